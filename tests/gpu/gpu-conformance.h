/* gpu-conformance.h - what the parts of gpu-conformance share: the communicator, its
 * stream and buffers, the tallies, and each part's modes (see gpu-conformance.c). */
#ifndef GPU_CONFORMANCE_H
#define GPU_CONFORMANCE_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda_runtime.h>

#include <smddp/smddp.h>

#include "clock.h" /* lib/clock/: the one clock */

extern int rank, nranks, failures, passed;
extern struct smddp_comm *comm;
extern cudaStream_t stream;
/* Device buffers and pinned host buffers of cap_bytes each. */
extern char *dsend, *drecv, *hbuf, *hout;
extern size_t cap_bytes;
/* Bytes of each dtype, written here so as not to trust the library. */
extern const size_t es_of[];

#define CK(call)                                                                            \
	do {                                                                                \
		cudaError_t e_ = (call);                                                    \
		if (e_ != cudaSuccess) {                                                    \
			fprintf(stderr, "rank %d: %s:%d: %s: %s\n", rank, __FILE__, __LINE__, \
				#call, cudaGetErrorString(e_));                             \
			exit(1);                                                            \
		}                                                                           \
	} while (0)

/* ---- gpu-conformance.c: the matrix ---- */
/* The collectives, in the order of enum sd_coll (their names: coll_names). */
enum { COLL_ALLREDUCE, COLL_ALLGATHER, COLL_REDUCE_SCATTER, COLL_BROADCAST, COLL_REDUCE,
       COLL_ALLTOALL, NCOLL };
extern const char *const coll_names[];
void matrix(size_t large, int quick, int small);

/* ---- gpu-order.c: stream ordering ---- */
/* Does a device call return once queued (smddp(7)'s rule, applied here)? */
int queued_mode(void);
/* A host function that holds its stream 300 ms (arg NULL) or *(int *)arg ms. */
void CUDART_CB hold(void *arg);
void order(void);
void twostreams(void);
void overlap(void);
/* The direct path's registration cache: many allocations, misses, reuse. */
void regs(void);
/* The calls of a torch DDP construction and first steps, in its order. */
void ddp(void);
/* A late peer's first launch of a new kernel while a direct kernel waits (GPU only). */
void lateload(void);

/* ---- gpu-faults.c: bad calls, failing peers ---- */
void errors(void);
/* One FAULT-OK or FAULT-BAD line, which the scripts grep for. */
void verdict(int ok, int rc, double took, const char *msg);
/* smddp_comm_get_async_error polled until a failure or secs after t0. */
int await_async_error(double t0, double secs);
int badbuf(int victim);
int abortq(void);
int cancelq(void);
int mixed(void);
int badmix(int victim);
int badmix_next(int victim);
int dead(int victim);
int p2pdead(int victim);
int cudafail(int victim, int call);
int mismatch(void);
/* The collective of abortq, cancelq, dead and mismatch (--coll NAME; allreduce). */
extern int fault_coll;
int refused(const char *how);
int refusedcc(const char *how);

/* ---- gpu-p2p.c: sends, receives, alltoallv, gather, scatter ---- */
void p2p(size_t large);
void p2p_perf(void);

/* ---- gpu-shrink.c: ranks die, the survivors shrink and go on ---- */
/* gpu-conformance shrink [options] STAGE...: argv as main's. */
int shrink(int argc, char **argv, size_t large, int quick, int small);

/* ---- gpu-threads.c: three communicators, three threads of each rank at once ---- */
/* gpu-conformance threads [options]: argv as main's. */
int threads(int argc, char **argv);

#endif
