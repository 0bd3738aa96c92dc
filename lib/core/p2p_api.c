/* p2p_api.c - the public entry points of sends, receives, groups, alltoallv, gather and scatter.
 *
 * Each call checks its arguments, sorts its buffers (host memory, or CUDA
 * device memory with the stream: lib/cuda/p2p.c), and hands a batch of
 * sends and receives to lib/coll/p2p.c.  A send or receive between
 * smddp_group_start() and smddp_group_end() is only recorded, per thread,
 * and the group's end runs the batch of each communicator.  alltoallv,
 * gather and scatter are collective calls: numbered like the others,
 * compared across ranks under SMDDP_CHECK_COLL; sends and receives are
 * not (they have their own count, p2p_calls, for messages).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "coll/coll.h"
#include "coll/net.h"
#include "core/api.h"
#include "core/said.h"
#include "cuda/cuda.h"

/* ---- one batch ------------------------------------------------------------ */

/* Where a call's batch lives: on the caller's stack when it is small and
 * the ranks share one host (a malloc per call showed in small sendrecv's
 * time), else on the heap.  Between hosts the fabric writes into the ops
 * (a piece's "taken" word lands in op->off) and, when a failure left
 * transfers it could not cancel, may do so after the call: those ops are
 * then never freed, as the fabric's own buffers are not. */
static int ops_on_stack(const struct smddp_comm *c, int n, int room)
{
	return n <= room && !c->net;
}

static void ops_free(struct smddp_comm *c, struct sd_p2p_op *ops, const struct sd_p2p_op *few)
{
	if (ops != few && !sd_net_poisoned(c))
		free(ops);
}

/* *dev: whether the buffers of ops are device memory; or an error. */
static int memory_of(struct smddp_comm *c, const struct sd_p2p_op *ops, int n, void *stream,
		     const char *call, int *dev)
{
	int ndev = 0, nhost = 0, driver = sd_api_cuda_loaded();

	*dev = 0;
	for (int i = 0; i < n; i++) {
		if (!ops[i].bytes)
			continue;
		if (driver && sd_api_device_ptr(ops[i].buf))
			ndev++;
		else
			nhost++;
	}
#ifdef HAVE_CUDA
	if (ndev && nhost)
		return sd_comm_error(c, SMDDP_EINVAL,
				     "%s: some buffers are CUDA device memory and some host memory: "
				     "pass device buffers (with a stream) or host buffers (with "
				     "stream NULL), not both",
				     call);
	if (nhost && stream)
		return sd_comm_error(c, SMDDP_EUNSUPPORTED,
				     "%s: a CUDA stream was given with host memory: host calls "
				     "block until done and take stream NULL",
				     call);
	*dev = ndev || stream;
	return SMDDP_OK;
#else
	(void)nhost;
	if (stream)
		return sd_comm_error(c, SMDDP_EUNSUPPORTED,
				     "%s: a CUDA stream was given, but this build of libsmddp "
				     "moves host memory only (configure --with-cuda): pass NULL",
				     call);
	if (ndev)
		return sd_comm_error(c, SMDDP_EUNSUPPORTED,
				     "%s: CUDA device memory, which this build of libsmddp does not "
				     "move (configure --with-cuda): pass host memory",
				     call);
	return SMDDP_OK;
#endif
}

/* Runs a batch on c, the call already entered (c->cur set). */
static int run(struct smddp_comm *c, struct sd_p2p_op *ops, int n, void *stream, const char *call)
{
	int dev;

	SD_CHECK(memory_of(c, ops, n, stream, call, &dev));
	if (!dev)
		return sd_coll_p2p(c, ops, n);
#ifdef HAVE_CUDA
	c->cur.mem = 1;
	return sd_cuda_p2p(c, ops, n, stream);
#else
	return sd_comm_error(c, SMDDP_EINTERNAL, "device memory in a build without CUDA");
#endif
}

/* Entry of a send, receive or group: not collective, so only counted for
 * messages; the device calls queued before run first. */
static int enter_p2p(struct smddp_comm *c, int coll, size_t count, int dtype, int peer, int tag)
{
	int rc = sd_cuda_collect(c, 1);

	if (rc)
		return rc;
	if (c->failed)
		return c->failed;
	memset(&c->cur, 0, sizeof(c->cur));
	if ((rc = sd_comm_cancelled(c)))
		return rc;
	c->cur.seq = ++c->p2p_calls;
	c->cur.coll = coll;
	c->cur.count = count;
	c->cur.dtype = dtype;
	c->cur.root = peer;
	c->cur.op = tag;
	c->last_error[0] = 0;
	return SMDDP_OK;
}

/* ---- groups ---------------------------------------------------------------- */

struct grp_op {
	struct smddp_comm *comm;
	struct sd_p2p_op op;
	int *source;
	void *stream;
	int ran; /* its communicator's batch was taken up */
};

/* One thread-local struct, its address taken once per entry point and
 * handed down.  In a shared library a thread-local's address is a call of
 * __tls_get_addr, and gcc calls it again at each use rather than keep the
 * address in a register; the result of an ordinary call it keeps. */
struct grp {
	int depth;
	struct grp_op *ops;
	int n, cap;
};
static __thread struct grp grp_tls;

static __attribute__((noinline)) struct grp *grp_get(void)
{
	return &grp_tls;
}

SD_EXPORT int smddp_group_start(void)
{
	struct grp *g = grp_get();

	if (g->depth >= 1 << 20)
		return sd_err_set(sd_init_err(), SMDDP_EINVAL,
				  "smddp_group_start: groups nested too deep (a missing "
				  "smddp_group_end?)");
	g->depth++;
	return SMDDP_OK;
}

static int grp_add(struct grp *gr, struct smddp_comm *c, const struct sd_p2p_op *op, int *source,
		   void *stream)
{
	if (gr->n == gr->cap) {
		int cap = gr->cap ? 2 * gr->cap : 16;
		struct grp_op *g = realloc(gr->ops, (size_t)cap * sizeof(*g));

		if (!g)
			return sd_comm_error(c, SMDDP_ENOMEM, "out of memory for a group of %d calls",
					     gr->n + 1);
		gr->ops = g;
		gr->cap = cap;
	}
	gr->ops[gr->n].comm = c;
	gr->ops[gr->n].op = *op;
	gr->ops[gr->n].source = source;
	gr->ops[gr->n].stream = stream;
	gr->ops[gr->n].ran = 0;
	gr->n++;
	return SMDDP_OK;
}

/* The recorded calls of one communicator, in the order they were made. */
static int grp_run_comm(struct grp *gr, struct smddp_comm *c, int first)
{
	struct sd_p2p_op few[8], *ops = few;
	void *stream = gr->ops[first].stream;
	int n = 0, rc;

	sd_api_async_forget(c);
	for (int i = first; i < gr->n; i++)
		n += gr->ops[i].comm == c;
	if (!ops_on_stack(c, n, (int)(sizeof(few) / sizeof(few[0]))) &&
	    !(ops = calloc((size_t)n, sizeof(*ops))))
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	n = 0;
	for (int i = first; i < gr->n; i++)
		if (gr->ops[i].comm == c) {
			if (gr->ops[i].stream != stream) {
				ops_free(c, ops, few);
				return sd_comm_error(c, SMDDP_EINVAL,
						     "a group's calls on one communicator must "
						     "use one stream");
			}
			ops[n++] = gr->ops[i].op;
		}
	rc = enter_p2p(c, SD_COLL_GROUP, (size_t)n, 0, 0, 0);
	if (!rc)
		rc = run(c, ops, n, stream, "smddp_group_end");
	n = 0;
	for (int i = first; i < gr->n; i++)
		if (gr->ops[i].comm == c) {
			if (gr->ops[i].source && !ops[n].is_send && ops[n].done)
				*gr->ops[i].source = ops[n].source;
			n++;
		}
	ops_free(c, ops, few);
	return sd_api_leave(c, rc);
}

SD_EXPORT int smddp_group_end(void)
{
	struct grp *gr = grp_get();
	int rc = SMDDP_OK;

	if (gr->depth == 0)
		return sd_err_set(sd_init_err(), SMDDP_EINVAL,
				  "smddp_group_end without smddp_group_start");
	if (--gr->depth > 0)
		return SMDDP_OK;
	/* One batch per communicator, in the order of their uids, which every
	 * rank agrees on (ties: first appearance): then, however each rank
	 * ordered its calls, the batch of the lowest uid still pending can
	 * always finish, as with locks taken in one order.  A broken
	 * communicator stops the rest (their peers would wait). */
	for (;;) {
		struct smddp_comm *c;
		int next = -1, r;

		for (int i = 0; i < gr->n; i++)
			if (!gr->ops[i].ran &&
			    (next < 0 || gr->ops[i].comm->uid < gr->ops[next].comm->uid))
				next = i;
		if (next < 0 || (rc && rc != SMDDP_EMISMATCH))
			break;
		c = gr->ops[next].comm;
		for (int i = next; i < gr->n; i++)
			gr->ops[i].ran |= gr->ops[i].comm == c;
		r = grp_run_comm(gr, c, next);
		rc = rc ? rc : r;
		if (r && r != SMDDP_EMISMATCH)
			rc = r;
	}
	gr->n = 0;
	if (gr->cap > 1024) {
		free(gr->ops);
		gr->ops = NULL;
		gr->cap = 0;
	}
	return rc;
}

/* ---- send and receive ------------------------------------------------------ */

static int check_p2p(struct smddp_comm *c, const char *call, const void *buf, size_t count,
		     int dtype, int peer, int tag, int any_ok)
{
	if (c->failed)
		return c->failed;
	if ((unsigned)dtype >= SMDDP_NUM_DTYPES)
		return sd_comm_error(c, SMDDP_EINVAL, "%s: unknown dtype %d", call, dtype);
	if (!(peer >= 0 && peer < c->size) && !(any_ok && peer == SMDDP_ANY_SOURCE))
		return sd_comm_error(c, SMDDP_EINVAL, "%s: peer %d is not a rank of 0..%d%s", call,
				     peer, c->size - 1, any_ok ? " or SMDDP_ANY_SOURCE" : "");
	if (tag < 0)
		return sd_comm_error(c, SMDDP_EINVAL, "%s: tag %d is negative (0 to SMDDP_TAG_MAX)",
				     call, tag);
	if (count > ((size_t)1 << 56))
		return sd_comm_error(c, SMDDP_EINVAL, "%s: count %zu is too large", call, count);
	if (!buf && count)
		return sd_comm_error(c, SMDDP_EINVAL, "%s: buf is NULL with count %zu", call, count);
	return SMDDP_OK;
}

static int p2p_call(int is_send, void *buf, size_t count, enum smddp_dtype dtype, int peer,
		    int tag, int *source, struct smddp_comm *comm, void *stream)
{
	const char *call = is_send ? "smddp_send" : "smddp_recv";
	struct grp *g = grp_get();
	struct sd_p2p_op op;
	int rc;

	if (!comm)
		return sd_err_set(sd_init_err(), SMDDP_EINVAL, "%s: communicator is NULL", call);
	sd_api_async_forget(comm);
	memset(&comm->cur, 0, sizeof(comm->cur));
	rc = check_p2p(comm, call, buf, count, dtype, peer, tag, !is_send);
	if (rc)
		return rc;
	memset(&op, 0, sizeof(op));
	op.is_send = is_send;
	op.peer = peer;
	op.key = (uint64_t)tag;
	op.buf = buf;
	op.bytes = count * smddp_dtype_size(dtype);
	if (g->depth > 0) {
		int dev;

		/* Host or device memory is decided for the whole group at its
		 * end; only a stream can make one call wrong on its own (host
		 * memory with a stream), so the driver is asked here only then:
		 * the probe showed in small sendrecv's time. */
		rc = stream ? memory_of(comm, &op, 1, stream, call, &dev) : SMDDP_OK;
		return rc ? rc : grp_add(g, comm, &op, source, stream);
	}
	rc = enter_p2p(comm, is_send ? SD_COLL_SEND : SD_COLL_RECV, count, dtype, peer, tag);
	if (!rc && peer == comm->rank)
		rc = sd_comm_error(comm, SMDDP_EINVAL,
				   "%s to this rank itself needs the matching %s in the same group "
				   "(smddp_group_start/end)",
				   call, is_send ? "receive" : "send");
	if (!rc) {
		struct sd_p2p_op *one = &op;

		/* Between hosts on the heap, as every batch (ops_on_stack). */
		if (!ops_on_stack(comm, 1, 1) && !(one = malloc(sizeof(*one))))
			rc = sd_comm_error(comm, SMDDP_ENOMEM, "out of memory");
		if (!rc) {
			*one = op;
			rc = run(comm, one, 1, stream, call);
			op.source = one->source;
			ops_free(comm, one, &op);
		}
	}
	if (!rc && source)
		*source = op.source;
	return sd_api_leave(comm, rc);
}

SD_EXPORT int smddp_send(const void *buf, size_t count, enum smddp_dtype dtype, int peer, int tag,
			 struct smddp_comm *comm, void *stream)
{
	return p2p_call(1, (void *)buf, count, dtype, peer, tag, NULL, comm, stream);
}

SD_EXPORT int smddp_recv(void *buf, size_t count, enum smddp_dtype dtype, int peer, int tag,
			 int *source, struct smddp_comm *comm, void *stream)
{
	return p2p_call(0, buf, count, dtype, peer, tag, source, comm, stream);
}

/* ---- alltoallv, gather, scatter -------------------------------------------- */

static uint64_t call_key(struct smddp_comm *c)
{
	return SD_P2P_KEY_COLL | (c->wire & 0xffffffffull);
}

/* Ops of a call kept on the stack: up to 4 ranks for alltoallv (p2p.sh
 * runs 8 ranks, so the heap path is tested too). */
#define FEW 8

static int room_of(const struct smddp_comm *c)
{
	return ops_on_stack(c, FEW, FEW) ? FEW : 0;
}

static int run_ops(struct smddp_comm *c, int rc, struct sd_p2p_op *ops, struct sd_p2p_op *few,
		   int n, void *stream, const char *call)
{
	if (!rc)
		rc = run(c, ops, n, stream, call);
	ops_free(c, ops, few);
	return sd_api_leave(c, rc);
}

SD_EXPORT int smddp_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
			      void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
			      enum smddp_dtype dtype, struct smddp_comm *comm, void *stream)
{
	struct sd_p2p_op few[FEW], *ops = NULL;
	size_t es = smddp_dtype_size(dtype);
	int n = 0, rc;

	/* Counts differ between ranks: the comparison is of dtype only. */
	rc = sd_api_enter(comm, SD_COLL_ALLTOALLV, 0, dtype, 0, 0, NULL);
	if (rc)
		return comm ? sd_api_leave(comm, rc) : rc;
	if (!sendcounts || !sdispls || !recvcounts || !rdispls)
		return sd_api_leave(comm, sd_comm_error(comm, SMDDP_EINVAL,
							"a count or displacement array is NULL"));
	for (int q = 0; q < comm->size; q++) {
		if (sendcounts[q] > ((size_t)1 << 56) || recvcounts[q] > ((size_t)1 << 56) ||
		    sdispls[q] > ((size_t)1 << 56) || rdispls[q] > ((size_t)1 << 56))
			return sd_api_leave(comm, sd_comm_error(comm, SMDDP_EINVAL,
								"the count or displacement of "
								"rank %d is too large",
								q));
		if ((sendcounts[q] && !sendbuf) || (recvcounts[q] && !recvbuf))
			return sd_api_leave(comm, sd_comm_error(comm, SMDDP_EINVAL,
								"%s is NULL with a count for "
								"rank %d",
								sendcounts[q] && !sendbuf
									? "sendbuf"
									: "recvbuf",
								q));
	}
	rc = sd_coll_alltoallv_ops(comm, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls,
				   es, call_key(comm), few, room_of(comm), &ops, &n);
	return run_ops(comm, rc, ops, few, n, stream, "smddp_alltoallv");
}

static int rooted(int gather, const void *sendbuf, void *recvbuf, size_t count,
		  enum smddp_dtype dtype, int root, struct smddp_comm *comm, void *stream)
{
	struct sd_p2p_op few[FEW], *ops = NULL;
	int n = 0, rc;

	rc = sd_api_enter(comm, gather ? SD_COLL_GATHER : SD_COLL_SCATTER, count, dtype, 0, root,
			  NULL);
	if (rc)
		return comm ? sd_api_leave(comm, rc) : rc;
	if (count && !sendbuf && (gather || comm->rank == root))
		return sd_api_leave(comm, sd_comm_error(comm, SMDDP_EINVAL,
							"sendbuf is NULL with count %zu", count));
	if (count && !recvbuf && (!gather || comm->rank == root))
		return sd_api_leave(comm, sd_comm_error(comm, SMDDP_EINVAL,
							"recvbuf is NULL with count %zu", count));
	rc = sd_coll_rooted_ops(comm, gather, sendbuf, recvbuf, count * smddp_dtype_size(dtype),
				root, call_key(comm), few, room_of(comm), &ops, &n);
	return run_ops(comm, rc, ops, few, n, stream, gather ? "smddp_gather" : "smddp_scatter");
}

SD_EXPORT int smddp_gather(const void *sendbuf, void *recvbuf, size_t count,
			   enum smddp_dtype dtype, int root, struct smddp_comm *comm, void *stream)
{
	return rooted(1, sendbuf, recvbuf, count, dtype, root, comm, stream);
}

SD_EXPORT int smddp_scatter(const void *sendbuf, void *recvbuf, size_t count,
			    enum smddp_dtype dtype, int root, struct smddp_comm *comm, void *stream)
{
	return rooted(0, sendbuf, recvbuf, count, dtype, root, comm, stream);
}
