/* cmd/bench/bench.h - shared pieces of smddp-allreduce-bench (not installed).
 *
 * The benchmark is split by concern, as util-linux splits lscpu:
 * smddp-allreduce-bench.c holds main() and the steps of a run;
 * bench_options.c the command line and --help; bench_sweep.c the buffers,
 * the measure of one size and the sweep of sizes; bench_smddp.c the
 * library measured (libsmddp as a backend); bench_output.c what rank 0
 * prints; bench_baseline.c --baseline and --min-busbw; bench_data.c fills,
 * poisons and checks buffers against a reference it computes itself;
 * bench_mpi.c (built only with Open MPI) runs the same collectives through
 * MPI for --compare mpi, bench_nccl.c through NCCL for --compare nccl, and
 * bench_cuda.c holds the device buffers of --device cuda.  A "backend" is
 * the one seam between the sweep and the library measured.  This header is
 * the seam and the data; sweep.h what the tool's own parts share besides.
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
	COLL_SENDRECV,
	COLL_ALLTOALLV,
	NUM_COLLS
};

/* One measured size, laid out the way nccl-tests lays it out.  Counts are in
 * elements.  param is the count handed to the collective (per rank for
 * allgather's input and reducescatter's output, per peer for alltoall, the
 * nominal block per peer for alltoallv, the whole message for sendrecv);
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
	/* alltoallv: this rank's layout (bench_v_layout), nranks entries each. */
	const size_t *sendcounts, *sdispls, *recvcounts, *rdispls;
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
/* sendrecv's ring: rank sends to rank + 1 and receives from rank - 1. */
int bench_ring_next(int rank, int nranks);
int bench_ring_prev(int rank, int nranks);
/* alltoallv's uneven pattern around a nominal block of count elements:
 * the block from rank r to rank q has bench_v_block((r + q) % nranks)
 * elements, a ramp whose nranks blocks add up to nranks * count, so that
 * every rank sends and receives as much as alltoall of count.  Blocks are
 * packed in peer order on both sides.  bench_v_layout fills this rank's
 * four arrays of nranks entries. */
size_t bench_v_block(size_t k, int nranks, size_t count);
void bench_v_layout(int rank, int nranks, size_t count, size_t *sendcounts, size_t *sdispls,
		    size_t *recvcounts, size_t *rdispls);

#ifdef HAVE_CUDA
/* bench_cuda.c (--device cuda): 0, or -1 with a sentence in err. gpu < 0:
 * local_rank % the number of GPUs.  bench_cuda_copy's kind: 0 host to
 * device, 1 device to host (both done on return), 2 device to device
 * (queued on the stream). */
int bench_cuda_init(int local_rank, int gpu, char *err, size_t len);
int bench_cuda_device(void);
const char *bench_cuda_device_name(void);
void *bench_cuda_stream(void);
void *bench_cuda_alloc(size_t bytes, char *err, size_t len);
void bench_cuda_free(void *p);
int bench_cuda_copy(void *dst, const void *src, size_t bytes, int kind, char *err, size_t len);
int bench_cuda_sync(char *err, size_t len);
#endif

#ifdef HAVE_NCCL
/* bench_nccl.c (--compare nccl, with --device cuda): the same sweep through
 * NCCL on the same buffers and stream.  0, or -1 with a sentence in err. */
int bench_nccl_init(struct smddp_comm *comm, void *stream, char *err, size_t len);
const struct bench_backend *bench_nccl_backend(void);
void bench_nccl_finalize(void);
const char *bench_nccl_version(void);
#endif

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
