/* api.c - the public collective entry points: argument checks, SMDDP_CHECK_COLL, dispatch. */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/comm.h"
#include "transport/transport.h"

/* ---- device pointers ----------------------------------------------------
 * This build moves host memory only.  When the process has the CUDA driver
 * loaded, a pointer it knows as device memory is refused instead of being
 * read by the CPU (a crash).  The driver is never loaded by us. */
typedef int (*cu_ptr_attr_fn)(void *data, int attribute, unsigned long long ptr);
static cu_ptr_attr_fn cu_ptr_attr;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;

static void cuda_probe(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);

	if (h)
		cu_ptr_attr = (cu_ptr_attr_fn)dlsym(h, "cuPointerGetAttribute");
}

static int is_device_ptr(const void *p)
{
	unsigned int type = 0, managed = 0;

	pthread_once(&cuda_once, cuda_probe);
	if (!cu_ptr_attr || !p)
		return 0;
	/* CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2, CU_MEMORYTYPE_DEVICE = 2,
	 * CU_POINTER_ATTRIBUTE_IS_MANAGED = 8 (managed memory is host-readable). */
	if (cu_ptr_attr(&type, 2, (unsigned long long)(uintptr_t)p) != 0 || type != 2)
		return 0;
	if (cu_ptr_attr(&managed, 8, (unsigned long long)(uintptr_t)p) == 0 && managed)
		return 0;
	return 1;
}

static int check_ptr(struct smddp_comm *c, const void *p, const char *what, size_t count)
{
	if (!p && count)
		return sd_comm_error(c, SMDDP_EINVAL, "%s is NULL with count %zu", what, count);
	if (count && is_device_ptr(p))
		return sd_comm_error(c, SMDDP_EUNSUPPORTED,
				     "%s is CUDA device memory, which this build of libsmddp does "
				     "not move yet: pass host memory",
				     what);
	return SMDDP_OK;
}

static int compare_descs(struct smddp_comm *c)
{
	struct sd_coll_desc d;
	char mine[160], theirs[160], msg[700];
	size_t off = 0;
	int bad = 0;

	c->tp->put_desc(c, &c->cur, sizeof(c->cur));
	SD_CHECK(c->tp->barrier(c));
	sd_coll_describe(&c->cur, mine, sizeof(mine));
	msg[0] = 0;
	for (int r = 0; r < c->size; r++) {
		c->tp->get_desc(c, r, &d, sizeof(d));
		if (!memcmp(&d, &c->cur, sizeof(d)))
			continue;
		sd_coll_describe(&d, theirs, sizeof(theirs));
		if (bad < 4 && off < sizeof(msg))
			off += (size_t)snprintf(msg + off, sizeof(msg) - off, "%srank %d called %s",
						bad ? "; " : "", r, theirs);
		bad++;
	}
	/* The second barrier keeps a rank from overwriting its descriptor
	 * with the next call's while a slower one still reads it. */
	SD_CHECK(c->tp->barrier(c));
	if (bad)
		/* Not sticky: every rank saw the same descriptors and stopped
		 * before moving data, so the communicator stays usable. */
		return sd_comm_error(c, SMDDP_EMISMATCH,
				     "ranks disagree (SMDDP_CHECK_COLL): this rank called %s, but %s%s",
				     mine, msg, bad > 4 ? "; ..." : "");
	return SMDDP_OK;
}

int sd_api_enter(struct smddp_comm *c, int coll, size_t count, int dtype, int op, int root,
		 void *stream)
{
	if (!c) {
		sd_set_init_error("%s: communicator is NULL", sd_coll_name(coll));
		return SMDDP_EINVAL;
	}
	if (c->failed)
		return c->failed;
	memset(&c->cur, 0, sizeof(c->cur));
	if (stream)
		return sd_comm_error(c, SMDDP_EUNSUPPORTED,
				     "%s: a CUDA stream was given, but this build of libsmddp moves "
				     "host memory only: pass NULL",
				     sd_coll_name(coll));
	if ((unsigned)dtype >= SMDDP_NUM_DTYPES)
		return sd_comm_error(c, SMDDP_EINVAL, "%s: unknown dtype %d", sd_coll_name(coll),
				     dtype);
	if ((unsigned)op >= SMDDP_NUM_OPS)
		return sd_comm_error(c, SMDDP_EINVAL, "%s: unknown op %d", sd_coll_name(coll), op);
	if (root < 0 || root >= c->size)
		return sd_comm_error(c, SMDDP_EINVAL, "%s: root %d is not a rank of 0..%d",
				     sd_coll_name(coll), root, c->size - 1);
	if (count > ((size_t)1 << 56))
		return sd_comm_error(c, SMDDP_EINVAL, "%s: count %zu is too large",
				     sd_coll_name(coll), count);
	c->cur.seq = ++c->seq;
	c->cur.coll = coll;
	c->cur.count = count;
	c->cur.dtype = dtype;
	c->cur.op = op;
	c->cur.root = root;
	c->last_error[0] = 0;
	if (c->check_coll && !(count == 0 && coll <= SD_COLL_ALLTOALL))
		return compare_descs(c);
	return SMDDP_OK;
}

/* A failure that leaves ranks at different places in the protocol breaks
 * the communicator for good. */
static int leave(struct smddp_comm *c, int rc)
{
	if (rc && rc != SMDDP_EMISMATCH && rc != SMDDP_EINVAL && rc != SMDDP_EUNSUPPORTED &&
	    !c->failed) {
		c->failed = rc;
		/* Tell the peers now, with the reason, rather than when the
		 * communicator is destroyed: they then report the root cause,
		 * not this rank's later exit. */
		c->tp->abort(c);
	}
	memset(&c->cur, 0, sizeof(c->cur));
	return rc;
}

#define ENTER(coll, count, dtype, op, root)                                                   \
	do {                                                                                 \
		int rc_ = sd_api_enter(comm, (coll), (count), (dtype), (op), (root), stream); \
		if (rc_)                                                                     \
			return comm ? leave(comm, rc_) : rc_;                                \
		if ((count) == 0)                                                            \
			return leave(comm, SMDDP_OK);                                        \
	} while (0)

SD_EXPORT int smddp_allreduce(const void *sendbuf, void *recvbuf, size_t count,
			      enum smddp_dtype dtype, enum smddp_op op, struct smddp_comm *comm,
			      void *stream)
{
	ENTER(SD_COLL_ALLREDUCE, count, dtype, op, 0);
	if (check_ptr(comm, sendbuf, "sendbuf", count) || check_ptr(comm, recvbuf, "recvbuf", count))
		return leave(comm, SMDDP_EINVAL);
	return leave(comm, sd_coll_allreduce(comm, sendbuf, recvbuf, count, dtype, op));
}

SD_EXPORT int smddp_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
			      enum smddp_dtype dtype, struct smddp_comm *comm, void *stream)
{
	ENTER(SD_COLL_ALLGATHER, sendcount, dtype, 0, 0);
	if (check_ptr(comm, sendbuf, "sendbuf", sendcount) ||
	    check_ptr(comm, recvbuf, "recvbuf", sendcount))
		return leave(comm, SMDDP_EINVAL);
	return leave(comm, sd_coll_allgather(comm, sendbuf, recvbuf, sendcount, dtype));
}

SD_EXPORT int smddp_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
				   enum smddp_dtype dtype, enum smddp_op op,
				   struct smddp_comm *comm, void *stream)
{
	ENTER(SD_COLL_REDUCE_SCATTER, recvcount, dtype, op, 0);
	if (check_ptr(comm, sendbuf, "sendbuf", recvcount) ||
	    check_ptr(comm, recvbuf, "recvbuf", recvcount))
		return leave(comm, SMDDP_EINVAL);
	return leave(comm, sd_coll_reduce_scatter(comm, sendbuf, recvbuf, recvcount, dtype, op));
}

SD_EXPORT int smddp_broadcast(void *buf, size_t count, enum smddp_dtype dtype, int root,
			      struct smddp_comm *comm, void *stream)
{
	ENTER(SD_COLL_BROADCAST, count, dtype, 0, root);
	if (check_ptr(comm, buf, "buf", count))
		return leave(comm, SMDDP_EINVAL);
	return leave(comm, sd_coll_broadcast(comm, buf, count, dtype, root));
}

SD_EXPORT int smddp_reduce(const void *sendbuf, void *recvbuf, size_t count,
			   enum smddp_dtype dtype, enum smddp_op op, int root,
			   struct smddp_comm *comm, void *stream)
{
	ENTER(SD_COLL_REDUCE, count, dtype, op, root);
	if (check_ptr(comm, sendbuf, "sendbuf", count) ||
	    (comm->rank == root && check_ptr(comm, recvbuf, "recvbuf", count)))
		return leave(comm, SMDDP_EINVAL);
	return leave(comm, sd_coll_reduce(comm, sendbuf, recvbuf, count, dtype, op, root));
}

SD_EXPORT int smddp_alltoall(const void *sendbuf, void *recvbuf, size_t count,
			     enum smddp_dtype dtype, struct smddp_comm *comm, void *stream)
{
	ENTER(SD_COLL_ALLTOALL, count, dtype, 0, 0);
	if (check_ptr(comm, sendbuf, "sendbuf", count) || check_ptr(comm, recvbuf, "recvbuf", count))
		return leave(comm, SMDDP_EINVAL);
	return leave(comm, sd_coll_alltoall(comm, sendbuf, recvbuf, count, dtype));
}

SD_EXPORT int smddp_barrier(struct smddp_comm *comm)
{
	int rc = sd_api_enter(comm, SD_COLL_BARRIER, 0, 0, 0, 0, NULL);

	if (rc)
		return comm ? leave(comm, rc) : rc;
	return leave(comm, comm->tp->barrier(comm));
}
