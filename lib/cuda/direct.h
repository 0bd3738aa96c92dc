/* direct.h - direct.c: large collectives whose kernels read the peers' registered buffers. */
#ifndef SD_CUDA_DIRECT_H
#define SD_CUDA_DIRECT_H

#include "cuda/internal.h"

/* Setup (sd_cuda_fast_setup, host thread): our registrations' segment and
 * the table (name into name[SD_REG_NAME]; 0 when the path is off here), then the
 * peers' segments (names[q]); frees what it made when on is 0. */
int sd_cuda_direct_make(struct smddp_comm *c, struct sd_cuda *cu, char *name);
int sd_cuda_direct_open(struct smddp_comm *c, struct sd_cuda *cu, const char *const *names);
void sd_cuda_direct_setup_done(struct sd_cuda *cu, int on);
/* Does call k take the direct path (the same answer on every rank)? */
int sd_cuda_direct_takes(const struct sd_cuda *cu, const struct sd_cuda_call *k);
/* Host thread, call checked (b: its buffers): launches it and returns. */
int sd_cuda_direct_call(struct smddp_comm *c, struct sd_cuda *cu, const struct sd_cuda_call *k,
			const struct buf_pub b[2]);
/* Proxy thread, while a direct call is in flight: maps the peers' new
 * registrations. A failure (its sentence in msg) breaks the communicator:
 * the caller hands it to sd_cuda_fast_break, so that direct.c never calls
 * up into fast.c. */
int sd_cuda_direct_poll(struct sd_cuda *cu, char *msg, size_t len);
/* comm_free. */
void sd_cuda_direct_free(struct smddp_comm *c, struct sd_cuda *cu, int stuck);

#endif
