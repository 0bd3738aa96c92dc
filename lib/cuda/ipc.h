/* ipc.h - ipc.c: CUDA IPC handles of our allocations and mappings of the peers'. */
#ifndef SD_CUDA_IPC_H
#define SD_CUDA_IPC_H

#include <sys/types.h>

#include <cuda_runtime.h>

#include "cuda/internal.h"

/* Our own allocation's IPC handle into b->h (cached by buffer id). */
int sd_cuda_own_handle(struct sd_cuda *cu, struct buf_pub *b);
/* Rank q's buffer b mapped into this process (cached per rank and id). */
int sd_cuda_peer_ptr(struct sd_cuda *cu, int q, const struct buf_pub *b, char **out);
/* A peer's mapping no longer used: closed later by the host thread
 * (sd_cuda_flush_stale). */
int sd_cuda_ipc_retire(struct sd_cuda *cu, void *ptr);
/* Rank pid's allocation b mapped into this process (counted, shared by
 * every communicator); a cudaError_t. */
cudaError_t sd_cuda_ipc_open(pid_t pid, int dev, const struct buf_pub *b, void **out);
/* Host thread: the mappings retired while calls were queued, to the
 * closer thread (ipc.c). */
void sd_cuda_flush_stale(struct sd_cuda *cu);
/* One reference to the mapping at ptr dropped, the mapping closed here
 * when it was the last. */
void sd_cuda_ipc_close(void *ptr);
/* The same, but the close handed to the closer thread: for a mapping that
 * no kernel of ours can read any more (or ever did), from a thread that a
 * close could hold back or that holds a lock.  Needs no memory. */
void sd_cuda_ipc_close_later(void *ptr);
/* Until the closer has closed what was handed to it so far (10 s at most,
 * then a warning). */
void sd_cuda_ipc_settle(void);

#endif
