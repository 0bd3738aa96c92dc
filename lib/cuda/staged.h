/* staged.h - staged.c: a device call between hosts, staged through pinned host memory. */
#ifndef SD_CUDA_STAGED_H
#define SD_CUDA_STAGED_H

#include "cuda/internal.h"

/* Host thread, call checked, o->seq its first ticket: queues the copies,
 * waits and ticket writes of the call's part from chunk o->ch0 on its
 * stream; sets o->ch1, o->more (later parts follow, each an op of its
 * own), o->last, o->upto and o->wire (taking the call's numbers on the
 * wire from c->wire).  On failure o->broken says whether tickets were
 * taken all the same. */
int sd_cuda_staged_queue(struct smddp_comm *c, struct sd_cuda *cu, struct op *o);
/* The thread that runs calls: the part's host collectives, chunk by chunk,
 * releasing each chunk's ticket; *one_off as sd_cuda_run_op's. */
int sd_cuda_staged_run(struct sd_cuda *cu, struct op *o, int *one_off);
/* The slots (poisoned: the fabric may still write into them: kept). */
void sd_cuda_stage_free(struct sd_cuda *cu, int poisoned);

#endif
