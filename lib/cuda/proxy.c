/* proxy.c - stream-ordered collectives on CUDA device memory among the ranks of one node.
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
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "base/checks.h"
#include "clock/clock.h"
#include "coll/net.h"
#include "config/param.h"
#include "cuda/cuda.h"
#include "cuda/internal.h"
#include "cuda/kernels.h"
#include "cuda/proxy.h"
#include "transport/transport.h"

/* ---- setup ------------------------------------------------------------------ */

static void *proxy_main(void *arg);
static int run_call(struct smddp_comm *c, struct sd_cuda *cu, struct op *o);

/* SMDDP_CUDA_ASYNC: auto (-1), or a boolean (the parameter's check has
 * accepted it). */
static int async_param(void)
{
	const char *v = sd_param_str("SMDDP_CUDA_ASYNC");
	int b = 0;

	if (!*v || !strcasecmp(v, "auto"))
		return -1;
	return sd_parse_bool(v, &b) == 0 ? b : -1;
}

/* Is the CUDA MPS daemon serving this user?  The rule CUDA's client uses:
 * its control socket in $CUDA_MPS_PIPE_DIRECTORY (else /tmp/nvidia-mps). */
static int mps_active(void)
{
	const char *d = getenv("CUDA_MPS_PIPE_DIRECTORY");
	char path[4096];
	struct stat st;

	snprintf(path, sizeof(path), "%s/control", d && *d ? d : "/tmp/nvidia-mps");
	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* The proxy thread exists for the queue-and-return mode only: otherwise
 * the calling thread does the work itself. */
static int start_proxy(struct smddp_comm *c, struct sd_cuda *cu)
{
	int e = pthread_create(&cu->thr, NULL, proxy_main, c);

	if (e != 0)
		return sd_comm_error(c, SMDDP_ESYSTEM, "cannot start the GPU proxy thread: %s",
				     strerror(e));
	cu->thr_started = 1;
	return SMDDP_OK;
}

/* SMDDP_CUDA_ASYNC=auto, after the first call has shown where the ranks
 * are: calls return once queued unless other ranks share this GPU without
 * MPS.  Then the kernels of the processes are time-sliced: a stream held
 * back on the GPU keeps its context's time slices while it waits, and
 * each switch costs hundreds of microseconds, so the caller does the work
 * instead.  Each rank decides for itself: the two modes meet the peers
 * the same way. */
static int decide(struct smddp_comm *c, struct sd_cuda *cu)
{
	int mps = cu->shared ? mps_active() : 0;

	cu->decided = 1;
	if (cu->shared && !mps) {
		SD_INFO(SD_SUB_COLL,
			"device collectives on GPU %d: %d other rank%s of this node use%s it and "
			"MPS is not running: calls return when done (SMDDP_CUDA_ASYNC=1 makes "
			"them return once queued)",
			cu->dev, cu->shared, cu->shared == 1 ? "" : "s", cu->shared == 1 ? "s" : "");
		return SMDDP_OK;
	}
	SD_INFO(SD_SUB_COLL, "device collectives on GPU %d: calls return once queued (%s)",
		cu->dev, mps ? "ranks share the GPU under MPS" : "no other rank uses this GPU");
	SD_CHECK(start_proxy(c, cu));
	cu->async = 1;
	return SMDDP_OK;
}

/* A queued call's kernel is launched before the peers' buffers are mapped
 * (the launch cannot wait for the peers), and compute-sanitizer's memcheck
 * checks a kernel against the allocations of its launch: it stops that
 * kernel as out of bounds (tests/gpu/late-map.cu shows it without IPC).  So
 * auto is blocking under the sanitizer, decided before the first call; an
 * explicit SMDDP_CUDA_ASYNC=1 is obeyed, with a warning.  Said once per
 * communicator, when its device state is made. */
static void say_sanitizer(const struct sd_cuda *cu, const char *inject)
{
	if (cu->mode == 1)
		SD_WARN(SD_SUB_COLL,
			"device collectives on GPU %d: SMDDP_CUDA_ASYNC=1 under compute-sanitizer "
			"(CUDA_INJECTION64_PATH=%s): its memcheck stops a queued call's kernel that reads "
			"a peer's buffer mapped after the launch; unset it (auto) or set 0 to sanitize",
			cu->dev, inject);
	else
		SD_INFO(SD_SUB_COLL,
			"device collectives on GPU %d: compute-sanitizer is loaded "
			"(CUDA_INJECTION64_PATH=%s): calls return when done, as its memcheck cannot "
			"follow the buffers a queued call maps after its launch (SMDDP_CUDA_ASYNC=1 "
			"queues them anyway)",
			cu->dev, inject);
}

static int state_init(struct smddp_comm *c, int dev)
{
	struct sd_cuda *cu;
	pthread_condattr_t ca;
	cudaError_t e;
	const char *inject = getenv("CUDA_INJECTION64_PATH");
	int old = -1, rc = SMDDP_OK, attr = 0, sanitized;

	cu = calloc(1, sizeof(*cu));
	if (!cu)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	cu->dev = dev;
	cu->mode = async_param();
	sanitized = cu->mode != 0 && sd_cuda_sanitizer(inject);
	/* auto: blocking under the sanitizer.  Between hosts no kernel waits
	 * on a peer and the GPU only copies (staged.c), so auto queues and
	 * returns there at once, whoever shares the GPU. */
	cu->decided = cu->mode >= 0 || sanitized || c->net;
	cu->async = cu->mode == 1 || (cu->mode < 0 && !sanitized && c->net);
	cu->shared = -1;
	cu->last_slot = -1;
	cudaGetDevice(&old);
	if ((e = cudaSetDevice(dev)) != cudaSuccess) {
		rc = SD_CUDA_ERR(c, e, "cannot use the buffers' GPU");
		goto fail;
	}
	cudaDeviceGetAttribute(&attr, cudaDevAttrMultiProcessorCount, dev);
	{
		struct cudaDeviceProp prop;

		if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
			memcpy(cu->uuid, &prop.uuid, sizeof(cu->uuid));
	}
	cu->max_blocks = attr > 0 ? 4 * attr : 0;
	if ((e = cudaStreamCreateWithFlags(&cu->st, cudaStreamNonBlocking)) != cudaSuccess) {
		rc = SD_CUDA_ERR(c, e, "cannot create the communicator's stream");
		goto fail;
	}
	/* Before any stream waits on the word (see kernels.h). */
	if ((e = (cudaError_t)sd_cuda_kernels_load()) != cudaSuccess) {
		rc = SD_CUDA_ERR(c, e, "cannot load libsmddp's GPU kernels");
		goto fail;
	}
	for (int i = 0; i < QCAP; i++) {
		if ((e = cudaEventCreateWithFlags(&cu->ev_in[i], cudaEventDisableTiming)) != cudaSuccess ||
		    (e = cudaEventCreateWithFlags(&cu->ev_out[i], cudaEventDisableTiming)) != cudaSuccess) {
			rc = SD_CUDA_ERR(c, e, "cannot create events");
			goto fail;
		}
	}
	/* Two words on lines of their own: the release word (the host writes
	 * it) and the up word (staged.c: the GPU writes it). */
	if ((e = cudaHostAlloc((void **)&cu->word, 128, cudaHostAllocMapped | cudaHostAllocPortable)) !=
	    cudaSuccess) {
		cu->word = NULL;
		rc = SD_CUDA_ERR(c, e, "cannot allocate pinned host memory for the release word");
		goto fail;
	}
	*cu->word = 0;
	cu->upw = (volatile uint32_t *)((volatile char *)cu->word + 64);
	*cu->upw = 0;
	void *dp = NULL;
	if ((e = cudaHostGetDevicePointer(&dp, (void *)cu->word, 0)) != cudaSuccess) {
		rc = SD_CUDA_ERR(c, e, "cannot map the release word into the GPU");
		goto fail;
	}
	cu->word_dev = (CUdeviceptr)(uintptr_t)dp;
	cu->up_dev = cu->word_dev + 64;
	cu->maxmaps = c->size * MAP_PER_PEER;
	cu->maps = calloc((size_t)cu->maxmaps, sizeof(*cu->maps));
	if (!cu->maps) {
		rc = sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
		goto fail;
	}
	/* The proxy's copy of the communicator: everything it needs (transport,
	 * pids, tunables) is fixed once the communicator exists. */
	memcpy(&cu->sh, c, sizeof(cu->sh));
	cu->sh.cuda = NULL;
	pthread_mutex_init(&cu->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cu->cv, &ca);
	pthread_cond_init(&cu->cv_done, &ca);
	pthread_condattr_destroy(&ca);
	c->cuda = cu;
	if (cu->async && (rc = start_proxy(c, cu)) != SMDDP_OK) {
		c->cuda = NULL;
		pthread_cond_destroy(&cu->cv_done);
		pthread_cond_destroy(&cu->cv);
		pthread_mutex_destroy(&cu->mu);
		goto fail;
	}
	if (old >= 0 && old != dev)
		cudaSetDevice(old);
	if (sanitized)
		say_sanitizer(cu, inject);
	else if (cu->decided)
		SD_INFO(SD_SUB_COLL, "device collectives %son GPU %d: %s (SMDDP_CUDA_ASYNC=%s)",
			c->net ? "between hosts " : "", dev,
			cu->async ? "calls return once queued" : "calls return when done",
			cu->mode < 0 ? "auto" : cu->mode ? "1" : "0");
	return SMDDP_OK;
fail:
	if (cu->word)
		cudaFreeHost((void *)cu->word);
	for (int i = 0; i < QCAP; i++) {
		if (cu->ev_in[i])
			cudaEventDestroy(cu->ev_in[i]);
		if (cu->ev_out[i])
			cudaEventDestroy(cu->ev_out[i]);
	}
	if (cu->st)
		cudaStreamDestroy(cu->st);
	free(cu->maps);
	free(cu);
	if (old >= 0 && old != dev)
		cudaSetDevice(old);
	return rc;
}

/* For lib/cuda/p2p.c, which uses the IPC caches and the scratch buffer of
 * this state (on the host thread, the queue drained) but queues nothing. */
int sd_cuda_state(struct smddp_comm *c, int dev, struct sd_cuda **out)
{
	if (!c->cuda)
		SD_CHECK(state_init(c, dev));
	*out = c->cuda;
	return SMDDP_OK;
}

/* Host thread, nothing queued: the wire numbers the runs took beyond one
 * per call go into c->wire, for the host's own calls and later ones. */
static void fold_wire(struct smddp_comm *c, struct sd_cuda *cu)
{
	c->wire += cu->xwire;
	cu->xwire = 0;
}

static void ts_after(struct timespec *ts, uint64_t ns)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ns += (uint64_t)ts->tv_nsec;
	ts->tv_sec += (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* Host thread: every queued call finished.  Bounded, as a backstop to the
 * proxy's own deadlines: SMDDP_TIMEOUT + 30 s without a call finishing
 * (not for the whole queue, which may hold 128 long calls).  Then the
 * communicator is broken and the peers are told, as sd_api_leave does. */
static int drain(struct smddp_comm *c, struct sd_cuda *cu)
{
	uint64_t limit = c->timeout_ns + 30ull * 1000000000ull;
	struct timespec ts;
	int rc = 0;

	pthread_mutex_lock(&cu->mu);
	uint64_t seen = cu->head;

	ts_after(&ts, limit);
	while (cu->head != cu->tail) {
		rc = pthread_cond_timedwait(&cu->cv_done, &cu->mu, &ts);
		if (cu->head != seen) {
			seen = cu->head;
			ts_after(&ts, limit);
		} else if (rc == ETIMEDOUT) {
			break;
		}
	}
	int busy = cu->head != cu->tail;
	pthread_mutex_unlock(&cu->mu);
	if (!busy) {
		fold_wire(c, cu);
		return SMDDP_OK;
	}
	rc = sd_comm_error(c, SMDDP_ETIMEDOUT,
			   "a call queued on the GPU did not finish within SMDDP_TIMEOUT + 30 s "
			   "(its stream held, or the GPU hung): the communicator is broken");
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
		SD_CHECK(drain(c, cu));
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

/* Before the device state exists (no device collective yet) the mode is
 * what the first call will do: one rank copies on the stream and returns
 * (one_rank), an explicit SMDDP_CUDA_ASYNC is obeyed (state_init), and
 * auto decides at that call. */
int sd_cuda_mode(const struct smddp_comm *c)
{
	const struct sd_cuda *cu = c->cuda;
	int mode;

	if (cu)
		return !cu->decided ? SMDDP_CUDA_UNDECIDED
				    : cu->async ? SMDDP_CUDA_QUEUED : SMDDP_CUDA_BLOCKING;
	mode = async_param();
	if (c->size == 1)
		return mode == 0 ? SMDDP_CUDA_BLOCKING : SMDDP_CUDA_QUEUED;
	return mode < 0 ? SMDDP_CUDA_UNDECIDED : mode ? SMDDP_CUDA_QUEUED : SMDDP_CUDA_BLOCKING;
}

/* ---- queueing (host thread) --------------------------------------------------- */

/* The streams' waits compare tickets as unsigned numbers
 * (CU_STREAM_WAIT_VALUE_GEQ), which do not wrap: before the count nears
 * 2^32 (past sd_cuda_ticket_limit) the queue drains, every stream passes
 * its last call, and both words start over from 0. */
uint32_t sd_cuda_ticket_limit = 0xf0000000u;

static int rewind_tickets(struct smddp_comm *c, struct sd_cuda *cu)
{
	cudaError_t e = cudaSuccess;

	SD_CHECK(drain(c, cu));
	for (int i = 0; i < QCAP; i++) {
		int rc;

		if (cu->out_used[i] == OUT_BLIND)
			return sd_comm_error(c, SMDDP_ECUDA,
					     "the end of an earlier call of this communicator on its "
					     "stream could not be recorded: its tickets cannot start over");
		if (!cu->out_used[i])
			continue;
		rc = sd_cuda_wait(sd_cuda_q_event, cu->ev_out[i], c->timeout_ns, NULL, &e);
		if (rc == SMDDP_ECUDA)
			return SD_CUDA_ERR(c, e, "the stream of an earlier call of this communicator "
						"failed");
		if (rc)
			return sd_comm_error(c, SMDDP_ETIMEDOUT,
					     "a stream did not pass an earlier call of this "
					     "communicator within SMDDP_TIMEOUT");
	}
	SD_INFO(SD_SUB_COLL, "GPU tickets start over after %u", cu->enq);
	__atomic_store_n((uint32_t *)cu->word, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n((uint32_t *)cu->upw, 0, __ATOMIC_SEQ_CST);
	cu->enq = 0;
	return SMDDP_OK;
}

int sd_cuda_settle(struct smddp_comm *c, int rc)
{
	struct sd_cuda *cu = c->cuda;
	char why[sizeof(c->last_error)];
	int d;

	if (!cu)
		return rc;
	snprintf(why, sizeof(why), "%s", c->last_error);
	if ((d = drain(c, cu)) != SMDDP_OK)
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

/* A bad buffer between hosts: the peers are already in the call (their
 * buffers were fine) and would wait for this rank until SMDDP_TIMEOUT, so
 * the communicator breaks and they are told now, with the reason, once
 * the calls queued before have run (the proxy uses the transport). */
static int refuse_between_hosts(struct smddp_comm *c, int rc)
{
	rc = sd_cuda_settle(c, rc);
	c->failed = rc;
	sd_cuda_abort(c);
	return rc;
}

/* The in-place alltoall on one node: rank r's block q is overwritten by
 * rank q while rank r still has to send it, so the proxy first copies the
 * input into the communicator's scratch buffer, published in *sbp. */
static int alltoall_scratch(struct smddp_comm *c, struct sd_cuda *cu, size_t sb, int dev,
			    void **scratch, struct buf_pub *sbp)
{
	int old = -1;
	cudaError_t e;

	if (cu->scratch_len < sb) {
		SD_CHECK(drain(c, cu));
		cudaGetDevice(&old);
		cudaSetDevice(dev);
		if (cu->scratch)
			cudaFree(cu->scratch);
		size_t len = sd_cuda_scratch_size(cu->scratch_len, sb);

		cu->scratch = NULL;
		cu->scratch_len = 0;
		e = cudaMalloc(&cu->scratch, len);
		if (old >= 0 && old != dev)
			cudaSetDevice(old);
		if (e != cudaSuccess) {
			cu->scratch = NULL;
			(void)cudaGetLastError(); /* ours, not left for the caller's next check */
			return SD_CUDA_ERR(c, e, "cannot allocate GPU memory for an in-place alltoall");
		}
		cu->scratch_len = len;
	}
	*scratch = cu->scratch;
	return sd_cuda_buffer_info(c, cu->scratch, sb, "the in-place alltoall's copy", &dev, sbp);
}

/* Blocking mode between hosts: the stream has copied the results down
 * (the end event of o), within SMDDP_TIMEOUT. */
static int wait_out(struct smddp_comm *c, struct sd_cuda *cu, const struct op *o)
{
	cudaError_t e = cudaSuccess;
	int rc = sd_cuda_wait(sd_cuda_q_event, cu->ev_out[o->slot], c->timeout_ns, NULL, &e);

	if (rc == SMDDP_ECUDA)
		return SD_CUDA_ERR(c, e, "a copy between host memory and the GPU failed");
	if (rc)
		return sd_comm_error(c, SMDDP_ETIMEDOUT,
				     "the copies of the result to the GPU did not finish within "
				     "SMDDP_TIMEOUT");
	return SMDDP_OK;
}

/* Queues call o on its stream (the stream's side of it): between hosts
 * the staged copies (staged.c); on one node, queued, the call's kernels
 * behind a wait (move.c), else the input event.  Sets o->last. */
static int queue_on_stream(struct smddp_comm *c, struct sd_cuda *cu, struct op *o)
{
	cudaStream_t st = (cudaStream_t)o->k.stream;
	cudaError_t e;

	/* Queued calls share the staging slots, the scratch copy and the up
	 * word: a call on another stream than the last goes after it. */
	if ((o->staged || cu->async) && (e = sd_cuda_after_last(cu, st)) != cudaSuccess)
		return SD_CUDA_ERR(c, e, "cannot order the stream after the last call on another "
					"stream");
	if (o->staged)
		return sd_cuda_staged_queue(c, cu, o);
	if (cu->async) {
		o->queued = 1;
		return sd_cuda_queue_kernels(c, cu, o);
	}
	o->last = o->seq;
	if ((e = cudaEventRecord(cu->ev_in[o->slot], st)) != cudaSuccess)
		return SD_CUDA_ERR(c, e, "cannot record an event on the stream (is it a stream of "
					"this GPU?)");
	return SMDDP_OK;
}

/* A communicator of one rank: nothing to meet, a copy on the user's stream
 * does it.  SMDDP_CUDA_ASYNC=0 returns when it is done, as with peers. */
static int one_rank(struct smddp_comm *c, const struct sd_cuda_call *k, int dev)
{
	void *dst = k->recvbuf;
	const void *src = k->coll == SD_COLL_BROADCAST ? k->recvbuf : k->sendbuf;
	cudaStream_t st = (cudaStream_t)k->stream;
	cudaEvent_t ev = NULL;
	cudaError_t e;
	int old = -1, rc = SMDDP_OK;

	if (k->coll == SD_COLL_BROADCAST || dst == src)
		return SMDDP_OK;
	cudaGetDevice(&old);
	cudaSetDevice(dev);
	e = cudaMemcpyAsync(dst, src, k->count * dtsize(k->dtype), cudaMemcpyDeviceToDevice, st);
	if (e != cudaSuccess) {
		rc = SD_CUDA_ERR(c, e, "cannot queue the copy on the stream");
		goto out;
	}
	if (async_param() != 0)
		goto out;
	if ((e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)) != cudaSuccess ||
	    (e = cudaEventRecord(ev, st)) != cudaSuccess) {
		rc = SD_CUDA_ERR(c, e, "cannot record an event on the stream");
		goto out;
	}
	rc = sd_cuda_wait(sd_cuda_q_event, ev, c->timeout_ns, NULL, &e);
	if (rc == SMDDP_ECUDA)
		rc = SD_CUDA_ERR(c, e, "the copy failed");
	else if (rc)
		rc = sd_comm_error(c, rc, "the copy did not finish within %s: is the work "
					  "queued before it on the stream stuck?",
				   c->timeout_from);
out:
	if (ev)
		cudaEventDestroy(ev);
	if (old >= 0 && old != dev)
		cudaSetDevice(old);
	return rc;
}

int sd_cuda_enqueue(struct smddp_comm *c, const struct sd_cuda_call *k)
{
	struct sd_cuda *cu = c->cuda;
	struct buf_pub b[2], sbp;
	size_t sb, rb;
	int dev = cu ? cu->dev : -1, old = -1, staged = c->net != NULL, rc;
	void *scratch = NULL;

	if (!staged && c->size > SD_CUDA_MAX_RANKS)
		return sd_comm_error(c, SMDDP_EUNSUPPORTED,
				     "device collectives take at most %d ranks on one node, this "
				     "communicator has %d",
				     SD_CUDA_MAX_RANKS, c->size);
	rc = sd_cuda_check_call(c, k, &dev, b);
	if (rc)
		return staged ? refuse_between_hosts(c, rc) : rc;
	sd_cuda_extents(k, c->size, c->rank, &sb, &rb);
	if (c->size == 1)
		return one_rank(c, k, dev);
	if (!cu) {
		SD_CHECK(state_init(c, dev));
		cu = c->cuda;
	}
	sd_cuda_flush_stale(cu);
	if (!staged && !cu->fast_tried) {
		/* Every rank, at its first device collective on this node. */
		SD_CHECK(drain(c, cu));
		cudaGetDevice(&old);
		cudaSetDevice(dev);
		rc = sd_cuda_fast_setup(c, cu, mps_active());
		if (!rc && cu->fast_on && !cu->decided)
			rc = decide(c, cu);
		if (old >= 0 && old != dev)
			cudaSetDevice(old);
		if (rc)
			return rc;
	}
	if (cu->async && (sd_cuda_fast_takes(cu, k) || sd_cuda_direct_takes(cu, k))) {
		cudaGetDevice(&old);
		if (old != dev)
			cudaSetDevice(dev);
		rc = sd_cuda_fast_takes(cu, k) ? sd_cuda_fast_call(c, cu, k)
					       : sd_cuda_direct_call(c, cu, k, b);
		if (old >= 0 && old != dev)
			cudaSetDevice(old);
		return rc;
	}
	memset(&sbp, 0, sizeof(sbp));
	if (!staged && k->coll == SD_COLL_ALLTOALL && b[0].base == b[1].base &&
	    b[0].off < b[1].off + rb && b[1].off < b[0].off + sb)
		SD_CHECK(alltoall_scratch(c, cu, sb, dev, &scratch, &sbp));

	if (cu->enq > sd_cuda_ticket_limit)
		SD_CHECK(rewind_tickets(c, cu));

	int slot = 0;

	if (cu->async) {
		pthread_mutex_lock(&cu->mu);
		if (cu->tail - cu->head >= QCAP) {
			struct timespec ts;

			ts_after(&ts, c->timeout_ns);
			while (cu->tail - cu->head >= QCAP && !cu->failed)
				if (pthread_cond_timedwait(&cu->cv_done, &cu->mu, &ts) == ETIMEDOUT)
					break;
			if (cu->tail - cu->head >= QCAP) {
				pthread_mutex_unlock(&cu->mu);
				return sd_comm_error(c, SMDDP_ETIMEDOUT,
						     "%d calls are queued on the GPU and none "
						     "finished within SMDDP_TIMEOUT",
						     QCAP);
			}
		}
		slot = (int)(cu->tail % QCAP);
		pthread_mutex_unlock(&cu->mu);
	}
	struct op *o = &cu->ring[slot];

	memset(o, 0, sizeof(*o));
	o->seq = cu->enq + 1;
	o->call = c->dev_calls;
	o->desc = c->cur;
	o->k = *k;
	o->b[0] = b[0];
	o->b[1] = b[1];
	o->scratch = scratch;
	o->sb = sbp;
	/* Except where one rank does all the work (every rank on this GPU, as
	 * the last call showed; shared is -1 before the first): it takes every
	 * copy itself, sparing each process a kernel of its own (time-sliced
	 * processes: hundreds of microseconds each).  Read here, by the host
	 * thread, for both modes. */
	o->copy_first = scratch && __atomic_load_n(&cu->shared, __ATOMIC_RELAXED) != c->size - 1;
	o->slot = slot;
	o->staged = staged;
	cudaGetDevice(&old);
	cudaSetDevice(dev);
	rc = queue_on_stream(c, cu, o);
	if (old >= 0 && old != dev)
		cudaSetDevice(old);
	if (rc && !o->broken)
		return rc;
	cu->enq = o->last;
	if (!cu->async) {
		/* This thread runs the call, and returns when the collective is
		 * done, with its own error; work queued on the stream before
		 * the call comes first, work queued after it follows.  Under
		 * SMDDP_CUDA_ASYNC=auto the first call on one node is done so,
		 * and shows whether other ranks share this GPU. */
		cudaGetDevice(&old);
		cudaSetDevice(dev);
		int done = SMDDP_OK;

		if (!o->broken && run_call(c, cu, o) == SMDDP_OK && staged)
			done = wait_out(c, cu, o);
		sd_cuda_release(cu, o->last);
		fold_wire(c, cu);
		if (old >= 0 && old != dev)
			cudaSetDevice(old);
		if (rc)
			return rc;
		rc = sd_cuda_collect(c, 0);
		if (!rc)
			rc = done;
		if (!rc && !cu->decided && cu->shared >= 0)
			rc = decide(c, cu);
		return rc;
	}
	pthread_mutex_lock(&cu->mu);
	cu->tail++;
	pthread_cond_signal(&cu->cv);
	pthread_mutex_unlock(&cu->mu);
	/* Queued halfway: released unrun, and the communicator breaks
	 * (sd_api_leave settles and tells the peers). */
	return rc;
}

/* ---- the proxy ------------------------------------------------------------------ */

/* One call through sd_cuda_run_op (one node) or sd_cuda_staged_run
 * (between hosts), and its failure recorded for sd_cuda_collect().  What
 * the host algorithms change in the communicator (c->step, the scratch
 * buffer of single copies) belongs to whoever runs calls while they run:
 * the host thread drains the queue before its own collectives. */
static int run_call(struct smddp_comm *c, struct sd_cuda *cu, struct op *o)
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

			ts_after(&ts, cu->direct_on && live > 200000ull ? 200000ull : live);
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
			run_call(c, cu, o);
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

static void stop_proxy(struct sd_cuda *cu)
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
	stop_proxy(cu);
}

void sd_cuda_comm_free(struct smddp_comm *c)
{
	struct sd_cuda *cu = c ? c->cuda : NULL;
	int old = -1;
	const char *stuck = NULL; /* why what a stream may still use is kept */

	if (!cu)
		return;
	stop_proxy(cu);
	/* Every queued call is released; let the streams pass their waits
	 * before the word goes (bounded: a stream stuck in the user's own
	 * work keeps the word, which is then leaked rather than freed). */
	sd_cuda_release(cu, cu->enq);
	cudaGetDevice(&old);
	cudaSetDevice(cu->dev);
	uint64_t deadline = sd_now_ns() + 10ull * 1000000000ull;
	for (int i = 0; i < QCAP; i++) {
		cudaError_t e = cudaSuccess;

		uint64_t now = sd_now_ns();

		if (cu->out_used[i] == OUT_BLIND)
			stuck = "the end of a call of this communicator on its stream could not be "
				"recorded";
		else if (!stuck && cu->out_used[i] &&
			 sd_cuda_wait(sd_cuda_q_event, cu->ev_out[i],
				      deadline > now ? deadline - now : 0, NULL,
				      &e) == SMDDP_ETIMEDOUT)
			stuck = "a stream still waits on a call of this communicator after 10 s";
	}
	/* What a stream may still read or wait on is leaked, not freed; so
	 * are the peers' mappings and the scratch copy, since closing or
	 * freeing them waits for the device, the stuck stream included. */
	sd_cuda_fast_free(c, cu, stuck != NULL);
	sd_cuda_direct_free(c, cu, stuck != NULL);
	if (stuck)
		SD_WARN(SD_SUB_COLL, "%s: its release word, kernel arguments, staging memory and "
				     "the peers' mappings are left allocated",
			stuck);
	for (int i = 0; !stuck && i < cu->nmaps; i++)
		if (cu->maps[i].ptr)
			sd_cuda_ipc_close(cu->maps[i].ptr);
	if (!stuck)
		sd_cuda_flush_stale(cu);
	if (cu->scratch && !stuck)
		cudaFree(cu->scratch);
	if (!stuck && cu->args) {
		cudaFreeHost(cu->args);
		cudaFree(cu->args_gpu);
	}
	if (!stuck)
		sd_cuda_stage_free(cu, sd_net_poisoned(c));
	for (int i = 0; i < QCAP; i++) {
		cudaEventDestroy(cu->ev_in[i]);
		cudaEventDestroy(cu->ev_out[i]);
	}
	cudaStreamDestroy(cu->st);
	if (!stuck)
		cudaFreeHost((void *)cu->word);
	if (old >= 0 && old != cu->dev)
		cudaSetDevice(old);
	pthread_mutex_destroy(&cu->mu);
	pthread_cond_destroy(&cu->cv);
	pthread_cond_destroy(&cu->cv_done);
	free(cu->maps);
	free(cu);
	c->cuda = NULL;
}
