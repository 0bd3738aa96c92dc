/* comm.h - the core's side of a communicator: its creation and the entry and exit of every call.
 *
 * The communicator itself, the call descriptor and sd_comm_error() are in
 * lib/base/comm-types.h, which every layer includes; the collective
 * algorithms are declared in lib/coll/coll.h.
 */
#ifndef SD_COMM_H
#define SD_COMM_H

#include <stdint.h>
#include <stddef.h>

#include "base/comm-types.h"

/* How sd_comm_init makes a world communicator when not from the
 * environment (smddp_comm_init_rank). */
struct sd_init_how {
	int rank, size;
	const char *addr, *port, *token; /* rank 0's rendezvous */
	int listen_fd;                   /* rank 0: its listening socket (taken over), else -1 */
	uint64_t timeout_ns;             /* 0: SMDDP_TIMEOUT */
};
int sd_comm_init(struct smddp_comm **out, const struct sd_init_how *how);
/* Warns, once per process, when a library loaded with libfabric has taken
 * the stopping signals (signals.c). */
void sd_check_signals(void);

/* Entry of every collective call: checks the communicator and the arguments
 * that do not depend on buffers, counts the call, and with SMDDP_CHECK_COLL
 * compares it across ranks.  count 0 still counts the call. */
int sd_api_enter(struct smddp_comm *c, int coll, size_t count, int dtype, int op, int root,
		 void *stream);

/* Exit of every call: a failure that leaves ranks at different places in
 * the protocol marks c failed and tells the peers; returns rc. */
int sd_api_leave(struct smddp_comm *c, int rc);
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
/* 1 if p is CUDA device memory (the driver is loaded and says so). */
int sd_api_device_ptr(const void *p);
/* 1 once the process has loaded the CUDA driver: before that, every
 * pointer is host memory (one probe for a batch, not one per buffer). */
int sd_api_cuda_loaded(void);

#endif
