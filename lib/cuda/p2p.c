/* p2p.c - sends, receives, alltoallv, gather and scatter of CUDA device memory: CUDA IPC inside a node, host copies between hosts.
 *
 * Design.  A batch (one send or receive, a group, the messages of
 * alltoallv, gather or scatter) runs as up to three batches of small host
 * messages through lib/coll/p2p.c, each run to completion by every rank
 * concerned, so a batch that sends to and receives from several peers
 * cannot deadlock, and messages keep their order per (peer, key):
 *   1. every send sends its receiver a descriptor (size, the sender's
 *      message number to that peer, and how it can be read: the CUDA IPC
 *      handle of its allocation and the offset, or "staged" when the
 *      receiver is on another host or the memory cannot be shared);
 *      every receive takes one with its key, from its peer or from anyone
 *      (SMDDP_ANY_SOURCE works as on the host: the descriptor names the
 *      sender).  The receiver then copies what it can read through IPC
 *      (the peer's allocation mapped once, cached: lib/cuda/ipc.c) with
 *      cudaMemcpyAsync on its own stream, after the work queued before
 *      the call, and waits for the copies;
 *   2. the receiver answers each IPC descriptor (done, wrong size, or
 *      "send it staged" when it cannot map the buffer: another GPU without
 *      peer access, one this process does not see), so that the sender
 *      returns knowing that nobody reads its buffer any more; staged
 *      messages carry their data here, from host copies taken before 1;
 *   3. only for the messages a receiver asked to be staged: the data.
 * The receivers' answers and data in 2 and 3 are posted in the order of
 * the sender's message numbers, which a receive from anyone may not
 * follow in the order of its operations.  Answers and data have keys of
 * their own (KEY_REPLY, KEY_DATA), which no tag or collective's key has.
 *
 * Before 1 the sender waits until its stream is past the work queued
 * before the call (bounded by SMDDP_TIMEOUT), as the receiver does for its
 * copies: the call returns when done, and the work queued after it sees
 * the result (SMDDP_CUDA_ASYNC does not apply to these calls yet).  A send
 * whose buffer a receive of the same batch overwrites (an exchange in
 * place) is read by its peer from a copy in the communicator's device
 * scratch, taken first.  A rank's messages to itself are paired here and
 * copied on the stream.  A size mismatch fails its operation with the
 * host path's wording, on both sides when the message goes by IPC (the
 * answer says so), on the receiver only when staged (as between hosts on
 * the host path); the other operations complete.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "base/checks.h"
#include "base/comm-types.h"
#include "coll/coll.h"
#include "coll/net.h"
#include "cuda/cuda.h"
#include "cuda/device.h"
#include "cuda/internal.h"
#include "cuda/ipc.h"
#include "cuda/state.h"
#include "transport/transport.h"

/* Keys of answers and data: bit 32 or 33, which no tag (up to bit 30) nor
 * collective's key (SD_P2P_KEY_COLL and a 32-bit wire number) has, so
 * that a receive from anyone in round 1 cannot take them (a peer may be
 * in round 2 while this rank still is in round 1); and SD_P2P_KEY_COLL,
 * so that the transport's messages (a dead peer, a timeout) call them
 * "this call's message" instead of quoting a tag nobody used. */
#define KEY_DATA (SD_P2P_KEY_COLL | 1ull << 32)
#define KEY_REPLY (SD_P2P_KEY_COLL | 1ull << 33)
_Static_assert((1ull << 32) > (uint64_t)SMDDP_TAG_MAX &&
		       ((KEY_DATA | KEY_REPLY) & SD_P2P_KEY_MASK) == (KEY_DATA | KEY_REPLY),
	       "KEY_DATA or KEY_REPLY collides with tags or collectives' keys");

#define DESC_MAGIC 0x50324453u  /* "SD2P" */
#define REPLY_MAGIC 0x52324453u /* "SD2R" */
#define SCRATCH_ALIGN 256

enum { M_IPC = 1, M_STAGED, M_EMPTY };  /* how a descriptor's data is read */
enum { R_DONE = 1, R_MISMATCH, R_DATA, R_FAILED }; /* a receiver's answer */

/* What a send tells its receiver (round 1). */
struct desc {
	uint32_t magic, mode;
	uint64_t bytes;
	uint64_t seq;             /* the sender's message number to this peer in the batch */
	unsigned char uuid[16];   /* the sender's GPU (M_IPC) */
	struct buf_pub b;         /* its allocation (M_IPC) */
};

struct reply {
	uint32_t magic, status;
};

/* One operation of the batch as this file runs it. */
struct dop {
	struct sd_p2p_op *op;
	const char *src;  /* send: what the peer reads (op->buf, or a copy in scratch) */
	void *host;       /* staged: the host copy */
	size_t hbytes;    /* ... its size (a receive of a wrong size takes the sender's) */
	struct desc d;    /* send: ours; receive: the sender's */
	struct reply r;   /* the receiver's answer */
	int r2, r3;       /* rounds 2 and 3: 0 none, 1 answer, 2 data */
	int ok;           /* receive: the data may be copied down */
	int self;         /* to or from this rank */
	int dev;          /* the GPU of the buffer (-1: no bytes) */
};

/* Each reason for staging inside a node is said once per process, at INFO:
 * it holds for the job, and a message per call would drown the log. */
static int said[5];

static void say_once(int i, const char *why)
{
	if (!__atomic_exchange_n(&said[i], 1, __ATOMIC_RELAXED))
		SD_INFO(SD_SUB_COLL, "device sends and receives inside the node go staged through "
				     "host memory where %s",
			why);
}

/* Waits, bounded by SMDDP_TIMEOUT, until the stream is past everything
 * queued on it so far. */
static int wait_stream(struct smddp_comm *c, cudaStream_t st, cudaEvent_t ev, const char *late)
{
	cudaError_t e = cudaEventRecord(ev, st);
	int r;

	if (e != cudaSuccess)
		return SD_CUDA_ERR(c, e, "cannot record an event on the stream");
	r = sd_cuda_wait(sd_cuda_q_event, ev, c->timeout_ns, NULL, &e);
	if (r == SMDDP_OK)
		return SMDDP_OK;
	if (r == SMDDP_ECUDA)
		return SD_CUDA_ERR(c, e, "%s", late);
	return sd_comm_error(c, SMDDP_ETIMEDOUT,
			     "waited %.0f s (%s) for the stream: %s did not finish (work queued "
			     "on the stream before the call may be stuck)",
			     (double)c->timeout_ns / 1e9, c->timeout_from, late);
}

/* The allocation of buf, through the buffer checks of the collectives
 * (device memory, long enough; they load the driver's entry points):
 * a broadcast of bytes uint8 has buf as its one buffer. */
static int buf_info(struct smddp_comm *c, const void *buf, size_t bytes, int *dev,
		    struct buf_pub *b)
{
	struct sd_cuda_call k;
	struct buf_pub bb[2];

	memset(&k, 0, sizeof(k));
	k.coll = SD_COLL_BROADCAST;
	k.recvbuf = (void *)buf;
	k.count = bytes;
	k.dtype = SMDDP_UINT8;
	*dev = -1;
	SD_CHECK(sd_cuda_check_call(c, &k, dev, bb));
	*b = bb[1];
	return SMDDP_OK;
}

/* Memory of cudaMallocAsync pools and cuMemCreate has no legacy IPC handle:
 * asking the driver first spares a failing cudaIpcGetMemHandle (and its
 * warning) on every call. */
typedef CUresult (*pfn_attr)(void *, CUpointer_attribute, CUdeviceptr);
static pfn_attr attr_fn;
static pthread_once_t attr_once = PTHREAD_ONCE_INIT;

static void attr_load(void)
{
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	void *fn = NULL;

	if (cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", &fn, 12000,
					     cudaEnableDefault, &q) == cudaSuccess &&
	    q == cudaDriverEntryPointSuccess)
		attr_fn = (pfn_attr)fn;
}

static int ipc_capable(const void *p)
{
	int yes = 1;

	pthread_once(&attr_once, attr_load);
	if (attr_fn && attr_fn(&yes, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
			       (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)
		yes = 1; /* unknown: let cudaIpcGetMemHandle say */
	return yes;
}

/* The UUIDs of the GPUs this process sees, by ordinal. */
#define MAX_GPUS 64
static unsigned char gpu_uuid[MAX_GPUS][16];
static int ngpus;
static pthread_once_t gpu_once = PTHREAD_ONCE_INIT;

static void gpu_load(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess)
		n = 0;
	for (int d = 0; d < n && d < MAX_GPUS; d++) {
		struct cudaDeviceProp p;

		if (cudaGetDeviceProperties(&p, d) == cudaSuccess)
			memcpy(gpu_uuid[d], &p.uuid, 16);
		ngpus = d + 1;
	}
}

/* Can this rank's GPU read memory of the GPU uuid through IPC? */
static int reachable(const struct sd_cuda *cu, const unsigned char *uuid)
{
	int ok = 0;

	if (!memcmp(uuid, cu->uuid, 16))
		return 1;
	pthread_once(&gpu_once, gpu_load);
	for (int d = 0; d < ngpus; d++) {
		if (memcmp(uuid, gpu_uuid[d], 16))
			continue;
		if (cudaDeviceCanAccessPeer(&ok, cu->dev, d) != cudaSuccess)
			ok = 0;
		if (!ok)
			say_once(2, "the GPUs of two ranks have no peer access to each other");
		return ok;
	}
	say_once(3, "a peer's GPU is not visible to this process (CUDA_VISIBLE_DEVICES)");
	return 0;
}

/* Receive o from rank q: the sender's buffer mapped here into *p, or 0
 * (the receiver asks for the data staged). */
/* A send that goes staged: its data into host memory, on the stream. */
static int stage_send(struct smddp_comm *c, struct dop *o, cudaStream_t st)
{
	struct sd_p2p_op *op = o->op;
	cudaError_t e;

	o->hbytes = op->bytes;
	if (!(o->host = malloc(op->bytes)))
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory for %zu bytes", op->bytes);
	e = cudaMemcpyAsync(o->host, o->src, op->bytes, cudaMemcpyDeviceToHost, st);
	if (e != cudaSuccess)
		return SD_CUDA_ERR(c, e, "copying a send buffer to the host");
	return SMDDP_OK;
}

static int can_map(struct sd_cuda *cu, struct dop *o, int q, char **p)
{
	if (!cu || o->dev != cu->dev) {
		say_once(0, "a buffer is on another GPU than the communicator's first");
		return 0;
	}
	if (!reachable(cu, o->d.uuid))
		return 0;
	if (sd_cuda_peer_ptr(cu, q, &o->d.b, p)) {
		/* Said at WARN by sd_cuda_peer_ptr (cu's own copy of the
		 * communicator), with the CUDA error. */
		cudaGetLastError();
		say_once(4, "cudaIpcOpenMemHandle fails (see the warning before)");
		return 0;
	}
	return 1;
}

static int same_host(struct smddp_comm *c, int q)
{
	if (c->net) {
		char(*h)[SD_HOSTID_MAX] = sd_net_hosts(c);

		return !strcmp(h[q], h[c->rank]);
	}
	return 1;
}

static int overlap(const void *a, size_t na, const void *b, size_t nb)
{
	const char *x = a, *y = b;

	return na && nb && x < y + nb && y < x + na;
}

/* Receives in the order of (sender, the sender's message number): the
 * order in which each sender posts its side of rounds 2 and 3. */
static int by_sender(const void *a, const void *b)
{
	const struct dop *x = *(struct dop *const *)a, *y = *(struct dop *const *)b;

	if (x->op->source != y->op->source)
		return x->op->source < y->op->source ? -1 : 1;
	return x->d.seq < y->d.seq ? -1 : x->d.seq > y->d.seq;
}

static void wop(struct sd_p2p_op *w, int is_send, int peer, uint64_t key, void *buf,
		size_t bytes)
{
	memset(w, 0, sizeof(*w));
	w->is_send = is_send;
	w->peer = peer;
	w->key = key;
	w->buf = buf;
	w->bytes = bytes;
}

/* Round 2 or 3 (which: the field r2 or r3): the sends in the order of the
 * batch, the receives in the order of their senders' numbers. */
static int run_round(struct smddp_comm *c, struct dop *x, int n, struct dop **rx, int which,
		 struct sd_p2p_op *w)
{
	int k = 0, m = 0;

	for (int i = 0; i < n; i++) {
		struct dop *o = &x[i];
		int r = which == 2 ? o->r2 : o->r3;

		if (!r || o->self)
			continue;
		if (!o->op->is_send) {
			rx[m++] = o;
			continue;
		}
		if (r == 1)
			wop(&w[k++], 0, o->op->peer, o->op->key | KEY_REPLY, &o->r, sizeof(o->r));
		else
			wop(&w[k++], 1, o->op->peer, o->op->key | KEY_DATA, o->host, o->hbytes);
	}
	qsort(rx, (size_t)m, sizeof(*rx), by_sender);
	for (int j = 0; j < m; j++) {
		struct dop *o = rx[j];
		int r = which == 2 ? o->r2 : o->r3;

		if (r == 1)
			wop(&w[k++], 1, o->op->source, o->op->key | KEY_REPLY, &o->r, sizeof(o->r));
		else
			wop(&w[k++], 0, o->op->source, o->op->key | KEY_DATA, o->host, o->hbytes);
	}
	return k ? sd_coll_p2p(c, w, k) : SMDDP_OK;
}

/* Pairs this rank's receives from itself with its sends to itself, in
 * order of key, as lib/coll/p2p.c does for host memory; *pair[i]: the send
 * of receive i. */
static int pair_self(struct smddp_comm *c, struct dop *x, int n, int *pair)
{
	for (int i = 0; i < n; i++) {
		struct sd_p2p_op *r = x[i].op;
		int s = -1;

		pair[i] = -1;
		if (!x[i].self || r->is_send)
			continue;
		for (int j = 0; j < n && s < 0; j++)
			if (x[j].self && x[j].op->is_send && !x[j].op->done &&
			    x[j].op->key == r->key)
				s = j;
		if (s < 0)
			return sd_comm_error(c, SMDDP_EINVAL,
					     "a receive from this rank itself needs its send in the "
					     "same group (smddp_group_start/end)");
		if (x[s].op->bytes != r->bytes)
			return sd_comm_error(c, SMDDP_EMISMATCH,
					     "this rank sent itself %zu bytes but receives %zu: the "
					     "count or dtype differs",
					     x[s].op->bytes, r->bytes);
		x[s].op->done = 1; /* taken; done is set again at the end */
		pair[i] = s;
	}
	for (int i = 0; i < n; i++)
		if (x[i].self && x[i].op->is_send && !x[i].op->done)
			return sd_comm_error(c, SMDDP_EINVAL,
					     "a send to this rank itself needs its receive in the "
					     "same group (smddp_group_start/end)");
	return SMDDP_OK;
}

static size_t aligned(size_t n)
{
	return (n + SCRATCH_ALIGN - 1) & ~(size_t)(SCRATCH_ALIGN - 1);
}

/* Each send: how its receiver reads it (o->d), and the bytes of scratch
 * that the sends in place need. */
static size_t plan_sends(struct smddp_comm *c, struct sd_cuda *cu, struct dop *x, int n,
			 uint64_t *nsent)
{
	size_t need = 0;

	for (int i = 0; i < n; i++) {
		struct dop *o = &x[i];
		struct sd_p2p_op *op = o->op;

		if (!op->is_send || o->self)
			continue;
		o->src = op->buf;
		o->d.magic = DESC_MAGIC;
		o->d.bytes = op->bytes;
		o->d.seq = nsent[op->peer]++;
		if (!op->bytes) {
			o->d.mode = M_EMPTY;
			continue;
		}
		o->d.mode = M_STAGED;
		if (!same_host(c, op->peer))
			continue;
		if (!cu || o->dev != cu->dev) {
			say_once(0, "a buffer is on another GPU than the communicator's first");
			continue;
		}
		if (!ipc_capable(op->buf)) {
			say_once(1, "a buffer cannot be shared by CUDA IPC (memory of "
				    "cudaMallocAsync pools or cuMemCreate)");
			continue;
		}
		o->d.mode = M_IPC;
		memcpy(o->d.uuid, cu->uuid, 16);
		for (int j = 0; j < n; j++)
			if (!x[j].op->is_send &&
			    overlap(op->buf, op->bytes, x[j].op->buf, x[j].op->bytes)) {
				need += aligned(op->bytes);
				o->src = NULL; /* from a copy in scratch */
				break;
			}
	}
	return need;
}

/* Before round 1, on the stream: the copies of sends in place, the host
 * copies of staged sends, then the messages to this rank itself (which
 * may overwrite what the first two read). */
static int copy_sends(struct smddp_comm *c, struct sd_cuda *cu, struct dop *x, int n,
		      const int *pair, cudaStream_t st)
{
	size_t used = 0;
	cudaError_t e;
	int d;

	for (int i = 0; i < n; i++) {
		struct dop *o = &x[i];
		struct sd_p2p_op *op = o->op;

		if (!op->is_send || o->self || !op->bytes)
			continue;
		if (o->d.mode == M_IPC && !o->src) {
			o->src = (char *)cu->scratch + used;
			used += aligned(op->bytes);
			e = cudaMemcpyAsync((void *)o->src, op->buf, op->bytes,
					    cudaMemcpyDeviceToDevice, st);
			if (e != cudaSuccess)
				return SD_CUDA_ERR(c, e, "copying a send buffer that the batch overwrites");
		}
		if (o->d.mode == M_IPC) {
			SD_CHECK(buf_info(c, o->src, op->bytes, &d, &o->d.b));
			if (sd_cuda_own_handle(cu, &o->d.b)) {
				cudaGetLastError();
				say_once(1, "a buffer cannot be shared by CUDA IPC (see the "
					    "warning before)");
				o->d.mode = M_STAGED;
			}
		}
		if (o->d.mode != M_STAGED)
			continue;
		SD_CHECK(stage_send(c, o, st));
	}
	for (int i = 0; i < n; i++) {
		struct sd_p2p_op *r = x[i].op, *s;

		if (pair[i] < 0)
			continue;
		s = x[pair[i]].op;
		r->source = c->rank;
		if (!r->bytes || r->buf == s->buf)
			continue;
		e = cudaMemcpyAsync(r->buf, s->buf, r->bytes, cudaMemcpyDefault, st);
		if (e != cudaSuccess)
			return SD_CUDA_ERR(c, e, "copying a message to this rank itself");
	}
	return SMDDP_OK;
}

/* After round 1, receive o from rank q: check the size, then copy through
 * IPC on the stream (*copied), or plan rounds 2 and 3.  A size mismatch
 * is this operation's failure only (returned; the caller goes on). */
static int take(struct smddp_comm *c, struct sd_cuda *cu, struct dop *o, int q,
		cudaStream_t st, int *copied)
{
	struct sd_p2p_op *op = o->op;
	char wbuf[64], *p = NULL;
	cudaError_t e;

	op->source = q;
	if (o->d.magic != DESC_MAGIC)
		return sd_comm_error(c, SMDDP_EMISMATCH,
				     "rank %d sent %s from host memory, but this rank receives it "
				     "on device memory: both sides must use the same kind",
				     SD_RANK_NAME(c, q), sd_p2p_what(op, wbuf, sizeof(wbuf)));
	o->r.magic = REPLY_MAGIC;
	o->r2 = 1;
	if (o->d.mode == M_STAGED) {
		/* Taken whatever its size, so that its sender completes as
		 * between hosts on the host path; a size that differs fails
		 * this receive only. */
		o->r2 = 2;
		o->hbytes = o->d.bytes;
		o->ok = o->d.bytes == op->bytes;
		if (o->hbytes && !(o->host = malloc(o->hbytes)))
			return sd_comm_error(c, SMDDP_ENOMEM, "out of memory for %zu bytes",
					     o->hbytes);
		if (!o->ok) {
			o->r.status = R_MISMATCH;
			return sd_p2p_size_differs(c, q, (size_t)o->d.bytes, op);
		}
		return SMDDP_OK;
	} else if (o->d.bytes != op->bytes) {
		o->r.status = R_MISMATCH;
		return sd_p2p_size_differs(c, q, (size_t)o->d.bytes, op);
	} else if (!op->bytes) {
		o->r.status = R_DONE;
	} else if (!can_map(cu, o, q, &p)) {
		o->r.status = R_DATA;
		o->r3 = 2;
		o->ok = 1;
	} else {
		/* cudaMemcpyDefault: the mapping may be of another GPU (peer
		 * access, enabled when it was opened). */
		e = cudaMemcpyAsync(op->buf, p, op->bytes, cudaMemcpyDefault, st);
		o->r.status = e == cudaSuccess ? R_DONE : R_FAILED;
		if (e != cudaSuccess)
			return SD_CUDA_ERR(c, e, "copying a message from a peer's GPU memory");
		*copied = 1;
	}
	o->hbytes = op->bytes;
	if (o->r3 == 2 && !(o->host = malloc(op->bytes)))
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory for %zu bytes", op->bytes);
	return SMDDP_OK;
}

/* After round 2, send o: its receiver's answer.  *again: it asked for the
 * data (round 3), copied to the host here. */
static int answered(struct smddp_comm *c, struct dop *o, cudaStream_t st, int *again)
{
	struct sd_p2p_op *op = o->op;
	char wbuf[64];

	if (o->r.magic != REPLY_MAGIC)
		return sd_comm_error(c, SMDDP_EINTERNAL, "rank %d answered %s with garbage",
				     SD_RANK_NAME(c, op->peer), sd_p2p_what(op, wbuf, sizeof(wbuf)));
	switch (o->r.status) {
	case R_DONE:
		return SMDDP_OK;
	case R_MISMATCH:
		return sd_p2p_refused(c, op);
	case R_DATA:
		/* Without its data the receiver times out: better than
		 * sending it garbage. */
		SD_CHECK(stage_send(c, o, st));
		o->r3 = 2;
		*again = 1;
		return SMDDP_OK;
	default:
		return sd_comm_error(c, SMDDP_EPEER,
				     "rank %d could not take %s (%zu bytes) from this rank: a CUDA "
				     "error there (its own error says which)",
				     SD_RANK_NAME(c, op->peer), sd_p2p_what(op, wbuf, sizeof(wbuf)),
				     op->bytes);
	}
}

/* A round's result: a size mismatch is kept in *first and the batch goes
 * on (the transport completed the rest); anything else ends it. */
static int keep(int rc, int *first)
{
	if (rc == SMDDP_EMISMATCH) {
		*first = *first ? *first : rc;
		return SMDDP_OK;
	}
	return rc;
}

/* The ops' descriptors x and their buffers' GPUs (*gpu: the one the call
 * runs on); the IPC state *cu (made on the first GPU) only when a message
 * may stay inside the node. */
static int find_gpus(struct smddp_comm *c, struct sd_p2p_op *ops, int n, struct dop *x,
		     struct sd_cuda **cu, int *gpu)
{
	for (int i = 0; i < n; i++) {
		x[i].op = &ops[i];
		x[i].self = ops[i].peer == c->rank;
		x[i].dev = -1;
		ops[i].done = 0;
		ops[i].source = ops[i].peer;
	}
	for (int i = 0; i < n; i++) {
		struct buf_pub b;

		if (!ops[i].bytes)
			continue;
		SD_CHECK(buf_info(c, ops[i].buf, ops[i].bytes, &x[i].dev, &b));
		if (*gpu < 0)
			*gpu = x[i].dev;
		if (!*cu && !x[i].self && (ops[i].peer < 0 || same_host(c, ops[i].peer)))
			SD_CHECK(sd_cuda_state(c, x[i].dev, cu));
	}
	if (*cu)
		*gpu = (*cu)->dev;
	return SMDDP_OK;
}

/* The scratch of sends in place, at least need bytes.  The queue is
 * drained: the proxy's in-place alltoall does not use it now. */
static int grow_scratch(struct smddp_comm *c, struct sd_cuda *cu, size_t need)
{
	size_t len = sd_cuda_scratch_size(cu->scratch_len, need);
	cudaError_t e;

	if (cu->scratch)
		cudaFree(cu->scratch);
	cu->scratch = NULL;
	cu->scratch_len = 0;
	if ((e = cudaMalloc(&cu->scratch, len)) != cudaSuccess) {
		cu->scratch = NULL;
		(void)cudaGetLastError(); /* ours, not left for the caller's next check */
		return SD_CUDA_ERR(c, e, "cannot allocate device memory for a send in place");
	}
	cu->scratch_len = len;
	return SMDDP_OK;
}

/* Round 1: every rank sends its descriptors; a sender then waits for its
 * answer in round 2 (or sends staged data there), a receiver takes what
 * it can at once (take(): *copied when it queued a copy).  A mismatch
 * goes to *first, a CUDA failure of this rank to *local (its senders are
 * answered R_FAILED); anything else fails the call. */
static int round1(struct smddp_comm *c, struct sd_cuda *cu, struct dop *x, int n,
		  struct sd_p2p_op *w, cudaStream_t st, int *copied, int *first, int *local)
{
	int k = 0, rc;

	for (int i = 0; i < n; i++)
		if (!x[i].self)
			wop(&w[k++], x[i].op->is_send, x[i].op->peer, x[i].op->key, &x[i].d,
			    sizeof(x[i].d));
	rc = k ? sd_coll_p2p(c, w, k) : SMDDP_OK;
	if (rc == SMDDP_EMISMATCH) {
		char said_[sizeof(c->last_error)];

		memcpy(said_, c->last_error, sizeof(said_));
		return sd_comm_error(c, SMDDP_EMISMATCH,
				     "a message did not fit a receive of device memory: both sides of "
				     "a message must use device memory, or both host memory (%s)",
				     said_);
	}
	if (rc)
		return rc;
	k = 0;
	for (int i = 0; i < n; i++) {
		struct dop *o = &x[i];
		int r;

		if (o->self)
			continue;
		k++;
		if (o->op->is_send) {
			o->r2 = o->d.mode == M_STAGED ? 2 : 1;
			continue;
		}
		r = take(c, cu, o, w[k - 1].source, st, copied);
		if (r == SMDDP_EMISMATCH && o->r.status == R_MISMATCH)
			*first = *first ? *first : r;
		else if (r == SMDDP_ECUDA)
			*local = *local ? *local : r; /* answered R_FAILED below */
		else if (r)
			SD_CHECK(r);
	}
	return SMDDP_OK;
}

/* This rank failed in round 1.  The senders of IPC messages wait for an
 * answer: they get one that says this rank failed, and nothing is staged
 * in round 3.  Staged messages are still taken in round 2, as their
 * senders send them, and dropped. */
static void answer_failed(struct dop *x, int n)
{
	for (int i = 0; i < n; i++)
		if (!x[i].op->is_send && !x[i].self) {
			if (x[i].r2 == 1)
				x[i].r.status = R_FAILED;
			x[i].r3 = x[i].ok = 0;
		}
}

/* After round 3: the messages received into host memory go down to their
 * device buffers (*down once a copy is queued). */
static int copy_down(struct smddp_comm *c, struct dop *x, int n, cudaStream_t st, int *down)
{
	for (int i = 0; i < n; i++) {
		struct dop *o = &x[i];
		cudaError_t e;

		if (o->op->is_send || o->self || !o->ok || !o->host)
			continue;
		e = cudaMemcpyAsync(o->op->buf, o->host, o->op->bytes, cudaMemcpyHostToDevice, st);
		if (e != cudaSuccess)
			return SD_CUDA_ERR(c, e, "copying a received message to the device");
		*down = 1;
	}
	return SMDDP_OK;
}

int sd_cuda_p2p(struct smddp_comm *c, struct sd_p2p_op *ops, int n, void *stream)
{
	cudaStream_t st = stream;
	struct dop *x = calloc((size_t)n + 1, sizeof(*x));
	struct dop **rx = calloc((size_t)n + 1, sizeof(*rx));
	struct sd_p2p_op *w = calloc((size_t)n + 1, sizeof(*w));
	int *pair = calloc((size_t)n + 1, sizeof(*pair));
	uint64_t *nsent = calloc((size_t)c->size, sizeof(*nsent));
	struct sd_cuda *cu = NULL;
	cudaEvent_t ev = NULL;
	cudaError_t e;
	size_t need;
	int rc = SMDDP_OK, first = SMDDP_OK, local = SMDDP_OK, old = -1, gpu = -1;
	int copied = 0, again = 0, down = 0, pending = 0;

	if (!x || !rx || !w || !pair || !nsent) {
		rc = sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
		goto out;
	}
	SD_CHECK_GOTO(find_gpus(c, ops, n, x, &cu, &gpu), rc, out);
	cudaGetDevice(&old);
	if (gpu >= 0 && (e = cudaSetDevice(gpu)) != cudaSuccess) {
		rc = SD_CUDA_ERR(c, e, "cudaSetDevice");
		goto out;
	}
	if ((e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming)) != cudaSuccess) {
		ev = NULL;
		rc = SD_CUDA_ERR(c, e, "cannot create an event");
		goto out;
	}
	SD_CHECK_GOTO(pair_self(c, x, n, pair), rc, out);
	need = plan_sends(c, cu, x, n, nsent);
	if (need && cu->scratch_len < need)
		SD_CHECK_GOTO(grow_scratch(c, cu, need), rc, out);
	/* pending: copies into host buffers may be queued still; after a
	 * failed wait those buffers are leaked, not freed under the copy. */
	pending = 1;
	SD_CHECK_GOTO(copy_sends(c, cu, x, n, pair, st), rc, out);
	/* The blocking contract: what is sent is what the stream holds after
	 * the work queued before the call. */
	SD_CHECK_GOTO(wait_stream(c, st, ev, "the work queued before the call"), rc, out);
	pending = 0;

	/* Round 1: the descriptors, and what receivers take of them at once. */
	SD_CHECK_GOTO(round1(c, cu, x, n, w, st, &copied, &first, &local), rc, out);
	if (!local && copied)
		local = wait_stream(c, st, ev, "copying the messages from the peers' GPU memory");
	if (local)
		answer_failed(x, n);

	/* Round 2: the answers, and the data of staged messages. */
	SD_CHECK_GOTO(keep(run_round(c, x, n, rx, 2, w), &first), rc, out);
	for (int i = 0; i < n; i++) {
		int r;

		if (!x[i].op->is_send || x[i].self || x[i].r2 != 1)
			continue;
		r = keep(answered(c, &x[i], st, &again), &first);
		local = local ? local : r;
	}
	pending = again;
	if (again && (rc = wait_stream(c, st, ev, "copying a send buffer to the host"))) {
		/* Nothing half copied goes out: those receivers time out. */
		local = local ? local : rc;
		rc = SMDDP_OK;
		for (int i = 0; i < n; i++)
			if (x[i].op->is_send)
				x[i].r3 = 0;
	} else {
		pending = 0;
	}
	/* Round 3: the data that receivers could not map. */
	SD_CHECK_GOTO(keep(run_round(c, x, n, rx, 3, w), &first), rc, out);
	if (local) {
		rc = local;
		goto out;
	}
	rc = copy_down(c, x, n, st, &down);
	if (down)
		pending = 1; /* also after a failure: the copies queued may still run */
	if (rc)
		goto out;
	/* The host copies are freed below: the stream must be past them. */
	if (down)
		SD_CHECK_GOTO(wait_stream(c, st, ev, "copying the received messages"), rc, out);
	pending = 0;
	for (int i = 0; i < n; i++)
		ops[i].done = 1;
out:
	for (int i = 0; x && i < n && !pending; i++)
		free(x[i].host);
	if (ev)
		cudaEventDestroy(ev);
	if (old >= 0)
		cudaSetDevice(old);
	free(x);
	free(rx);
	free(w);
	free(pair);
	free(nsent);
	return rc ? rc : first;
}
