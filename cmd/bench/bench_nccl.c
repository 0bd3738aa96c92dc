/* cmd/bench/bench_nccl.c - the NCCL side of smddp-allreduce-bench --device cuda --compare nccl.
 *
 * The same collectives through NCCL, in the same processes, on the same
 * device buffers and stream, timed by the same loop (each call and its
 * stream's synchronisation; median over iterations of the slowest rank).
 * Built only when configure found NCCL beside CUDA.  NCCL needs one GPU per
 * rank: it refuses two ranks on one GPU.  The NCCL id travels over
 * libsmddp's own broadcast.  NVLink SHARP (NVLS) is left to the
 * environment: keep NCCL_NVLS_ENABLE=0 on shared machines.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "bench.h"

static ncclComm_t nccl;
static int nrank, nsize;
static cudaStream_t stream;

int bench_nccl_init(struct smddp_comm *comm, void *st, char *err, size_t errlen)
{
	ncclUniqueId id;
	ncclResult_t r = ncclSuccess;
	int rc;

	nrank = smddp_comm_rank(comm);
	nsize = smddp_comm_size(comm);
	stream = (cudaStream_t)st;
	memset(&id, 0, sizeof(id));
	if (nrank == 0)
		r = ncclGetUniqueId(&id);
	/* Everybody takes part in the broadcast, so that a failure of rank 0
	 * is seen everywhere (a zero id). */
	rc = smddp_broadcast(&id, sizeof(id), SMDDP_UINT8, 0, comm, NULL);
	if (rc || r != ncclSuccess) {
		snprintf(err, errlen, "cannot share the NCCL id: %s",
			 rc ? smddp_last_error(comm) : ncclGetErrorString(r));
		return -1;
	}
	r = ncclCommInitRank(&nccl, smddp_comm_size(comm), id, nrank);
	if (r != ncclSuccess) {
		snprintf(err, errlen, "ncclCommInitRank: %s (NCCL needs one GPU per rank)",
			 ncclGetErrorString(r));
		return -1;
	}
	return 0;
}

void bench_nccl_finalize(void)
{
	if (nccl)
		ncclCommDestroy(nccl);
	nccl = NULL;
}

const char *bench_nccl_version(void)
{
	static char v[32];
	int code = 0;

	ncclGetVersion(&code);
	snprintf(v, sizeof(v), "NCCL %d.%d.%d", code / 10000, code / 100 % 100, code % 100);
	return v;
}

static ncclDataType_t nccl_dtype(enum smddp_dtype dt)
{
	static const ncclDataType_t map[SMDDP_NUM_DTYPES] = {
		[SMDDP_INT8] = ncclInt8,	 [SMDDP_UINT8] = ncclUint8,
		[SMDDP_INT32] = ncclInt32,	 [SMDDP_UINT32] = ncclUint32,
		[SMDDP_INT64] = ncclInt64,	 [SMDDP_UINT64] = ncclUint64,
		[SMDDP_FLOAT16] = ncclFloat16,	 [SMDDP_BFLOAT16] = ncclBfloat16,
		[SMDDP_FLOAT32] = ncclFloat32,	 [SMDDP_FLOAT64] = ncclFloat64,
	};
	return map[dt];
}

/* NCCL numbers MIN and MAX the other way round. */
static ncclRedOp_t nccl_op(enum smddp_op op)
{
	switch (op) {
	case SMDDP_PROD: return ncclProd;
	case SMDDP_MIN: return ncclMin;
	case SMDDP_MAX: return ncclMax;
	case SMDDP_AVG: return ncclAvg;
	default: return ncclSum;
	}
}

static const char *nccl_unsupported(enum smddp_dtype dt, enum smddp_op op)
{
	return NULL;
}

/* NCCL has no sendrecv or alltoallv call: both are sends and receives in
 * one group, as nccl-tests' sendrecv_perf and alltoall_perf do.  The group
 * is closed even after a failed record. */
static int nccl_sendrecv(const struct bench_call *c, ncclDataType_t t)
{
	ncclResult_t r = ncclGroupStart(), r2;

	if (r != ncclSuccess)
		return r;
	r = ncclSend(c->sendbuf, c->count, t, bench_ring_next(nrank, nsize), nccl, stream);
	if (r == ncclSuccess)
		r = ncclRecv(c->recvbuf, c->count, t, bench_ring_prev(nrank, nsize), nccl, stream);
	r2 = ncclGroupEnd();
	return r != ncclSuccess ? r : r2;
}

static int nccl_alltoallv(const struct bench_call *c, ncclDataType_t t)
{
	size_t es = smddp_dtype_size(c->dtype);
	const char *sb = c->sendbuf;
	char *rb = c->recvbuf;
	ncclResult_t r = ncclGroupStart(), r2;

	if (r != ncclSuccess)
		return r;
	for (int q = 0; q < nsize && r == ncclSuccess; q++) {
		r = ncclSend(sb + c->sdispls[q] * es, c->sendcounts[q], t, q, nccl, stream);
		if (r == ncclSuccess)
			r = ncclRecv(rb + c->rdispls[q] * es, c->recvcounts[q], t, q, nccl,
				     stream);
	}
	r2 = ncclGroupEnd();
	return r != ncclSuccess ? r : r2;
}

static int nccl_run(const struct bench_call *c)
{
	ncclDataType_t t = nccl_dtype(c->dtype);
	ncclRedOp_t op = nccl_op(c->op);

	switch (c->coll) {
	case COLL_ALLREDUCE:
		return ncclAllReduce(c->sendbuf, c->recvbuf, c->count, t, op, nccl, stream);
	case COLL_ALLGATHER:
		return ncclAllGather(c->sendbuf, c->recvbuf, c->count, t, nccl, stream);
	case COLL_REDUCESCATTER:
		return ncclReduceScatter(c->sendbuf, c->recvbuf, c->count, t, op, nccl, stream);
	case COLL_BROADCAST:
		return ncclBroadcast(c->inplace ? c->recvbuf : c->sendbuf, c->recvbuf, c->count, t,
				     c->root, nccl, stream);
	case COLL_REDUCE:
		return ncclReduce(c->sendbuf, c->recvbuf, c->count, t, op, c->root, nccl, stream);
	case COLL_ALLTOALL:
		return ncclAlltoAll(c->sendbuf, c->recvbuf, c->count, t, nccl, stream);
	case COLL_SENDRECV:
		return nccl_sendrecv(c, t);
	case COLL_ALLTOALLV:
		return nccl_alltoallv(c, t);
	default:
		return ncclInvalidArgument;
	}
}

static int nccl_barrier(void)
{
	/* Every call is done when its stream is: a device barrier is an
	 * allreduce of nothing much, then the stream. */
	static float one;
	static float *d;
	ncclResult_t r;

	if (!d && cudaMalloc((void **)&d, sizeof(one)) != cudaSuccess)
		return ncclUnhandledCudaError;
	r = ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, nccl, stream);
	if (r != ncclSuccess)
		return r;
	return cudaStreamSynchronize(stream) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

/* NCCL's in-place layouts are libsmddp's. */
static size_t nccl_ip_send_off(enum bench_coll c, int r, size_t count)
{
	return c == COLL_ALLGATHER ? (size_t)r * count : 0;
}

static size_t nccl_ip_recv_off(enum bench_coll c, int r, size_t count)
{
	return c == COLL_REDUCESCATTER ? (size_t)r * count : 0;
}

static const char *nccl_last_error(int rc)
{
	static char s[512];
	const char *detail = nccl ? ncclGetLastError(nccl) : "";

	snprintf(s, sizeof(s), "%s%s%s", ncclGetErrorString((ncclResult_t)rc),
		 detail && *detail ? ": " : "", detail ? detail : "");
	return s;
}

static const struct bench_backend backend = {
	.name = "NCCL",
	.run = nccl_run,
	.barrier = nccl_barrier,
	.ip_send_off = nccl_ip_send_off,
	.ip_recv_off = nccl_ip_recv_off,
	.unsupported = nccl_unsupported,
	.last_error = nccl_last_error,
};

const struct bench_backend *bench_nccl_backend(void)
{
	return &backend;
}
