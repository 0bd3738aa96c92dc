/* state.h - state.c: a communicator's device state made and freed, and its mode. */
#ifndef SD_CUDA_STATE_H
#define SD_CUDA_STATE_H

#include "cuda/internal.h"

/* Host thread, comm drained: c's device state, made on GPU dev if c has
 * none yet (an existing one keeps its own GPU). */
int sd_cuda_state(struct smddp_comm *c, int dev, struct sd_cuda **out);
/* SMDDP_CUDA_ASYNC: -1 auto, else 0 or 1. */
int sd_cuda_async_param(void);
/* Is the CUDA MPS daemon serving this user? */
int sd_cuda_mps_active(void);
/* SMDDP_CUDA_ASYNC=auto, once the first call showed where the ranks are:
 * queued (the proxy started) unless others share this GPU without MPS. */
int sd_cuda_decide(struct smddp_comm *c, struct sd_cuda *cu);

#endif
