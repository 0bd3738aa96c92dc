/* move.c - one device call on one node, start to end: wait for the input, publish the
 * buffers, meet the peers, map theirs, move the data with one rank's kernels (or each
 * rank's share), meet again.  Run by the calling thread or the proxy (proxy.c). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "base/checks.h"
#include "clock/clock.h"
#include "coll/coll.h"
#include "cuda/cuda.h"
#include "cuda/device.h"
#include "cuda/internal.h"
#include "cuda/ipc.h"
#include "cuda/kernels.h"
#include "cuda/move.h"
#include "transport/transport.h"

static cudaError_t q_stream(void *s)
{
	return cudaStreamQuery((cudaStream_t)s);
}

/* Where the data movement goes: launched at once on cu->st (the blocking
 * mode), or written as the arguments of the kernels that the call queued
 * on the user's stream (the queued mode: tasks and groups of its slot,
 * see sd_cuda_queue_kernels). */
struct sink {
	struct sd_cuda *cu;
	struct sd_cuda_kargs *tasks; /* NULL: launch */
	struct sd_cuda_kpairs *groups;
	int ntasks, ngroups, maxtasks, maxgroups;
};

static int launch_reduce(struct sink *k, struct sd_cuda_kargs *a, int dt, int op, int div)
{
	struct sd_cuda *cu = k->cu;
	int e;

	if (k->tasks) {
		if (k->ntasks == k->maxtasks)
			return sd_comm_error(&cu->sh, SMDDP_EINTERNAL, "more reductions than queued");
		a->div = div;
		k->tasks[k->ntasks++] = *a;
		k->tasks[0].ntasks = k->ntasks;
		return SMDDP_OK;
	}
	e = sd_cuda_kernel_reduce(a, dt, op, div, cu->st, cu->max_blocks);
	if (e)
		return SD_CUDA_ERR(&cu->sh, e, "cannot launch the reduction kernel");
	return SMDDP_OK;
}

static int launch_pairs(struct sink *k, const void *const *src, void *const *dst, int np,
			size_t bytes)
{
	struct sd_cuda *cu = k->cu;
	int e;

	if (k->groups) {
		struct sd_cuda_kpairs *g = &k->groups[k->ngroups];

		if (k->ngroups == k->maxgroups)
			return sd_comm_error(&cu->sh, SMDDP_EINTERNAL, "more copies than queued");
		k->ngroups++;
		for (int i = 0; i < np; i++) {
			g->src[i] = src[i];
			g->dst[i] = dst[i];
		}
		g->bytes = bytes;
		g->npairs = np;
		return SMDDP_OK;
	}
	e = sd_cuda_kernel_copy_pairs(src, dst, np, bytes, cu->st, cu->max_blocks);
	if (e)
		return SD_CUDA_ERR(&cu->sh, e, "cannot launch the copy kernel");
	return SMDDP_OK;
}

/* Does rank q's reduce_scatter stage its result in its own send block (its
 * recvbuf overlaps its sendbuf elsewhere than at block q)? */
static int rs_staged(const struct buf_pub *b, size_t m, int n, int q)
{
	return b[0].present && b[1].present && b[0].base == b[1].base &&
	       b[1].off < b[0].off + m * (size_t)n && b[0].off < b[1].off + m &&
	       b[1].off != b[0].off + (size_t)q * m;
}

/* Queues this rank's share of the data movement on cu->st.  ps[q] and pr[q]
 * are rank q's sendbuf and recvbuf as seen here (NULL where not mapped).
 *
 * Who works: when every rank is on one GPU, a single rank (0, or the root
 * of a broadcast) moves everything: the kernels of different processes on
 * one GPU are time-sliced, and each switch between processes costs hundreds
 * of microseconds, while one process's kernel has the whole GPU anyway.
 * With a GPU per rank, each rank moves its share, in parallel. */
static int move_data(struct sink *sk, const struct op *o, const struct pub *const *pubs,
		     char *const *ps, char *const *pr, char *const *pss, int worker)
{
	struct sd_cuda *cu = sk->cu;
	const struct sd_cuda_call *k = &o->k;
	struct smddp_comm *c = &cu->sh;
	struct sd_cuda_kargs a;
	size_t es = dtsize(k->dtype), m = k->count * es;
	int n = c->size, me = c->rank, all = worker >= 0;

	if (all && me != worker)
		return SMDDP_OK;
	memset(&a, 0, sizeof(a));
	switch (k->coll) {
	case SD_COLL_ALLREDUCE:
	case SD_COLL_REDUCE: {
		size_t part = sd_coll_part_elems(k->count, n, es);
		size_t lo = part * (size_t)me, hi = lo + part;

		if (all)
			lo = 0, hi = k->count;
		if (hi > k->count)
			hi = k->count;
		if (lo >= hi)
			return SMDDP_OK;
		for (int q = 0; q < n; q++)
			a.src[q] = ps[q] + lo * es;
		a.nsrc = n;
		if (k->coll == SD_COLL_ALLREDUCE) {
			for (int q = 0; q < n; q++)
				a.dst[q] = pr[q] + lo * es;
			a.ndst = n;
		} else {
			a.dst[0] = pr[k->root] + lo * es;
			a.ndst = 1;
		}
		a.count = hi - lo;
		return launch_reduce(sk, &a, k->dtype, k->op, n);
	}
	case SD_COLL_REDUCE_SCATTER:
		/* Block q of every input into rank q's output; a rank whose
		 * recvbuf is its sendbuf gets it in its own block q (read by
		 * nobody else) and moves it once every rank is done. */
		for (int q = all ? 0 : me; q < (all ? n : me + 1); q++) {
			for (int p = 0; p < n; p++)
				a.src[p] = ps[p] + (size_t)q * m;
			a.nsrc = n;
			a.dst[0] = rs_staged(pubs[q]->b, m, n, q) ? ps[q] + (size_t)q * m : pr[q];
			a.ndst = 1;
			a.count = k->count;
			SD_CHECK(launch_reduce(sk, &a, k->dtype, k->op, n));
		}
		return SMDDP_OK;
	case SD_COLL_ALLGATHER:
		for (int q = all ? 0 : me; q < (all ? n : me + 1); q++) {
			const struct buf_pub *b = pubs[q]->b;
			int inplace = b[0].base == b[1].base && b[0].off == b[1].off + (size_t)q * m;

			a.src[0] = ps[q];
			a.nsrc = 1;
			a.ndst = 0;
			for (int p = 0; p < n; p++)
				if (!(p == q && inplace))
					a.dst[a.ndst++] = pr[p] + (size_t)q * m;
			a.count = k->count;
			if (a.ndst)
				SD_CHECK(launch_reduce(sk, &a, k->dtype, SMDDP_SUM, 1));
		}
		return SMDDP_OK;
	case SD_COLL_BROADCAST:
		if (me != k->root)
			return SMDDP_OK;
		a.src[0] = pr[me];
		a.nsrc = 1;
		for (int q = 0; q < n; q++)
			if (q != me)
				a.dst[a.ndst++] = pr[q];
		a.count = k->count;
		return launch_reduce(sk, &a, k->dtype, SMDDP_SUM, 1);
	case SD_COLL_ALLTOALL:
		/* Rank q's block p into block q of rank p's output (from q's
		 * private copy when q works in place; one worker takes the
		 * copies that the ranks left to it first, on the same stream). */
		if (all) {
			const void *src[SD_CUDA_MAX_RANKS];
			void *dst[SD_CUDA_MAX_RANKS];
			int np = 0;

			for (int q = 0; q < n; q++)
				if (pubs[q]->scratch && !pubs[q]->copied) {
					src[np] = ps[q];
					dst[np++] = pss[q];
				}
			if (np)
				SD_CHECK(launch_pairs(sk, src, dst, np, m * (size_t)n));
		}
		for (int q = all ? 0 : me; q < (all ? n : me + 1); q++) {
			const void *src[SD_CUDA_MAX_RANKS];
			void *dst[SD_CUDA_MAX_RANKS];
			const char *from = pubs[q]->scratch ? pss[q] : ps[q];

			for (int p = 0; p < n; p++) {
				src[p] = from + (size_t)p * m;
				dst[p] = pr[p] + (size_t)q * m;
			}
			SD_CHECK(launch_pairs(sk, (const void *const *)src, (void *const *)dst, n,
					      m));
		}
		return SMDDP_OK;
	default:
		return sd_comm_error(c, SMDDP_EINTERNAL, "no device algorithm for %s",
				     sd_coll_name(k->coll));
	}
}

static int wait_stream(struct sd_cuda *cu)
{
	cudaError_t e = cudaSuccess;
	/* Kernels always end; the deadline only guards against a GPU gone bad. */
	int rc = sd_cuda_wait(q_stream, cu->st, cu->sh.timeout_ns, NULL, &e);

	if (rc == SMDDP_OK)
		return SMDDP_OK;
	if (rc == SMDDP_ECUDA)
		return SD_CUDA_ERR(&cu->sh, e, "a kernel of this call failed");
	return sd_comm_error(&cu->sh, SMDDP_ETIMEDOUT,
			     "the GPU did not finish this call's kernel within %s",
			     cu->sh.timeout_from);
}

/* The kernels' arguments of ring slot s (queued mode): n reductions, then
 * n + 1 groups of copies (alltoall: the private copies, then one group per
 * rank). */
static size_t slot_bytes(int n)
{
	return (size_t)n * sizeof(struct sd_cuda_kargs) + (size_t)(n + 1) * sizeof(struct sd_cuda_kpairs);
}

static struct sd_cuda_kargs *slot_tasks(struct sd_cuda *cu, int s)
{
	return (struct sd_cuda_kargs *)(cu->args + (size_t)s * slot_bytes(cu->sh.size));
}

static struct sd_cuda_kpairs *slot_groups(struct sd_cuda *cu, int s)
{
	return (struct sd_cuda_kpairs *)(slot_tasks(cu, s) + cu->sh.size);
}

/* Their copy on the GPU, which the kernels read.  Not the pinned memory
 * itself: every block of every rank's kernel would fetch the arguments
 * over the bus, and those reads take turns (about 1.6 us per block on the
 * H200, a millisecond and more per call: docs/internals/gpu-measurements.md). */
static void *gpu_of(const struct sd_cuda *cu, const void *host)
{
	return (char *)cu->args_gpu + ((const char *)host - cu->args);
}

/* The copy of the arguments that the call's kernels will read (only
 * those: a slot holds room for every collective), then the kernels.  The
 * copy reads the pinned memory when the stream gets there, after the
 * proxy wrote it and released the wait.  Returns a cudaError_t. */
static int queue_kernels_at(struct sd_cuda *cu, const struct sd_cuda_call *k, int slot, size_t m)
{
	int n = cu->sh.size, ke;
	struct sd_cuda_kargs *tasks = slot_tasks(cu, slot);
	struct sd_cuda_kpairs *groups = slot_groups(cu, slot);
	cudaStream_t st = (cudaStream_t)k->stream;
	int alltoall = k->coll == SD_COLL_ALLTOALL;
	int ntasks = k->coll == SD_COLL_REDUCE_SCATTER || k->coll == SD_COLL_ALLGATHER ? n : 1;
	int op = k->coll == SD_COLL_ALLGATHER || k->coll == SD_COLL_BROADCAST ? SMDDP_SUM : k->op;
	const void *args = alltoall ? (const void *)groups : tasks;
	size_t bytes = alltoall ? (size_t)(n + 1) * sizeof(*groups) : (size_t)ntasks * sizeof(*tasks);

	ke = (int)cudaMemcpyAsync(gpu_of(cu, args), args, bytes, cudaMemcpyHostToDevice, st);
	if (ke)
		return ke;
	if (!alltoall)
		return sd_cuda_kernel_reduce_at(gpu_of(cu, tasks), ntasks, k->count, k->dtype, op,
						st, cu->max_blocks);
	ke = sd_cuda_kernel_pairs_at(gpu_of(cu, groups), 1, n, m * (size_t)n, st, cu->max_blocks);
	if (!ke)
		ke = sd_cuda_kernel_pairs_at(gpu_of(cu, groups + 1), n, n, m, st, cu->max_blocks);
	return ke;
}

int sd_cuda_queue_kernels(struct smddp_comm *c, struct sd_cuda *cu, struct op *o)
{
	const struct sd_cuda_call *k = &o->k;
	cudaStream_t st = (cudaStream_t)k->stream;
	int n = c->size, me = c->rank;
	size_t es = dtsize(k->dtype), m = k->count * es, sb, rb;
	cudaError_t e = cudaSuccess;
	CUresult r;

	if (!cu->args) {
		e = cudaHostAlloc((void **)&cu->args, QCAP * slot_bytes(n), cudaHostAllocPortable);
		if (e == cudaSuccess)
			e = cudaMalloc(&cu->args_gpu, QCAP * slot_bytes(n));
		if (e != cudaSuccess) {
			/* Not left for the next launch's cudaGetLastError. */
			(void)cudaGetLastError();
			if (cu->args)
				cudaFreeHost(cu->args);
			cu->args = NULL;
			cu->args_gpu = NULL;
			return SD_CUDA_ERR(c, e, "cannot allocate memory for the kernels' arguments");
		}
	}
	/* The slot's last call has run on its stream (a call released unrun
	 * may not have yet): its kernels must not read this call's arguments. */
	if (cu->out_used[o->slot] == OUT_BLIND)
		return sd_comm_error(c, SMDDP_ECUDA,
				     "the call queued %d calls ago could not be followed on its "
				     "stream (its end event failed): its slot cannot be reused",
				     QCAP);
	if (cu->out_used[o->slot]) {
		int rc = sd_cuda_wait(sd_cuda_q_event, cu->ev_out[o->slot], c->timeout_ns, NULL, &e);

		if (rc == SMDDP_ECUDA)
			return SD_CUDA_ERR(c, e, "the stream of the call that last used this slot "
						"failed");
		if (rc)
			return sd_comm_error(c, SMDDP_ETIMEDOUT,
					     "the stream of the call queued %d calls ago did not pass "
					     "it within %s",
					     QCAP, c->timeout_from);
		cu->out_used[o->slot] = OUT_NONE;
	}
	/* Nothing to do until the proxy says otherwise: a call released unrun
	 * runs empty kernels. */
	memset(slot_tasks(cu, o->slot), 0, slot_bytes(n));
	o->last = o->seq + 1;
	sd_cuda_extents(k, n, me, &sb, &rb);
	if (o->copy_first)
		e = cudaMemcpyAsync(o->scratch, k->sendbuf, sb, cudaMemcpyDeviceToDevice, st);
	if (e == cudaSuccess)
		e = cudaEventRecord(cu->ev_in[o->slot], st);
	if (e != cudaSuccess)
		return SD_CUDA_ERR(c, e, "cannot queue the call on the stream (is it a stream of this "
					"GPU?)");
	if ((r = (CUresult)sd_cuda_wait32(st, cu->word_dev, o->seq)) != CUDA_SUCCESS)
		return sd_comm_error(c, SMDDP_ECUDA,
				     "cannot make the stream wait (cuStreamWaitValue32: CUDA error %d)",
				     (int)r);
	/* From here the stream waits for o->seq: a failure keeps the tickets
	 * taken, and the proxy releases them unrun (empty kernels). */
	o->broken = 1;
	int ke = queue_kernels_at(cu, k, o->slot, m);
	int rc = SMDDP_OK;

	if (ke)
		rc = SD_CUDA_ERR(c, ke, "cannot queue the call's kernel");
	else if ((r = (CUresult)sd_cuda_write32(st, cu->up_dev, o->seq)) != CUDA_SUCCESS ||
		 (r = (CUresult)sd_cuda_wait32(st, cu->word_dev, o->last)) != CUDA_SUCCESS)
		rc = sd_comm_error(c, SMDDP_ECUDA,
				   "cannot queue the call's waits on the stream (cuStreamWriteValue32 "
				   "or cuStreamWaitValue32: CUDA error %d)",
				   (int)r);
	else if (k->coll == SD_COLL_REDUCE_SCATTER && rs_staged(o->b, m, n, me) &&
		 (e = cudaMemcpyAsync(k->recvbuf, (const char *)k->sendbuf + (size_t)me * m, m,
				      cudaMemcpyDeviceToDevice, st)) != cudaSuccess)
		rc = SD_CUDA_ERR(c, e, "cannot queue the copy of the result into recvbuf");
	/* Also after a failure: what the slot's next call must wait for. */
	if (!sd_cuda_end_queued(cu, st, o->slot) && !rc)
		rc = sd_comm_error(c, SMDDP_ECUDA, "cannot record an event on the stream");
	if (!rc)
		o->broken = 0;
	return rc;
}

/* A step of call o traced, with the time since the proxy took it up:
 * where a slow call spends its time. */
#define GPU_STEP(what)                                                                        \
	SD_TRACE(SD_SUB_COLL, "GPU call %u: " what " (%.1f us in)", o->call,                  \
		 (double)(sd_now_ns() - m->t0) / 1e3)

/* What the ranks met with in step 2 of a call (sd_cuda_run_op). */
struct meeting {
	uint64_t t0; /* when the proxy took the call up */
	char *ps[SD_CUDA_MAX_RANKS], *pr[SD_CUDA_MAX_RANKS], *pss[SD_CUDA_MAX_RANKS];
	const struct pub *pubs[SD_CUDA_MAX_RANKS];
	int worker; /* the rank that moves everything, or -1: each its share */
};

/* Step 1: the stream reached the call, so the input is there; an
 * in-place alltoall's private copy is taken (o->copy_first, see
 * sd_cuda_enqueue) before the ranks meet, since peers write into this
 * input once they have met; queued, it is on the user's stream before
 * ev_in. */
static int input_ready(struct sd_cuda *cu, struct op *o, struct meeting *m)
{
	struct smddp_comm *c = &cu->sh;
	cudaError_t e = cudaSuccess;
	int rc = sd_cuda_wait_cancel(sd_cuda_q_event, cu->ev_in[o->slot], c->timeout_ns, &cu->stop,
				     c, &e);

	if (rc == SMDDP_EABORTED)
		return sd_cuda_stopped(c, "before this call ran");
	if (rc == SMDDP_ECUDA)
		return SD_CUDA_ERR(c, e, "the stream failed before this call");
	if (rc)
		return sd_comm_error(c, SMDDP_ETIMEDOUT,
				     "the stream did not reach this call within %s: is "
				     "the work queued before it stuck?",
				     c->timeout_from);
	if (o->copy_first && !o->queued) {
		size_t sb, rb;

		sd_cuda_extents(&o->k, c->size, c->rank, &sb, &rb);
		if ((e = cudaMemcpyAsync(o->scratch, o->k.sendbuf, sb, cudaMemcpyDeviceToDevice,
					 cu->st)) != cudaSuccess)
			return SD_CUDA_ERR(c, e, "cannot copy the input aside");
		SD_CHECK(wait_stream(cu));
	}
	GPU_STEP("input ready");
	return SMDDP_OK;
}

/* Step 2: publish our buffers, meet, check that every rank made this
 * call, map theirs (into m).  A mismatch that SMDDP_CHECK_COLL found
 * sets *one_off: every rank saw every descriptor and stops here, in
 * step. */
static int meet(struct sd_cuda *cu, struct op *o, struct meeting *m, int *one_off)
{
	struct smddp_comm *c = &cu->sh;
	const struct sd_transport_ops *tp = c->tp;
	int n = c->size, me = c->rank;

	for (int i = 0; i < 2; i++)
		if (o->b[i].present)
			SD_CHECK(sd_cuda_own_handle(cu, &o->b[i]));
	if (o->sb.present)
		SD_CHECK(sd_cuda_own_handle(cu, &o->sb));
	int h = (int)(c->step++ & 1);
	struct pub *mine = tp->slot(c, me, h);

	mine->magic = PUB_MAGIC;
	mine->call = o->call;
	mine->desc = o->desc;
	mine->dev = cu->dev;
	mine->scratch = o->scratch != NULL;
	mine->copied = o->copy_first;
	memcpy(mine->uuid, cu->uuid, sizeof(mine->uuid));
	mine->b[0] = o->b[0];
	mine->b[1] = o->b[1];
	mine->s = o->sb;
	GPU_STEP("handles ready");
	SD_CHECK(tp->barrier(c));
	GPU_STEP("every rank is here");
	int mismatch = 0, one_gpu = 1, map, shared = 0;
	char theirs[160], ours[160], msg[400] = "";

	for (int q = 0; q < n; q++) {
		m->pubs[q] = tp->slot(c, q, h);
		int same = !memcmp(m->pubs[q]->uuid, cu->uuid, sizeof(cu->uuid));

		one_gpu &= same;
		shared += same && q != me;
	}
	/* Read by the host thread when it queues a call. */
	__atomic_store_n(&cu->shared, shared, __ATOMIC_RELAXED);
	for (int q = 0; q < n && !one_gpu; q++)
		if (m->pubs[q]->scratch && !m->pubs[q]->copied)
			return sd_comm_error(c, SMDDP_EINTERNAL,
					     "rank %d left its in-place alltoall copy to a worker, but "
					     "the ranks are on several GPUs", q);
	/* One GPU for all: one rank moves everything (see move_data). */
	m->worker = !one_gpu ? -1 : o->k.coll == SD_COLL_BROADCAST ? o->k.root : 0;
	map = m->worker < 0 || m->worker == me;
	for (int q = 0; q < n; q++) {
		const struct pub *p = m->pubs[q];

		if (p->magic != PUB_MAGIC)
			return sd_comm_error(c, SMDDP_EMISMATCH,
					     "rank %d met this rank without a device call: did every "
					     "rank make the same calls on device memory?",
					     q);
		if (p->call != o->call) {
			/* Calls refused on a rank's own arguments, and those of
			 * count 0, take their numbers too (lib/core/api.c). */
			int ahead = (int32_t)(p->call - o->call) > 0;

			return sd_comm_error(c, SMDDP_EMISMATCH,
					     "rank %d is at device call %u, this rank at %u: %s made "
					     "%u more device call(s) (one refused on a rank's own "
					     "arguments, or of count 0 on it, counts too): every rank "
					     "must make the same calls on device memory",
					     q, p->call, o->call, ahead ? "it" : "this rank",
					     ahead ? p->call - o->call : o->call - p->call);
		}
		if (c->check_coll && memcmp(&p->desc, &o->desc, sizeof(o->desc)) && !mismatch) {
			sd_coll_describe(&p->desc, theirs, sizeof(theirs));
			snprintf(msg, sizeof(msg), "rank %d called %s", q, theirs);
			mismatch = 1;
		}
		/* Whatever SMDDP_CHECK_COLL says: a rank that moved another
		 * count, dtype or root would read or write past the peers'
		 * buffers.  Every rank sees every descriptor: all fail alike. */
		if (!mismatch &&
		    (p->desc.coll != o->desc.coll || p->desc.count != o->desc.count ||
		     p->desc.dtype != o->desc.dtype || p->desc.root != o->desc.root)) {
			sd_coll_describe(&p->desc, theirs, sizeof(theirs));
			sd_coll_describe(&o->desc, ours, sizeof(ours));
			return sd_comm_error(c, SMDDP_EMISMATCH,
					     "rank %d called %s, this rank %s: every rank must make "
					     "the same calls on device memory",
					     q, theirs, ours);
		}
		m->ps[q] = m->pr[q] = m->pss[q] = NULL;
		if (q == me) {
			m->ps[q] = (char *)o->k.sendbuf;
			m->pr[q] = o->k.recvbuf;
			m->pss[q] = o->scratch;
			continue;
		}
		if (mismatch || !map)
			continue;
		if (p->b[0].present)
			SD_CHECK(sd_cuda_peer_ptr(cu, q, &p->b[0], &m->ps[q]));
		if (p->b[1].present)
			SD_CHECK(sd_cuda_peer_ptr(cu, q, &p->b[1], &m->pr[q]));
		if (p->scratch && p->s.present)
			SD_CHECK(sd_cuda_peer_ptr(cu, q, &p->s, &m->pss[q]));
	}
	if (mismatch) {
		SD_CHECK(tp->barrier(c));
		sd_coll_describe(&o->desc, ours, sizeof(ours));
		*one_off = 1;
		return sd_comm_error(c, SMDDP_EMISMATCH,
				     "ranks disagree (SMDDP_CHECK_COLL): this rank called %s, but %s",
				     ours, msg);
	}
	GPU_STEP("peers' buffers mapped");
	return SMDDP_OK;
}

/* Step 3, queued: the kernels wait on the user's stream behind o->seq
 * for their arguments; written, the stream is released, and the proxy
 * waits for the word the stream writes after them. */
static int run_queued(struct sd_cuda *cu, struct op *o, struct meeting *m)
{
	struct smddp_comm *c = &cu->sh;
	struct sink sk = {.cu = cu,
			  .tasks = slot_tasks(cu, o->slot),
			  .groups = slot_groups(cu, o->slot),
			  .maxtasks = c->size,
			  .maxgroups = c->size + 1};
	cudaError_t e = cudaSuccess;
	int rc = move_data(&sk, o, m->pubs, m->ps, m->pr, m->pss, m->worker);

	if (rc) {
		/* Released unrun: the kernels find no work, not half of it. */
		memset(sk.tasks, 0, slot_bytes(c->size));
		return rc;
	}
	sd_cuda_release(cu, o->seq);
	GPU_STEP("arguments written, stream released");
	rc = sd_cuda_wait_word(cu->upw, o->seq, cu->st, c->timeout_ns, &cu->stop, NULL, &e);
	if (rc == SMDDP_EABORTED) {
		/* The kernels are let go and write the peers' outputs: peers
		 * told of the abort must not reuse those buffers under them.
		 * Kernels end; a stream held by the user's earlier work is
		 * waited for 10 s at most. */
		uint64_t grace = 10ull * 1000000000ull;

		(void)sd_cuda_wait_word(cu->upw, o->seq, cu->st,
					c->timeout_ns < grace ? c->timeout_ns : grace, NULL, NULL, &e);
		return sd_cuda_stopped(c, "during this call");
	}
	if (rc == SMDDP_ECUDA)
		return SD_CUDA_ERR(c, e, "a kernel of this call failed");
	if (rc)
		return sd_comm_error(c, rc, "the GPU did not finish this call's kernel within "
					    "%s",
				     c->timeout_from);
	return SMDDP_OK;
}

/* Step 3: move, wait, meet: then every rank's output is complete.  A
 * blocking reduce_scatter that staged its result in its send block
 * copies it into recvbuf once every rank is done reading it. */
static int move_and_meet(struct sd_cuda *cu, struct op *o, struct meeting *m)
{
	struct smddp_comm *c = &cu->sh;
	size_t es = dtsize(o->k.dtype), mb = o->k.count * es;
	int after = !o->queued && o->k.coll == SD_COLL_REDUCE_SCATTER &&
		    rs_staged(o->b, mb, c->size, c->rank);
	struct sink sk = {.cu = cu};
	cudaError_t e;

	if (o->queued)
		SD_CHECK(run_queued(cu, o, m));
	else {
		SD_CHECK(move_data(&sk, o, m->pubs, m->ps, m->pr, m->pss, m->worker));
		SD_CHECK(wait_stream(cu));
	}
	/* A failure returned: the peers learn it at the next barrier (abort). */
	GPU_STEP("kernel done");
	SD_CHECK(c->tp->barrier(c));
	GPU_STEP("every rank is done");
	if (after) {
		if ((e = cudaMemcpyAsync(o->k.recvbuf, (char *)o->k.sendbuf + (size_t)c->rank * mb, mb,
					 cudaMemcpyDeviceToDevice, cu->st)) != cudaSuccess)
			return SD_CUDA_ERR(c, e, "cannot copy the result into recvbuf");
		SD_CHECK(wait_stream(cu));
	}
	return SMDDP_OK;
}

/* One call, start to end, on the proxy thread. */
int sd_cuda_run_op(struct sd_cuda *cu, struct op *o, int *one_off)
{
	struct smddp_comm *c = &cu->sh;
	struct meeting m = {.t0 = sd_now_ns()};

	c->cur = o->desc;
	c->last_error[0] = 0;
	SD_CHECK(input_ready(cu, o, &m));    /* 1. the input is there */
	SD_CHECK(meet(cu, o, &m, one_off)); /* 2. every rank is here, buffers mapped */
	return move_and_meet(cu, o, &m);     /* 3. moved, every rank done */
}
