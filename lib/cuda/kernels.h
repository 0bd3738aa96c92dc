/* kernels.h - the device kernels of lib/cuda/kernels.cu, callable from C.
 *
 * One kernel does every data movement of the device collectives: each
 * element i < count is reduced from src[0][i], ..., src[nsrc-1][i], left
 * to right (the order of lib/reduce/, so that every rank and the host path
 * agree), and the result is written to every dst[k][i].  With nsrc == 1 and
 * an op other than AVG it is a copy to ndst places, read once.
 *
 * Semantics are those of sd_reduce() (lib/util/sd.h): integer SUM and PROD
 * wrap; fp16 and bf16 reduce in float and round once to nearest even; AVG is
 * the sum divided by avg_div (floats in their accumulation type, integers
 * the wrapped sum divided truncating toward zero).  A dst may be one of the
 * srcs (each thread reads an element from every source before it writes
 * it); partial overlaps are the caller's to avoid.
 */
#ifndef SD_CUDA_KERNELS_H
#define SD_CUDA_KERNELS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SD_CUDA_MAX_RANKS 32 /* sources and destinations of one launch */

struct sd_cuda_kargs {
	const void *src[SD_CUDA_MAX_RANKS];
	void *dst[SD_CUDA_MAX_RANKS];
	int nsrc, ndst;
	size_t count; /* elements */
	int div;      /* the *_at launch: the AVG divisor; */
	int ntasks;   /* ... in its first task: how many tasks it has */
};

/* npairs copies of bytes bytes each, src[k] to dst[k] (the *_at launch). */
struct sd_cuda_kpairs {
	const void *src[SD_CUDA_MAX_RANKS];
	void *dst[SD_CUDA_MAX_RANKS];
	int npairs, pad;
	size_t bytes;
};

/* Launches the kernel on stream (a cudaStream_t) with at most max_blocks
 * blocks (0: sized from the device).  Returns a cudaError_t (0: queued). */
int sd_cuda_kernel_reduce(const struct sd_cuda_kargs *a, int dtype, int op, int avg_div,
			  void *stream, int max_blocks);

/* npairs copies of bytes bytes each, src[k] to dst[k], in one launch. */
int sd_cuda_kernel_copy_pairs(const void *const *src, void *const *dst, int npairs, size_t bytes,
			      void *stream, int max_blocks);

/* The same kernels with their arguments read when they run, not when they
 * are launched: the launch is queued behind a wait on the stream, and the
 * arguments (the peers' buffers) are known only once the proxy has met the
 * peers (proxy.c).  tasks and groups point into device memory, which the
 * stream fills before the launch (a copy from the proxy's pinned memory:
 * move.c says why not the pinned memory itself).  reduce_at: ntasks
 * reductions, task i of up to max_count elements (a task with nsrc 0 does
 * nothing); pairs_at: ngroups groups of up to max_pairs pairs of up to
 * max_bytes bytes.  The tasks
 * run one after the other, each on the whole grid (most calls have one:
 * a rank's own share); tasks[0].ntasks says how many there are.  Returns a
 * cudaError_t. */
int sd_cuda_kernel_reduce_at(const struct sd_cuda_kargs *tasks, int ntasks, size_t max_count,
			     int dtype, int op, void *stream, int max_blocks);
int sd_cuda_kernel_pairs_at(const struct sd_cuda_kpairs *groups, int ngroups, int max_pairs,
			    size_t max_bytes, void *stream, int max_blocks);

/* Loads every kernel of this file into the current device's context.
 * With lazy module loading (CUDA's default since 12.2) the first launch of
 * a kernel loads it, and loading waits for the whole context: a launch by
 * the proxy while the user's stream waits on the proxy's word
 * (SMDDP_CUDA_ASYNC) never returns.  So they are loaded before any stream
 * is made to wait.  Returns a cudaError_t. */
int sd_cuda_kernels_load(void);

#ifdef __cplusplus
}
#endif
#endif
