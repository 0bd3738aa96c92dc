/* kernels.cu - device reduction and copy kernels of the CUDA collectives: the blocking
 * mode's, and the queued mode's whose arguments the proxy writes (move.c).  The bodies
 * they share with the fast path's kernels (kernels-fast.cu) are in kernels-common.cuh.
 */
#include "cuda/kernels-common.cuh"

/* ---- the reduction kernel ------------------------------------------------ */

template <typename Tr, int OP>
__global__ void __launch_bounds__(THREADS) k_reduce(const kargs a)
{
	reduce_body<Tr, OP>(a, blockIdx.x, gridDim.x);
}

/* Task t of tasks into a, read from the GPU's copy of what the proxy wrote
 * before it let the stream reach the launch (move.c): the block's threads
 * fetch it word by word.  Returns (to every thread) the number of tasks
 * that task 0 announces. */
template <typename Tr>
__device__ int load_task(const struct sd_cuda_kargs *tasks, int t, int max, kargs &a,
			 unsigned long long *raw)
{
	constexpr int W = sizeof(struct sd_cuda_kargs) / sizeof(unsigned long long);
	static_assert(sizeof(struct sd_cuda_kargs) % sizeof(unsigned long long) == 0, "words");
	static_assert(W <= THREADS, "one word per thread");
	const unsigned long long *from = (const unsigned long long *)(tasks + t);
	__shared__ int n;

	if (threadIdx.x < W)
		raw[threadIdx.x] = from[threadIdx.x];
	__syncthreads();
	if (threadIdx.x == 0) {
		const struct sd_cuda_kargs *k = (const struct sd_cuda_kargs *)raw;
		int ok = k->nsrc >= 1 && k->nsrc <= SD_CUDA_MAX_RANKS && k->ndst >= 1 &&
			 k->ndst <= SD_CUDA_MAX_RANKS;

		if (t == 0)
			n = k->ntasks < 0 ? 0 : k->ntasks > max ? max : k->ntasks;
		a.nsrc = ok ? k->nsrc : 0;
		a.ndst = ok ? k->ndst : 0;
		a.count = ok ? k->count : 0;
		a.div = k->div < 1 ? 1 : k->div;
		for (int i = 0; i < a.nsrc; i++)
			a.src[i] = (const char *)k->src[i];
		for (int i = 0; i < a.ndst; i++)
			a.dst[i] = (char *)k->dst[i];
		if (a.count)
			split_vectors<Tr>(a);
	}
	__syncthreads();
	return n;
}

/* The reductions of a queued call, their arguments read when it runs: the
 * tasks one after the other, each on the whole grid. */
template <typename Tr, int OP>
__global__ void __launch_bounds__(THREADS) k_reduce_at(const struct sd_cuda_kargs *tasks, int max)
{
	__shared__ unsigned long long raw[sizeof(struct sd_cuda_kargs) / sizeof(unsigned long long)];
	__shared__ kargs a;
	int n = load_task<Tr>(tasks, 0, max, a, raw);

	for (int t = 0; t < n; t++) {
		if (t)
			load_task<Tr>(tasks, t, max, a, raw);
		if (a.count)
			reduce_body<Tr, OP>(a, blockIdx.x, gridDim.x);
		__syncthreads(); /* a is rewritten by the next load */
	}
}

/* ---- copies: npairs of (src, dst), blockIdx.y picks the pair --------------- */

struct pargs {
	const char *src[SD_CUDA_MAX_RANKS];
	char *dst[SD_CUDA_MAX_RANKS];
	size_t bytes;
};

__global__ void __launch_bounds__(THREADS) k_copy_pairs(const pargs a)
{
	copy_body(a.src[blockIdx.y], a.dst[blockIdx.y], a.bytes, blockIdx.x, gridDim.x);
}

/* Pair blockIdx.y of group blockIdx.z, read when the kernel runs (as
 * k_reduce_at); pairs past a group's npairs do nothing. */
__global__ void __launch_bounds__(THREADS) k_copy_pairs_at(const struct sd_cuda_kpairs *groups)
{
	__shared__ const char *s;
	__shared__ char *d;
	__shared__ size_t bytes;
	__shared__ int npairs;
	const struct sd_cuda_kpairs *g = groups + blockIdx.z;

	if (threadIdx.x == 0)
		npairs = g->npairs;
	else if (threadIdx.x == 1)
		bytes = g->bytes;
	else if (threadIdx.x == 2)
		s = (const char *)g->src[blockIdx.y];
	else if (threadIdx.x == 3)
		d = (char *)g->dst[blockIdx.y];
	__syncthreads();
	if ((int)blockIdx.y < npairs && bytes)
		copy_body(s, d, bytes, blockIdx.x, gridDim.x);
}

/* ---- launch ------------------------------------------------------------- */

template <typename Tr, int OP>
static int launch(kargs &a, cudaStream_t st, int max_blocks)
{
	split_vectors<Tr>(a);
	size_t work = a.nvec ? (a.nvec + UNROLL - 1) / UNROLL : a.count;
	return launch_kernel(k_reduce<Tr, OP>, dim3(grid_for(work, max_blocks)), st, a);
}

/* Up to ntasks tasks of up to max_count elements each, one after the other. */
template <typename Tr, int OP>
static int launch_at(const struct sd_cuda_kargs *tasks, int ntasks, size_t max_count,
		     cudaStream_t st, int max_blocks)
{
	constexpr size_t es = sizeof(typename Tr::S);
	size_t nvec = max_count / (16 / es);
	size_t work = nvec ? (nvec + UNROLL - 1) / UNROLL : max_count;

	return launch_kernel(k_reduce_at<Tr, OP>, dim3(grid_for(work, max_blocks)), st, tasks,
			     ntasks);
}

extern "C" int sd_cuda_kernel_reduce(const struct sd_cuda_kargs *in, int dtype, int op,
				     int avg_div, void *stream, int max_blocks)
{
	kargs a;

	if (in->nsrc < 1 || in->nsrc > SD_CUDA_MAX_RANKS || in->ndst < 1 ||
	    in->ndst > SD_CUDA_MAX_RANKS)
		return (int)cudaErrorInvalidValue;
	if (in->count == 0)
		return 0;
	for (int i = 0; i < in->nsrc; i++)
		a.src[i] = (const char *)in->src[i];
	for (int i = 0; i < in->ndst; i++)
		a.dst[i] = (char *)in->dst[i];
	a.nsrc = in->nsrc;
	a.ndst = in->ndst;
	a.count = in->count;
	a.div = avg_div < 1 ? 1 : avg_div;
	/* One source and no division: a copy, whatever the type (NaN bits kept). */
	if (in->nsrc == 1 && op != SMDDP_AVG)
		op = SMDDP_SUM;
	cudaStream_t st = (cudaStream_t)stream;
	return by_type(dtype, op, [&](auto tr, auto o) {
		return launch<decltype(tr), decltype(o)::value>(a, st, max_blocks);
	});
}

extern "C" int sd_cuda_kernels_load(void)
{
	int e = load_kernels(k_copy_pairs, k_copy_pairs_at);

	if (!e)
		e = every_type_op([](auto tr, auto o) {
			return load_kernels(k_reduce<decltype(tr), decltype(o)::value>,
					    k_reduce_at<decltype(tr), decltype(o)::value>);
		});
	return e ? e : sd_cuda_kernels_load_fast();
}

extern "C" int sd_cuda_kernel_copy_pairs(const void *const *src, void *const *dst, int npairs,
					 size_t bytes, void *stream, int max_blocks)
{
	pargs a;

	if (npairs < 1 || npairs > SD_CUDA_MAX_RANKS)
		return (int)cudaErrorInvalidValue;
	if (bytes == 0)
		return 0;
	for (int i = 0; i < npairs; i++) {
		a.src[i] = (const char *)src[i];
		a.dst[i] = (char *)dst[i];
	}
	a.bytes = bytes;
	/* The blocks of all pairs together: a few per multiprocessor. */
	int cap = max_blocks > 0 ? max_blocks : sm_count() * 4;
	int per = (cap + npairs - 1) / npairs;
	dim3 grid(grid_for((bytes / 16 + UNROLL - 1) / UNROLL + 1, per), (unsigned)npairs);
	return launch_kernel(k_copy_pairs, grid, (cudaStream_t)stream, a);
}

extern "C" int sd_cuda_kernel_reduce_at(const struct sd_cuda_kargs *tasks, int ntasks,
					size_t max_count, int dtype, int op, void *stream,
					int max_blocks)
{
	if (ntasks < 1 || ntasks > SD_CUDA_MAX_RANKS)
		return (int)cudaErrorInvalidValue;
	if (max_count == 0)
		return 0;
	return by_type(dtype, op, [&](auto tr, auto o) {
		return launch_at<decltype(tr), decltype(o)::value>(tasks, ntasks, max_count,
								   (cudaStream_t)stream, max_blocks);
	});
}

extern "C" int sd_cuda_kernel_pairs_at(const struct sd_cuda_kpairs *groups, int ngroups,
				       int max_pairs, size_t max_bytes, void *stream,
				       int max_blocks)
{
	if (ngroups < 1 || max_pairs < 1 || max_pairs > SD_CUDA_MAX_RANKS)
		return (int)cudaErrorInvalidValue;
	if (max_bytes == 0)
		return 0;
	int cap = max_blocks > 0 ? max_blocks : sm_count() * 4;
	int per = (cap + max_pairs * ngroups - 1) / (max_pairs * ngroups);
	dim3 grid(grid_for((max_bytes / 16 + UNROLL - 1) / UNROLL + 1, per), (unsigned)max_pairs,
		  (unsigned)ngroups);
	return launch_kernel(k_copy_pairs_at, grid, (cudaStream_t)stream, groups);
}
