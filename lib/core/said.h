/* said.h - said.c: what smddp_comm_get_async_error() reported, per thread, and the communicators' serials. */
#ifndef SD_CORE_SAID_H
#define SD_CORE_SAID_H

#include <stdint.h>

#include "base/comm-types.h"

/* The sentence of the async error smddp_comm_get_async_error() last
 * reported for c on this thread, else NULL: what smddp_last_error(c) gives
 * on this thread until its next call on c, whose entry forgets it (every
 * public function that may write c->last_error calls forget first). */
const char *sd_api_async_said(const struct smddp_comm *c);
void sd_api_async_forget(const struct smddp_comm *c);
/* smddp_comm_get_async_error(): err is what this thread now says for c. */
void sd_api_async_keep(const struct smddp_comm *c, const struct sd_err *err);
/* A new communicator's serial: never 0, never reused. */
uint64_t sd_api_serial(void);

#endif
