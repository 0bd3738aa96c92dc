/* proxy.c - the proxy thread of the queued mode, and the host thread's waits for it.
 *
 *
 * Design.  A call on device memory is ordered on the user's stream: the
 * calling thread records an event on the stream (the input is ready when
 * the stream passes it).  In the queue-and-return mode, NCCL's, it then
 * queues on the user's stream a wait until a word in pinned host memory
 * (the release word) reaches the call's first ticket (cuStreamWaitValue32),
 * the call's kernels, which read their arguments from pinned host memory
 * when they run, a write of the ticket into a second word, and a wait for
 * the call's second ticket; and returns.  The communicator's proxy thread
 * waits for the event, meets the peers through the communicator's
 * shared-memory transport (its barrier has the deadlines, dead-peer
 * detection and abort of the host path), maps the peers' buffers (CUDA
 * IPC), writes the kernels' arguments, releases the first ticket, waits
 * for the second word (the kernels are done), meets the peers again and
 * releases the second ticket: the user's stream goes on.  Every piece of
 * GPU work that a held stream waits for is queued on that stream itself,
 * ahead of the wait: a process's streams share a few hardware queues (fewer
 * under MPS, one at a time under compute-sanitizer), and work on another
 * stream could land behind the held one and never run.  In the blocking
 * mode the calling thread does the same meeting itself, runs the kernels on
 * the communicator's own stream (no stream is held) and returns when done.
 * Between hosts, staged.c queues the call's copies on the user's stream the
 * same way.
 *
 * SMDDP_CUDA_ASYNC=auto (the default) queues and returns unless other ranks
 * share this GPU without MPS (see decide()); the first call, which shows
 * where the ranks are, is done blocking.  Under compute-sanitizer auto is
 * blocking from the start (see say_sanitizer()).
 * Every kernel is loaded before a stream is first made to wait
 * (kernels.h: lazy loading would deadlock).
 *
 * Why the host meets the peers and not the kernels: several ranks may share
 * one GPU (tests, small jobs), and without MPS the kernels of different
 * processes are time-sliced, so a kernel spinning on a flag that another
 * process's kernel will write can crawl or hang.  The host side also bounds
 * every wait by SMDDP_TIMEOUT, so a dead peer never leaves a GPU waiting:
 * whatever happens (error, deadline, abort, destroy), the proxy writes the
 * word and the stream is released.
 *
 * Per call: [wait input event] publish buffers (IPC handle of the
 * allocation, offset, buffer id), barrier, map peers' buffers (cached per
 * rank and buffer id: a freed and reallocated address has a new id and is
 * mapped afresh), one kernel, wait for it, barrier, release.  Algorithms:
 *   allreduce   rank r reduces partition r of every rank's input and writes
 *               it into every rank's output (reduce-scatter and all-gather
 *               in one pass: each input byte read once, each output byte
 *               written once, 2 * n * size bytes through HBM in all); each
 *               element is reduced by one rank, so all get the same bits,
 *               and in place is safe (an element is read and written by the
 *               same thread of the same rank only).
 *   reduce      the same, writing into the root's output only.
 *   reduce_scatter  rank r reduces block r of every input into its output.
 *   allgather   rank r writes its input into block r of every output.
 *   broadcast   the root writes its buffer into every other rank's.
 *   alltoall    rank r writes its block q into block r of rank q's output
 *               (in place: from a private copy of its input taken first).
 *
 * Errors of a queued call are reported by the next call on the
 * communicator (and smddp_last_error()); a failure breaks the communicator
 * as on the host path, the peers are told at once (transport abort), and
 * later queued calls are released without moving data.
 *
 * Threads: the host thread queues; the proxy alone uses the transport while
 * calls are queued (host collectives, barrier, split and destroy first wait
 * until the queue is empty: sd_cuda_collect(c, 1); a failure on the host
 * thread asks the proxy to abort a fabric endpoint, sd_cuda_abort).  The proxy works on a
 * private copy of the communicator struct ("shadow"), so that the host
 * thread can write c->cur and c->last_error meanwhile; c->step, the slot
 * half counter, belongs to the proxy while calls are queued.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "base/checks.h"
#include "clock/clock.h"
#include "coll/net.h"
#include "cuda/cuda.h"
#include "cuda/device.h"
#include "cuda/direct.h"
#include "cuda/fast.h"
#include "cuda/internal.h"
#include "cuda/ipc.h"
#include "cuda/kernels.h"
#include "cuda/move.h"
#include "cuda/proxy.h"
#include "cuda/staged.h"
#include "transport/transport.h"

static void *proxy_main(void *arg);

/* The proxy thread exists for the queue-and-return mode only: otherwise
 * the calling thread does the work itself. */
int sd_cuda_proxy_start(struct smddp_comm *c, struct sd_cuda *cu)
{
	int e = pthread_create(&cu->thr, NULL, proxy_main, c);

	if (e != 0)
		return sd_comm_error(c, SMDDP_ESYSTEM, "cannot start the GPU proxy thread: %s",
				     strerror(e));
	cu->thr_started = 1;
	return SMDDP_OK;
}

/* ---- the host thread's side ------------------------------------------------- */

/* Host thread, nothing queued: the wire numbers the runs took beyond one
 * per call go into c->wire, for the host's own calls and later ones. */
void sd_cuda_fold_wire(struct smddp_comm *c, struct sd_cuda *cu)
{
	c->wire += cu->xwire;
	cu->xwire = 0;
}

/* Host thread: every queued call finished.  Bounded, as a backstop to the
 * proxy's own deadlines: SMDDP_TIMEOUT + 30 s without a call finishing
 * (not for the whole queue, which may hold 128 long calls).  Then the
 * communicator is broken and the peers are told, as sd_api_leave does. */
int sd_cuda_drain(struct smddp_comm *c, struct sd_cuda *cu)
{
	uint64_t limit = c->timeout_ns + 30ull * 1000000000ull;
	struct timespec ts;
	int rc = 0;

	pthread_mutex_lock(&cu->mu);
	uint64_t seen = cu->head;

	sd_cuda_ts_after(&ts, limit);
	while (cu->head != cu->tail) {
		rc = pthread_cond_timedwait(&cu->cv_done, &cu->mu, &ts);
		if (cu->head != seen) {
			seen = cu->head;
			sd_cuda_ts_after(&ts, limit);
		} else if (rc == ETIMEDOUT) {
			break;
		}
	}
	int busy = cu->head != cu->tail;
	pthread_mutex_unlock(&cu->mu);
	if (!busy) {
		sd_cuda_fold_wire(c, cu);
		return SMDDP_OK;
	}
	rc = sd_comm_error(c, SMDDP_ETIMEDOUT,
			   "a call queued on the GPU did not finish within %s + 30 s "
			   "(its stream held, or the GPU hung): the communicator is broken",
			   c->timeout_from);
	c->failed = rc;
	sd_cuda_abort(c);
	return rc;
}

int sd_cuda_collect(struct smddp_comm *c, int do_drain)
{
	struct sd_cuda *cu = c ? c->cuda : NULL;
	int rc = SMDDP_OK;

	if (!cu)
		return SMDDP_OK;
	sd_cuda_fast_collect(c, cu);
	if (do_drain) {
		SD_CHECK(sd_cuda_drain(c, cu));
		sd_cuda_flush_stale(cu);
	}
	pthread_mutex_lock(&cu->mu);
	if (cu->failed) {
		rc = cu->failed;
		if (!c->failed) {
			c->failed = rc;
			snprintf(c->last_error, sizeof(c->last_error), "%s", cu->errmsg);
		}
	} else if (cu->pending) {
		rc = cu->pending;
		cu->pending = 0;
		snprintf(c->last_error, sizeof(c->last_error), "%s", cu->errmsg);
	}
	pthread_mutex_unlock(&cu->mu);
	return rc;
}

int sd_cuda_async_error(struct smddp_comm *c, struct sd_err *err)
{
	struct sd_cuda *cu = c ? c->cuda : NULL;
	int rc;

	if (!cu)
		return 0;
	pthread_mutex_lock(&cu->mu);
	rc = cu->failed ? cu->failed : cu->pending;
	if (rc)
		sd_err_set(err, rc, "%s", cu->errmsg);
	pthread_mutex_unlock(&cu->mu);
	if (!rc) {
		char msg[sizeof(cu->errmsg)];

		if ((rc = sd_cuda_fast_async_error(cu, msg, sizeof(msg))))
			sd_err_set(err, rc, "%s", msg);
	}
	return rc;
}

int sd_cuda_settle(struct smddp_comm *c, int rc)
{
	struct sd_cuda *cu = c->cuda;
	char why[sizeof(c->last_error)];
	int d;

	if (!cu)
		return rc;
	snprintf(why, sizeof(why), "%s", c->last_error);
	if ((d = sd_cuda_drain(c, cu)) != SMDDP_OK)
		return d;
	if (cu->fast_pending) {
		/* The fast calls before it end everywhere first (or give up). */
		cudaError_t e = cudaSuccess;

		(void)sd_cuda_wait(sd_cuda_q_event, cu->fast_ev, c->timeout_ns + 30ull * 1000000000ull,
				   NULL, &e);
		sd_cuda_fast_collect(c, cu);
	}
	pthread_mutex_lock(&cu->mu);
	if (cu->failed) {
		/* The root cause: the proxy already told the peers so. */
		rc = cu->failed;
		snprintf(c->last_error, sizeof(c->last_error), "%s", cu->errmsg);
	} else {
		snprintf(c->last_error, sizeof(c->last_error), "%s", why);
	}
	pthread_mutex_unlock(&cu->mu);
	return rc;
}

/* ---- the proxy ------------------------------------------------------------------ */

/* One call through sd_cuda_run_op (one node) or sd_cuda_staged_run
 * (between hosts), and its failure recorded for sd_cuda_collect().  What
 * the host algorithms change in the communicator (c->step, the scratch
 * buffer of single copies) belongs to whoever runs calls while they run:
 * the host thread drains the queue before its own collectives. */
int sd_cuda_run_call(struct smddp_comm *c, struct sd_cuda *cu, struct op *o)
{
	int one_off = 0, rc;

	cu->sh.step = c->step;
	cu->sh.scratch = c->scratch;
	rc = o->staged ? sd_cuda_staged_run(cu, o, &one_off) : sd_cuda_run_op(cu, o, &one_off);
	c->step = cu->sh.step;
	c->scratch = cu->sh.scratch;
	/* Queued, a mismatch is for good: each rank's host thread may already
	 * have queued other calls after it, and the next call of one rank
	 * would meet another's. */
	if (rc && one_off && cu->async) {
		one_off = 0;
		snprintf(cu->sh.last_error + strlen(cu->sh.last_error),
			 sizeof(cu->sh.last_error) - strlen(cu->sh.last_error),
			 " (met by a queued call: the communicator is broken)");
	}
	if (rc) {
		pthread_mutex_lock(&cu->mu);
		snprintf(cu->errmsg, sizeof(cu->errmsg), "%s", cu->sh.last_error);
		if (one_off)
			cu->pending = rc;
		else
			cu->failed = rc;
		pthread_mutex_unlock(&cu->mu);
		if (!one_off) {
			/* Tell the peers now, with the reason. */
			cu->sh.failed = rc;
			cu->sh.tp->abort(&cu->sh);
		}
	}
	return rc;
}

/* Proxy thread, mu held: the abort the host thread asked for
 * (sd_cuda_abort), with its reason, once. */
static void proxy_abort(struct sd_cuda *cu)
{
	cu->aborted = 1;
	if (!cu->sh.failed && cu->abort_asked == 2) {
		cu->sh.failed = cu->failed;
		snprintf(cu->sh.last_error, sizeof(cu->sh.last_error), "%s", cu->errmsg);
	}
	pthread_mutex_unlock(&cu->mu);
	cu->sh.tp->abort(&cu->sh);
	pthread_mutex_lock(&cu->mu);
}

static void *proxy_main(void *arg)
{
	struct smddp_comm *c = arg;
	struct sd_cuda *cu = c->cuda;
	uint64_t watch_at = 0;

	cudaSetDevice(cu->dev);
	pthread_mutex_lock(&cu->mu);
	for (;;) {
		while (cu->head == cu->tail && !cu->stop && !(cu->abort_asked && !cu->aborted)) {
			if (!cu->fast_on) {
				pthread_cond_wait(&cu->cv, &cu->mu);
				continue;
			}
			/* Fast calls go past the proxy: it watches them, and
			 * while a direct one is in flight it maps the peers'
			 * new buffers every 200 us (direct.c). */
			struct timespec ts;
			uint64_t live = cu->sh.liveness_ns ? cu->sh.liveness_ns : 50000000ull;
			uint64_t now = sd_now_ns();

			sd_cuda_ts_after(&ts, cu->direct_on && live > 200000ull ? 200000ull : live);
			if (pthread_cond_timedwait(&cu->cv, &cu->mu, &ts) != ETIMEDOUT ||
			    cu->failed || !sd_cuda_fast_busy(cu))
				continue;
			pthread_mutex_unlock(&cu->mu);
			char msg[sizeof(cu->errmsg)];
			int prc = sd_cuda_direct_poll(cu, msg, sizeof(msg));

			if (prc != SMDDP_OK)
				sd_cuda_fast_break(cu, prc, msg);
			if (now >= watch_at) {
				sd_cuda_fast_watch(cu);
				watch_at = now + live;
			}
			pthread_mutex_lock(&cu->mu);
		}
		if (cu->abort_asked && !cu->aborted) {
			proxy_abort(cu);
			continue;
		}
		if (cu->head == cu->tail)
			break;
		struct op *o = &cu->ring[cu->head % QCAP];
		int skip = cu->failed || cu->stop || o->broken;
		pthread_mutex_unlock(&cu->mu);

		if (!skip)
			sd_cuda_run_call(c, cu, o);
		sd_cuda_release(cu, o->last);
		pthread_mutex_lock(&cu->mu);
		cu->head++;
		pthread_cond_broadcast(&cu->cv_done);
	}
	pthread_mutex_unlock(&cu->mu);
	return NULL;
}

void sd_cuda_abort(struct smddp_comm *c)
{
	struct sd_cuda *cu = c->cuda;

	if (cu)
		sd_cuda_fast_stop(cu);
	if (!cu || !cu->thr_started || !c->net) {
		/* No proxy, or shared memory: it takes an abort from any thread. */
		c->tp->abort(c);
		return;
	}
	/* First the running call's reason to stop, then the proxy's. */
	sd_net_ask_abort(c);
	pthread_mutex_lock(&cu->mu);
	if (!cu->failed) {
		cu->failed = c->failed ? c->failed : SMDDP_EABORTED;
		snprintf(cu->errmsg, sizeof(cu->errmsg), "%s",
			 c->failed ? c->last_error : "this rank aborted the communicator");
	}
	/* smddp_comm_abort (no failure): the peers hear of an abort, not of
	 * a failure with a stale sentence. */
	cu->abort_asked = c->failed ? 2 : 1;
	pthread_cond_signal(&cu->cv);
	pthread_mutex_unlock(&cu->mu);
}

void sd_cuda_proxy_stop(struct sd_cuda *cu)
{
	if (!cu->thr_started)
		return;
	pthread_mutex_lock(&cu->mu);
	__atomic_store_n(&cu->stop, 1, __ATOMIC_RELEASE);
	pthread_cond_signal(&cu->cv);
	pthread_mutex_unlock(&cu->mu);
	pthread_join(cu->thr, NULL);
	cu->thr_started = 0;
}

void sd_cuda_stop(struct smddp_comm *c)
{
	struct sd_cuda *cu = c->cuda;

	if (!cu || !cu->thr_started)
		return;
	sd_cuda_abort(c);
	sd_cuda_proxy_stop(cu);
}
