/* move.h - move.c: one call on one node through the proxy: meet, map, move. */
#ifndef SD_CUDA_MOVE_H
#define SD_CUDA_MOVE_H

#include "cuda/internal.h"

/* Host thread, queue-and-return mode, o->seq its first ticket: queues the
 * call on its stream (the private copy of an in-place alltoall, the input
 * event, a wait for o->seq, a copy of its slot of cu->args to the GPU, the
 * kernels, the up word, a wait for o->last) and sets o->last.  On failure
 * o->broken says whether tickets were taken all the same. */
int sd_cuda_queue_kernels(struct smddp_comm *c, struct sd_cuda *cu, struct op *o);
/* One call, start to end, on the thread that runs calls; *one_off is set
 * for a failure that leaves the communicator usable (EMISMATCH). */
int sd_cuda_run_op(struct sd_cuda *cu, struct op *o, int *one_off);

#endif
