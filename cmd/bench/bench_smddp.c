/* cmd/bench/bench_smddp.c - the library measured: libsmddp as a backend, and its failures */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <smddp/smddp.h>

#include "bench.h"
#include "sweep.h"
#include "../common/tool.h"

/* ---- the library measured ----------------------------------------------- */

struct smddp_comm *comm;
int rank, nranks;

noreturn void fail(const char *what, int rc)
{
	tool_warn("rank %d: %s failed: %s%s%s", rank, what, smddp_strerror(rc),
		  *smddp_last_error(comm) ? ": " : "", smddp_last_error(comm));
	smddp_comm_abort(comm);
#ifdef HAVE_MPI
	if (opt.compare_mpi)
		bench_mpi_abort(TOOL_EXIT_FAILURE);
#endif
	exit(TOOL_EXIT_FAILURE);
}

#ifdef HAVE_CUDA
noreturn void gpu_fail(const char *err)
{
	tool_warn("rank %d: %s", rank, err);
	smddp_comm_abort(comm);
	exit(TOOL_EXIT_FAILURE);
}
#endif

void *stream; /* --device cuda: the stream of every call */

static int sm_run(const struct bench_call *c)
{
	size_t es = smddp_dtype_size(c->dtype);

	switch (c->coll) {
	case COLL_ALLREDUCE:
		return smddp_allreduce(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, comm, stream);
	case COLL_ALLGATHER:
		return smddp_allgather(c->sendbuf, c->recvbuf, c->count, c->dtype, comm, stream);
	case COLL_REDUCESCATTER:
		return smddp_reduce_scatter(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, comm,
					    stream);
	case COLL_BROADCAST:
		/* The API's broadcast works in place; out of place, as NCCL
		 * defines it, is the root's copy and then the broadcast. */
		if (!c->inplace && rank == c->root && c->count) {
#ifdef HAVE_CUDA
			char err[256];

			if (opt.on_gpu) {
				if (bench_cuda_copy(c->recvbuf, c->sendbuf, c->count * es, 2, err,
						    sizeof(err)))
					gpu_fail(err);
			} else
#endif
				memcpy(c->recvbuf, c->sendbuf, c->count * es);
		}
		return smddp_broadcast(c->recvbuf, c->count, c->dtype, c->root, comm, stream);
	case COLL_REDUCE:
		return smddp_reduce(c->sendbuf, c->recvbuf, c->count, c->dtype, c->op, c->root, comm,
				    stream);
	case COLL_ALLTOALL:
		return smddp_alltoall(c->sendbuf, c->recvbuf, c->count, c->dtype, comm, stream);
	case COLL_SENDRECV: {
		/* The send and the receive in one group, so that they run at
		 * once around the ring; the group is closed even after a
		 * failed record, and the first failure is the one reported.
		 * Never in place (coll_has_inplace). */
		int rc = smddp_group_start(), rc2;

		if (rc)
			return rc;
		rc = smddp_send(c->sendbuf, c->count, c->dtype, bench_ring_next(rank, nranks), 0,
				comm, stream);
		if (!rc)
			rc = smddp_recv(c->recvbuf, c->count, c->dtype,
					bench_ring_prev(rank, nranks), 0, NULL, comm, stream);
		rc2 = smddp_group_end();
		return rc ? rc : rc2;
	}
	case COLL_ALLTOALLV:
		return smddp_alltoallv(c->sendbuf, c->sendcounts, c->sdispls, c->recvbuf,
				       c->recvcounts, c->rdispls, c->dtype, comm, stream);
	default:
		return SMDDP_EINVAL;
	}
}

static int sm_barrier(void)
{
	return smddp_barrier(comm);
}

/* NCCL's in-place layouts: allgather's input is the rank's block of the
 * output; reducescatter's output is the rank's block of the input. */
static size_t sm_ip_send_off(enum bench_coll c, int r, size_t count)
{
	return c == COLL_ALLGATHER ? (size_t)r * count : 0;
}

static size_t sm_ip_recv_off(enum bench_coll c, int r, size_t count)
{
	return c == COLL_REDUCESCATTER ? (size_t)r * count : 0;
}

static const char *sm_unsupported(enum smddp_dtype dt, enum smddp_op op)
{
	return NULL;
}

static const char *sm_last_error(int rc)
{
	return smddp_last_error(comm);
}

const struct bench_backend smddp_backend = {
	.name = "libsmddp",
	.run = sm_run,
	.barrier = sm_barrier,
	.ip_send_off = sm_ip_send_off,
	.ip_recv_off = sm_ip_recv_off,
	.unsupported = sm_unsupported,
	.last_error = sm_last_error,
};
