/* kernels-common.cuh - what the kernel files share: element types, the reduction and copy bodies, launch.
 *
 * Design.  The collectives are memory bound, so the kernels are written for
 * bytes in flight: every thread moves 16-byte vectors (uint4 loads and
 * stores, coalesced across the warp), UNROLL vectors per source at a time so
 * that several independent loads are outstanding before the first use, over
 * a grid-stride loop on a grid of a few blocks per multiprocessor.  The
 * sources are combined left to right in an accumulator type (float for fp16
 * and bf16, rounded once at the end), exactly as lib/reduce/ does on the
 * host, so that a rank's result is bitwise the same whichever rank computes
 * it.  Pointers that do not share one alignment modulo 16 take a scalar
 * loop (still coalesced); otherwise the elements before the first aligned
 * vector and after the last are done one by one.
 *
 * Loads and stores are streaming (evict-first): every byte is touched once.
 * Included by kernels.cu (the proxy's and the blocking mode's kernels) and
 * kernels-fast.cu (the kernels that meet their peers); everything here is
 * static or a template, so each file has its own copy.
 */
#ifndef SD_CUDA_KERNELS_COMMON_CUH
#define SD_CUDA_KERNELS_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

#include <smddp/smddp.h>

#include "cuda/kernels.h"

#define THREADS 512
#define UNROLL 4

struct kargs {
	const char *src[SD_CUDA_MAX_RANKS];
	char *dst[SD_CUDA_MAX_RANKS];
	int nsrc, ndst;
	size_t count; /* elements */
	size_t head;  /* scalar elements before the vectors */
	size_t nvec;  /* 16-byte vectors after head */
	int div;      /* AVG divisor */
};

/* ---- element types: storage S, accumulation A ---------------------------- */

template <typename T, typename U> struct int_traits {
	typedef T S;
	typedef T A;
	static __device__ __forceinline__ A ld(S x) { return x; }
	static __device__ __forceinline__ S st(A x) { return x; }
	/* Sums and products wrap: computed in the unsigned type. */
	static __device__ __forceinline__ A add(A x, A y) { return (A)(U)((U)x + (U)y); }
	static __device__ __forceinline__ A mul(A x, A y) { return (A)(U)((U)x * (U)y); }
	/* The wrapped sum, divided truncating toward zero (C's x / div). */
	static __device__ __forceinline__ A avg(A x, int div) { return (A)(x / (A)div); }
};

template <typename T> struct float_traits {
	typedef T S;
	typedef T A;
	static __device__ __forceinline__ A ld(S x) { return x; }
	static __device__ __forceinline__ S st(A x) { return x; }
	static __device__ __forceinline__ A add(A x, A y) { return add_rn(x, y); }
	static __device__ __forceinline__ A mul(A x, A y) { return mul_rn(x, y); }
	static __device__ __forceinline__ A avg(A x, int div) { return x / (A)div; }
	/* _rn: never contracted into an FMA, so the host's bits. */
	static __device__ __forceinline__ float add_rn(float x, float y) { return __fadd_rn(x, y); }
	static __device__ __forceinline__ double add_rn(double x, double y) { return __dadd_rn(x, y); }
	static __device__ __forceinline__ float mul_rn(float x, float y) { return __fmul_rn(x, y); }
	static __device__ __forceinline__ double mul_rn(double x, double y) { return __dmul_rn(x, y); }
};

struct half_traits {
	typedef unsigned short S;
	typedef float A;
	static __device__ __forceinline__ A ld(S x) { return __half2float(__ushort_as_half(x)); }
	static __device__ __forceinline__ S st(A x) { return __half_as_ushort(__float2half_rn(x)); }
	static __device__ __forceinline__ A add(A x, A y) { return __fadd_rn(x, y); }
	static __device__ __forceinline__ A mul(A x, A y) { return __fmul_rn(x, y); }
	static __device__ __forceinline__ A avg(A x, int div) { return __fdiv_rn(x, (float)div); }
};

struct bf16_traits {
	typedef unsigned short S;
	typedef float A;
	static __device__ __forceinline__ A ld(S x) { return __bfloat162float(__ushort_as_bfloat16(x)); }
	static __device__ __forceinline__ S st(A x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
	static __device__ __forceinline__ A add(A x, A y) { return __fadd_rn(x, y); }
	static __device__ __forceinline__ A mul(A x, A y) { return __fmul_rn(x, y); }
	static __device__ __forceinline__ A avg(A x, int div) { return __fdiv_rn(x, (float)div); }
};

/* x is the accumulated value, y the next source: the operand order of the
 * host kernels, which decides which NaN comes out of MIN and MAX. */
template <typename Tr, int OP>
__device__ __forceinline__ typename Tr::A combine(typename Tr::A x, typename Tr::A y)
{
	switch (OP) {
	case SMDDP_PROD: return Tr::mul(x, y);
	case SMDDP_MIN: return x < y ? x : y;
	case SMDDP_MAX: return x > y ? x : y;
	default: return Tr::add(x, y); /* SUM, AVG */
	}
}

/* ---- the reduction and the copy, by the blocks that share them ----------- */

template <typename Tr, int OP>
__device__ __forceinline__ void reduce_one(const kargs &a, size_t i)
{
	typedef typename Tr::S S;
	typedef typename Tr::A A;
	A acc = Tr::ld(((const S *)a.src[0])[i]);

	for (int s = 1; s < a.nsrc; s++)
		acc = combine<Tr, OP>(acc, Tr::ld(((const S *)a.src[s])[i]));
	if (OP == SMDDP_AVG)
		acc = Tr::avg(acc, a.div);
	const S out = Tr::st(acc);
	for (int d = 0; d < a.ndst; d++)
		((S *)a.dst[d])[i] = out;
}

/* The reduction of a by the blocks blk of nblk that share it (the grid,
 * or one block of the fast path). */
template <typename Tr, int OP>
__device__ __forceinline__ void reduce_body(const kargs &a, unsigned blk, unsigned nblk)
{
	typedef typename Tr::S S;
	typedef typename Tr::A A;
	constexpr int V = 16 / sizeof(S);
	const size_t nthreads = (size_t)nblk * blockDim.x;
	const size_t tid = (size_t)blk * blockDim.x + threadIdx.x;
	const size_t body_end = a.head + a.nvec * V;

	/* Scalar elements: the head, then the tail. */
	const size_t nscalar = a.head + (a.count - body_end);
	for (size_t k = tid; k < nscalar; k += nthreads)
		reduce_one<Tr, OP>(a, k < a.head ? k : body_end + (k - a.head));

	/* 16-byte vectors, UNROLL per thread per trip, strided by the block
	 * so that a warp's loads stay contiguous. */
	for (size_t base = (size_t)blk * blockDim.x * UNROLL + threadIdx.x; base < a.nvec;
	     base += nthreads * UNROLL) {
		A acc[UNROLL][V];
		uint4 v[UNROLL];

#pragma unroll
		for (int u = 0; u < UNROLL; u++) {
			const size_t j = base + (size_t)u * blockDim.x;
			if (j < a.nvec)
				v[u] = __ldcs((const uint4 *)(a.src[0] + a.head * sizeof(S)) + j);
		}
#pragma unroll
		for (int u = 0; u < UNROLL; u++) {
			const S *e = (const S *)&v[u];
#pragma unroll
			for (int k = 0; k < V; k++)
				acc[u][k] = Tr::ld(e[k]);
		}
		for (int s = 1; s < a.nsrc; s++) {
#pragma unroll
			for (int u = 0; u < UNROLL; u++) {
				const size_t j = base + (size_t)u * blockDim.x;
				if (j < a.nvec)
					v[u] = __ldcs((const uint4 *)(a.src[s] + a.head * sizeof(S)) + j);
			}
#pragma unroll
			for (int u = 0; u < UNROLL; u++) {
				const S *e = (const S *)&v[u];
#pragma unroll
				for (int k = 0; k < V; k++)
					acc[u][k] = combine<Tr, OP>(acc[u][k], Tr::ld(e[k]));
			}
		}
#pragma unroll
		for (int u = 0; u < UNROLL; u++) {
			S *e = (S *)&v[u];
#pragma unroll
			for (int k = 0; k < V; k++)
				e[k] = Tr::st(OP == SMDDP_AVG ? Tr::avg(acc[u][k], a.div) : acc[u][k]);
		}
		for (int d = 0; d < a.ndst; d++) {
#pragma unroll
			for (int u = 0; u < UNROLL; u++) {
				const size_t j = base + (size_t)u * blockDim.x;
				if (j < a.nvec)
					__stcs((uint4 *)(a.dst[d] + a.head * sizeof(S)) + j, v[u]);
			}
		}
	}
}

/* Scalar head and 16-byte vectors of a, where every pointer shares one
 * alignment modulo 16 (else all scalar). */
template <typename Tr>
__host__ __device__ __forceinline__ void split_vectors(kargs &a)
{
	constexpr size_t es = sizeof(typename Tr::S);
	uintptr_t mis = (uintptr_t)a.src[0] & 15;
	int same = 1;

	for (int s = 0; s < a.nsrc; s++)
		same &= ((uintptr_t)a.src[s] & 15) == mis;
	for (int d = 0; d < a.ndst; d++)
		same &= ((uintptr_t)a.dst[d] & 15) == mis;
	if (same && mis % es == 0) {
		a.head = ((16 - mis) & 15) / es;
		if (a.head > a.count)
			a.head = a.count;
		a.nvec = (a.count - a.head) / (16 / es);
	} else {
		a.head = a.count;
		a.nvec = 0;
	}
}

__device__ __forceinline__ void copy_body(const char *s, char *d, size_t bytes, unsigned blk,
					  unsigned nblk)
{
	const size_t nthreads = (size_t)nblk * blockDim.x;
	const size_t tid = (size_t)blk * blockDim.x + threadIdx.x;
	size_t head = 0, nvec = 0;

	if ((((uintptr_t)s ^ (uintptr_t)d) & 15) == 0) {
		head = (16 - ((uintptr_t)s & 15)) & 15;
		if (head > bytes)
			head = bytes;
		nvec = (bytes - head) / 16;
	} else {
		head = bytes;
	}
	const size_t body_end = head + nvec * 16, nscalar = head + (bytes - body_end);

	for (size_t k = tid; k < nscalar; k += nthreads) {
		const size_t i = k < head ? k : body_end + (k - head);
		d[i] = s[i];
	}
	const uint4 *vs = (const uint4 *)(s + head);
	uint4 *vd = (uint4 *)(d + head);
	for (size_t base = (size_t)blk * blockDim.x * UNROLL + threadIdx.x; base < nvec;
	     base += nthreads * UNROLL) {
		uint4 v[UNROLL];
#pragma unroll
		for (int u = 0; u < UNROLL; u++) {
			const size_t j = base + (size_t)u * blockDim.x;
			if (j < nvec)
				v[u] = __ldcs(vs + j);
		}
#pragma unroll
		for (int u = 0; u < UNROLL; u++) {
			const size_t j = base + (size_t)u * blockDim.x;
			if (j < nvec)
				__stcs(vd + j, v[u]);
		}
	}
}

/* ---- launch ------------------------------------------------------------- */

static int sm_count(void)
{
	static int cache[64];
	int dev = 0, n = 0;

	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0)
		return 132;
	if (dev < 64 && cache[dev])
		return cache[dev];
	if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0)
		n = 132;
	if (dev < 64)
		cache[dev] = n;
	return n;
}

static unsigned grid_for(size_t work_threads, int max_blocks)
{
	size_t blocks = (work_threads + THREADS - 1) / THREADS;
	size_t cap = max_blocks > 0 ? (size_t)max_blocks : (size_t)sm_count() * 4;

	if (blocks > cap)
		blocks = cap;
	return blocks ? (unsigned)blocks : 1;
}

/* The launch's own error, as cudaLaunchKernel returns it: not an earlier
 * error left on this thread (the caller's, or a failed allocation's),
 * which cudaGetLastError after <<<>>> would report and clear. */
template <typename... P, typename... A>
static int launch_kernel(void (*k)(P...), dim3 grid, cudaStream_t st, A... a)
{
	static_assert(sizeof...(P) == sizeof...(A) && (std::is_same<P, A>::value && ...),
		      "the arguments' types are the kernel's parameters' own");
	void *args[] = {(void *)&a...};

	return (int)cudaLaunchKernel((const void *)k, grid, dim3(THREADS), args, 0, st);
}

/* f(Tr{}, OP), OP a std::integral_constant: the kernel instance of a
 * dtype and an op (cudaErrorInvalidValue for others). */
template <typename Tr, typename F>
static int by_op(int op, F f)
{
	switch (op) {
	case SMDDP_SUM: return f(Tr{}, std::integral_constant<int, SMDDP_SUM>{});
	case SMDDP_PROD: return f(Tr{}, std::integral_constant<int, SMDDP_PROD>{});
	case SMDDP_MIN: return f(Tr{}, std::integral_constant<int, SMDDP_MIN>{});
	case SMDDP_MAX: return f(Tr{}, std::integral_constant<int, SMDDP_MAX>{});
	case SMDDP_AVG: return f(Tr{}, std::integral_constant<int, SMDDP_AVG>{});
	default: return (int)cudaErrorInvalidValue;
	}
}

template <typename F>
static int by_type(int dtype, int op, F f)
{
	switch (dtype) {
	case SMDDP_INT8: return by_op<int_traits<int8_t, uint8_t>>(op, f);
	case SMDDP_UINT8: return by_op<int_traits<uint8_t, uint8_t>>(op, f);
	case SMDDP_INT32: return by_op<int_traits<int32_t, uint32_t>>(op, f);
	case SMDDP_UINT32: return by_op<int_traits<uint32_t, uint32_t>>(op, f);
	case SMDDP_INT64: return by_op<int_traits<int64_t, uint64_t>>(op, f);
	case SMDDP_UINT64: return by_op<int_traits<uint64_t, uint64_t>>(op, f);
	case SMDDP_FLOAT16: return by_op<half_traits>(op, f);
	case SMDDP_BFLOAT16: return by_op<bf16_traits>(op, f);
	case SMDDP_FLOAT32: return by_op<float_traits<float>>(op, f);
	case SMDDP_FLOAT64: return by_op<float_traits<double>>(op, f);
	default: return (int)cudaErrorInvalidValue;
	}
}

/* The kernels ks loaded (cudaFuncGetAttributes), until one fails: a
 * cudaError_t.  Up front, before any stream waits (kernels.h says why). */
template <typename... K>
static int load_kernels(K... ks)
{
	cudaFuncAttributes fa;
	cudaError_t e = cudaSuccess;

	((e = e == cudaSuccess ? cudaFuncGetAttributes(&fa, ks) : e), ...);
	return (int)e;
}

/* f(Tr{}, OP) for every dtype and op that by_type serves, until one
 * fails: for load_kernels of every instance. */
template <typename F>
static int every_type_op(F f)
{
	static const int dtypes[] = {SMDDP_INT8,    SMDDP_UINT8,   SMDDP_INT32,   SMDDP_UINT32,
				     SMDDP_INT64,   SMDDP_UINT64,  SMDDP_FLOAT16, SMDDP_BFLOAT16,
				     SMDDP_FLOAT32, SMDDP_FLOAT64};
	static const int ops[] = {SMDDP_SUM, SMDDP_PROD, SMDDP_MIN, SMDDP_MAX, SMDDP_AVG};
	int e = 0;

	for (int dt : dtypes)
		for (int op : ops)
			if (!e)
				e = by_type(dt, op, f);
	return e;
}

#endif
