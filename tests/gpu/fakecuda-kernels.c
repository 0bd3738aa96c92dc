/* fakecuda-kernels.c - lib/cuda/kernels.h in the fake CUDA: host work queued on the
 * streams (see fakecuda.c).
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#include <cuda_runtime.h>

#include "clock/clock.h"
#include "cuda/kernels.h"
#include "fakecuda.h"
#include "reduce/reduce.h"
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

/* ---- the fast path (kernels.h): the protocol of kernels-fast.cu's k_fast, step
 * by step over all blocks, on the stream's thread; the flags are C11 atomics in the
 * shared "device memory", and the waits poll (yielding, then napping) with the
 * kernel's checks: the host's abort word, a "gave up" word, the deadline. */

struct kfast {
	struct sd_fast_args a;
	int dtype, op;
};

/* kernels-fast.cu's check_common: peer q's announcement of this call with
 * another tag, the abort word, a "gave up" word, the deadline. */
/* As kernels-fast.cu: a peer at a later call that gave up on one is that
 * failure, not a mismatch. */
static int peer_ahead(char *const *win, int q)
{
	return __atomic_load_n((uint32_t *)(win[q] + SD_FAST_GAVEUP), __ATOMIC_ACQUIRE)
		       ? SD_FAST_GAVE_UP
		       : SD_FAST_AHEAD;
}

static int check_common(struct sd_fast_host *host, char *const *win, int me, int q,
			uint64_t deadline, uint32_t call, uint32_t tag)
{
	uint64_t v = __atomic_load_n((uint64_t *)(win[me] + SD_DIRECT_ANN +
						  (size_t)q * sizeof(struct sd_direct_ann)),
				     __ATOMIC_ACQUIRE);

	if ((uint32_t)v == call && (uint32_t)(v >> 32) != tag)
		return SD_FAST_DESC;
	if (__atomic_load_n(&host->abort, __ATOMIC_ACQUIRE))
		return SD_FAST_ABORTED;
	if (__atomic_load_n((uint32_t *)(win[q] + SD_FAST_GAVEUP), __ATOMIC_ACQUIRE) ||
	    __atomic_load_n((uint32_t *)(win[me] + SD_FAST_GAVEUP), __ATOMIC_ACQUIRE))
		return SD_FAST_GAVE_UP;
	return sd_now_ns() > deadline ? SD_FAST_TIMEOUT : SD_FAST_OK;
}

static int fast_check(const struct sd_fast_args *a, int q, uint64_t deadline)
{
	return check_common(a->host, a->win, a->rank, q, deadline, a->call, a->tag);
}

static void announce_call(char *const *win, int n, int me, uint32_t call, uint32_t tag)
{
	for (int q = 0; q < n; q++)
		if (q != me)
			__atomic_store_n((uint64_t *)(win[q] + SD_DIRECT_ANN +
						      (size_t)me * sizeof(struct sd_direct_ann)),
					 (uint64_t)tag << 32 | call, __ATOMIC_RELEASE);
}

static void fast_nap(unsigned spin)
{
	struct timespec ts = {0, 20000};

	if (spin < 200)
		sched_yield();
	else
		nanosleep(&ts, NULL);
}

/* Waits for peer q's flag of block b (arrived: its call and tag; else
 * consumed: need or later); the failure, its call number in *seen. */
static int fast_wait(const struct sd_fast_args *a, int q, int b, int arrived, uint64_t deadline,
		     uint32_t *seen)
{
	int n = a->nranks;

	for (unsigned spin = 0;; spin++) {
		if (arrived) {
			uint64_t v = __atomic_load_n(
				(uint64_t *)(a->win[a->rank] + sd_fast_arrive_off(n, a->par, q, b)),
				__ATOMIC_ACQUIRE);
			int32_t d = (int32_t)((uint32_t)v - a->call);

			*seen = (uint32_t)v;
			if (d == 0 && (uint32_t)(v >> 32) != a->tag)
				return SD_FAST_DESC;
			if (d == 0)
				return __atomic_load_n((uint32_t *)(a->win[q] + SD_FAST_GAVEUP),
						       __ATOMIC_ACQUIRE)
					       ? SD_FAST_GAVE_UP
					       : SD_FAST_OK;
			if (d > 0)
				return peer_ahead(a->win, q);
		} else {
			uint32_t v = __atomic_load_n(
				(uint32_t *)(a->win[a->rank] + sd_fast_consumed_off(n, a->par, q, b)),
				__ATOMIC_ACQUIRE);

			*seen = v;
			if ((int32_t)(v - a->need[b]) >= 0)
				return SD_FAST_OK;
		}
		int e = fast_check(a, q, deadline);

		if (e)
			return e;
		fast_nap(spin);
	}
}

static int fast_weight(int e)
{
	return e == SD_FAST_AHEAD || e == SD_FAST_DESC ? 3 : e == SD_FAST_TIMEOUT ? 2 : e ? 1 : 0;
}

/* Every peer of block b waited for; the heaviest failure, as kernels-fast.cu's
 * fast_pick. */
static int fast_wait_all(const struct sd_fast_args *a, int b, int arrived, uint64_t deadline,
			 int *peer, uint32_t *seen)
{
	int fail = 0;

	for (int q = 0; q < a->nranks; q++) {
		uint32_t s = 0;
		int e;

		if (q == a->rank || (!arrived && !a->need[b]))
			continue;
		e = fast_wait(a, q, b, arrived, deadline, &s);
		if (fast_weight(e) > fast_weight(fail))
			fail = e, *peer = q, *seen = s;
	}
	return fail;
}

/* kernels-fast.cu's fast_push_src: what this rank pushes to peer q in the
 * chunk at element lo, or NULL. */
static const char *fast_push_src(const struct sd_fast_args *a, int q, size_t lo, size_t es)
{
	const char *send = a->send;

	switch (a->coll) {
	case SD_FAST_BROADCAST: return a->rank == a->root ? send + lo * es : NULL;
	case SD_FAST_REDUCE: return q == a->root ? send + lo * es : NULL;
	case SD_FAST_REDUCE_SCATTER:
	case SD_FAST_ALLTOALL: return send + ((size_t)q * a->count + lo) * es;
	default: return send + lo * es;
	}
}

/* Step 4 of block b (kernels.h): reduced in rank order, or copied. */
static void fast_output(const struct sd_fast_args *a, int dtype, int op, int b, size_t lo,
			size_t cnt)
{
	int n = a->nranks, me = a->rank;
	size_t es = smddp_dtype_size((enum smddp_dtype)dtype);
	const void *src[SD_CUDA_MAX_RANKS];

	switch (a->coll) {
	case SD_FAST_REDUCE:
		if (me != a->root)
			return;
		/* fall through */
	case SD_FAST_ALLREDUCE:
	case SD_FAST_REDUCE_SCATTER: {
		size_t own = a->coll == SD_FAST_REDUCE_SCATTER ? (size_t)me * a->count : 0;

		for (int q = 0; q < n; q++)
			src[q] = q == me ? (const char *)a->send + (own + lo) * es
					 : a->win[me] + sd_fast_inbox_off(n, a->region, a->par, q, b);
		sd_reduce((char *)a->recv + lo * es, src, n, cnt, (enum smddp_dtype)dtype,
			  (enum smddp_op)op, n);
		return;
	}
	case SD_FAST_BROADCAST:
		if (me != a->root)
			memcpy((char *)a->recv + lo * es,
			       a->win[me] + sd_fast_inbox_off(n, a->region, a->par, a->root, b), cnt * es);
		return;
	default: /* allgather, alltoall */
		for (int q = 0; q < n; q++) {
			char *dst = (char *)a->recv + ((size_t)q * a->count + lo) * es;
			const char *from =
				q != me ? a->win[me] + sd_fast_inbox_off(n, a->region, a->par, q, b)
				: a->coll == SD_FAST_ALLTOALL
					? (const char *)a->send + ((size_t)me * a->count + lo) * es
					: (const char *)a->send + lo * es;

			if (from != dst)
				memcpy(dst, from, cnt * es);
		}
	}
}

static void k_fast(void *arg)
{
	struct kfast *k = arg;
	const struct sd_fast_args *a = &k->a;
	int n = a->nranks, me = a->rank, fail = 0, peer = -1, phase = 0;
	size_t es = smddp_dtype_size((enum smddp_dtype)k->dtype), per = a->region / es;
	uint64_t deadline = sd_now_ns() + a->timeout_ns;
	uint32_t seen = 0;

	announce_call(a->win, n, me, a->call, a->tag);
	for (int b = 0; b < a->nblocks && !fail; b++)
		if ((fail = fast_wait_all(a, b, 0, deadline, &peer, &seen)))
			phase = 1;
	for (int b = 0; b < a->nblocks && !fail; b++) {
		size_t lo = (size_t)b * per, cnt = a->count - lo < per ? a->count - lo : per;
		uint64_t v = (uint64_t)a->tag << 32 | a->call;

		for (int q = 0; q < n; q++) {
			const char *src = q != me ? fast_push_src(a, q, lo, es) : NULL;

			if (src)
				memcpy(a->win[q] + sd_fast_inbox_off(n, a->region, a->par, me, b), src,
				       cnt * es);
		}
		for (int q = 0; q < n; q++)
			if (q != me)
				__atomic_store_n((uint64_t *)(a->win[q] + sd_fast_arrive_off(n, a->par, me, b)),
						 v, __ATOMIC_RELEASE);
	}
	for (int b = 0; b < a->nblocks && !fail; b++)
		if ((fail = fast_wait_all(a, b, 1, deadline, &peer, &seen)))
			phase = 3;
	for (int b = 0; b < a->nblocks && !fail; b++) {
		size_t lo = (size_t)b * per, cnt = a->count - lo < per ? a->count - lo : per;

		fast_output(a, k->dtype, k->op, b, lo, cnt);
		for (int q = 0; q < n; q++)
			if (q != me)
				__atomic_store_n((uint32_t *)(a->win[q] + sd_fast_consumed_off(n, a->par, me, b)),
						 a->call, __ATOMIC_RELEASE);
	}
	if (fail) {
		uint32_t zero = 0;

		if (__atomic_compare_exchange_n((uint32_t *)(a->win[me] + SD_FAST_GAVEUP), &zero,
						a->call ? a->call : 1u, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			a->host->call = a->call;
			a->host->peer = peer;
			a->host->theirs = seen;
			a->host->phase = (uint32_t)phase;
			a->host->coll = (uint32_t)a->coll;
			__atomic_store_n(&a->host->code, (uint32_t)fail, __ATOMIC_RELEASE);
		}
	}
	free(k);
}

int sd_cuda_kernel_fast(const struct sd_fast_args *a, int dtype, int op, void *stream)
{
	struct kfast *k;

	if (a->nranks < 2 || a->nranks > SD_CUDA_MAX_RANKS || a->nblocks < 1 ||
	    a->nblocks > SD_FAST_MAXB || a->region % 64 || a->coll < SD_FAST_ALLREDUCE ||
	    a->coll > SD_FAST_ALLTOALL || a->root < 0 || a->root >= a->nranks)
		return cudaErrorInvalidValue;
	if ((k = malloc(sizeof(*k))))
		*k = (struct kfast){.a = *a, .dtype = dtype, .op = op};
	return launch_kernel((cudaStream_t)stream, k_fast, k);
}

/* ---- the direct path (kernels.h): kernels-fast.cu's k_direct_meet and
 * k_direct, their steps one after the other on the stream's thread (the
 * meeting, then the whole part, then the last block's rendezvous). */

struct kdirect {
	struct sd_direct_args a;
	int dtype, op;
};

static void direct_fail(const struct sd_direct_args *a, int fail, int peer, uint32_t seen,
			int phase)
{
	uint32_t zero = 0;

	if (__atomic_compare_exchange_n((uint32_t *)(a->win[a->rank] + SD_FAST_GAVEUP), &zero,
					a->call ? a->call : 1u, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		a->host->call = a->call;
		a->host->peer = peer;
		a->host->theirs = seen;
		a->host->phase = (uint32_t)phase;
		a->host->coll = (uint32_t)a->coll;
		__atomic_store_n(&a->host->code, (uint32_t)fail, __ATOMIC_RELEASE);
	}
}

/* Peer q's announcement of this call (step 2). */
static int direct_wait_ann(const struct sd_direct_args *a, int q, uint64_t deadline,
			   uint32_t *seen)
{
	uint64_t *f = (uint64_t *)(a->win[a->rank] + SD_DIRECT_ANN +
				   (size_t)q * sizeof(struct sd_direct_ann));

	for (unsigned spin = 0;; spin++) {
		uint64_t v = __atomic_load_n(f, __ATOMIC_ACQUIRE);
		int32_t d = (int32_t)((uint32_t)v - a->call);

		*seen = (uint32_t)v;
		if (d > 0)
			return peer_ahead(a->win, q);
		if (d == 0)
			return (uint32_t)(v >> 32) != a->tag ? SD_FAST_DESC : SD_FAST_OK;
		int e = check_common(a->host, a->win, a->rank, q, deadline, a->call, a->tag);

		if (e)
			return e;
		fast_nap(spin);
	}
}

/* Peer q's slot j of generation g as this rank's host mapped it. */
static uint64_t direct_resolve(const struct sd_direct_args *a, int q, uint32_t j, uint32_t g,
			       uint64_t deadline, int *err)
{
	struct sd_reg_tab *x;

	if (j >= SD_REG_SLOTS) {
		*err = SD_FAST_DESC;
		return 0;
	}
	x = &a->tab[(size_t)q * SD_REG_SLOTS + j];
	struct sd_reg_tab *c = (struct sd_reg_tab *)(a->win[a->rank] + SD_DIRECT_CACHE) +
			       (size_t)q * SD_REG_SLOTS + j;

	if (__atomic_load_n(&c->gen, __ATOMIC_ACQUIRE) == g)
		return c->ptr;
	for (unsigned spin = 0;; spin++) {
		if (__atomic_load_n(&x->gen, __ATOMIC_ACQUIRE) == g) {
			c->ptr = x->ptr;
			__atomic_store_n(&c->gen, g, __ATOMIC_RELEASE);
			return c->ptr;
		}
		int e = check_common(a->host, a->win, a->rank, q, deadline, a->call, a->tag);

		if (e) {
			*err = e == SD_FAST_TIMEOUT ? SD_FAST_UNMAPPED : e;
			return 0;
		}
		fast_nap(spin);
	}
}

/* k_direct_meet: steps 1 to 3, the peers' buffers into our window's
 * pointers and the go word (or the record). */
static void k_direct_meet(void *arg)
{
	struct kdirect *k = arg;
	const struct sd_direct_args *a = &k->a;
	int n = a->nranks, me = a->rank, fail = 0, peer = -1, phase = 0;
	uint64_t deadline = sd_now_ns() + a->timeout_ns;
	uint64_t *ptrs = (uint64_t *)(a->win[me] + SD_DIRECT_PTRS);
	uint32_t seen = 0;

	for (int q = 0; q < n; q++) {
		struct sd_direct_ann *an;

		if (q == me)
			continue;
		an = (struct sd_direct_ann *)(a->win[q] + SD_DIRECT_ANN + (size_t)me * sizeof(*an));
		an->soff = a->soff;
		an->roff = a->roff;
		an->sj = a->sj;
		an->sg = a->sg;
		an->rj = a->rj;
		an->rg = a->rg;
		__atomic_store_n(&an->word, (uint64_t)a->tag << 32 | a->call, __ATOMIC_RELEASE);
	}
	for (int q = 0; q < n; q++) {
		const struct sd_direct_ann *an =
			(const struct sd_direct_ann *)(a->win[me] + SD_DIRECT_ANN + (size_t)q * sizeof(*an));
		uint32_t s = 0;
		int e = 0, ph = 2;

		if (q == me)
			continue;
		if (!(e = direct_wait_ann(a, q, deadline, &s))) {
			uint64_t sp, rp;

			ph = 4;
			sp = direct_resolve(a, q, an->sj, an->sg, deadline, &e);
			rp = e ? 0 : direct_resolve(a, q, an->rj, an->rg, deadline, &e);
			ptrs[2 * q] = sp + an->soff;
			ptrs[2 * q + 1] = rp + an->roff;
		}
		if (fast_weight(e) > fast_weight(fail))
			fail = e, peer = q, seen = s, phase = ph;
	}
	if (fail)
		direct_fail(a, fail, peer, seen, phase);
	else
		__atomic_store_n((uint32_t *)(a->win[me] + SD_DIRECT_GO), a->call, __ATOMIC_RELEASE);
	free(k);
}

/* k_direct: steps 4 and 5, once the go word holds this call (else the
 * meeting failed and said why). */
static void k_direct(void *arg)
{
	struct kdirect *k = arg;
	const struct sd_direct_args *a = &k->a;
	int n = a->nranks, me = a->rank, fail = 0, peer = -1, phase = 0;
	size_t es = smddp_dtype_size((enum smddp_dtype)k->dtype), lo, cnt;
	uint64_t deadline = sd_now_ns() + a->timeout_ns;
	const uint64_t *ptrs = (const uint64_t *)(a->win[me] + SD_DIRECT_PTRS);
	const void *src[SD_CUDA_MAX_RANKS];
	void *dst[SD_CUDA_MAX_RANKS];
	uint32_t seen = 0;

	if (__atomic_load_n((uint32_t *)(a->win[me] + SD_DIRECT_GO), __ATOMIC_ACQUIRE) != a->call) {
		free(k);
		return;
	}
	for (int q = 0; q < n; q++) {
		src[q] = q == me ? a->send : (const void *)(uintptr_t)ptrs[2 * q];
		dst[q] = q == me ? a->recv : (void *)(uintptr_t)ptrs[2 * q + 1];
	}
	cnt = sd_direct_part(a->coll, a->count, es, n, me, &lo);
	if (cnt && a->coll == SD_FAST_REDUCE_SCATTER) {
		/* Block me of every rank's input, reduced in rank order into out
		 * (which may be our own block me: read before written). */
		const void *s2[SD_CUDA_MAX_RANKS];

		for (int q = 0; q < n; q++)
			s2[q] = (const char *)src[q] + (size_t)me * a->count * es;
		sd_reduce(a->out, s2, n, cnt, (enum smddp_dtype)k->dtype, (enum smddp_op)k->op, n);
	} else if (cnt && a->coll == SD_FAST_ALLTOALL) {
		/* Block me of rank q's input into block q of out. */
		for (int q = 0; q < n; q++) {
			const char *from = (const char *)src[q] + (size_t)me * a->count * es;
			char *to = (char *)a->out + (size_t)q * a->count * es;

			if (from != to)
				memcpy(to, from, cnt * es);
		}
	} else if (cnt && a->coll == SD_FAST_ALLGATHER) {
		for (int q = 0; q < n; q++) {
			char *d = (char *)dst[q] + (size_t)me * a->count * es;

			if (d != (const char *)a->send)
				memcpy(d, a->send, cnt * es);
		}
	} else if (cnt && a->coll == SD_FAST_BROADCAST) {
		for (int q = 0; q < n; q++)
			if (q != a->root)
				memcpy((char *)dst[q] + lo * es, (const char *)src[a->root] + lo * es,
				       cnt * es);
	} else if (cnt) {
		const void *s2[SD_CUDA_MAX_RANKS];
		int to = a->coll == SD_FAST_REDUCE ? a->root : me;

		for (int q = 0; q < n; q++)
			s2[q] = (const char *)src[q] + lo * es;
		sd_reduce((char *)dst[to] + lo * es, s2, n, cnt, (enum smddp_dtype)k->dtype,
			  (enum smddp_op)k->op, n);
		for (int q = 0; q < n && a->coll == SD_FAST_ALLREDUCE; q++)
			if (q != me)
				memcpy((char *)dst[q] + lo * es, (char *)dst[me] + lo * es, cnt * es);
	}
	for (int q = 0; q < n; q++)
		if (q != me)
			__atomic_store_n((uint32_t *)(a->win[q] + SD_DIRECT_DONE + (size_t)me * 4),
					 a->call, __ATOMIC_RELEASE);
	for (int q = 0; q < n && !fail; q++) {
		uint32_t *f = (uint32_t *)(a->win[me] + SD_DIRECT_DONE + (size_t)q * 4);

		for (unsigned spin = 0; q != me; spin++) {
			uint32_t v = __atomic_load_n(f, __ATOMIC_ACQUIRE);
			int e;

			if ((int32_t)(v - a->call) >= 0)
				break;
			if ((e = check_common(a->host, a->win, me, q, deadline, a->call, a->tag))) {
				fail = e, peer = q, seen = v, phase = 5;
				break;
			}
			fast_nap(spin);
		}
	}
	if (fail)
		direct_fail(a, fail, peer, seen, phase);
	free(k);
}

int sd_cuda_kernel_direct(const struct sd_direct_args *a, int dtype, int op, void *stream)
{
	struct kdirect *k, *m;
	cudaError_t e;

	if (a->nranks < 2 || a->nranks > SD_CUDA_MAX_RANKS || a->root < 0 || a->root >= a->nranks ||
	    a->coll < SD_FAST_ALLREDUCE || a->coll > SD_FAST_ALLTOALL ||
	    ((a->coll == SD_FAST_REDUCE_SCATTER || a->coll == SD_FAST_ALLTOALL) && !a->out))
		return cudaErrorInvalidValue;
	if ((m = malloc(sizeof(*m))))
		*m = (struct kdirect){.a = *a, .dtype = dtype, .op = op};
	if ((e = launch_kernel((cudaStream_t)stream, k_direct_meet, m)) != cudaSuccess)
		return e;
	if ((k = malloc(sizeof(*k))))
		*k = (struct kdirect){.a = *a, .dtype = dtype, .op = op};
	return launch_kernel((cudaStream_t)stream, k_direct, k);
}
