/* proxy.h - proxy.c: the proxy thread, and the host's waits for it. */
#ifndef SD_CUDA_PROXY_H
#define SD_CUDA_PROXY_H

#include "cuda/internal.h"

/* The proxy thread, started (queued mode), stopped (comm_free). */
int sd_cuda_proxy_start(struct smddp_comm *c, struct sd_cuda *cu);
void sd_cuda_proxy_stop(struct sd_cuda *cu);
/* Host thread: every queued call finished, within SMDDP_TIMEOUT + 30 s
 * per call (else the communicator breaks). */
int sd_cuda_drain(struct smddp_comm *c, struct sd_cuda *cu);
/* Host thread, nothing queued: the wire numbers the runs took into c->wire. */
void sd_cuda_fold_wire(struct smddp_comm *c, struct sd_cuda *cu);
/* One call run (the proxy, or the host thread in the blocking mode), its
 * failure recorded for sd_cuda_collect. */
int sd_cuda_run_call(struct smddp_comm *c, struct sd_cuda *cu, struct op *o);

#endif
