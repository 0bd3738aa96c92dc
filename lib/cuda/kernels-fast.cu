/* kernels-fast.cu - the kernels that meet their peers themselves: the fast path
 * (fast.c) and the direct path (direct.c); the protocols are in kernels.h.
 */
#include "cuda/kernels-common.cuh"

/* ---- the fast path: kernels that meet their peers (kernels.h) -------------- */

__device__ __forceinline__ uint64_t global_ns(void)
{
	uint64_t t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/* Polls of a wait before its warp naps between polls: spinning answers
 * fastest while a peer is a few microseconds away; past that (some
 * hundred microseconds), naps leave the SM's issue slots to the warps of
 * other kernels, a late peer's first of all when ranks share a GPU under
 * MPS. */
#define SPIN_FREE 1024u

__device__ __forceinline__ void poll_pause(unsigned spin)
{
	if (spin > SPIN_FREE)
		__nanosleep(spin > 8 * SPIN_FREE ? 1000 : 100);
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

/* Peer q is at a later call: it made more calls than this rank, unless it
 * gave up on one (a timeout, a dead peer: its "gave up" word, set before it
 * went on) and went past this one failing; then that failure is the cause. */
__device__ __forceinline__ int peer_ahead(char *const *win, int q)
{
	__threadfence_system();
	return *(const volatile uint32_t *)(win[q] + SD_FAST_GAVEUP) ? SD_FAST_GAVE_UP : SD_FAST_AHEAD;
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

/* Until the count *f of peer q reaches want (as 32-bit counts that wrap),
 * checking the peers (check_common) every 2048 polls: its failure, with
 * what *f said in *seen.  Fast and direct kernels (Args: sd_fast_args,
 * sd_direct_args).  The waits on announcements (fast_wait_arrived,
 * direct_wait_ann) stay written out: each tells its own mismatches. */
template <typename Args>
__device__ __forceinline__ int wait_count(const Args &a, const volatile uint32_t *f, uint32_t want,
					  int q, uint64_t deadline, uint32_t *seen)
{
	for (unsigned spin = 1;; spin++) {
		const uint32_t v = *f;

		if ((int32_t)(v - want) >= 0)
			return SD_FAST_OK;
		if ((spin & 2047) == 0) {
			int e = check_common(a.host, a.win, a.rank, q, deadline, a.call, a.tag);

			if (e) {
				*seen = v;
				return e;
			}
		}
		poll_pause(spin);
	}
}

/* Step 1: peer q has consumed block b's last push of this parity. */
__device__ int fast_wait_consumed(const sd_fast_args &a, int q, uint64_t deadline, uint32_t *seen)
{
	const size_t off = sd_fast_consumed_off(a.nranks, a.par, q, blockIdx.x);

	return wait_count(a, (const volatile uint32_t *)(a.win[a.rank] + off), a.need[blockIdx.x], q,
			  deadline, seen);
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
			return peer_ahead(a.win, q);
		}
		if ((spin & 2047) == 0) {
			int e = fast_check(a, q, deadline);

			if (e) {
				*seen = call;
				return e;
			}
		}
		poll_pause(spin);
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

/* What block b of this rank pushes to peer q (kernels.h, step 2): the
 * start of its chunk, or NULL for nothing. */
__device__ __forceinline__ const char *fast_push_src(const sd_fast_args &a, int q, size_t lo,
						   size_t es)
{
	const char *send = (const char *)a.send;

	switch (a.coll) {
	case SD_FAST_BROADCAST: return a.rank == a.root ? send + lo * es : NULL;
	case SD_FAST_REDUCE: return q == a.root ? send + lo * es : NULL;
	case SD_FAST_REDUCE_SCATTER:
	case SD_FAST_ALLTOALL: return send + ((size_t)q * a.count + lo) * es;
	default: return send + lo * es; /* allreduce, allgather */
	}
}

/* Step 4 of the collectives that copy (allgather, alltoall, broadcast):
 * every peer's chunk (and this rank's own) into its place in recvbuf, by
 * the whole block. */
__device__ __forceinline__ void fast_place(const sd_fast_args &a, size_t lo, size_t cnt, size_t es)
{
	const int n = a.nranks, me = a.rank, b = blockIdx.x;
	const size_t bytes = cnt * es;

	if (a.coll == SD_FAST_BROADCAST) {
		if (me != a.root)
			copy_body(a.win[me] + sd_fast_inbox_off(n, a.region, a.par, a.root, b),
				  (char *)a.recv + lo * es, bytes, 0, 1);
		return;
	}
	for (int q = 0; q < n; q++) {
		char *dst = (char *)a.recv + ((size_t)q * a.count + lo) * es;
		const char *src = q != me ? a.win[me] + sd_fast_inbox_off(n, a.region, a.par, q, b)
			: a.coll == SD_FAST_ALLTOALL ? (const char *)a.send + ((size_t)me * a.count + lo) * es
						       : (const char *)a.send + lo * es;

		if (src != dst) /* in place: its own chunk is there */
			copy_body(src, dst, bytes, 0, 1);
	}
}

template <typename Tr, int OP>
__global__ void __launch_bounds__(THREADS) k_fast(const __grid_constant__ sd_fast_args a)
{
	typedef typename Tr::S S;
	__shared__ int fail, fail_peer, fail_phase;
	__shared__ uint32_t fail_seen;
	__shared__ kargs k;
	const int n = a.nranks, me = a.rank, b = blockIdx.x, t = threadIdx.x;
	const size_t es = sizeof(S), per = a.region / es;
	const size_t lo = (size_t)b * per;
	const size_t cnt = a.count - lo < per ? a.count - lo : per;
	const uint64_t deadline = global_ns() + a.timeout_ns;
	const int reducing = a.coll == SD_FAST_ALLREDUCE || a.coll == SD_FAST_REDUCE_SCATTER ||
			     a.coll == SD_FAST_REDUCE;
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
		/* 2. Push our chunk b for each peer into its inbox, then say so
		 * to every peer (also where nothing went: the flags are the
		 * rendezvous). */
		for (int q = 0; q < n; q++) {
			const char *src = q != me ? fast_push_src(a, q, lo, es) : NULL;

			if (src)
				copy_body(src, a.win[q] + sd_fast_inbox_off(n, a.region, a.par, me, b),
					  cnt * es, 0, 1);
		}
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
		/* 4. Our output's chunk b: reduced in rank order, or copied. */
		__threadfence();
		if (reducing && (a.coll != SD_FAST_REDUCE || me == a.root)) {
			if (t == 0) {
				const size_t own = a.coll == SD_FAST_REDUCE_SCATTER ? (size_t)me * a.count : 0;

				for (int q = 0; q < n; q++)
					k.src[q] = q == me ? (const char *)a.send + (own + lo) * es
							   : a.win[me] + sd_fast_inbox_off(n, a.region, a.par, q, b);
				k.dst[0] = (char *)a.recv + lo * es;
				k.nsrc = n;
				k.ndst = 1;
				k.count = cnt;
				k.div = n;
				split_vectors<Tr>(k);
			}
			__syncthreads();
			reduce_body<Tr, OP>(k, 0, 1);
		} else if (!reducing) {
			fast_place(a, lo, cnt, es);
		}
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
			a.host->coll = (uint32_t)a.coll;
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
			return d > 0 ? peer_ahead(a.win, q) : (uint32_t)(v >> 32) != a.tag ? SD_FAST_DESC : SD_FAST_OK;
		}
		if ((spin & 2047) == 0) {
			int e = direct_check(a, q, deadline);

			if (e) {
				*seen = call;
				return e;
			}
		}
		poll_pause(spin);
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

/* Step 5: peer q is done with this call. */
__device__ int direct_wait_done(const sd_direct_args &a, int q, uint64_t deadline, uint32_t *seen)
{
	const size_t off = SD_DIRECT_DONE + (size_t)q * 4;

	return wait_count(a, (const volatile uint32_t *)(a.win[a.rank] + off), a.call, q, deadline,
			  seen);
}

/* A failure, recorded as the fast kernel does: the first block of the
 * rank to give up writes the host's record.  Thread 0. */
__device__ void direct_record(const sd_direct_args &a, int fail, int peer, uint32_t seen, int phase)
{
	unsigned *gave = (unsigned *)(a.win[a.rank] + SD_FAST_GAVEUP);

	if (atomicCAS(gave, 0u, a.call ? a.call : 1u) == 0u) {
		a.host->call = a.call;
		a.host->peer = peer;
		a.host->theirs = seen;
		a.host->phase = (uint32_t)phase;
		a.host->coll = (uint32_t)a.coll;
		__threadfence_system();
		a.host->code = (uint32_t)fail;
	}
	__threadfence_system();
}

/* Steps 1 to 3 (kernels.h), by one warp: the only wait of the call that
 * lasts as long as a peer is late, so that a rank whose peer is late
 * holds one warp of one SM, not its share of the GPU (the data kernel's
 * blocks, launched behind it). */
__global__ void __launch_bounds__(32) k_direct_meet(const __grid_constant__ sd_direct_args a)
{
	__shared__ int fail, fail_peer, fail_phase;
	__shared__ uint32_t fail_seen;
	const int n = a.nranks, me = a.rank, t = threadIdx.x;
	char *const mine = a.win[me];
	const uint64_t deadline = global_ns() + a.timeout_ns;
	uint32_t seen = 0;
	int e = 0, phase = 2;

	if (t == 0)
		fail = 0;
	__syncthreads();
	/* 1. Where our buffers are, then the word. */
	if (t < n && t != me) {
		sd_direct_ann *an =
			(sd_direct_ann *)(a.win[t] + SD_DIRECT_ANN + (size_t)me * sizeof(sd_direct_ann));

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
	if (t < n && t != me && !(e = direct_wait_ann(a, t, deadline, &seen))) {
		const volatile sd_direct_ann *an =
			(const volatile sd_direct_ann *)(mine + SD_DIRECT_ANN + (size_t)t * sizeof(sd_direct_ann));
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
	__syncthreads();
	/* 3. Go: the data kernel behind us on the stream reads it first. */
	if (t == 0 && !fail) {
		__threadfence();
		*(volatile uint32_t *)(mine + SD_DIRECT_GO) = a.call;
	} else if (t == 0) {
		direct_record(a, fail, fail_peer, fail_seen, fail_phase);
	}
}

/* Steps 4 and 5 (kernels.h): launched behind k_direct_meet on the stream,
 * so every peer has arrived; its blocks never wait on a peer but in the
 * last block's final rendezvous. */
template <typename Tr, int OP>
__global__ void __launch_bounds__(THREADS) k_direct(const __grid_constant__ sd_direct_args a)
{
	typedef typename Tr::S S;
	__shared__ int fail, fail_peer, fail_phase, last, met;
	__shared__ uint32_t fail_seen;
	__shared__ kargs k;
	const int n = a.nranks, me = a.rank, t = threadIdx.x;
	char *const mine = a.win[me];
	const volatile uint64_t *p = (const volatile uint64_t *)(mine + SD_DIRECT_PTRS);
	const size_t es = sizeof(S);
	uint32_t seen = 0;
	int e = 0;

	if (t == 0) {
		fail = 0;
		met = *(const volatile uint32_t *)(mine + SD_DIRECT_GO) == a.call;
	}
	__syncthreads();
	if (!met)
		return; /* the meeting failed, and k_direct_meet said why */
	const uint64_t deadline = global_ns() + a.timeout_ns;

	if (a.coll == SD_FAST_ALLTOALL) {
		/* 4. Block me of rank q's input into block q of our output,
		 * one peer after the other over the whole grid. */
		for (int q = 0; q < n; q++) {
			if (t == 0) {
				k.src[0] = (q == me ? (const char *)a.send : (const char *)p[2 * q]) +
					   (size_t)me * a.count * es;
				k.dst[0] = (char *)a.out + (size_t)q * a.count * es;
				k.nsrc = 1;
				k.ndst = k.src[0] != k.dst[0]; /* in place: ours is there */
				k.count = k.ndst ? a.count : 0;
				k.div = 1;
				split_vectors<Tr>(k);
			}
			__syncthreads();
			if (k.count)
				reduce_body<Tr, OP>(k, blockIdx.x, gridDim.x);
			__syncthreads();
		}
	} else {
		/* 4. Our part: a slice of every rank's input (broadcast: of
		 * the root's) into every rank's output (reduce: the root's),
		 * our input into every rank's output (allgather), or block me
		 * of every rank's input into ours (reduce_scatter). */
		if (t == 0) {
			size_t lo, cnt = sd_direct_part(a.coll, a.count, es, n, me, &lo);

			for (int q = 0; q < n; q++) {
				k.src[q] = (q == me ? (const char *)a.send : (const char *)p[2 * q]) + lo * es;
				k.dst[q] = (q == me ? (char *)a.recv : (char *)p[2 * q + 1]) + lo * es;
			}
			k.nsrc = n;
			k.ndst = n;
			if (a.coll == SD_FAST_REDUCE) {
				k.dst[0] = k.dst[a.root];
				k.ndst = 1;
			} else if (a.coll == SD_FAST_REDUCE_SCATTER) {
				for (int q = 0; q < n; q++)
					k.src[q] += (size_t)me * a.count * es;
				k.dst[0] = (char *)a.out;
				k.ndst = 1;
			} else if (a.coll == SD_FAST_BROADCAST) {
				k.src[0] = k.src[a.root];
				k.nsrc = 1;
				k.ndst = 0;
				for (int q = 0; q < n; q++)
					if (q != a.root)
						k.dst[k.ndst++] = q == me ? (char *)a.recv + lo * es
									  : (char *)p[2 * q + 1] + lo * es;
			} else if (a.coll == SD_FAST_ALLGATHER) {
				k.src[0] = (const char *)a.send;
				k.nsrc = 1;
				k.ndst = 0;
				for (int q = 0; q < n; q++) {
					char *d = (q == me ? (char *)a.recv : (char *)p[2 * q + 1]) +
						  (size_t)me * a.count * es;

					if (d != (const char *)a.send) /* in place: ours is there */
						k.dst[k.ndst++] = d;
				}
			}
			k.count = k.ndst ? cnt : 0;
			k.div = n;
			split_vectors<Tr>(k);
		}
		__syncthreads();
		if (k.count)
			reduce_body<Tr, OP>(k, blockIdx.x, gridDim.x);
	}
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
	/* 5. The last block: we are done with every peer's buffers; wait
	 * until every peer is done with ours. */
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
	if (t == 0)
		direct_record(a, fail, fail_peer, fail_seen, fail_phase);
}

/* ---- launch ------------------------------------------------------------- */

extern "C" int sd_cuda_kernel_fast(const struct sd_fast_args *a, int dtype, int op, void *stream)
{
	if (a->nranks < 2 || a->nranks > SD_CUDA_MAX_RANKS || a->nblocks < 1 ||
	    a->nblocks > SD_FAST_MAXB || a->region % 64 || a->coll < SD_FAST_ALLREDUCE ||
	    a->coll > SD_FAST_ALLTOALL || a->root < 0 || a->root >= a->nranks)
		return (int)cudaErrorInvalidValue;
	/* The collectives that copy run the instance of SUM (any would do). */
	if (a->coll == SD_FAST_ALLGATHER || a->coll == SD_FAST_BROADCAST ||
	    a->coll == SD_FAST_ALLTOALL)
		op = SMDDP_SUM;
	sd_fast_args v = *a;
	return by_type(dtype, op, [&](auto tr, auto o) {
		return launch_kernel(k_fast<decltype(tr), decltype(o)::value>,
				     dim3((unsigned)v.nblocks), (cudaStream_t)stream, v);
	});
}

/* The data kernel's blocks: enough for its part, and no more than the GPU
 * holds at once divided among the ranks on it, which share it.  The
 * meeting first, one warp (k_direct_meet); the data kernel behind it on
 * the stream starts once every peer has arrived. */
template <typename Tr, int OP>
static int launch_direct(const sd_direct_args &v, cudaStream_t st)
{
	constexpr size_t es = sizeof(typename Tr::S);
	size_t lo, cnt = sd_direct_part(v.coll, v.count, es, v.nranks, v.rank, &lo);
	int occ = 0, share = v.share < 1 ? 1 : v.share;
	auto kern = k_direct<Tr, OP>;
	sd_direct_args m = v;
	void *margs[] = {(void *)&m};
	cudaError_t e;

	if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, THREADS, 0) != cudaSuccess ||
	    occ < 1)
		occ = 1;
	int cap = sm_count() * occ / share;
	size_t nvec = cnt / (16 / es), work = (nvec + UNROLL - 1) / UNROLL;
	unsigned grid = grid_for(work ? work : 1, cap < 1 ? 1 : cap);

	if ((e = cudaLaunchKernel((const void *)k_direct_meet, dim3(1), dim3(32), margs, 0, st)) !=
	    cudaSuccess)
		return (int)e;
	return launch_kernel(kern, dim3(grid), st, v);
}

extern "C" int sd_cuda_kernel_direct(const struct sd_direct_args *a, int dtype, int op, void *stream)
{
	if (a->nranks < 2 || a->nranks > SD_CUDA_MAX_RANKS || a->root < 0 || a->root >= a->nranks ||
	    a->coll < SD_FAST_ALLREDUCE || a->coll > SD_FAST_ALLTOALL ||
	    ((a->coll == SD_FAST_REDUCE_SCATTER || a->coll == SD_FAST_ALLTOALL) && !a->out))
		return (int)cudaErrorInvalidValue;
	/* The collectives that copy run the instance of SUM (one source:
	 * reduce_body copies). */
	if (a->coll == SD_FAST_ALLGATHER || a->coll == SD_FAST_BROADCAST || a->coll == SD_FAST_ALLTOALL)
		op = SMDDP_SUM;
	sd_direct_args v = *a;
	return by_type(dtype, op, [&](auto tr, auto o) {
		return launch_direct<decltype(tr), decltype(o)::value>(v, (cudaStream_t)stream);
	});
}

extern "C" int sd_cuda_kernels_load_fast(void)
{
	int e = load_kernels(k_direct_meet);

	return e ? e : every_type_op([](auto tr, auto o) {
		return load_kernels(k_fast<decltype(tr), decltype(o)::value>,
				    k_direct<decltype(tr), decltype(o)::value>);
	});
}
