/* cmd/bench/bench.h - shared pieces of smddp-allreduce-bench (not installed).
 *
 * The benchmark is cut in three: smddp-allreduce-bench.c parses the command
 * line, runs the sweep and prints; bench_data.c fills, poisons and checks
 * buffers against a reference it computes itself; bench_mpi.c (built only
 * with Open MPI) runs the same collectives through MPI for --compare mpi.
 * A "backend" is the one seam between the sweep and the library measured.
 */
#ifndef SMDDP_CMD_BENCH_H
#define SMDDP_CMD_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include <smddp/smddp.h>

enum bench_coll {
	COLL_ALLREDUCE,
	COLL_ALLGATHER,
	COLL_REDUCESCATTER,
	COLL_BROADCAST,
	COLL_REDUCE,
	COLL_ALLTOALL,
	NUM_COLLS
};

/* One measured size, laid out the way nccl-tests lays it out.  Counts are in
 * elements.  param is the count handed to the collective (per rank for
 * allgather's input and reducescatter's output, per peer for alltoall);
 * send and recv are the whole buffers of one rank. */
struct bench_geom {
	size_t param;
	size_t send;
	size_t recv;
	size_t bytes; /* the "size" column: max(send, recv) * element size */
};

/* What one call needs; sendbuf and recvbuf are the two buffers of the rank,
 * each large enough for geom.send and geom.recv elements. */
struct bench_call {
	enum bench_coll coll;
	enum smddp_dtype dtype;
	enum smddp_op op;
	int root;
	int inplace;
	size_t count; /* geom.param */
	void *sendbuf;
	void *recvbuf;
};

/* The collective library measured: libsmddp, or Open MPI for comparison.
 * In-place layouts differ (MPI's reduce_scatter_block leaves its result at
 * the start of the buffer, NCCL's at rank * count), so the backend says
 * where the input goes and where the output lands. */
struct bench_backend {
	const char *name;
	int (*run)(const struct bench_call *call);
	int (*barrier)(void);
	/* Offsets in elements inside recvbuf, in place: input and output. */
	size_t (*ip_send_off)(enum bench_coll coll, int rank, size_t count);
	size_t (*ip_recv_off)(enum bench_coll coll, int rank, size_t count);
	/* Non-zero when the backend cannot run this dtype and op at all. */
	const char *(*unsupported)(enum smddp_dtype dtype, enum smddp_op op);
	/* A sentence about the last failure. */
	const char *(*last_error)(int rc);
};

/* bench_data.c */
void bench_fill(void *buf, size_t n, size_t base, enum smddp_dtype dtype, enum smddp_op op,
		int rank);
void bench_poison(void *buf, size_t n, enum smddp_dtype dtype);
/* Counts the wrong elements of what rank `rank` holds after call->coll: out
 * is where the output landed (geom.recv elements, or param for
 * reducescatter).  The reference is computed from the fill pattern, never
 * from another rank's memory. */
uint64_t bench_check(enum bench_coll coll, enum smddp_dtype dtype, enum smddp_op op, int root,
		     int rank, int nranks, size_t count, const void *out);

#ifdef HAVE_MPI
/* bench_mpi.c: NULL and a message in err when MPI cannot be started. */
int bench_mpi_init(int *argc, char ***argv, char *err, size_t errlen);
const struct bench_backend *bench_mpi_backend(void);
int bench_mpi_rank(void);
int bench_mpi_size(void);
void bench_mpi_finalize(void);
void bench_mpi_abort(int code);
const char *bench_mpi_version(void);
#endif

#endif /* SMDDP_CMD_BENCH_H */
