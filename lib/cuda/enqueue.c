/* enqueue.c - a device collective on one node or between hosts, queued on its stream (the host thread's side).
 *
 * The call is checked, the communicator's device state made at its first
 * device call (state.c), and the call takes one of three ways: the fast
 * or the direct path's kernels (fast.c, direct.c), which meet the peers
 * themselves; or a slot of the ring, queued on the stream behind a wait
 * (move.c on one node, staged.c between hosts) that the proxy thread
 * releases (proxy.c, which says why), or run at once by this thread in
 * the blocking mode.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
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
#include "cuda/state.h"

/* The streams' waits compare tickets as unsigned numbers
 * (CU_STREAM_WAIT_VALUE_GEQ), which do not wrap: before the count nears
 * 2^32 (past sd_cuda_ticket_limit) the queue drains, every stream passes
 * its last call, and both words start over from 0.  Global, so that the
 * fake CUDA of the tests can lower it (FAKECUDA_TICKET_LIMIT) to reach that
 * path. */
uint32_t sd_cuda_ticket_limit = 0xf0000000u;

static int rewind_tickets(struct smddp_comm *c, struct sd_cuda *cu)
{
	cudaError_t e = cudaSuccess;

	SD_CHECK(sd_cuda_drain(c, cu));
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
					     "communicator within %s",
					     c->timeout_from);
	}
	SD_INFO(SD_SUB_COLL, "GPU tickets start over after %u", cu->enq);
	__atomic_store_n((uint32_t *)cu->word, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n((uint32_t *)cu->upw, 0, __ATOMIC_SEQ_CST);
	cu->enq = 0;
	return SMDDP_OK;
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
		SD_CHECK(sd_cuda_drain(c, cu));
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
				     "%s",
				     c->timeout_from);
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
	if (sd_cuda_async_param() != 0)
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

/* Queues (and in the blocking mode runs) one op: the call k, or the part
 * of a staged call from chunk *next on; *next becomes the chunk the next
 * part starts at, or 0 when the call is all queued. */
static int enqueue_op(struct smddp_comm *c, struct sd_cuda *cu, const struct sd_cuda_call *k,
		      const struct buf_pub *b, void *scratch, const struct buf_pub *sbp, int dev,
		      size_t *next)
{
	int staged = c->net != NULL, old = -1, rc;
	int slot = 0;

	if (cu->async) {
		pthread_mutex_lock(&cu->mu);
		if (cu->tail - cu->head >= QCAP) {
			struct timespec ts;

			sd_cuda_ts_after(&ts, c->timeout_ns);
			while (cu->tail - cu->head >= QCAP && !cu->failed)
				if (pthread_cond_timedwait(&cu->cv_done, &cu->mu, &ts) == ETIMEDOUT)
					break;
			if (cu->tail - cu->head >= QCAP) {
				pthread_mutex_unlock(&cu->mu);
				return sd_comm_error(c, SMDDP_ETIMEDOUT,
						     "%d calls are queued on the GPU and none "
						     "finished within %s",
						     QCAP, c->timeout_from);
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
	o->sb = *sbp;
	o->ch0 = *next;
	/* Except where one rank does all the work (every rank on this GPU, as
	 * the last call showed; shared is -1 before the first): it takes every
	 * copy itself, sparing each process a kernel of its own (time-sliced
	 * processes: hundreds of microseconds each).  Read here, by the host
	 * thread, for both modes. */
	o->copy_first = scratch && __atomic_load_n(&cu->shared, __ATOMIC_RELAXED) != c->size - 1;
	o->slot = slot;
	o->staged = staged;
	o->made_ns = sd_now_ns();
	cudaGetDevice(&old);
	cudaSetDevice(dev);
	rc = queue_on_stream(c, cu, o);
	if (old >= 0 && old != dev)
		cudaSetDevice(old);
	if (rc && !o->broken)
		/* a later part: the peers already have the call's first ones */
		return o->ch0 ? refuse_between_hosts(c, rc) : rc;
	/* A call that stops after this part leaves copies up queued that
	 * write tickets past its last (staged.c): the next call starts after
	 * them. */
	cu->enq = rc && o->upto > o->last ? o->upto : o->last;
	*next = o->more && !rc ? o->ch1 : 0;
	if (!cu->async) {
		/* This thread runs the call, and returns when the collective is
		 * done, with its own error; work queued on the stream before
		 * the call comes first, work queued after it follows.  Under
		 * SMDDP_CUDA_ASYNC=auto the first call on one node is done so,
		 * and shows whether other ranks share this GPU. */
		cudaGetDevice(&old);
		cudaSetDevice(dev);
		int done = SMDDP_OK, ran = o->broken ? SMDDP_EINTERNAL : sd_cuda_run_call(c, cu, o);

		if (ran == SMDDP_OK && staged && !o->more)
			done = wait_out(c, cu, o);
		sd_cuda_release(cu, o->last);
		if (ran != SMDDP_OK && o->more) {
			cu->enq = o->upto;
			*next = 0;
		}
		sd_cuda_fold_wire(c, cu);
		if (old >= 0 && old != dev)
			cudaSetDevice(old);
		if (rc)
			return rc;
		rc = sd_cuda_collect(c, 0);
		if (!rc)
			rc = done;
		if (!rc && !cu->decided && cu->shared >= 0)
			rc = sd_cuda_decide(c, cu);
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
	if (!cu)
		SD_CHECK(sd_cuda_state(c, dev, &cu));
	sd_cuda_flush_stale(cu);
	if (!staged && !cu->fast_tried) {
		/* Every rank, at its first device collective on this node. */
		SD_CHECK(sd_cuda_drain(c, cu));
		cudaGetDevice(&old);
		cudaSetDevice(dev);
		rc = sd_cuda_fast_setup(c, cu, sd_cuda_mps_active());
		if (!rc && cu->fast_on && !cu->decided)
			rc = sd_cuda_decide(c, cu);
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

	/* A staged call of many chunks is queued and run in parts (staged.c
	 * says why); each part is an op of its own, in order. */
	size_t ch = 0;

	do {
		rc = enqueue_op(c, cu, k, b, scratch, &sbp, dev, &ch);
		/* Queued, a part may have failed already: the proxy would
		 * release the rest unrun, so they are not queued, and the
		 * failure (naming its cause) is this call's. */
		if (!rc && ch && cu->async)
			rc = sd_cuda_collect(c, 0);
	} while (!rc && ch);
	return rc;
}
