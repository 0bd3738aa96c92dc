/* fast.h - fast.c: collectives whose kernels meet the peers through windows of their own. */
#ifndef SD_CUDA_FAST_H
#define SD_CUDA_FAST_H

#include "cuda/internal.h"

/* Host thread, nothing queued, c->size > 1 on one node: the window, the
 * exchange and the decision (two steps of the transport's slots, on every
 * rank at its first device collective).  Sets cu->fast_on and cu->shared;
 * mps: the MPS daemon serves this process. */
int sd_cuda_fast_setup(struct smddp_comm *c, struct sd_cuda *cu, int mps);
/* Does call k take the fast path (the same answer on every rank)? */
int sd_cuda_fast_takes(const struct sd_cuda *cu, const struct sd_cuda_call *k);
/* Host thread, call checked (one that sd_cuda_fast_takes): launches it on
 * its stream and returns. */
int sd_cuda_fast_call(struct smddp_comm *c, struct sd_cuda *cu, const struct sd_cuda_call *k);
/* Host thread: a failure the kernels recorded becomes cu->failed, and
 * the peers are told. */
void sd_cuda_fast_collect(struct smddp_comm *c, struct sd_cuda *cu);
/* Any thread: the kernels' failure in words (buf), 0 when none. */
int sd_cuda_fast_async_error(const struct sd_cuda *cu, char *buf, size_t len);
/* Kernels in flight and later ones give up. */
void sd_cuda_fast_stop(struct sd_cuda *cu);

/* Proxy thread: is a fast call in flight; then the peers' health,
 * smddp_comm_cancel and the kernels' record, every SMDDP_LIVENESS_MS. */
int sd_cuda_fast_busy(struct sd_cuda *cu);
void sd_cuda_fast_watch(struct sd_cuda *cu);
/* comm_free: the window (kept where a peer or a stream may still use it). */
void sd_cuda_fast_free(struct smddp_comm *c, struct sd_cuda *cu, int stuck);

/* The proxy thread, or the host thread, breaks the communicator for a
 * failure the kernels cannot see (rc, msg): the kernels give up, the
 * peers are told. */
void sd_cuda_fast_break(struct sd_cuda *cu, int rc, const char *msg);

#endif
