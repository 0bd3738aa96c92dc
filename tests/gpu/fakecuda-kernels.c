/* fakecuda-kernels.c - lib/cuda/kernels.h in the fake CUDA: host work queued on the
 * streams (see fakecuda.c).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "cuda/kernels.h"
#include "fakecuda.h"
#include "util/sd.h"

/* ---- the kernels (lib/cuda/kernels.h), as host work on the stream ------------ */

int sd_cuda_kernels_load(void)
{
	return cudaSuccess;
}

/* A kernel's launch: host work on the stream, unless FAKECUDA_FAIL says
 * this one fails. */
static cudaError_t launch_kernel(cudaStream_t st, void (*fn)(void *), void *arg)
{
	if (fake_launch_fails()) {
		free(arg);
		return cudaErrorLaunchOutOfResources;
	}
	return fake_launch_owned(st, fn, arg);
}

struct kreduce {
	struct sd_cuda_kargs a;
	int dtype, op, avg_div;
};

/* The kernel's contract with sd_reduce's arithmetic (kernels.h says they
 * agree): every source is read before any destination is written, as
 * the reduction into dst[0] (which may be a source) finishes before the
 * copies into the others. */
static void k_reduce(void *arg)
{
	struct kreduce *k = arg;
	size_t bytes = k->a.count * smddp_dtype_size((enum smddp_dtype)k->dtype);

	if (k->a.count && k->a.ndst) {
		sd_reduce(k->a.dst[0], k->a.src, k->a.nsrc, k->a.count, (enum smddp_dtype)k->dtype,
			  (enum smddp_op)k->op, k->avg_div);
		for (int i = 1; i < k->a.ndst; i++)
			if (k->a.dst[i] != k->a.dst[0])
				memmove(k->a.dst[i], k->a.dst[0], bytes);
	}
	free(k);
}

int sd_cuda_kernel_reduce(const struct sd_cuda_kargs *a, int dtype, int op, int avg_div,
			  void *stream, int max_blocks)
{
	struct kreduce *k;

	(void)max_blocks;
	if (a->nsrc < 1 || a->nsrc > SD_CUDA_MAX_RANKS || a->ndst < 0 ||
	    a->ndst > SD_CUDA_MAX_RANKS)
		return cudaErrorInvalidValue;
	if ((k = malloc(sizeof(*k))))
		*k = (struct kreduce){.a = *a, .dtype = dtype, .op = op, .avg_div = avg_div};
	return launch_kernel((cudaStream_t)stream, k_reduce, k);
}

struct kpairs {
	int n;
	size_t bytes;
	const void *src[SD_CUDA_MAX_RANKS];
	void *dst[SD_CUDA_MAX_RANKS];
};

static void k_pairs(void *arg)
{
	struct kpairs *k = arg;

	for (int i = 0; i < k->n; i++)
		memmove(k->dst[i], k->src[i], k->bytes);
	free(k);
}

int sd_cuda_kernel_copy_pairs(const void *const *src, void *const *dst, int npairs, size_t bytes,
			      void *stream, int max_blocks)
{
	struct kpairs *k;

	(void)max_blocks;
	if (npairs < 0 || npairs > SD_CUDA_MAX_RANKS)
		return cudaErrorInvalidValue;
	if ((k = malloc(sizeof(*k)))) {
		k->n = npairs;
		k->bytes = bytes;
		for (int i = 0; i < npairs; i++) {
			k->src[i] = src[i];
			k->dst[i] = dst[i];
		}
	}
	return launch_kernel((cudaStream_t)stream, k_pairs, k);
}

/* The *_at kernels read their arguments when they run, as the GPU's do:
 * the proxy writes them after the launch was queued. */
struct kat {
	const struct sd_cuda_kargs *tasks;
	const struct sd_cuda_kpairs *groups;
	int n, dtype, op;
};

static void k_reduce_at(void *arg)
{
	struct kat *k = arg;
	int n = k->tasks[0].ntasks < 0 ? 0 : k->tasks[0].ntasks > k->n ? k->n : k->tasks[0].ntasks;

	for (int i = 0; i < n; i++) {
		struct sd_cuda_kargs a;

		memcpy(&a, (const void *)&k->tasks[i], sizeof(a));
		if (a.nsrc < 1 || a.nsrc > SD_CUDA_MAX_RANKS || a.ndst < 1 ||
		    a.ndst > SD_CUDA_MAX_RANKS || !a.count)
			continue;
		sd_reduce(a.dst[0], a.src, a.nsrc, a.count, (enum smddp_dtype)k->dtype,
			  (enum smddp_op)k->op, a.div < 1 ? 1 : a.div);
		for (int d = 1; d < a.ndst; d++)
			if (a.dst[d] != a.dst[0])
				memmove(a.dst[d], a.dst[0],
					a.count * smddp_dtype_size((enum smddp_dtype)k->dtype));
	}
	free(k);
}

static void k_pairs_at(void *arg)
{
	struct kat *k = arg;

	for (int g = 0; g < k->n; g++) {
		struct sd_cuda_kpairs p;

		memcpy(&p, (const void *)&k->groups[g], sizeof(p));
		for (int i = 0; i < p.npairs && i < SD_CUDA_MAX_RANKS; i++)
			memmove(p.dst[i], p.src[i], p.bytes);
	}
	free(k);
}

static int queue_at(void (*fn)(void *), const struct sd_cuda_kargs *tasks,
		    const struct sd_cuda_kpairs *groups, int n, int dtype, int op, void *stream)
{
	struct kat *k = malloc(sizeof(*k));

	if (k)
		*k = (struct kat){tasks, groups, n, dtype, op};
	return launch_kernel((cudaStream_t)stream, fn, k);
}

/* A GPU can read pinned host memory, but a kernel that every block of
 * which reads its arguments there took about 1.6 us per block on the H200
 * (the reads take turns): the queued kernels read a copy on the GPU
 * (lib/cuda/move.c).  Here that is a rule, so that a test fails if it
 * comes back. */
static int args_on_host(const void *p, const char *kernel)
{
	if (!fake_is_pinned((uintptr_t)p))
		return 0;
	fprintf(stderr, "fakecuda: %s: its arguments are in pinned host memory, where every "
			"block would read them over the bus; give it device memory\n", kernel);
	return 1;
}

int sd_cuda_kernel_reduce_at(const struct sd_cuda_kargs *tasks, int ntasks, size_t max_count,
			     int dtype, int op, void *stream, int max_blocks)
{
	(void)max_blocks;
	if (args_on_host(tasks, "sd_cuda_kernel_reduce_at"))
		return cudaErrorInvalidValue;
	if (ntasks < 1 || ntasks > SD_CUDA_MAX_RANKS)
		return cudaErrorInvalidValue;
	return max_count ? queue_at(k_reduce_at, tasks, NULL, ntasks, dtype, op, stream) : 0;
}

int sd_cuda_kernel_pairs_at(const struct sd_cuda_kpairs *groups, int ngroups, int max_pairs,
			    size_t max_bytes, void *stream, int max_blocks)
{
	(void)max_blocks;
	if (args_on_host(groups, "sd_cuda_kernel_pairs_at"))
		return cudaErrorInvalidValue;
	if (ngroups < 1 || max_pairs < 1 || max_pairs > SD_CUDA_MAX_RANKS)
		return cudaErrorInvalidValue;
	return max_bytes ? queue_at(k_pairs_at, NULL, groups, ngroups, 0, 0, stream) : 0;
}
