/* errors.h - the result strings' file: the per-thread init error (errors.c). */
#ifndef SD_BASE_ERRORS_H
#define SD_BASE_ERRORS_H

#include "util/sd.h"

/* This thread's sink for failures without a communicator (smddp_init, a
 * NULL communicator, smddp_group_*): smddp_last_error(NULL) reads it. */
struct sd_err *sd_init_err(void);

#endif
