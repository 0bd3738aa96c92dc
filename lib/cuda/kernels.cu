/* kernels.cu - device reduction and copy kernels of the CUDA collectives.
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
 */
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

/* ---- the reduction kernel ------------------------------------------------ */

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

template <typename Tr, int OP>
__global__ void __launch_bounds__(THREADS) k_reduce(const kargs a)
{
	reduce_body<Tr, OP>(a, blockIdx.x, gridDim.x);
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

/* ---- the fast path: kernels that meet their peers (kernels.h) -------------- */

__device__ __forceinline__ uint64_t global_ns(void)
{
	uint64_t t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* Every few thousand polls: the deadline, the host's abort word, a peer
 * or a sibling block that gave up. */
/* Also peer q's announcement (ann[q] of our window, which fast and direct
 * kernels both write): this call with another tag is a mismatch. */
__device__ __forceinline__ int check_common(struct sd_fast_host *host, char *const *win, int me,
					   int q, uint64_t deadline, uint32_t call, uint32_t tag)
{
	const uint64_t v = *(const volatile uint64_t *)(win[me] + SD_DIRECT_ANN +
							 (size_t)q * sizeof(sd_direct_ann));

	if ((uint32_t)v == call && (uint32_t)(v >> 32) != tag)
		return SD_FAST_DESC;
	if (host->abort)
		return SD_FAST_ABORTED;
	if (*(volatile uint32_t *)(win[q] + SD_FAST_GAVEUP) ||
	    *(volatile uint32_t *)(win[me] + SD_FAST_GAVEUP))
		return SD_FAST_GAVE_UP;
	if (global_ns() > deadline)
		return SD_FAST_TIMEOUT;
	return SD_FAST_OK;
}

__device__ __forceinline__ int fast_check(const sd_fast_args &a, int q, uint64_t deadline)
{
	return check_common(a.host, a.win, a.rank, q, deadline, a.call, a.tag);
}

/* Tells every peer which call this rank's kernel is in (ann[me] of their
 * windows): threads t < nranks of one block. */
__device__ __forceinline__ void announce_call(char *const *win, int n, int me, uint32_t call,
					      uint32_t tag)
{
	const int t = threadIdx.x;

	if (t < n && t != me)
		*(volatile uint64_t *)(win[t] + SD_DIRECT_ANN + (size_t)me * sizeof(sd_direct_ann)) =
			(uint64_t)tag << 32 | call;
}

/* Step 1: peer q has consumed block b's last push of this parity. */
__device__ int fast_wait_consumed(const sd_fast_args &a, int q, uint64_t deadline, uint32_t *seen)
{
	const volatile uint32_t *f =
		(const volatile uint32_t *)(a.win[a.rank] +
					    sd_fast_consumed_off(a.nranks, a.par, q, blockIdx.x));
	const uint32_t need = a.need[blockIdx.x];

	for (unsigned spin = 1;; spin++) {
		uint32_t v = *f;

		if ((int32_t)(v - need) >= 0)
			return SD_FAST_OK;
		if ((spin & 2047) == 0) {
			int e = fast_check(a, q, deadline);

			if (e) {
				*seen = v;
				return e;
			}
		}
	}
}

/* Step 3: peer q's chunk b of this call is in our inbox. */
__device__ int fast_wait_arrived(const sd_fast_args &a, int q, uint64_t deadline, uint32_t *seen)
{
	const volatile uint64_t *f =
		(const volatile uint64_t *)(a.win[a.rank] +
					    sd_fast_arrive_off(a.nranks, a.par, q, blockIdx.x));

	for (unsigned spin = 1;; spin++) {
		uint64_t v = *f;
		uint32_t call = (uint32_t)v;
		int32_t d = (int32_t)(call - a.call);

		if (d == 0) {
			*seen = call;
			if ((uint32_t)(v >> 32) != a.tag)
				return SD_FAST_DESC;
			/* Its data is here, but a peer that has given up (its
			 * failure, or an abort) will not take ours: this call
			 * fails too, rather than leave the next one waiting. */
			return *(volatile uint32_t *)(a.win[q] + SD_FAST_GAVEUP) ? SD_FAST_GAVE_UP
										 : SD_FAST_OK;
		}
		if (d > 0) {
			*seen = call;
			return SD_FAST_AHEAD;
		}
		if ((spin & 2047) == 0) {
			int e = fast_check(a, q, deadline);

			if (e) {
				*seen = call;
				return e;
			}
		}
	}
}

/* A failure's weight: a root cause (a mismatch, then a deadline) before a
 * peer's giving up or an abort, which may follow from it. */
__device__ __forceinline__ int fast_weight(int e)
{
	return e == SD_FAST_AHEAD || e == SD_FAST_DESC ? 3 : e == SD_FAST_TIMEOUT ? 2 : 1;
}

/* Warp 0 (the waiting threads: n <= 32) agrees on the block's failure:
 * the heaviest, then the lowest peer.  e: this thread's (0: none). */
__device__ __forceinline__ void fast_pick(int e, int peer, uint32_t seen, int phase, int *fail,
					 int *fail_peer, uint32_t *fail_seen, int *fail_phase)
{
	unsigned key = e ? (unsigned)fast_weight(e) << 8 | (unsigned)(31 - peer) : 0u;
	unsigned top = __reduce_max_sync(0xffffffffu, key);

	if (key && key == top) {
		*fail = e;
		*fail_peer = peer;
		*fail_seen = seen;
		*fail_phase = phase;
	}
}

template <typename Tr, int OP>
__global__ void __launch_bounds__(THREADS) k_fast_allreduce(const __grid_constant__ sd_fast_args a)
{
	typedef typename Tr::S S;
	__shared__ int fail, fail_peer, fail_phase;
	__shared__ uint32_t fail_seen;
	__shared__ kargs k;
	const int n = a.nranks, me = a.rank, b = blockIdx.x, t = threadIdx.x;
	const size_t per = a.region / sizeof(S);
	const size_t lo = (size_t)b * per;
	const size_t cnt = a.count - lo < per ? a.count - lo : per;
	const uint64_t deadline = global_ns() + a.timeout_ns;
	uint32_t seen = 0;
	int e;

	if (t == 0)
		fail = 0;
	if (b == 0)
		announce_call(a.win, n, me, a.call, a.tag);
	__syncthreads();
	/* 1. Our last push of this parity into block b's regions is consumed. */
	if (t < 32) {
		e = t < n && t != me && a.need[b] ? fast_wait_consumed(a, t, deadline, &seen) : 0;
		fast_pick(e, t, seen, 1, &fail, &fail_peer, &fail_seen, &fail_phase);
	}
	__syncthreads();
	if (!fail) {
		/* 2. Push chunk b into every peer's inbox, then say so. */
		const char *src = (const char *)a.send + lo * sizeof(S);

		for (int q = 0; q < n; q++)
			if (q != me)
				copy_body(src, a.win[q] + sd_fast_inbox_off(n, a.region, a.par, me, b),
					  cnt * sizeof(S), 0, 1);
		__syncthreads();
		if (t == 0) {
			const uint64_t v = (uint64_t)a.tag << 32 | a.call;

			__threadfence_system();
			for (int q = 0; q < n; q++)
				if (q != me)
					*(volatile uint64_t *)(a.win[q] +
							       sd_fast_arrive_off(n, a.par, me, b)) = v;
		}
		/* 3. Every peer's chunk b is here. */
		if (t < 32) {
			e = t < n && t != me ? fast_wait_arrived(a, t, deadline, &seen) : 0;
			fast_pick(e, t, seen, 3, &fail, &fail_peer, &fail_seen, &fail_phase);
		}
		__syncthreads();
	}
	if (!fail) {
		/* 4. Reduce in rank order into recvbuf. */
		__threadfence();
		if (t == 0) {
			for (int q = 0; q < n; q++)
				k.src[q] = q == me ? (const char *)a.send + lo * sizeof(S)
						   : a.win[me] + sd_fast_inbox_off(n, a.region, a.par, q, b);
			k.dst[0] = (char *)a.recv + lo * sizeof(S);
			k.nsrc = n;
			k.ndst = 1;
			k.count = cnt;
			k.div = n;
			split_vectors<Tr>(k);
		}
		__syncthreads();
		reduce_body<Tr, OP>(k, 0, 1);
		__syncthreads();
		/* 5. Our inbox's block b is free again. */
		if (t == 0) {
			__threadfence_system();
			for (int q = 0; q < n; q++)
				if (q != me)
					*(volatile uint32_t *)(a.win[q] +
							       sd_fast_consumed_off(n, a.par, me, b)) = a.call;
		}
		return;
	}
	/* A failure: the first block to give up writes the host's record (its
	 * "gave up" word, in this GPU's memory, picks it), then every peer
	 * and sibling block sees that word at its next check. */
	if (t == 0) {
		unsigned *gave = (unsigned *)(a.win[me] + SD_FAST_GAVEUP);

		if (atomicCAS(gave, 0u, a.call ? a.call : 1u) == 0u) {
			a.host->call = a.call;
			a.host->peer = fail_peer;
			a.host->theirs = fail_seen;
			a.host->phase = (uint32_t)fail_phase;
			__threadfence_system();
			a.host->code = (uint32_t)fail;
		}
		__threadfence_system();
	}
}

/* ---- the direct path: kernels that read the peers' buffers (kernels.h) ---- */

__device__ __forceinline__ int direct_check(const sd_direct_args &a, int q, uint64_t deadline)
{
	return check_common(a.host, a.win, a.rank, q, deadline, a.call, a.tag);
}

/* Step 2: peer q's announcement of this call is in our window. */
__device__ int direct_wait_ann(const sd_direct_args &a, int q, uint64_t deadline, uint32_t *seen)
{
	const volatile uint64_t *f =
		(const volatile uint64_t *)(a.win[a.rank] + SD_DIRECT_ANN + (size_t)q * sizeof(sd_direct_ann));

	for (unsigned spin = 1;; spin++) {
		const uint64_t v = *f;
		const uint32_t call = (uint32_t)v;
		const int32_t d = (int32_t)(call - a.call);

		if (d == 0 || d > 0) {
			*seen = call;
			return d > 0 ? SD_FAST_AHEAD : (uint32_t)(v >> 32) != a.tag ? SD_FAST_DESC : SD_FAST_OK;
		}
		if ((spin & 2047) == 0) {
			int e = direct_check(a, q, deadline);

			if (e) {
				*seen = call;
				return e;
			}
		}
	}
}

/* ... and its slot j of generation g mapped here (the host's table): the
 * address, or 0 with *err set. */
__device__ uint64_t direct_resolve(const sd_direct_args &a, int q, uint32_t j, uint32_t g,
				   uint64_t deadline, int *err)
{
	const struct sd_reg_tab *x = &a.tab[(size_t)q * SD_REG_SLOTS + (j < SD_REG_SLOTS ? j : 0)];
	/* Our own copy, in the window: (q, j, g) always means one mapping
	 * (generations are never reused), so a copy never goes stale. */
	volatile struct sd_reg_tab *c = (volatile struct sd_reg_tab *)(a.win[a.rank] + SD_DIRECT_CACHE) +
					(size_t)q * SD_REG_SLOTS + (j < SD_REG_SLOTS ? j : 0);

	if (j >= SD_REG_SLOTS) {
		*err = SD_FAST_DESC;
		return 0;
	}
	if (c->gen == g)
		return c->ptr;
	for (unsigned spin = 1;; spin++) {
		if (x->gen == g) {
			__threadfence_system();
			const uint64_t p = x->ptr;

			c->ptr = p;
			c->gen = g;
			return p;
		}
		/* Reads over the bus: a slower poll. */
		if ((spin & 63) == 0) {
			int e = direct_check(a, q, deadline);

			if (e) {
				*err = e == SD_FAST_TIMEOUT ? SD_FAST_UNMAPPED : e;
				return 0;
			}
		}
		__nanosleep(200);
	}
}

/* Step 4: peer q is done with this call. */
__device__ int direct_wait_done(const sd_direct_args &a, int q, uint64_t deadline, uint32_t *seen)
{
	const volatile uint32_t *f = (const volatile uint32_t *)(a.win[a.rank] + SD_DIRECT_DONE + (size_t)q * 4);

	for (unsigned spin = 1;; spin++) {
		const uint32_t v = *f;

		if ((int32_t)(v - a.call) >= 0)
			return SD_FAST_OK;
		if ((spin & 2047) == 0) {
			int e = direct_check(a, q, deadline);

			if (e) {
				*seen = v;
				return e;
			}
		}
	}
}

template <typename Tr, int OP>
__global__ void __launch_bounds__(THREADS) k_direct_allreduce(const __grid_constant__ sd_direct_args a)
{
	typedef typename Tr::S S;
	__shared__ int fail, fail_peer, fail_phase, last;
	__shared__ uint32_t fail_seen;
	__shared__ kargs k;
	const int n = a.nranks, me = a.rank, t = threadIdx.x;
	char *const mine = a.win[me];
	const uint64_t deadline = global_ns() + a.timeout_ns;
	uint32_t seen = 0;
	int e = 0;

	if (t == 0)
		fail = 0;
	__syncthreads();
	if (blockIdx.x == 0) {
		/* 1. Where our buffers are, then the word. */
		if (t < n && t != me) {
			sd_direct_ann *an = (sd_direct_ann *)(a.win[t] + SD_DIRECT_ANN +
							       (size_t)me * sizeof(sd_direct_ann));

			an->soff = a.soff;
			an->roff = a.roff;
			an->sj = a.sj;
			an->sg = a.sg;
			an->rj = a.rj;
			an->rg = a.rg;
			__threadfence_system();
			*(volatile uint64_t *)&an->word = (uint64_t)a.tag << 32 | a.call;
		}
		/* 2. Every peer's buffers, as mapped here. */
		if (t < 32) {
			int phase = 2;

			if (t < n && t != me && !(e = direct_wait_ann(a, t, deadline, &seen))) {
				const volatile sd_direct_ann *an =
					(const volatile sd_direct_ann *)(mine + SD_DIRECT_ANN +
									 (size_t)t * sizeof(sd_direct_ann));
				__threadfence();
				uint32_t sj = an->sj, sg = an->sg, rj = an->rj, rg = an->rg;
				uint64_t so = an->soff, ro = an->roff, sp, rp;

				phase = 4;
				sp = direct_resolve(a, t, sj, sg, deadline, &e);
				rp = e ? 0 : direct_resolve(a, t, rj, rg, deadline, &e);
				if (!e) {
					volatile uint64_t *p = (volatile uint64_t *)(mine + SD_DIRECT_PTRS);

					p[2 * t] = sp + so;
					p[2 * t + 1] = rp + ro;
				}
			}
			fast_pick(e, t, seen, phase, &fail, &fail_peer, &fail_seen, &fail_phase);
		}
		__syncthreads();
		if (!fail && t == 0) {
			__threadfence();
			*(volatile uint32_t *)(mine + SD_DIRECT_GO) = a.call;
		}
	} else {
		if (t == 0) {
			const volatile uint32_t *go = (const volatile uint32_t *)(mine + SD_DIRECT_GO);

			for (unsigned spin = 1; *go != a.call; spin++)
				if ((spin & 2047) == 0 && (e = direct_check(a, me, deadline))) {
					fail = e;
					fail_peer = me;
					fail_seen = 0;
					fail_phase = 2;
					break;
				}
			__threadfence();
		}
		__syncthreads();
	}
	if (!fail) {
		/* 3. Our slice of every rank's input into every rank's output. */
		if (t == 0) {
			const volatile uint64_t *p = (const volatile uint64_t *)(mine + SD_DIRECT_PTRS);
			size_t lo, cnt = sd_direct_slice(a.count, sizeof(S), n, me, &lo);

			for (int q = 0; q < n; q++) {
				k.src[q] = (q == me ? (const char *)a.send : (const char *)p[2 * q]) + lo * sizeof(S);
				k.dst[q] = (q == me ? (char *)a.recv : (char *)p[2 * q + 1]) + lo * sizeof(S);
			}
			k.nsrc = n;
			k.ndst = n;
			k.count = cnt;
			k.div = n;
			split_vectors<Tr>(k);
		}
		__syncthreads();
		if (k.count)
			reduce_body<Tr, OP>(k, blockIdx.x, gridDim.x);
		/* The block's stores, then one system fence (the fast kernel's
		 * pattern), then the count. */
		__syncthreads();
		if (t == 0) {
			__threadfence_system();
			last = atomicAdd((unsigned *)(mine + SD_DIRECT_COUNT), 1u) == gridDim.x - 1;
		}
		__syncthreads();
		if (!last)
			return;
		/* 4. The last block: we are done with every peer's buffers;
		 * wait until every peer is done with ours. */
		if (t == 0)
			*(volatile unsigned *)(mine + SD_DIRECT_COUNT) = 0;
		__threadfence_system();
		if (t < n && t != me)
			*(volatile uint32_t *)(a.win[t] + SD_DIRECT_DONE + (size_t)me * 4) = a.call;
		if (t < 32) {
			e = t < n && t != me ? direct_wait_done(a, t, deadline, &seen) : 0;
			fast_pick(e, t, seen, 5, &fail, &fail_peer, &fail_seen, &fail_phase);
		}
		__syncthreads();
		if (!fail) {
			__threadfence_system();
			return;
		}
	}
	/* A failure: recorded as the fast kernel does. */
	if (t == 0) {
		unsigned *gave = (unsigned *)(mine + SD_FAST_GAVEUP);

		if (atomicCAS(gave, 0u, a.call ? a.call : 1u) == 0u) {
			a.host->call = a.call;
			a.host->peer = fail_peer;
			a.host->theirs = fail_seen;
			a.host->phase = (uint32_t)fail_phase;
			__threadfence_system();
			a.host->code = (uint32_t)fail;
		}
		__threadfence_system();
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

template <typename Tr>
static cudaError_t load_ops()
{
	cudaFuncAttributes fa;
	cudaError_t e = cudaSuccess;

	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_reduce<Tr, SMDDP_SUM>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_reduce<Tr, SMDDP_PROD>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_reduce<Tr, SMDDP_MIN>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_reduce<Tr, SMDDP_MAX>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_reduce<Tr, SMDDP_AVG>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_reduce_at<Tr, SMDDP_SUM>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_reduce_at<Tr, SMDDP_PROD>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_reduce_at<Tr, SMDDP_MIN>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_reduce_at<Tr, SMDDP_MAX>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_reduce_at<Tr, SMDDP_AVG>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_fast_allreduce<Tr, SMDDP_SUM>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_fast_allreduce<Tr, SMDDP_PROD>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_fast_allreduce<Tr, SMDDP_MIN>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_fast_allreduce<Tr, SMDDP_MAX>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_fast_allreduce<Tr, SMDDP_AVG>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_direct_allreduce<Tr, SMDDP_SUM>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_direct_allreduce<Tr, SMDDP_PROD>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_direct_allreduce<Tr, SMDDP_MIN>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_direct_allreduce<Tr, SMDDP_MAX>);
	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_direct_allreduce<Tr, SMDDP_AVG>);
	return e;
}

extern "C" int sd_cuda_kernels_load(void)
{
	cudaFuncAttributes fa;
	cudaError_t e = cudaFuncGetAttributes(&fa, k_copy_pairs);

	if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, k_copy_pairs_at);

	if (e == cudaSuccess) e = load_ops<int_traits<int8_t, uint8_t>>();
	if (e == cudaSuccess) e = load_ops<int_traits<uint8_t, uint8_t>>();
	if (e == cudaSuccess) e = load_ops<int_traits<int32_t, uint32_t>>();
	if (e == cudaSuccess) e = load_ops<int_traits<uint32_t, uint32_t>>();
	if (e == cudaSuccess) e = load_ops<int_traits<int64_t, uint64_t>>();
	if (e == cudaSuccess) e = load_ops<int_traits<uint64_t, uint64_t>>();
	if (e == cudaSuccess) e = load_ops<half_traits>();
	if (e == cudaSuccess) e = load_ops<bf16_traits>();
	if (e == cudaSuccess) e = load_ops<float_traits<float>>();
	if (e == cudaSuccess) e = load_ops<float_traits<double>>();
	return (int)e;
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

extern "C" int sd_cuda_kernel_fast_allreduce(const struct sd_fast_args *a, int dtype, int op,
					     void *stream)
{
	if (a->nranks < 2 || a->nranks > SD_CUDA_MAX_RANKS || a->nblocks < 1 ||
	    a->nblocks > SD_FAST_MAXB || a->region % 64)
		return (int)cudaErrorInvalidValue;
	sd_fast_args v = *a;
	return by_type(dtype, op, [&](auto tr, auto o) {
		return launch_kernel(k_fast_allreduce<decltype(tr), decltype(o)::value>,
				     dim3((unsigned)v.nblocks), (cudaStream_t)stream, v);
	});
}

/* Blocks per rank: enough for the slice, and no more than the GPU holds
 * at once divided among the ranks on it, so that every rank's kernel is
 * resident while block 0 waits on the peers and the others on block 0. */
template <typename Tr, int OP>
static int launch_direct(const sd_direct_args &v, cudaStream_t st)
{
	constexpr size_t es = sizeof(typename Tr::S);
	size_t lo, cnt = sd_direct_slice(v.count, es, v.nranks, v.rank, &lo);
	int occ = 0, share = v.share < 1 ? 1 : v.share;
	auto kern = k_direct_allreduce<Tr, OP>;

	if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, THREADS, 0) != cudaSuccess ||
	    occ < 1)
		occ = 1;
	int cap = sm_count() * occ / share;
	size_t nvec = cnt / (16 / es), work = (nvec + UNROLL - 1) / UNROLL;
	unsigned grid = grid_for(work ? work : 1, cap < 1 ? 1 : cap);

	return launch_kernel(kern, dim3(grid), st, v);
}

extern "C" int sd_cuda_kernel_direct_allreduce(const struct sd_direct_args *a, int dtype, int op,
					      void *stream)
{
	if (a->nranks < 2 || a->nranks > SD_CUDA_MAX_RANKS)
		return (int)cudaErrorInvalidValue;
	sd_direct_args v = *a;
	return by_type(dtype, op, [&](auto tr, auto o) {
		return launch_direct<decltype(tr), decltype(o)::value>(v, (cudaStream_t)stream);
	});
}
