/* cmd/bench/sweep.h - the state of a run of the benchmark, shared by the tool's own parts */
#ifndef SMDDP_CMD_BENCH_SWEEP_H
#define SMDDP_CMD_BENCH_SWEEP_H

/*
 * One process runs one sweep through libsmddp and perhaps one more through
 * MPI or NCCL: the options, the communicator and this rank are globals
 * that main() (smddp-allreduce-bench.c) sets once, before the sweep, and
 * bench_options.c, bench_sweep.c, bench_smddp.c, bench_output.c and
 * bench_baseline.c read.  The backends of bench_mpi.c, bench_nccl.c and
 * bench_data.c see only bench.h.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdnoreturn.h>

#include <smddp/smddp.h>

#include "bench.h"

#define PROG "smddp-allreduce-bench"
#define MIB (1024 * 1024)

/* bench_options.c: the command line */
struct bench_options {
	uint64_t minbytes, maxbytes, stepbytes;
	long stepfactor, iters, warmup;
	int check, blocking;
	enum smddp_dtype dtypes[SMDDP_NUM_DTYPES];
	int ndtypes;
	enum smddp_op ops[SMDDP_NUM_OPS];
	int nops;
	int root; /* -1: all */
	enum bench_coll colls[NUM_COLLS];
	int ncolls;
	bool cputime; /* -C 1: the time column is the call's return, not its end */
	char ignored[160]; /* nccl-tests' options taken and ignored, for the header */
	bool json;
	const char *json_file; /* -J: rank 0 writes JSON lines there too */
	const char *baseline;
	double tolerance;
	double min_busbw; /* < 0: off */
	bool compare_mpi;
	bool compare_nccl;
	bool on_gpu; /* --device cuda */
	int gpu;     /* --gpu, -1: local rank % GPUs */
	uint64_t offset; /* --offset: rank r's buffers start r x offset bytes in */
};

extern struct bench_options opt;
extern const char *const coll_names[NUM_COLLS];
void coll_from_argv0(const char *argv0);
void parse_args(int argc, char **argv);

/* One size as measured: out of place and in place. */
struct meas {
	double time_us, algbw, busbw;
	double cputime_us; /* -C 1: until the call returned (= time_us on host memory) */
	int64_t wrong; /* -1: not checked */
	bool none;     /* no such placement (alltoallv in place): N/A */
};

struct result {
	enum bench_coll coll;
	enum smddp_dtype dtype;
	int op; /* -1: none */
	int root;
	uint64_t bytes;
	size_t count;
	struct meas m[2]; /* out of place, in place */
	bool skipped;
};

/* The results of one sweep through one backend, in order. */
struct sweep {
	struct result *res;
	size_t n, cap;
	uint64_t wrong;
	double bw_sum;
	long bw_count;
};

/* bench_smddp.c: the communicator, this rank, and libsmddp as a backend.
 * fail() and gpu_fail() say what failed on this rank, abort and exit 1. */
extern struct smddp_comm *comm;
extern int rank, nranks;
extern void *stream; /* --device cuda: the stream of every call */
extern const struct bench_backend smddp_backend;
noreturn void fail(const char *what, int rc);
#ifdef HAVE_CUDA
noreturn void gpu_fail(const char *err);
#endif

/* bench_sweep.c */
void buffers_alloc(void);
void buffers_free(void);
void be_barrier(const struct bench_backend *be);
void run_sweep(const struct bench_backend *be, struct sweep *s, const struct sweep *ours);

/* bench_output.c: rank 0 prints; progress on stderr when it is a terminal */
extern bool show_progress;
extern FILE *json_file; /* -J, rank 0 */
void progress_clear(void);
void progress_show(const struct result *r, const char *be);
void print_header(void);
void print_table_header(enum bench_coll c, const char *be, bool ratio);
void print_row(const struct result *r, const char *impl, const struct result *ours);
void print_footer(const struct sweep *s);

/* bench_baseline.c: rank 0 reads the baseline and judges */
struct base_row;
long load_baseline(const char *path, struct base_row **out);
int judge(const struct sweep *s, const struct base_row *base, long nbase);

#endif /* SMDDP_CMD_BENCH_SWEEP_H */
