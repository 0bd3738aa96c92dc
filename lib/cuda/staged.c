/* staged.c - collectives on CUDA device memory between hosts, staged through pinned host memory.
 *
 * A communicator whose ranks are on several hosts moves device buffers by
 * copying them through pinned host memory and running the host algorithms
 * of lib/coll/net.c (shared memory inside each host, libfabric between
 * hosts) on the copies.  The call is cut into chunks of the same elements
 * on every rank, and the chunks are pipelined over NSLOT slots of pinned
 * memory: while the host thread runs the collective of chunk i, the copy
 * engines bring chunks i+1 and i+2 up (device to host, stream "up") and
 * take chunk i-1 down (host to device, stream "down"); a slot is refilled
 * only once the copy that empties it has finished (an event the up stream
 * waits on, on the GPU).  Each chunk is its own host collective, with its
 * own number on the wire (c->wire), so that messages of different chunks
 * never match.
 *
 * Chunk layout, for a chunk of L elements at element o of each block
 * (m = count elements per block, r this rank, n ranks):
 *   allreduce, reduce     S = sendbuf[o, o+L), reduced in place
 *   broadcast             S = root's buf[o, o+L)
 *   allgather             S[r] = sendbuf[o, o+L); S[q] -> recvbuf block q at o
 *   reduce_scatter        S[q] = sendbuf block q at o; S[r] -> recvbuf[o, o+L)
 *   alltoall              S[q] = sendbuf block q at o; S[n + q] -> recvbuf block q at o
 * (strided copies are cudaMemcpy2DAsync).  The in-place layouts of
 * smddp(3) are safe: a chunk's input is in host memory before any output
 * of that chunk is written back, and the chunks touch disjoint elements.
 *
 * Ordering: the up stream waits for an event recorded on the user's stream
 * at the call (the input is ready), the user's stream waits for an event
 * after the last copy down (whatever happens, also after a failure: the
 * user's later work never races our copies).  The call returns when the
 * collective is done, as on one node by default; SMDDP_CUDA_ASYNC does not
 * apply here (the host runs the network part, so there is nothing to
 * queue).  Every wait on the GPU is bounded by SMDDP_TIMEOUT.
 *
 * GPUDirect (FI_HMEM, the provider reading device memory) is not used yet:
 * the tcp provider does not offer it, and no machine here has EFA.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "base/comm-types.h"
#include "coll/coll.h"
#include "coll/net.h"
#include "cuda/cuda.h"
#include "cuda/internal.h"
#include "transport/transport.h"

#define NSLOT 3
#define CHUNK_MAX ((size_t)4 << 20)   /* bytes of data per slot, at most */
#define CHUNK_MIN ((size_t)256 << 10) /* ... and at least, unless the call is smaller */

struct sd_stage {
	int dev;
	cudaStream_t up, down;
	cudaEvent_t in, upd, done, got[NSLOT], freed[NSLOT];
	char *host; /* NSLOT slots of slot bytes, pinned */
	size_t slot;
};

static int cuda_fail(struct smddp_comm *c, cudaError_t e, const char *what)
{
	return sd_comm_error(c, SMDDP_ECUDA, "%s: %s (%s)", what, cudaGetErrorString(e),
			     cudaGetErrorName(e));
}

/* Waits until ev has passed, at most SMDDP_TIMEOUT: 0, or an error. */
static int wait_event(struct smddp_comm *c, cudaEvent_t ev, const char *late)
{
	cudaError_t e = cudaSuccess;
	int rc = sd_cuda_wait(sd_cuda_q_event, ev, c->timeout_ns, NULL, &e);

	if (rc == SMDDP_OK)
		return SMDDP_OK;
	if (rc == SMDDP_ECUDA)
		return cuda_fail(c, e, "a copy between the GPU and host memory failed");
	return sd_comm_error(c, SMDDP_ETIMEDOUT, "%s within SMDDP_TIMEOUT (%.0f s)", late,
			     (double)c->timeout_ns / 1e9);
}

/* Both streams idle (or failed): cudaSuccess, else cudaErrorNotReady. */
static cudaError_t q_idle(void *arg)
{
	struct sd_stage *s = arg;

	if (cudaStreamQuery(s->up) == cudaErrorNotReady ||
	    cudaStreamQuery(s->down) == cudaErrorNotReady)
		return cudaErrorNotReady;
	return cudaSuccess;
}

/* Both streams idle (at most 10 s): 1, else 0. */
static int streams_idle(struct sd_stage *s)
{
	cudaError_t e = cudaSuccess;

	return sd_cuda_wait(q_idle, s, 10ull * 1000000000ull, NULL, &e) == SMDDP_OK;
}

static void stage_destroy(struct sd_stage *s)
{
	int idle = s->up && s->down && streams_idle(s);

	if (s->host) {
		if (idle)
			cudaFreeHost(s->host);
		else
			SD_WARN(SD_SUB_COLL, "copies of a device call between hosts still run "
					     "after 10 s: their pinned host memory is left allocated");
	}
	cudaEvent_t *evs[] = {&s->in, &s->upd, &s->done};

	for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
		if (*evs[i])
			cudaEventDestroy(*evs[i]);
	for (int i = 0; i < NSLOT; i++) {
		if (s->got[i])
			cudaEventDestroy(s->got[i]);
		if (s->freed[i])
			cudaEventDestroy(s->freed[i]);
	}
	if (s->up)
		cudaStreamDestroy(s->up);
	if (s->down)
		cudaStreamDestroy(s->down);
	free(s);
}

void sd_cuda_stage_free(struct smddp_comm *c)
{
	struct sd_stage *s = c->cuda_stage;
	int old = -1;

	if (!s)
		return;
	if (s->host && sd_net_poisoned(c)) {
		/* The provider may still write into a slot (a transfer the
		 * failed call left behind): keep them, as net.c keeps its own. */
		SD_WARN(SD_SUB_COLL, "the fabric endpoint was left with transfers in flight: the "
				     "pinned staging memory (%zu bytes) is left allocated",
			 NSLOT * s->slot);
		s->host = NULL;
	}
	cudaGetDevice(&old);
	cudaSetDevice(s->dev);
	stage_destroy(s);
	if (old >= 0 && old != s->dev)
		cudaSetDevice(old);
	c->cuda_stage = NULL;
}

/* The communicator's staging state on GPU dev (the current device), with
 * slots of at least slot bytes. */
static int stage_get(struct smddp_comm *c, int dev, size_t slot, struct sd_stage **out)
{
	struct sd_stage *s = c->cuda_stage;
	cudaError_t e;

	if (s && s->dev != dev)
		return sd_comm_error(c, SMDDP_EINVAL,
				     "the buffers are on GPU %d, but this communicator's earlier "
				     "device calls used GPU %d: one communicator uses one GPU per "
				     "rank",
				     dev, s->dev);
	if (!s) {
		if (!(s = calloc(1, sizeof(*s))))
			return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
		s->dev = dev;
		e = cudaStreamCreateWithFlags(&s->up, cudaStreamNonBlocking);
		if (e == cudaSuccess)
			e = cudaStreamCreateWithFlags(&s->down, cudaStreamNonBlocking);
		cudaEvent_t *evs[] = {&s->in, &s->upd, &s->done};
		for (size_t i = 0; e == cudaSuccess && i < sizeof(evs) / sizeof(evs[0]); i++)
			e = cudaEventCreateWithFlags(evs[i], cudaEventDisableTiming);
		for (int i = 0; e == cudaSuccess && i < NSLOT; i++) {
			e = cudaEventCreateWithFlags(&s->got[i], cudaEventDisableTiming);
			if (e == cudaSuccess)
				e = cudaEventCreateWithFlags(&s->freed[i], cudaEventDisableTiming);
		}
		if (e != cudaSuccess) {
			stage_destroy(s);
			return cuda_fail(c, e, "cannot create the streams and events of staging");
		}
		c->cuda_stage = s;
	}
	if (s->slot < slot) {
		if (s->host) {
			if (!streams_idle(s))
				return sd_comm_error(c, SMDDP_ECUDA,
						     "copies of an earlier device call still run "
						     "after 10 s: cannot grow the staging memory");
			cudaFreeHost(s->host);
			s->host = NULL;
			s->slot = 0;
		}
		e = cudaHostAlloc((void **)&s->host, NSLOT * slot, cudaHostAllocPortable);
		if (e != cudaSuccess) {
			s->host = NULL;
			return sd_comm_error(c, SMDDP_ENOMEM,
					     "cannot allocate %zu bytes of pinned host memory to stage "
					     "device buffers between hosts: %s",
					     NSLOT * slot, cudaGetErrorString(e));
		}
		s->slot = slot;
	}
	*out = s;
	return SMDDP_OK;
}

struct plan {
	const struct sd_cuda_call *k;
	size_t es, m;    /* element size; bytes of a block (count elements) */
	size_t len, nch; /* elements per chunk, chunks */
	int n, r, words; /* words: blocks of len elements in a slot */
};

/* Elements [o, o + L) of chunk i. */
static void chunk_of(const struct plan *p, size_t i, size_t *o, size_t *L)
{
	*o = i * p->len;
	*L = p->k->count - *o < p->len ? p->k->count - *o : p->len;
}

/* cudaMemcpy2DAsync, or one copy per row where a pitch is beyond what it
 * takes (2^31 - 1 bytes on current GPUs: blocks over 2 GiB). */
static cudaError_t copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
			  size_t height, enum cudaMemcpyKind kind, cudaStream_t st)
{
	cudaError_t e = cudaSuccess;

	if (dpitch < ((size_t)1 << 31) && spitch < ((size_t)1 << 31))
		return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, st);
	for (size_t y = 0; y < height && e == cudaSuccess; y++)
		e = cudaMemcpyAsync((char *)dst + y * dpitch, (const char *)src + y * spitch, width,
				    kind, st);
	return e;
}

/* Queue chunk i's copy up into slot S (after the slot's last copy down). */
static cudaError_t copy_up(struct sd_stage *s, const struct plan *p, size_t i)
{
	const struct sd_cuda_call *k = p->k;
	int sl = (int)(i % NSLOT);
	char *S = s->host + (size_t)sl * s->slot;
	size_t o, L;
	cudaError_t e;

	chunk_of(p, i, &o, &L);
	size_t Lb = L * p->es, ob = o * p->es;

	if ((e = cudaStreamWaitEvent(s->up, s->freed[sl], 0)) != cudaSuccess)
		return e;
	switch (k->coll) {
	case SD_COLL_ALLREDUCE:
	case SD_COLL_REDUCE:
		e = cudaMemcpyAsync(S, (const char *)k->sendbuf + ob, Lb, cudaMemcpyDeviceToHost,
				    s->up);
		break;
	case SD_COLL_BROADCAST:
		if (p->r == k->root)
			e = cudaMemcpyAsync(S, (const char *)k->recvbuf + ob, Lb,
					    cudaMemcpyDeviceToHost, s->up);
		break;
	case SD_COLL_ALLGATHER:
		e = cudaMemcpyAsync(S + (size_t)p->r * Lb, (const char *)k->sendbuf + ob, Lb,
				    cudaMemcpyDeviceToHost, s->up);
		break;
	default: /* reduce_scatter, alltoall: block q at o into S[q] */
		e = copy2d(S, Lb, (const char *)k->sendbuf + ob, p->m, Lb, (size_t)p->n,
			   cudaMemcpyDeviceToHost, s->up);
		break;
	}
	if (e == cudaSuccess)
		e = cudaEventRecord(s->got[sl], s->up);
	return e;
}

/* The host collective of chunk i, on its slot. */
static int host_chunk(struct smddp_comm *c, struct sd_stage *s, const struct plan *p, size_t i)
{
	const struct sd_cuda_call *k = p->k;
	char *S = s->host + (i % NSLOT) * s->slot;
	size_t o, L;
	enum smddp_dtype dt = (enum smddp_dtype)k->dtype;
	enum smddp_op op = (enum smddp_op)k->op;

	chunk_of(p, i, &o, &L);
	size_t Lb = L * p->es;

	switch (k->coll) {
	case SD_COLL_ALLREDUCE: return sd_coll_allreduce(c, S, S, L, dt, op);
	case SD_COLL_REDUCE: return sd_coll_reduce(c, S, S, L, dt, op, k->root);
	case SD_COLL_BROADCAST: return sd_coll_broadcast(c, S, L, dt, k->root);
	case SD_COLL_ALLGATHER: return sd_coll_allgather(c, S + (size_t)p->r * Lb, S, L, dt);
	case SD_COLL_REDUCE_SCATTER:
		return sd_coll_reduce_scatter(c, S, S + (size_t)p->r * Lb, L, dt, op);
	case SD_COLL_ALLTOALL: return sd_coll_alltoall(c, S, S + (size_t)p->n * Lb, L, dt);
	default:
		return sd_comm_error(c, SMDDP_EINTERNAL, "no staged algorithm for %s",
				     sd_coll_name(k->coll));
	}
}

/* Queue chunk i's copy down from its slot, then free the slot. */
static cudaError_t copy_down(struct sd_stage *s, const struct plan *p, size_t i)
{
	const struct sd_cuda_call *k = p->k;
	int sl = (int)(i % NSLOT);
	char *S = s->host + (size_t)sl * s->slot;
	size_t o, L;
	cudaError_t e = cudaSuccess;

	chunk_of(p, i, &o, &L);
	size_t Lb = L * p->es, ob = o * p->es;
	char *R = k->recvbuf ? (char *)k->recvbuf + ob : NULL; /* NULL: reduce, not root */

	switch (k->coll) {
	case SD_COLL_ALLREDUCE:
		e = cudaMemcpyAsync(R, S, Lb, cudaMemcpyHostToDevice, s->down);
		break;
	case SD_COLL_REDUCE:
		if (p->r == k->root)
			e = cudaMemcpyAsync(R, S, Lb, cudaMemcpyHostToDevice, s->down);
		break;
	case SD_COLL_BROADCAST:
		if (p->r != k->root)
			e = cudaMemcpyAsync(R, S, Lb, cudaMemcpyHostToDevice, s->down);
		break;
	case SD_COLL_ALLGATHER:
		e = copy2d(R, p->m, S, Lb, Lb, (size_t)p->n, cudaMemcpyHostToDevice, s->down);
		break;
	case SD_COLL_REDUCE_SCATTER:
		e = cudaMemcpyAsync(R, S + (size_t)p->r * Lb, Lb, cudaMemcpyHostToDevice, s->down);
		break;
	default: /* alltoall */
		e = copy2d(R, p->m, S + (size_t)p->n * Lb, Lb, Lb, (size_t)p->n,
			   cudaMemcpyHostToDevice, s->down);
		break;
	}
	if (e == cudaSuccess)
		e = cudaEventRecord(s->freed[sl], s->down);
	return e;
}

static int run(struct smddp_comm *c, struct sd_stage *s, const struct plan *p, cudaStream_t user)
{
	size_t issued = 0;
	cudaError_t e;
	int rc = SMDDP_OK;

	if ((e = cudaEventRecord(s->in, user)) != cudaSuccess)
		return cuda_fail(c, e, "cannot record an event on the stream (is it a stream of "
				       "this GPU?)");
	if ((e = cudaStreamWaitEvent(s->up, s->in, 0)) != cudaSuccess)
		return cuda_fail(c, e, "cannot order the copies after the stream's work");
	for (; issued < p->nch && issued < NSLOT - 1; issued++)
		if ((e = copy_up(s, p, issued)) != cudaSuccess)
			return cuda_fail(c, e, "cannot queue a copy to host memory");
	for (size_t i = 0; i < p->nch; i++) {
		SD_CHECK(wait_event(c, s->got[i % NSLOT],
				    i ? "a copy from the GPU to host memory did not finish"
				      : "the stream did not reach this call (is the work queued "
					"before it stuck?) or its copy to host memory did not "
					"finish"));
		/* Chunk i+2 into the slot chunk i-1 leaves (after its copy
		 * down, queued last round): two chunks ahead of the host. */
		if (issued < p->nch) {
			if ((e = copy_up(s, p, issued)) != cudaSuccess)
				return cuda_fail(c, e, "cannot queue a copy to host memory");
			issued++;
		}
		if (i)
			c->wire++; /* each chunk is a call of its own on the wire */
		rc = host_chunk(c, s, p, i);
		if (rc)
			return rc;
		if ((e = copy_down(s, p, i)) != cudaSuccess)
			return cuda_fail(c, e, "cannot queue a copy to the GPU");
	}
	return SMDDP_OK;
}

int sd_cuda_staged(struct smddp_comm *c, const struct sd_cuda_call *k)
{
	struct buf_pub b[2];
	struct sd_stage *s = NULL;
	struct plan p;
	int dev = c->cuda_stage ? ((struct sd_stage *)c->cuda_stage)->dev : -1, old = -1, rc;
	cudaStream_t user = (cudaStream_t)k->stream;
	cudaError_t e;

	rc = sd_cuda_check_call(c, k, &dev, b);
	if (rc) {
		/* The peers are already in the call (their buffers were fine)
		 * and would wait for this rank until SMDDP_TIMEOUT: between
		 * hosts a bad buffer breaks the communicator, and they are told
		 * now, with the reason. */
		c->failed = rc;
		c->tp->abort(c);
		return rc;
	}
	memset(&p, 0, sizeof(p));
	p.k = k;
	p.n = c->size;
	p.r = c->rank;
	p.es = smddp_dtype_size((enum smddp_dtype)k->dtype);
	p.m = k->count * p.es;
	p.words = k->coll == SD_COLL_ALLTOALL ? 2 * p.n
		  : k->coll == SD_COLL_ALLGATHER || k->coll == SD_COLL_REDUCE_SCATTER ? p.n
										       : 1;
	/* A quarter of the call per chunk (so that copies and network
	 * overlap), within [CHUNK_MIN, CHUNK_MAX]: the same on every rank. */
	size_t unit = (size_t)p.words * p.es, want = p.m * (size_t)p.words / 4;

	want = want < CHUNK_MIN ? CHUNK_MIN : want > CHUNK_MAX ? CHUNK_MAX : want;
	p.len = want / unit ? want / unit : 1;
	if (p.len > k->count)
		p.len = k->count;
	p.nch = (k->count + p.len - 1) / p.len;

	cudaGetDevice(&old);
	if ((e = cudaSetDevice(dev)) != cudaSuccess)
		return cuda_fail(c, e, "cannot use the buffers' GPU");
	rc = stage_get(c, dev, (p.len * unit + 63) / 64 * 64, &s);
	if (!rc) {
		SD_TRACE(SD_SUB_COLL, "staged between hosts: %zu chunks of %zu elements", p.nch,
			 p.len);
		rc = run(c, s, &p, user);
		/* Whatever happened: the user's stream goes on after our last
		 * copies (up and down), never beside them. */
		e = cudaEventRecord(s->upd, s->up);
		if (e == cudaSuccess)
			e = cudaStreamWaitEvent(s->down, s->upd, 0);
		if (e == cudaSuccess)
			e = cudaEventRecord(s->done, s->down);
		if (e == cudaSuccess)
			e = cudaStreamWaitEvent(user, s->done, 0);
		if (e != cudaSuccess && !rc)
			rc = cuda_fail(c, e, "cannot order the stream after the call");
		if (!rc)
			rc = wait_event(c, s->done, "the copies of the result to the GPU did not "
						    "finish");
	}
	if (old >= 0 && old != dev)
		cudaSetDevice(old);
	return rc;
}
