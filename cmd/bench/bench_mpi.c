/* cmd/bench/bench_mpi.c - the Open MPI side of smddp-allreduce-bench --compare mpi.
 *
 * The same collectives through MPI_COMM_WORLD, in the same process and with
 * the same buffers, so that the two libraries are measured on the same
 * machine, the same pages and the same moment.  MPI has no fp16 or bf16 type
 * in Open MPI 4 and no AVG op: those combinations are skipped, not emulated.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "bench.h"

static int mpi_rank, mpi_size;

int bench_mpi_init(int *argc, char ***argv, char *err, size_t errlen)
{
	int rc = MPI_Init(argc, argv);

	if (rc != MPI_SUCCESS) {
		snprintf(err, errlen, "MPI_Init failed (error %d)", rc);
		return -1;
	}
	/* Failures come back as codes, to be reported like ours. */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
	return 0;
}

int bench_mpi_rank(void)
{
	return mpi_rank;
}

int bench_mpi_size(void)
{
	return mpi_size;
}

void bench_mpi_finalize(void)
{
	MPI_Finalize();
}

void bench_mpi_abort(int code)
{
	MPI_Abort(MPI_COMM_WORLD, code);
}

const char *bench_mpi_version(void)
{
	static char v[MPI_MAX_LIBRARY_VERSION_STRING];
	int len = 0;

	MPI_Get_library_version(v, &len);
	v[strcspn(v, ",\n")] = 0; /* "Open MPI v4.1.4, package: ..." */
	return v;
}

static MPI_Datatype mpi_dtype(enum smddp_dtype dt)
{
	switch (dt) {
	case SMDDP_INT8: return MPI_INT8_T;
	case SMDDP_UINT8: return MPI_UINT8_T;
	case SMDDP_INT32: return MPI_INT32_T;
	case SMDDP_UINT32: return MPI_UINT32_T;
	case SMDDP_INT64: return MPI_INT64_T;
	case SMDDP_UINT64: return MPI_UINT64_T;
	case SMDDP_FLOAT32: return MPI_FLOAT;
	case SMDDP_FLOAT64: return MPI_DOUBLE;
	default: return MPI_DATATYPE_NULL;
	}
}

static MPI_Op mpi_op(enum smddp_op op)
{
	switch (op) {
	case SMDDP_SUM: return MPI_SUM;
	case SMDDP_PROD: return MPI_PROD;
	case SMDDP_MIN: return MPI_MIN;
	case SMDDP_MAX: return MPI_MAX;
	default: return MPI_OP_NULL;
	}
}

static const char *mpi_unsupported(enum smddp_dtype dt, enum smddp_op op)
{
	if (mpi_dtype(dt) == MPI_DATATYPE_NULL)
		return "MPI has no such datatype";
	if (mpi_op(op) == MPI_OP_NULL)
		return "MPI has no such op";
	return NULL;
}

/* MPI_Alltoallv's int arrays, converted from the call's size_t layout when
 * the count changes (the layout depends on it alone), so that a timed call
 * only compares one number.  MPI_ERR_COUNT when an offset does not fit in
 * an int. */
static int v_arrays(const struct bench_call *c, int **out)
{
	static int *a;
	static size_t last = (size_t)-1;
	const size_t *src[4] = { c->sendcounts, c->sdispls, c->recvcounts, c->rdispls };
	size_t n = (size_t)mpi_size;

	if (!a && !(a = malloc(4 * n * sizeof(*a))))
		return MPI_ERR_NO_MEM;
	if (last != c->count) {
		last = (size_t)-1; /* until every entry is converted */
		for (size_t k = 0; k < 4; k++)
			for (size_t q = 0; q < n; q++) {
				if (src[k][q] > (size_t)0x7fffffff)
					return MPI_ERR_COUNT;
				a[k * n + q] = (int)src[k][q];
			}
		last = c->count;
	}
	for (size_t k = 0; k < 4; k++)
		out[k] = a + k * n;
	return MPI_SUCCESS;
}

/* MPI counts are int: sizes past 2^31 elements are refused, not wrapped. */
static int mpi_run(const struct bench_call *c)
{
	MPI_Datatype t = mpi_dtype(c->dtype);
	MPI_Op op = mpi_op(c->op);
	const void *sb = c->inplace ? MPI_IN_PLACE : c->sendbuf;
	int n = (int)c->count;
	int size;

	if (c->count > (size_t)0x7fffffff)
		return MPI_ERR_COUNT;
	MPI_Type_size(t, &size);
	switch (c->coll) {
	case COLL_ALLREDUCE:
		return MPI_Allreduce(sb, c->recvbuf, n, t, op, MPI_COMM_WORLD);
	case COLL_ALLGATHER:
		return MPI_Allgather(sb, n, t, c->recvbuf, n, t, MPI_COMM_WORLD);
	case COLL_REDUCESCATTER:
		return MPI_Reduce_scatter_block(sb, c->recvbuf, n, t, op, MPI_COMM_WORLD);
	case COLL_BROADCAST:
		/* As for libsmddp: out of place is the root's copy, then Bcast. */
		if (!c->inplace && mpi_rank == c->root && n)
			memcpy(c->recvbuf, c->sendbuf, c->count * (size_t)size);
		return MPI_Bcast(c->recvbuf, n, t, c->root, MPI_COMM_WORLD);
	case COLL_REDUCE:
		/* MPI_IN_PLACE is the root's alone; the others send their buffer. */
		if (c->inplace && mpi_rank != c->root)
			sb = c->recvbuf;
		return MPI_Reduce(sb, c->recvbuf, n, t, op, c->root, MPI_COMM_WORLD);
	case COLL_ALLTOALL:
		return MPI_Alltoall(sb, n, t, c->recvbuf, n, t, MPI_COMM_WORLD);
	case COLL_SENDRECV: {
		int next = bench_ring_next(mpi_rank, mpi_size), prev = bench_ring_prev(mpi_rank, mpi_size);
		/* Out of place only, as for libsmddp. */
		return MPI_Sendrecv(c->sendbuf, n, t, next, 0, c->recvbuf, n, t, prev, 0,
				    MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	}
	case COLL_ALLTOALLV: {
		int *v[4], rc = v_arrays(c, v);
		if (rc != MPI_SUCCESS)
			return rc;
		return MPI_Alltoallv(c->sendbuf, v[0], v[1], t, c->recvbuf, v[2], v[3], t,
				     MPI_COMM_WORLD);
	}
	default:
		return MPI_ERR_OP;
	}
}

static int mpi_barrier(void)
{
	return MPI_Barrier(MPI_COMM_WORLD);
}

/* MPI's in-place layouts: allgather's input already sits in the rank's block;
 * reduce_scatter_block takes the whole input and leaves its block at the
 * start of the buffer. */
static size_t mpi_ip_send_off(enum bench_coll c, int r, size_t count)
{
	return c == COLL_ALLGATHER ? (size_t)r * count : 0;
}

static size_t mpi_ip_recv_off(enum bench_coll c, int r, size_t count)
{
	return 0;
}

static const char *mpi_last_error(int rc)
{
	static char s[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS)
		snprintf(s, sizeof(s), "MPI error %d", rc);
	return s;
}

static const struct bench_backend backend = {
	.name = "Open MPI",
	.run = mpi_run,
	.barrier = mpi_barrier,
	.ip_send_off = mpi_ip_send_off,
	.ip_recv_off = mpi_ip_recv_off,
	.unsupported = mpi_unsupported,
	.last_error = mpi_last_error,
};

const struct bench_backend *bench_mpi_backend(void)
{
	return &backend;
}
