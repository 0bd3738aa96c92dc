/* fast.c - device collectives whose kernels meet their peers themselves: no host round trip per call.
 *
 * Design.  NCCL keeps the host out of a call: its kernels synchronize
 * with their peers through flags in memory that every GPU mapped when
 * the communicator was set up, and move data through buffers mapped
 * then.  This file does the same for the collectives (allreduce,
 * reduce_scatter, allgather, broadcast, reduce, alltoall) that send each
 * peer up to SMDDP_CUDA_FAST bytes among the ranks of one node:
 *
 * - Setup, once per communicator, at its first device collective (host
 *   thread, nothing queued; every rank makes it, whichever call it is):
 *   each rank allocates a window of device memory (flags and two sets of
 *   inboxes, kernels.h), and the ranks exchange its CUDA IPC handle and
 *   how they would run (SMDDP_CUDA_ASYNC, MPS, which GPU) through the
 *   transport's slots, in two steps: what each has, then whether each
 *   mapped every other's window.  The path is on when every rank mapped
 *   every window and every rank queues its calls: ranks time-sliced on
 *   one GPU without MPS keep the blocking mode, since a kernel spinning
 *   on a flag that another process's kernel will set would wait for a
 *   time slice, and then the path is off for the whole communicator (the
 *   ranks must agree, call by call, on which path a call takes).
 * - A call: the host checks the buffers (as every device call does),
 *   launches one kernel on the user's stream with every window's address
 *   as its arguments, records an event (to order a later call on another
 *   stream after it) and returns.  The kernel's blocks push their chunk
 *   into every peer's inbox, wait on flags in their own GPU's memory and
 *   reduce (kernels.h); the stream goes on when the kernel ends.
 * - Deadlines and failures: a kernel gives up at SMDDP_TIMEOUT after its
 *   start, or when the host's abort word or a peer's "gave up" word says
 *   so, and writes what it met into pinned host memory.  The host turns
 *   that into the error of the next call (and of
 *   smddp_comm_get_async_error), naming the peer, and tells the peers
 *   through the transport.  While a fast call is in flight the proxy
 *   thread watches, every SMDDP_LIVENESS_MS, the peers' health (a dead
 *   or aborted peer: the transport's health op), smddp_comm_cancel and
 *   the kernels' record, and sets the abort word: a dead peer releases
 *   the stream in milliseconds, not at the deadline.
 *
 * Larger calls keep the proxy's path (move.c), but for allreduces,
 * allgathers, broadcasts and reduces, which read the peers' buffers
 * directly (direct.c).  Calls of both paths on one stream are ordered by the
 * stream, on two streams by the events (device.c, sd_cuda_after_last).
 */
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
#include "config/param.h"
#include "cuda/cuda.h"
#include "cuda/device.h"
#include "cuda/direct.h"
#include "cuda/fast.h"
#include "cuda/internal.h"
#include "cuda/kernels.h"
#include "transport/transport.h"

#define FAST_MAGIC 0x54534146u /* "FAST" */

/* What each rank publishes at setup. */
struct fast_pub {
	uint32_t magic;
	int32_t want;  /* this rank has a window and the path is not off here */
	int32_t mode;  /* -1 auto (not decided yet), 0 blocking, 1 queued */
	int32_t mps;   /* the MPS daemon serves it */
	int32_t mapped; /* step 2: it mapped every peer's window */
	int32_t pad;
	uint64_t max;  /* its SMDDP_CUDA_FAST */
	unsigned char uuid[16];
	cudaIpcMemHandle_t h;
	int32_t direct;    /* SMDDP_CUDA_DIRECT and its registrations (direct.c); step 2: */
	int32_t direct_ok; /* ... it opened every peer's */
	char reg[SD_REG_NAME]; /* its registrations' segment */
};

/* The region of a block: max bytes over SD_FAST_MAXB blocks, 64-byte
 * multiples (every dtype's size divides it). */
static size_t region_of(size_t max)
{
	size_t r = (max + SD_FAST_MAXB - 1) / SD_FAST_MAXB;

	return (r + 63) / 64 * 64;
}

static void unmap_peers(struct sd_cuda *cu, int n, int me)
{
	for (int q = 0; q < n; q++) {
		if (q != me && cu->fast_peer[q])
			cudaIpcCloseMemHandle(cu->fast_peer[q]);
		cu->fast_peer[q] = NULL;
	}
}

/* Our window and the host record; on failure nothing is kept (want 0). */
static int make_window(struct smddp_comm *c, struct sd_cuda *cu, size_t max, struct fast_pub *mine)
{
	size_t region = region_of(max), len = sd_fast_window_bytes(c->size, region);
	cudaError_t e;

	len = (len + ((size_t)2 << 20) - 1) / ((size_t)2 << 20) * ((size_t)2 << 20);
	if ((e = cudaMalloc(&cu->fast_win, len)) != cudaSuccess) {
		cu->fast_win = NULL;
		goto fail;
	}
	if ((e = cudaMemsetAsync(cu->fast_win, 0, len, cu->st)) != cudaSuccess ||
	    (e = cudaStreamSynchronize(cu->st)) != cudaSuccess ||
	    (e = cudaIpcGetMemHandle(&mine->h, cu->fast_win)) != cudaSuccess)
		goto fail;
	if ((e = cudaHostAlloc((void **)&cu->fast_host, sizeof(*cu->fast_host),
			       cudaHostAllocMapped | cudaHostAllocPortable)) != cudaSuccess) {
		cu->fast_host = NULL;
		goto fail;
	}
	memset((void *)cu->fast_host, 0, sizeof(*cu->fast_host));
	void *dp = NULL;

	if ((e = cudaHostGetDevicePointer(&dp, (void *)cu->fast_host, 0)) != cudaSuccess ||
	    (e = cudaEventCreateWithFlags(&cu->fast_ev, cudaEventDisableTiming)) != cudaSuccess)
		goto fail;
	cu->fast_host_dev = dp;
	cu->fast_region = region;
	mine->want = 1;
	return SMDDP_OK;
fail:
	(void)cudaGetLastError(); /* ours, not the caller's next check's */
	SD_INFO(SD_SUB_COLL, "device collectives on GPU %d: no window for the fast path (%s): every "
			     "call takes the proxy's path",
		cu->dev, cudaGetErrorString(e));
	if (cu->fast_host)
		cudaFreeHost((void *)cu->fast_host);
	cu->fast_host = NULL;
	if (cu->fast_win)
		cudaFree(cu->fast_win);
	cu->fast_win = NULL;
	return SMDDP_OK;
}

/* Would rank q's calls be queued (SMDDP_CUDA_ASYNC, or auto: unless other
 * ranks share its GPU without MPS)? */
static int queues(const struct fast_pub *p, const struct fast_pub *all, int n, int q, int *shared)
{
	int s = 0;

	for (int r = 0; r < n; r++)
		s += r != q && !memcmp(all[r].uuid, p->uuid, sizeof(p->uuid));
	*shared = s;
	if (p->mode >= 0)
		return p->mode;
	return !s || p->mps;
}

int sd_cuda_fast_setup(struct smddp_comm *c, struct sd_cuda *cu, int mps)
{
	const struct sd_transport_ops *tp = c->tp;
	int n = c->size, me = c->rank, on = 1, h, shared = 0;
	int64_t max = sd_param_int("SMDDP_CUDA_FAST");
	int direct = sd_param_int("SMDDP_CUDA_DIRECT") != 0, don = 1;
	struct fast_pub mine, *all = NULL, *p;
	const char *names[SD_CUDA_MAX_RANKS];
	int rc = SMDDP_OK;

	cu->fast_tried = 1;
	memset(&mine, 0, sizeof(mine));
	mine.magic = FAST_MAGIC;
	mine.mode = cu->decided ? cu->async : -1;
	mine.mps = mps;
	mine.max = max > 0 ? (uint64_t)max : 0;
	memcpy(mine.uuid, cu->uuid, sizeof(mine.uuid));
	if ((max > 0 || direct) && n <= SD_CUDA_MAX_RANKS && tp->half_bytes(c) >= sizeof(mine))
		make_window(c, cu, max > 0 ? (size_t)max : 0, &mine);
	if (mine.want && direct)
		sd_cuda_direct_make(c, cu, mine.reg);
	mine.direct = mine.reg[0] != 0;
	all = calloc((size_t)n, sizeof(*all));
	if (!all)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");

	/* Step 1: what every rank has. */
	h = (int)(c->step++ & 1);
	memcpy(tp->slot(c, me, h), &mine, sizeof(mine));
	SD_CHECK_GOTO(tp->barrier(c), rc, out);
	for (int q = 0; q < n; q++) {
		memcpy(&all[q], tp->slot(c, q, h), sizeof(all[q]));
		if (all[q].magic != FAST_MAGIC) {
			rc = sd_comm_error(c, SMDDP_EMISMATCH,
					   "rank %d met this rank's first device collective with "
					   "something else: did every rank make the same calls on "
					   "device memory?",
					   q);
			goto out;
		}
		on &= all[q].want;
		don &= all[q].direct;
		all[q].reg[sizeof(all[q].reg) - 1] = 0;
		names[q] = all[q].reg;
		if (all[q].max < mine.max)
			mine.max = all[q].max;
	}
	for (int q = 0; q < n && on; q++) {
		int s;

		on &= queues(&all[q], all, n, q, &s);
		if (q == me)
			shared = s;
	}
	/* Every window mapped here (ours as it is). */
	for (int q = 0; q < n && on; q++) {
		void *ptr = NULL;

		if (q == me) {
			cu->fast_peer[q] = cu->fast_win;
			continue;
		}
		if (cudaIpcOpenMemHandle(&ptr, all[q].h, cudaIpcMemLazyEnablePeerAccess) !=
		    cudaSuccess) {
			(void)cudaGetLastError();
			SD_INFO(SD_SUB_COLL, "device collectives: cannot map rank %d's window: the "
					     "fast path is off",
				q);
			on = 0;
			break;
		}
		cu->fast_peer[q] = ptr;
	}
	don = don && on && sd_cuda_direct_open(c, cu, names);
	/* Step 2: did every rank map every window (and open every segment)? */
	mine.mapped = on;
	mine.direct_ok = don;
	h = (int)(c->step++ & 1);
	memcpy(tp->slot(c, me, h), &mine, sizeof(mine));
	SD_CHECK_GOTO(tp->barrier(c), rc, out);
	for (int q = 0; q < n; q++) {
		p = tp->slot(c, q, h);
		on &= p->mapped;
		don &= p->direct_ok;
	}
	if (mine.direct)
		sd_cuda_direct_setup_done(cu, on && don);
	cu->shared = shared;
	if (on) {
		/* The proxy, if it runs, now watches fast calls (proxy_main). */
		pthread_mutex_lock(&cu->mu);
		cu->fast_on = 1;
		pthread_cond_signal(&cu->cv);
		pthread_mutex_unlock(&cu->mu);
		/* The smallest of the ranks' SMDDP_CUDA_FAST, so that they agree
		 * on which calls take the path; the regions are our own. */
		cu->fast_max = mine.max < cu->fast_region * SD_FAST_MAXB
				       ? (size_t)mine.max
				       : cu->fast_region * SD_FAST_MAXB;
		SD_INFO(SD_SUB_COLL,
			"device collectives on GPU %d: collectives of up to %zu bytes per peer run on kernels "
			"that meet their peers themselves (a window of %zu bytes per rank)",
			cu->dev, cu->fast_max, sd_fast_window_bytes(n, cu->fast_region));
		if (cu->direct_on)
			SD_INFO(SD_SUB_COLL,
				"device collectives on GPU %d: larger ones read the peers' buffers "
				"directly, mapped once per allocation",
				cu->dev);
	}
out:
	if (rc && mine.direct && cu->reg_name[0])
		sd_cuda_direct_setup_done(cu, 0);
	if (!cu->fast_on) {
		unmap_peers(cu, n, me);
		if (cu->fast_win && (rc || !on)) {
			/* Peers may have mapped it (step 1 passed): kept until the
			 * communicator goes, but unused. */
		}
	}
	free(all);
	return rc;
}

#define SAME(x) ((int)SD_FAST_##x == (int)SD_COLL_##x)
_Static_assert(SAME(ALLREDUCE) && SAME(ALLGATHER) && SAME(REDUCE_SCATTER) && SAME(BROADCAST) &&
		       SAME(REDUCE) && SAME(ALLTOALL),
	       "kernels.h names enum sd_coll's values");
#undef SAME

/* k->count is what each rank sends one peer (kernels.h): the fast path
 * takes a call when that fits the regions, whatever the collective. */
int sd_cuda_fast_takes(const struct sd_cuda *cu, const struct sd_cuda_call *k)
{
	return sd_cuda_kernels_run(k->coll) && cu->fast_on && k->count &&
	       k->count * dtsize(k->dtype) <= cu->fast_max;
}

int sd_cuda_fast_call(struct smddp_comm *c, struct sd_cuda *cu, const struct sd_cuda_call *k)
{
	struct sd_fast_args a;
	cudaStream_t st = (cudaStream_t)k->stream;
	size_t per = cu->fast_region / dtsize(k->dtype);
	int par = (int)(cu->fast_k & 1), ke;
	cudaError_t e;

	memset(&a, 0, offsetof(struct sd_fast_args, need));
	for (int q = 0; q < c->size; q++)
		a.win[q] = cu->fast_peer[q];
	a.send = k->sendbuf;
	a.recv = k->recvbuf;
	a.count = k->count;
	a.region = cu->fast_region;
	a.timeout_ns = c->timeout_ns;
	a.host = cu->fast_host_dev;
	a.nranks = c->size;
	a.rank = c->rank;
	a.nblocks = (int)((k->count + per - 1) / per);
	a.par = par;
	a.coll = k->coll;
	a.root = k->coll == SD_COLL_BROADCAST || k->coll == SD_COLL_REDUCE ? k->root : 0;
	a.call = c->dev_calls;
	a.tag = sd_cuda_call_tag(k);
	memcpy(a.need, cu->fast_need[par], sizeof(a.need));
	/* After the last call of this communicator when that was on another
	 * stream: they share the window (and the proxy's resources). */
	if (cu->last_st != st && (e = sd_cuda_after_last(cu, st)) != cudaSuccess)
		return SD_CUDA_ERR(c, e, "cannot order the stream after the last call on another "
					"stream");
	if ((ke = sd_cuda_kernel_fast(&a, k->dtype, k->op, st)) != 0)
		return SD_CUDA_ERR(c, ke, "cannot launch the %s kernel (is the stream one of this GPU?)",
				   sd_coll_name(k->coll));
	for (int b = 0; b < a.nblocks; b++)
		cu->fast_need[par][b] = a.call;
	cu->fast_k++;
	if ((e = sd_cuda_kernels_launched(c, cu, st)) != cudaSuccess)
		/* A later call on another stream could not be ordered after it. */
		return SD_CUDA_ERR(c, e, "cannot record an event on the stream");
	cu->fast_calls[k->coll]++;
	SD_TRACE(SD_SUB_COLL, "GPU call %u: fast %s of %zu elements, %d block(s), queued", a.call,
		 sd_coll_name(k->coll), k->count, a.nblocks);
	return SMDDP_OK;
}

static cudaError_t q_stream(void *st)
{
	return cudaStreamQuery((cudaStream_t)st);
}

int sd_cuda_refused(struct smddp_comm *c, const struct sd_cuda_call *k, unsigned call, int *told)
{
	struct sd_cuda *cu = c->cuda;
	const uint64_t word = call; /* tag 0: sd_cuda_call_tag() is odd */
	const size_t at = SD_DIRECT_ANN + (size_t)c->rank * sizeof(struct sd_direct_ann);
	cudaError_t e = cudaSuccess;
	int rc;

	*told = 0;
	if (!cu || c->net || !cu->async || (unsigned)k->dtype >= SMDDP_NUM_DTYPES ||
	    !(sd_cuda_fast_takes(cu, k) || sd_cuda_direct_takes(cu, k)))
		return SMDDP_OK;
	/* This rank's kernels write the same words when they start. */
	if (cu->fast_pending) {
		rc = sd_cuda_wait(sd_cuda_q_event, cu->fast_ev, c->timeout_ns, NULL, &e);
		if (rc == SMDDP_ECUDA)
			return SD_CUDA_ERR(c, e, "the last device call of this communicator failed");
		if (rc)
			return sd_comm_error(c, SMDDP_ETIMEDOUT,
					     "the last device call of this communicator did not end "
					     "within %s",
					     c->timeout_from);
	}
	for (int q = 0; q < c->size && e == cudaSuccess; q++)
		if (q != c->rank)
			e = cudaMemcpyAsync(cu->fast_peer[q] + at, &word, sizeof(word),
					    cudaMemcpyHostToDevice, cu->st);
	if (e == cudaSuccess) {
		rc = sd_cuda_wait(q_stream, cu->st, c->timeout_ns, NULL, &e);
		if (rc == SMDDP_ETIMEDOUT)
			return sd_comm_error(c, SMDDP_ETIMEDOUT,
					     "telling the peers' kernels of a refused call took over %s",
					     c->timeout_from);
	}
	if (e != cudaSuccess)
		return SD_CUDA_ERR(c, e, "cannot tell the peers' kernels of a refused call");
	*told = 1;
	return SMDDP_OK;
}

/* The kernels' record in words (buf), and its result; 0 when there is
 * none.  Any thread: reads the pinned record only. */
static int fast_words(const struct sd_cuda *cu, char *buf, size_t len)
{
	const volatile struct sd_fast_host *hr = cu->fast_host;
	uint32_t code = hr ? __atomic_load_n(&hr->code, __ATOMIC_ACQUIRE) : 0;
	uint32_t call = hr ? hr->call : 0, theirs = hr ? hr->theirs : 0;
	int peer = hr ? hr->peer : -1;
	const char *coll = sd_coll_name(hr ? (int)hr->coll : SD_COLL_ALLREDUCE);
	const char *an = coll[0] == 'a' ? "an" : "a"; /* "an allgather", "a broadcast" */

	switch (code) {
	case SD_FAST_OK:
		return 0;
	case SD_FAST_TIMEOUT:
		/* With its pid, as a dead rank is named elsewhere: where the
		 * peers' health was not checked in time, this is how a death
		 * shows, and a shrink reads the rank to leave out from it. */
		snprintf(buf, len,
			 "device call %u (%s %s whose kernels wait on their peers): rank %d (pid %d) "
			 "did not %s within %s: is it dead or stuck, or did it make other "
			 "calls?",
			 call, an, coll, peer,
			 peer >= 0 && peer < cu->sh.size && cu->sh.pids ? (int)cu->sh.pids[peer] : 0,
			 hr->phase == 1 ? "take this rank's data of an earlier call"
			 : hr->phase == 5 ? "finish with this rank's buffers"
					  : "arrive",
			 cu->sh.timeout_from);
		return SMDDP_ETIMEDOUT;
	case SD_FAST_AHEAD:
		snprintf(buf, len,
			 "rank %d is at device call %u, this rank at %u: it made %u more device "
			 "call(s) (one refused on a rank's own arguments, or of count 0 on it, counts "
			 "too): every rank must make the same calls on device memory",
			 peer, theirs, call, theirs - call);
		return SMDDP_EMISMATCH;
	case SD_FAST_DESC:
		snprintf(buf, len,
			 "rank %d called device call %u with another collective, count, dtype, op "
			 "or root than this rank (%s %s), or refused it on its own arguments "
			 "(SMDDP_CHECK_COLL: its error says why): every rank must make the same "
			 "calls on device memory",
			 peer, call, an, coll);
		return SMDDP_EMISMATCH;
	case SD_FAST_UNMAPPED:
		snprintf(buf, len,
			 "device call %u (%s %s that reads its peers' buffers): rank %d's "
			 "buffer was not mapped on this rank within %s: did its host "
			 "thread stop, or its mapping fail?",
			 call, an, coll, peer, cu->sh.timeout_from);
		return SMDDP_ETIMEDOUT;
	case SD_FAST_GAVE_UP:
		snprintf(buf, len,
			 "rank %d gave up device call %u: it aborted the communicator or failed (its "
			 "own error says why)",
			 peer, call);
		return SMDDP_EABORTED;
	default:
		snprintf(buf, len, "device call %u was aborted while its kernel waited on rank %d",
			 call, peer);
		return SMDDP_EABORTED;
	}
}

/* cu->failed := rc with words msg unless it failed already; the kernels
 * in flight and later give up.  Returns whether this set it. */
static int fast_fail(struct sd_cuda *cu, int rc, const char *msg)
{
	int set = 0;

	pthread_mutex_lock(&cu->mu);
	if (!cu->failed) {
		cu->failed = rc;
		snprintf(cu->errmsg, sizeof(cu->errmsg), "%s", msg);
		set = 1;
	}
	pthread_mutex_unlock(&cu->mu);
	sd_cuda_fast_stop(cu);
	return set;
}

void sd_cuda_fast_break(struct sd_cuda *cu, int rc, const char *msg)
{
	struct smddp_comm *c = &cu->sh;

	if (fast_fail(cu, rc, msg)) {
		c->failed = rc;
		snprintf(c->last_error, sizeof(c->last_error), "%s", msg);
		c->tp->abort(c);
	}
}

void sd_cuda_fast_stop(struct sd_cuda *cu)
{
	__atomic_store_n(&cu->fast_stopped, 1, __ATOMIC_RELEASE);
	if (cu->fast_host)
		__atomic_store_n(&cu->fast_host->abort, 1, __ATOMIC_SEQ_CST);
}

int sd_cuda_fast_async_error(const struct sd_cuda *cu, char *buf, size_t len)
{
	return cu->fast_on ? fast_words(cu, buf, len) : 0;
}

void sd_cuda_fast_collect(struct smddp_comm *c, struct sd_cuda *cu)
{
	char msg[sizeof(cu->errmsg)];
	int rc;

	if (!cu->fast_on || !(rc = fast_words(cu, msg, sizeof(msg))))
		return;
	if (__atomic_load_n(&cu->failed, __ATOMIC_ACQUIRE))
		return;
	/* A peer that gave up has told the transport why, with its words:
	 * those name the root cause. */
	if (cu->fast_host->code == SD_FAST_GAVE_UP) {
		int h = c->tp->health(c);

		if (h && h != SMDDP_EUNSUPPORTED) {
			rc = h;
			snprintf(msg, sizeof(msg), "%s", c->last_error);
		}
	}
	if (fast_fail(cu, rc, msg)) {
		/* Tell the peers now, with the reason. */
		c->failed = rc;
		snprintf(c->last_error, sizeof(c->last_error), "%s", msg);
		c->tp->abort(c);
	}
}

int sd_cuda_fast_busy(struct sd_cuda *cu)
{
	/* In flight, or failed and not yet taken (the kernels ended). */
	return cu->fast_pending && (cudaEventQuery(cu->fast_ev) == cudaErrorNotReady ||
				    __atomic_load_n(&cu->fast_host->code, __ATOMIC_ACQUIRE));
}

void sd_cuda_fast_watch(struct sd_cuda *cu)
{
	struct smddp_comm *c = &cu->sh;
	char msg[sizeof(cu->errmsg)];
	int rc;

	if (__atomic_load_n(&cu->failed, __ATOMIC_ACQUIRE))
		return;
	c->last_error[0] = 0;
	/* The sentences below name the call in progress: on this (the
	 * proxy's) copy that is the last call the proxy ran, not the fast
	 * or direct one whose kernels wait (the last launched, as a rule). */
	pthread_mutex_lock(&cu->mu);
	c->cur = cu->fast_last;
	pthread_mutex_unlock(&cu->mu);
	rc = fast_words(cu, msg, sizeof(msg));
	if (rc && cu->fast_host->code == SD_FAST_GAVE_UP) {
		int h = c->tp->health(c);

		if (h && h != SMDDP_EUNSUPPORTED) {
			rc = h;
			snprintf(msg, sizeof(msg), "%s", c->last_error);
		}
	}
	if (!rc && (rc = sd_comm_cancelled(c)))
		snprintf(msg, sizeof(msg), "%s", c->last_error);
	if (!rc && (rc = c->tp->health(c)) != SMDDP_OK) {
		if (rc == SMDDP_EUNSUPPORTED)
			return;
		snprintf(msg, sizeof(msg), "%s", c->last_error);
	}
	if (!rc)
		return;
	if (fast_fail(cu, rc, msg)) {
		c->failed = rc;
		snprintf(c->last_error, sizeof(c->last_error), "%s", msg);
		c->tp->abort(c);
	}
}

/* Host thread, comm_free: whether the window may be freed now.  Our own
 * kernels are done (the caller waited for the streams); once every peer
 * has taken what we pushed last (consumed flags in our window), no peer
 * writes into it any more. */
static int peers_done(struct sd_cuda *cu, int n, int me)
{
	uint64_t deadline = sd_now_ns() + 10ull * 1000000000ull;
	uint32_t *f = malloc(SD_FAST_FLAGS);
	int done = 0;

	if (!f)
		return 0;
	while (!done && sd_now_ns() < deadline) {
		if (cudaMemcpy(f, cu->fast_win, SD_FAST_FLAGS, cudaMemcpyDeviceToHost) != cudaSuccess)
			break;
		done = 1;
		for (int par = 0; par < 2 && done; par++)
			for (int q = 0; q < n && done; q++)
				for (int b = 0; b < SD_FAST_MAXB && done; b++) {
					uint32_t need = cu->fast_need[par][b];
					uint32_t v = f[sd_fast_consumed_off(n, par, q, b) / 4];

					done = q == me || !need || (int32_t)(v - need) >= 0;
				}
		if (!done) {
			struct timespec ts = {0, 1000000};

			nanosleep(&ts, NULL);
		}
	}
	free(f);
	return done;
}

void sd_cuda_fast_free(struct smddp_comm *c, struct sd_cuda *cu, int stuck)
{
	int n = c->size, me = c->rank;
	int failed = cu->failed || c->failed || cu->fast_stopped;
	const uint64_t *fc = cu->fast_calls;

	if (cu->fast_on)
		SD_INFO(SD_SUB_COLL,
			"device collectives on GPU %d: fast path calls: allreduce %llu, reduce_scatter "
			"%llu, allgather %llu, broadcast %llu, reduce %llu, alltoall %llu",
			cu->dev, (unsigned long long)fc[SD_FAST_ALLREDUCE],
			(unsigned long long)fc[SD_FAST_REDUCE_SCATTER],
			(unsigned long long)fc[SD_FAST_ALLGATHER], (unsigned long long)fc[SD_FAST_BROADCAST],
			(unsigned long long)fc[SD_FAST_REDUCE], (unsigned long long)fc[SD_FAST_ALLTOALL]);

	if (cu->fast_pending && !stuck) {
		cudaError_t e = cudaSuccess;

		if (sd_cuda_wait(sd_cuda_q_event, cu->fast_ev, 10ull * 1000000000ull, NULL, &e) ==
		    SMDDP_ETIMEDOUT)
			stuck = 1;
	}
	if (!cu->fast_win)
		goto host;
	if (stuck || failed || (cu->fast_on && !peers_done(cu, n, me))) {
		/* A peer's kernel may still write into it, or our stream may
		 * still run one: leaked rather than freed under them. */
		SD_INFO(SD_SUB_COLL, "device collectives on GPU %d: the fast path's window is left "
				     "allocated (%s)",
			cu->dev, stuck ? "a stream still runs" : failed ? "the communicator failed or was aborted"
								: "a peer did not finish");
		if (!stuck)
			unmap_peers(cu, n, me);
		cu->fast_win = NULL;
		return; /* the host record too: a kernel may still write it */
	}
	unmap_peers(cu, n, me);
	cudaFree(cu->fast_win);
	cu->fast_win = NULL;
host:
	if (cu->fast_host && !stuck)
		cudaFreeHost((void *)cu->fast_host);
	cu->fast_host = NULL;
	if (cu->fast_ev)
		cudaEventDestroy(cu->fast_ev);
	cu->fast_ev = NULL;
}
