/* cmd/bench/smddp-allreduce-bench.c - measure libsmddp's collectives the way nccl-tests does.
 *
 * Every rank runs the same sweep of sizes; rank 0 alone prints.  For each
 * size: -w untimed warm-up calls, a barrier, -n calls each timed on every
 * rank; after the loop (never inside it) the per-call times are combined
 * with an allreduce MAX, so that the time of a call is that of its slowest
 * rank, and the reported time is the median of those.  With -c 1 a separate
 * call follows on poisoned output and freshly filled input, and every element
 * is compared with a reference computed here (bench_data.c).  Sizes, counts
 * and bus bandwidth factors are those of nccl-tests, so that the numbers of
 * the two tools can be compared column for column.  sendrecv is nccl-tests'
 * ring of grouped sends and receives; alltoallv, which nccl-tests lack,
 * cuts alltoall's totals into the uneven blocks of bench_v_block().
 *
 * --device cuda (builds with CUDA) puts both buffers in device memory and
 * passes a stream: a timed call is the call and the synchronisation of its
 * stream, so the time is still that of a finished collective; filling,
 * poisoning and checking go through a host copy, outside the timed loop.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include <smddp/smddp.h>

#include "bench.h"
#include "../common/tool.h"

#define PROG "smddp-allreduce-bench"
#define MIB (1024 * 1024)

static const char *const coll_names[NUM_COLLS] = {
	"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall",
	"sendrecv", "alltoallv"
};

static int coll_reduces(enum bench_coll c)
{
	return c == COLL_ALLREDUCE || c == COLL_REDUCESCATTER || c == COLL_REDUCE;
}

static int coll_rooted(enum bench_coll c)
{
	return c == COLL_BROADCAST || c == COLL_REDUCE;
}

/* alltoallv has no in-place form in libsmddp's API (nor in NCCL's, which
 * has no alltoallv), and the buffers of a group's sends must stay unchanged
 * until its end, so a receive into the buffer being sent (nccl-tests'
 * in-place sendrecv) is outside the contract: it gave wrong data past the
 * inline size.  Their in-place half is N/A for every backend alike. */
static int coll_has_inplace(enum bench_coll c)
{
	return c != COLL_ALLTOALLV && c != COLL_SENDRECV;
}

/* busbw = algbw * factor: the bandwidth a ring would need on its busiest
 * link, independent of the rank count (nccl-tests' PERFORMANCE.md). */
static double bus_factor(enum bench_coll c, int n)
{
	switch (c) {
	case COLL_ALLREDUCE: return 2.0 * (n - 1) / n;
	case COLL_ALLGATHER:
	case COLL_REDUCESCATTER:
	case COLL_ALLTOALL:
	case COLL_ALLTOALLV: return (double)(n - 1) / n;
	default: return 1.0; /* sendrecv too: one send and one receive per rank */
	}
}

/* nccl-tests' getCollByteCount(): count = size / element size, then per
 * collective. */
static void geometry(enum bench_coll c, uint64_t size, size_t es, int nranks, struct bench_geom *g)
{
	size_t count = (size_t)(size / es), n = (size_t)nranks;

	switch (c) {
	case COLL_ALLGATHER:
		g->param = g->send = count / n;
		g->recv = count / n * n;
		break;
	case COLL_REDUCESCATTER:
		g->param = g->recv = count / n;
		g->send = count / n * n;
		break;
	case COLL_ALLTOALL:
	case COLL_ALLTOALLV: /* the same totals, only cut unevenly */
		g->param = count / n;
		g->send = g->recv = count / n * n;
		break;
	default:
		g->param = g->send = g->recv = count;
		break;
	}
	g->bytes = (g->send > g->recv ? g->send : g->recv) * es;
}

/* ---- options ------------------------------------------------------------ */

static const struct {
	const char *name;
	enum smddp_dtype dt;
} dtype_names[] = {
	{ "int8", SMDDP_INT8 },       { "char", SMDDP_INT8 },         { "uint8", SMDDP_UINT8 },
	{ "int32", SMDDP_INT32 },     { "int", SMDDP_INT32 },         { "uint32", SMDDP_UINT32 },
	{ "uint", SMDDP_UINT32 },     { "int64", SMDDP_INT64 },       { "uint64", SMDDP_UINT64 },
	{ "float16", SMDDP_FLOAT16 }, { "half", SMDDP_FLOAT16 },      { "fp16", SMDDP_FLOAT16 },
	{ "bfloat16", SMDDP_BFLOAT16 }, { "bf16", SMDDP_BFLOAT16 },   { "float32", SMDDP_FLOAT32 },
	{ "float", SMDDP_FLOAT32 },   { "fp32", SMDDP_FLOAT32 },      { "float64", SMDDP_FLOAT64 },
	{ "double", SMDDP_FLOAT64 },  { "fp64", SMDDP_FLOAT64 },
};

static struct {
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
} opt = {
	/* nccl-tests' defaults */
	.minbytes = 32 * MIB, .maxbytes = 32 * MIB, .stepbytes = 1 * MIB,
	.stepfactor = 1, .iters = 20, .warmup = 5, .check = 1, .blocking = 1,
	.dtypes = { SMDDP_FLOAT32 }, .ndtypes = 1, .ops = { SMDDP_SUM }, .nops = 1, .root = 0,
	.colls = { COLL_ALLREDUCE }, .ncolls = 1, .tolerance = 10, .min_busbw = -1, .gpu = -1,
};

static void usage(void)
{
	printf("Usage: %s [options]\n"
	       "Measure libsmddp's collectives like nccl-tests; run one process per rank,\n"
	       "e.g. smddp-run -n 2 %s -b 8 -e 256M -f 2\n"
	       "\n"
	       "Options:\n"
	       "  -b, --minbytes SIZE       smallest size (default 32M); K, M, G = 2^10, 2^20, 2^30\n"
	       "  -e, --maxbytes SIZE       largest size (default 32M), always the last one\n"
	       "                            measured, even where -f or -i would step over it\n"
	       "  -f, --stepfactor N        multiply the size by N at each step\n"
	       "  -i, --stepbytes SIZE      add SIZE at each step when -f is 1 (default 1M)\n"
	       "  -n, --iters N             timed calls per size (default 20)\n"
	       "  -w, --warmup_iters N      untimed calls before them (default 5)\n"
	       "  -c, --check 0|1           check every element of a separate call (default 1)\n"
	       "  -d, --datatype TYPE       int8 uint8 int32 uint32 int64 uint64 float16\n"
	       "                            bfloat16 float32 float64 (or half, float, double...),\n"
	       "                            or all (default float32)\n"
	       "  -o, --op OP               sum prod min max avg, or all (default sum)\n"
	       "  -r, --root N|all          root of broadcast and reduce (default 0)\n"
	       "      --coll, --collective NAME\n"
	       "                            allreduce allgather reducescatter broadcast reduce\n"
	       "                            alltoall sendrecv alltoallv, or all (default\n"
	       "                            allreduce, or as the name all_gather_perf... says)\n"
	       "  -C, --report_cputime 0|1  the time column is the CPU time until the call\n"
	       "                            returns (as nccl-tests; busbw stays the real time);\n"
	       "                            -C NAME (not a number) is the old --coll NAME\n"
	       "  -T, --timeout SEC         every wait of libsmddp fails after SEC seconds\n"
	       "                            (SMDDP_TIMEOUT; 0: as configured)\n"
	       "  -z, --blocking 0|1        accepted for nccl-tests; host calls always block\n"
	       "  -g, --ngpus 1, -t, --nthreads 1\n"
	       "                            accepted for nccl-tests: one process is one rank\n"
	       "  -a, --average 0-3, -m, --agg_iters N, -G, --cudagraph N,\n"
	       "  -p, --parallel_init 0|1, -y, --stream_null 0|1, -R, --local_register 0-2\n"
	       "                            nccl-tests' options, accepted and ignored (the\n"
	       "                            header names them): the time is always the median\n"
	       "                            of the slowest rank, one call per timed iteration\n"
	       "      --json                one JSON object per size and line, no table\n"
	       "  -J, --json-file FILE      also write those lines to FILE (rank 0 only, never\n"
	       "                            tagged by smddp-run), beside the table\n"
	       "      --baseline FILE       exit 3 if a busbw is below FILE's (a saved --json run;\n"
	       "                            smddp-run's \"[0] \" tags are skipped)\n"
	       "      --tolerance PCT       ... by more than PCT percent (default 10)\n"
	       "      --min-busbw GBPS      exit 3 if a busbw of a size >= 1 MiB is below GBPS\n"
	       "      --compare mpi         under mpirun, run the same sweep through Open MPI%s\n"
	       "      --compare nccl        with --device cuda, the same sweep through NCCL\n"
	       "                            (one GPU per rank)%s\n"
	       "      --device host|cuda    where the buffers live (default host); cuda: device\n"
	       "                            memory and a stream, one GPU per local rank%s\n"
	       "      --gpu N               with --device cuda: use GPU N on every rank (default:\n"
	       "                            local rank modulo the number of GPUs, so ranks share\n"
	       "                            GPUs when there are fewer GPUs than ranks)\n"
	       "  -h, --help                show this help and exit\n"
	       "  -V, --version             show the version and exit\n"
	       "\n"
	       "Exit status: 0 ok, 1 runtime failure, 2 usage error, 3 a check failed\n"
	       "(wrong elements, below the baseline or below --min-busbw).\n"
	       "See smddp-allreduce-bench(1).\n",
	       PROG, PROG,
#ifdef HAVE_MPI
	       "",
#else
	       "\n                            (not in this build)",
#endif
#ifdef HAVE_NCCL
	       "",
#else
	       "\n                            (not in this build)",
#endif
#ifdef HAVE_CUDA
	       ""
#else
	       "\n                            (cuda: not in this build)"
#endif
	);
}

static uint64_t parse_size_arg(const char *flag, const char *s)
{
	uint64_t v;

	if (tool_parse_size(s, &v) < 0)
		tool_usage_error("%s: not a size: '%s' (try 8, 64K, 256M or 1G)", flag, s);
	return v;
}

static long parse_long_arg(const char *flag, const char *s, long min, long max)
{
	long v;

	if (tool_parse_long(s, min, max, &v) < 0)
		tool_usage_error("%s: '%s' is not a whole number from %ld to %ld", flag, s, min, max);
	return v;
}

static void parse_dtype(const char *s)
{
	if (!strcmp(s, "all")) {
		for (int i = 0; i < SMDDP_NUM_DTYPES; i++)
			opt.dtypes[i] = (enum smddp_dtype)i;
		opt.ndtypes = SMDDP_NUM_DTYPES;
		return;
	}
	for (size_t i = 0; i < sizeof(dtype_names) / sizeof(dtype_names[0]); i++) {
		if (!strcmp(s, dtype_names[i].name)) {
			opt.dtypes[0] = dtype_names[i].dt;
			opt.ndtypes = 1;
			return;
		}
	}
	tool_usage_error("-d: unknown datatype '%s' (int8 uint8 int32 uint32 int64 uint64 "
			 "float16 bfloat16 float32 float64 or all)", s);
}

static void parse_op(const char *s)
{
	if (!strcmp(s, "all")) {
		for (int i = 0; i < SMDDP_NUM_OPS; i++)
			opt.ops[i] = (enum smddp_op)i;
		opt.nops = SMDDP_NUM_OPS;
		return;
	}
	for (int i = 0; i < SMDDP_NUM_OPS; i++) {
		if (!strcmp(s, smddp_op_name((enum smddp_op)i))) {
			opt.ops[0] = (enum smddp_op)i;
			opt.nops = 1;
			return;
		}
	}
	tool_usage_error("-o: unknown op '%s' (sum prod min max avg or all)", s);
}

/* nccl-tests' per-collective programs, for a link of that name to this tool */
static const struct {
	const char *prog;
	enum bench_coll coll;
} perf_names[] = {
	{ "all_reduce_perf", COLL_ALLREDUCE },      { "all_gather_perf", COLL_ALLGATHER },
	{ "reduce_scatter_perf", COLL_REDUCESCATTER }, { "broadcast_perf", COLL_BROADCAST },
	{ "reduce_perf", COLL_REDUCE },             { "alltoall_perf", COLL_ALLTOALL },
	{ "sendrecv_perf", COLL_SENDRECV },
};

static void coll_from_argv0(const char *argv0)
{
	const char *base = strrchr(argv0, '/');

	base = base ? base + 1 : argv0;
	for (size_t i = 0; i < sizeof(perf_names) / sizeof(perf_names[0]); i++)
		if (!strcmp(base, perf_names[i].prog))
			opt.colls[0] = perf_names[i].coll;
}

/* An option of nccl-tests that has no meaning here: checked like theirs
 * (a whole number) and named in the header, so that nobody reads a
 * number as measured with it. */
static void ignore_opt(int c, const char *arg, long min, long max)
{
	char flag[4] = { '-', (char)c, 0, 0 };
	size_t used = strlen(opt.ignored);

	parse_long_arg(flag, arg, min, max);
	snprintf(opt.ignored + used, sizeof(opt.ignored) - used, "%s-%c %s", used ? " " : "", c,
		 arg);
}

static void parse_coll(const char *flag, const char *s)
{
	if (!strcmp(s, "all")) {
		for (int i = 0; i < NUM_COLLS; i++)
			opt.colls[i] = (enum bench_coll)i;
		opt.ncolls = NUM_COLLS;
		return;
	}
	for (int i = 0; i < NUM_COLLS; i++) {
		if (!strcmp(s, coll_names[i])) {
			opt.colls[0] = (enum bench_coll)i;
			opt.ncolls = 1;
			return;
		}
	}
	tool_usage_error("%s: unknown collective '%s' (allreduce allgather reducescatter "
			 "broadcast reduce alltoall sendrecv alltoallv or all%s)", flag, s,
			 flag[1] == 'C' ? "; or 0|1: report_cputime" : "");
}

enum { OPT_COLL = 256, OPT_JSON, OPT_BASELINE, OPT_TOLERANCE, OPT_MIN_BUSBW, OPT_COMPARE, OPT_DEVICE, OPT_GPU };

static void parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "minbytes", required_argument, NULL, 'b' },
		{ "maxbytes", required_argument, NULL, 'e' },
		{ "stepfactor", required_argument, NULL, 'f' },
		{ "stepbytes", required_argument, NULL, 'i' },
		{ "iters", required_argument, NULL, 'n' },
		{ "warmup_iters", required_argument, NULL, 'w' },
		{ "check", required_argument, NULL, 'c' },
		{ "datatype", required_argument, NULL, 'd' },
		{ "op", required_argument, NULL, 'o' },
		{ "root", required_argument, NULL, 'r' },
		{ "blocking", required_argument, NULL, 'z' },
		{ "coll", required_argument, NULL, OPT_COLL },
		{ "collective", required_argument, NULL, OPT_COLL },
		{ "report_cputime", required_argument, NULL, 'C' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "average", required_argument, NULL, 'a' },
		{ "agg_iters", required_argument, NULL, 'm' },
		{ "cudagraph", required_argument, NULL, 'G' },
		{ "parallel_init", required_argument, NULL, 'p' },
		{ "stream_null", required_argument, NULL, 'y' },
		{ "local_register", required_argument, NULL, 'R' },
		{ "ngpus", required_argument, NULL, 'g' },
		{ "nthreads", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "json-file", required_argument, NULL, 'J' },
		{ "baseline", required_argument, NULL, OPT_BASELINE },
		{ "tolerance", required_argument, NULL, OPT_TOLERANCE },
		{ "min-busbw", required_argument, NULL, OPT_MIN_BUSBW },
		{ "compare", required_argument, NULL, OPT_COMPARE },
		{ "device", required_argument, NULL, OPT_DEVICE },
		{ "gpu", required_argument, NULL, OPT_GPU },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:b:e:f:i:n:w:c:d:o:r:z:C:g:t:J:T:a:m:G:p:y:R:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'b': opt.minbytes = parse_size_arg("-b", optarg); break;
		case 'e': opt.maxbytes = parse_size_arg("-e", optarg); break;
		case 'f': opt.stepfactor = parse_long_arg("-f", optarg, 1, 1024); break;
		case 'i': opt.stepbytes = parse_size_arg("-i", optarg); break;
		case 'n': opt.iters = parse_long_arg("-n", optarg, 1, 10000000); break;
		case 'w': opt.warmup = parse_long_arg("-w", optarg, 0, 10000000); break;
		case 'c': opt.check = (int)parse_long_arg("-c", optarg, 0, 1); break;
		case 'd': parse_dtype(optarg); break;
		case 'o': parse_op(optarg); break;
		case 'r':
			opt.root = !strcmp(optarg, "all") ? -1
							  : (int)parse_long_arg("-r", optarg, 0, 1 << 30);
			break;
		case 'z': opt.blocking = (int)parse_long_arg("-z", optarg, 0, 1); break;
		case OPT_COLL: parse_coll("--coll", optarg); break;
		case 'C': {
			/* nccl-tests' report_cputime takes a number; a collective's
			 * name never is one, so the old -C NAME still works. */
			long v;
			if (tool_parse_long(optarg, LONG_MIN, LONG_MAX, &v) < 0)
				parse_coll("-C", optarg);
			else
				opt.cputime = parse_long_arg("-C", optarg, 0, 1);
			break;
		}
		case 'T': {
			long sec = parse_long_arg("-T", optarg, 0, 1L << 30);
			char val[24];
			/* the command line before the environment (DESIGN 4) */
			snprintf(val, sizeof(val), "%ld", sec);
			if (sec > 0 && setenv("SMDDP_TIMEOUT", val, 1) < 0)
				tool_usage_error("-T: cannot set SMDDP_TIMEOUT");
			break;
		}
		case 'a': ignore_opt(c, optarg, 0, 3); break;
		case 'm': ignore_opt(c, optarg, 0, 1L << 30); break;
		case 'G': ignore_opt(c, optarg, 0, 1L << 30); break;
		case 'p': ignore_opt(c, optarg, 0, 1); break;
		case 'y': ignore_opt(c, optarg, 0, 1); break;
		case 'R': ignore_opt(c, optarg, 0, 2); break;
		case 'g':
		case 't':
			/* nccl-tests' threads and GPUs per process: here one rank
			 * is one process. */
			parse_long_arg(c == 'g' ? "-g" : "-t", optarg, 1, 1);
			break;
		case OPT_JSON: opt.json = true; break;
		case 'J':
			if (!*optarg)
				tool_usage_error("-J: empty file name");
			opt.json_file = optarg;
			break;
		case OPT_BASELINE: opt.baseline = optarg; break;
		case OPT_TOLERANCE:
			if (tool_parse_double(optarg, 0, 100, &opt.tolerance) < 0)
				tool_usage_error("--tolerance: '%s' is not a percentage from 0 to 100",
						 optarg);
			break;
		case OPT_MIN_BUSBW:
			if (tool_parse_double(optarg, 0, 1e9, &opt.min_busbw) < 0)
				tool_usage_error("--min-busbw: '%s' is not a bandwidth in GB/s", optarg);
			break;
		case OPT_COMPARE:
			if (!strcmp(optarg, "nccl")) {
#ifndef HAVE_NCCL
				tool_usage_error("--compare nccl: built without NCCL (configure "
						 "--with-cuda where nccl.h and libnccl are)");
#endif
				opt.compare_nccl = true;
				break;
			}
			if (strcmp(optarg, "mpi") != 0)
				tool_usage_error("--compare: unknown '%s' (mpi or nccl)", optarg);
#ifndef HAVE_MPI
			tool_usage_error("--compare mpi: built without Open MPI");
#endif
			opt.compare_mpi = true;
			break;
		case OPT_DEVICE:
			if (!strcmp(optarg, "host")) {
				opt.on_gpu = false;
				break;
			}
			if (strcmp(optarg, "cuda") != 0)
				tool_usage_error("--device: unknown '%s' (host or cuda)", optarg);
#ifndef HAVE_CUDA
			tool_usage_error("--device cuda: built without CUDA (configure --with-cuda)");
#endif
			opt.on_gpu = true;
			break;
		case OPT_GPU: opt.gpu = (int)parse_long_arg("--gpu", optarg, 0, 1023); break;
		case 'h': usage(); exit(TOOL_EXIT_OK);
		case 'V':
			printf("%s from libsmddp %s\n", PROG, smddp_version());
			exit(TOOL_EXIT_OK);
		default: tool_getopt_error(c, optopt, argv, optind);
		}
	}
	if (optind < argc)
		tool_usage_error("unexpected argument '%s'", argv[optind]);
	if (opt.minbytes > opt.maxbytes)
		tool_usage_error("-b %" PRIu64 " is larger than -e %" PRIu64, opt.minbytes, opt.maxbytes);
	if (opt.stepfactor <= 1 && opt.stepbytes == 0 && opt.minbytes < opt.maxbytes)
		tool_usage_error("-i 0 with -f 1 would never reach -e");
	if (opt.maxbytes > ((uint64_t)1 << 40))
		tool_usage_error("-e %" PRIu64 " is beyond 1 TiB", opt.maxbytes);
	if (opt.compare_mpi && opt.on_gpu)
		tool_usage_error("--compare mpi measures host memory: leave out --device cuda");
	if (opt.compare_nccl && !opt.on_gpu)
		tool_usage_error("--compare nccl needs --device cuda");
	if (opt.compare_nccl && opt.compare_mpi)
		tool_usage_error("--compare takes one of mpi and nccl");
	if (opt.gpu >= 0 && !opt.on_gpu)
		tool_usage_error("--gpu needs --device cuda");
	if (opt.compare_mpi && !getenv("OMPI_COMM_WORLD_SIZE"))
		tool_usage_error("--compare mpi needs a launch by Open MPI's mpirun "
				 "(OMPI_COMM_WORLD_SIZE is not set)");
}

/* The size after SIZE (< -e): the sweep always ends exactly at -e, added as
 * its last point where the factor or the step would jump over it (nccl-tests
 * stop at the last size below, so -b 8 -e 64M -f 4 ends at 32M there). */
static uint64_t next_size(uint64_t size)
{
	uint64_t next;

	if (opt.stepfactor > 1)
		next = size ? size * (uint64_t)opt.stepfactor : 1;
	else
		next = size + opt.stepbytes;
	return next > opt.maxbytes ? opt.maxbytes : next;
}

/* ---- the library measured ----------------------------------------------- */

static struct smddp_comm *comm;
static int rank, nranks;

static noreturn void fail(const char *what, int rc)
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

static void *stream; /* --device cuda: the stream of every call */
#ifdef HAVE_CUDA
static noreturn void gpu_fail(const char *err);
#endif

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

static const struct bench_backend smddp_backend = {
	.name = "libsmddp",
	.run = sm_run,
	.barrier = sm_barrier,
	.ip_send_off = sm_ip_send_off,
	.ip_recv_off = sm_ip_recv_off,
	.unsupported = sm_unsupported,
	.last_error = sm_last_error,
};

/* ---- measuring one size --------------------------------------------------- */

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

static void *sendbuf, *recvbuf;
static double *times, *cputimes;
static size_t *vlayout; /* alltoallv: 4 arrays of nranks counts */

#ifdef HAVE_CUDA
static void *stage; /* --device cuda: host copy of a device buffer */

static noreturn void gpu_fail(const char *err)
{
	tool_warn("rank %d: %s", rank, err);
	smddp_comm_abort(comm);
	exit(TOOL_EXIT_FAILURE);
}
#endif

/* The fill, poison and check of bench_data.c, on host memory or through the
 * host copy of a device buffer. */
static void buf_fill(void *buf, size_t n, enum smddp_dtype dt, enum smddp_op op)
{
#ifdef HAVE_CUDA
	char err[256];

	if (opt.on_gpu) {
		bench_fill(stage, n, 0, dt, op, rank);
		if (bench_cuda_copy(buf, stage, n * smddp_dtype_size(dt), 0, err, sizeof(err)))
			gpu_fail(err);
		return;
	}
#endif
	bench_fill(buf, n, 0, dt, op, rank);
}

static void buf_poison(void *buf, size_t n, enum smddp_dtype dt)
{
#ifdef HAVE_CUDA
	char err[256];

	if (opt.on_gpu) {
		bench_poison(stage, n, dt);
		if (bench_cuda_copy(buf, stage, n * smddp_dtype_size(dt), 0, err, sizeof(err)))
			gpu_fail(err);
		return;
	}
#endif
	bench_poison(buf, n, dt);
}

static const void *buf_fetch(const void *buf, size_t n, enum smddp_dtype dt)
{
#ifdef HAVE_CUDA
	char err[256];

	if (opt.on_gpu) {
		if (bench_cuda_sync(err, sizeof(err)) ||
		    bench_cuda_copy(stage, buf, n * smddp_dtype_size(dt), 1, err, sizeof(err)))
			gpu_fail(err);
		return stage;
	}
#endif
	(void)n;
	(void)dt;
	return buf;
}

/* After a timed call: a device call is finished once its stream is. */
static void finish_call(void)
{
#ifdef HAVE_CUDA
	char err[256];

	if (opt.on_gpu && bench_cuda_sync(err, sizeof(err)))
		gpu_fail(err);
#endif
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void be_check(const struct bench_backend *be, const char *what, int rc)
{
	if (!rc)
		return;
	if (be == &smddp_backend)
		fail(what, rc);
	tool_warn("rank %d: %s %s failed: %s", rank, be->name, what, be->last_error(rc));
	smddp_comm_abort(comm);
#ifdef HAVE_MPI
	bench_mpi_abort(TOOL_EXIT_FAILURE);
#endif
	exit(TOOL_EXIT_FAILURE);
}

static void be_run(const struct bench_backend *be, const struct bench_call *call)
{
	int rc = be->run(call);

	if (rc) {
		char what[96];
		snprintf(what, sizeof(what), "%s of %zu %s", coll_names[call->coll], call->count,
			 smddp_dtype_name(call->dtype));
		be_check(be, what, rc);
	}
}

static void be_barrier(const struct bench_backend *be)
{
	be_check(be, "barrier", be->barrier());
}

/* Each call's time becomes that of its slowest rank; the median of those
 * (T is sorted in place). */
static double slowest_median(double *t)
{
	int rc = smddp_allreduce(t, t, (size_t)opt.iters, SMDDP_FLOAT64, SMDDP_MAX, comm, NULL);

	if (rc)
		fail("allreduce of the times", rc);
	qsort(t, (size_t)opt.iters, sizeof(double), cmp_double);
	return opt.iters % 2 ? t[opt.iters / 2] : (t[opt.iters / 2 - 1] + t[opt.iters / 2]) / 2;
}

static void measure(const struct bench_backend *be, struct bench_call call,
		    const struct bench_geom *g, int inplace, struct meas *m)
{
	size_t es = smddp_dtype_size(call.dtype);
	char *rbase = recvbuf;
	int rc;

	memset(m, 0, sizeof(*m));
	m->wrong = -1;
	if (inplace && !coll_has_inplace(call.coll)) {
		m->none = true;
		return;
	}
	if (call.coll == COLL_ALLTOALLV) {
		size_t n = (size_t)nranks;
		bench_v_layout(rank, nranks, g->param, vlayout, vlayout + n, vlayout + 2 * n,
			       vlayout + 3 * n);
		call.sendcounts = vlayout;
		call.sdispls = vlayout + n;
		call.recvcounts = vlayout + 2 * n;
		call.rdispls = vlayout + 3 * n;
	}
	call.inplace = inplace;
	if (inplace) {
		call.sendbuf = rbase + be->ip_send_off(call.coll, rank, g->param) * es;
		call.recvbuf = rbase + be->ip_recv_off(call.coll, rank, g->param) * es;
	} else {
		call.sendbuf = sendbuf;
		call.recvbuf = recvbuf;
	}

	for (long i = 0; i < opt.warmup; i++)
		be_run(be, &call);
	finish_call();
	be_barrier(be);
	for (long i = 0; i < opt.iters; i++) {
		double t0 = now_s();
		be_run(be, &call);
		cputimes[i] = now_s() - t0;
		finish_call();
		times[i] = now_s() - t0;
	}
	double sec = slowest_median(times);
	m->time_us = sec * 1e6;
	if (opt.cputime)
		m->cputime_us = slowest_median(cputimes) * 1e6;
	m->algbw = sec > 0 ? (double)g->bytes / sec / 1e9 : 0;
	m->busbw = m->algbw * bus_factor(call.coll, nranks);
	if (!opt.check)
		return;

	/* The checked call: poison everything the rank may receive into, then
	 * write its input where this layout wants it. */
	size_t whole = g->send > g->recv ? g->send : g->recv;
	buf_poison(rbase, inplace ? whole : g->recv, call.dtype);
	if (!(call.coll == COLL_BROADCAST && rank != call.root))
		buf_fill(inplace ? call.sendbuf : sendbuf, g->send, call.dtype, call.op);
	be_run(be, &call);
	uint64_t wrong = bench_check(call.coll, call.dtype, call.op, call.root, rank, nranks,
				     g->param,
				     buf_fetch(call.recvbuf,
					       call.coll == COLL_REDUCESCATTER ? g->param : g->recv,
					       call.dtype));
	rc = smddp_allreduce(&wrong, &wrong, 1, SMDDP_UINT64, SMDDP_SUM, comm, NULL);
	if (rc)
		fail("allreduce of the wrong counts", rc);
	m->wrong = (int64_t)wrong;
}

/* ---- output ----------------------------------------------------------------- */

static bool progress;

static void progress_clear(void)
{
	if (progress)
		fputs("\r\033[K", stderr);
}

static void progress_show(const struct result *r, const char *be)
{
	char root[24] = "";

	if (!progress)
		return;
	if (r->root >= 0)
		snprintf(root, sizeof(root), " root %d", r->root);
	fprintf(stderr, "\r\033[K%s: %s %s%s%s%s: %" PRIu64 " B ...", be, coll_names[r->coll],
		smddp_dtype_name(r->dtype), r->op < 0 ? "" : " ",
		r->op < 0 ? "" : smddp_op_name((enum smddp_op)r->op), root, r->bytes);
	fflush(stderr);
}

static void print_table_header(enum bench_coll c, const char *be, bool ratio)
{
	if (opt.json || rank != 0)
		return;
	printf("#\n# Collective: %s (%s)\n", coll_names[c], be);
	printf("#                                                              out-of-place"
	       "                       in-place          %s\n",
	       ratio ? "   busbw ratio" : "");
	/* -C 1: nccl-tests' header names the CPU time the same way */
	const char *t = opt.cputime ? "cputime" : "   time";

	printf("#       size         count      type   redop    root  %s   algbw   busbw"
	       " #wrong  %s   algbw   busbw #wrong%s\n",
	       t, t, ratio ? "     oop      ip" : "");
	printf("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
	       "            (us)  (GB/s)  (GB/s)       %s\n",
	       ratio ? "     (x)     (x)" : "");
	fflush(stdout);
}

static void fmt_time(char *buf, size_t len, double us)
{
	snprintf(buf, len, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
}

/* busbw of ours / busbw of theirs; both moved the same bytes with the same
 * factor, so this is their time over ours, which also holds where busbw
 * is 0 (one rank, or a size that rounds to 0 elements). */
static double ratio_of(const struct meas *ours, const struct meas *theirs)
{
	return ours->time_us > 0 ? theirs->time_us / ours->time_us : 0;
}

static void print_json_ratio(FILE *f, const char *pfx, const struct meas *ours,
			     const struct meas *theirs)
{
	if (ours->none || theirs->none)
		fprintf(f, ",\"%s_ratio\":null", pfx);
	else
		fprintf(f, ",\"%s_ratio\":%.6g", pfx, ratio_of(ours, theirs));
}

static void print_json_meas(FILE *f, const char *pfx, const struct meas *m)
{
	if (m->none) {
		fprintf(f, ",\"%s_time_us\":null,\"%s_algbw_gbps\":null,\"%s_busbw_gbps\":null,"
			"\"%s_wrong\":null", pfx, pfx, pfx, pfx);
		if (opt.cputime)
			fprintf(f, ",\"%s_cputime_us\":null", pfx);
		return;
	}
	fprintf(f, ",\"%s_time_us\":%.3f,\"%s_algbw_gbps\":%.6g,\"%s_busbw_gbps\":%.6g,\"%s_wrong\":",
		pfx, m->time_us, pfx, m->algbw, pfx, m->busbw, pfx);
	if (m->wrong < 0)
		fprintf(f, "null");
	else
		fprintf(f, "%" PRId64, m->wrong);
	if (opt.cputime)
		fprintf(f, ",\"%s_cputime_us\":%.3f", pfx, m->cputime_us);
}

static FILE *json_file; /* -J, rank 0 */

static void print_json_row(FILE *f, const struct result *r, const char *impl,
			   const struct result *ours)
{
	const char *opname = r->op < 0 ? "none" : smddp_op_name((enum smddp_op)r->op);

	fprintf(f, "{\"collective\":\"%s\",\"impl\":\"%s\",\"size_bytes\":%" PRIu64
		",\"count\":%zu,\"type\":\"%s\",\"redop\":\"%s\",\"root\":%d",
		coll_names[r->coll], impl, r->bytes, r->count, smddp_dtype_name(r->dtype), opname,
		r->root);
	print_json_meas(f, "oop", &r->m[0]);
	print_json_meas(f, "ip", &r->m[1]);
	fprintf(f, ",\"nranks\":%d", nranks);
	if (ours) {
		print_json_ratio(f, "oop", &ours->m[0], &r->m[0]);
		print_json_ratio(f, "ip", &ours->m[1], &r->m[1]);
	}
	fprintf(f, "}\n");
	fflush(f);
}

static void print_row(const struct result *r, const char *impl, const struct result *ours)
{
	const char *opname = r->op < 0 ? "none" : smddp_op_name((enum smddp_op)r->op);

	if (rank != 0)
		return;
	progress_clear();
	if (json_file)
		print_json_row(json_file, r, impl, ours);
	if (opt.json) {
		print_json_row(stdout, r, impl, ours);
		return;
	}
	printf("%12" PRIu64 "  %12zu  %8s  %6s  %6d", r->bytes, r->count, smddp_dtype_name(r->dtype),
	       opname, r->root);
	for (int k = 0; k < 2; k++) {
		char t[32], w[32];
		if (r->m[k].none) {
			printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
			continue;
		}
		fmt_time(t, sizeof(t), opt.cputime ? r->m[k].cputime_us : r->m[k].time_us);
		if (r->m[k].wrong < 0)
			snprintf(w, sizeof(w), "N/A");
		else
			snprintf(w, sizeof(w), "%" PRId64, r->m[k].wrong);
		printf("  %7s  %6.2f  %6.2f  %5s", t, r->m[k].algbw, r->m[k].busbw, w);
	}
	for (int k = 0; ours && k < 2; k++) {
		if (ours->m[k].none || r->m[k].none)
			printf("  %6s", "N/A");
		else
			printf("  %6.2f", ratio_of(&ours->m[k], &r->m[k]));
	}
	printf("\n");
	fflush(stdout);
}

/* ---- the sweep -------------------------------------------------------------- */

struct sweep {
	struct result *res;
	size_t n, cap;
	uint64_t wrong;
	double bw_sum;
	long bw_count;
};

static void add_result(struct sweep *s, const struct result *r)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->res = realloc(s->res, s->cap * sizeof(*s->res));
		if (!s->res) {
			tool_warn("rank %d: out of memory", rank);
			smddp_comm_abort(comm);
			exit(TOOL_EXIT_FAILURE);
		}
	}
	s->res[s->n++] = *r;
}

/* Runs the whole sweep through one backend; with `ours` (the libsmddp sweep,
 * in the same order) each row also gets the ratio of busbws. */
static void run_sweep(const struct bench_backend *be, struct sweep *s, const struct sweep *ours)
{
	size_t idx = 0;

	for (int ci = 0; ci < opt.ncolls; ci++) {
		enum bench_coll coll = opt.colls[ci];
		int nops = coll_reduces(coll) ? opt.nops : 1;
		int root_lo = 0, root_hi = 0;

		if (coll_rooted(coll)) {
			root_lo = opt.root < 0 ? 0 : opt.root;
			root_hi = opt.root < 0 ? nranks - 1 : opt.root;
		}
		print_table_header(coll, be->name, ours != NULL);
		for (int di = 0; di < opt.ndtypes; di++) {
			enum smddp_dtype dt = opt.dtypes[di];
			size_t es = smddp_dtype_size(dt);
			for (int oi = 0; oi < nops; oi++) {
				/* Non-reducing collectives carry the SUM pattern. */
				enum smddp_op op = coll_reduces(coll) ? opt.ops[oi] : SMDDP_SUM;
				const char *why = be->unsupported(dt, coll_reduces(coll) ? op : SMDDP_SUM);
				if (why && rank == 0 && !opt.json)
					printf("# %s %s %s: skipped: %s\n", coll_names[coll],
					       smddp_dtype_name(dt),
					       coll_reduces(coll) ? smddp_op_name(op) : "none", why);
				/* The timed calls need sane numbers in both buffers. */
				if (!why) {
					buf_fill(sendbuf, (size_t)(opt.maxbytes / es), dt, op);
					buf_fill(recvbuf, (size_t)(opt.maxbytes / es), dt, op);
				}
				for (int root = root_lo; root <= root_hi; root++) {
					for (uint64_t size = opt.minbytes, more = 1; more;
					     more = size < opt.maxbytes, size = next_size(size)) {
						struct bench_geom g;
						struct result r = {
							.coll = coll, .dtype = dt,
							.op = coll_reduces(coll) ? (int)op : -1,
							.root = coll_rooted(coll) ? root : -1,
						};
						geometry(coll, size, es, nranks, &g);
						r.bytes = g.bytes;
						r.count = g.param;
						const struct result *o =
							ours && idx < ours->n ? &ours->res[idx] : NULL;
						idx++;
						if (why) {
							r.skipped = true;
							add_result(s, &r);
							continue;
						}
						if (rank == 0)
							progress_show(&r, be->name);
						struct bench_call call = {
							.coll = coll, .dtype = dt, .op = op,
							.root = coll_rooted(coll) ? root : 0,
							.count = g.param,
						};
						measure(be, call, &g, 0, &r.m[0]);
						measure(be, call, &g, 1, &r.m[1]);
						for (int k = 0; k < 2; k++) {
							if (r.m[k].none)
								continue;
							if (r.m[k].wrong > 0)
								s->wrong += (uint64_t)r.m[k].wrong;
							s->bw_sum += r.m[k].busbw;
							s->bw_count++;
						}
						add_result(s, &r);
						print_row(&r, be == &smddp_backend ? "smddp"
							       : !strcmp(be->name, "NCCL") ? "nccl"
											      : "mpi",
							  o);
					}
				}
			}
		}
	}
	if (rank == 0) {
		progress_clear();
		fflush(stderr);
	}
}

static void print_footer(const struct sweep *s)
{
	if (rank != 0 || opt.json)
		return;
	printf("# Out of bounds values : %" PRIu64 " %s\n", s->wrong, s->wrong ? "FAILED" : "OK");
	printf("# Avg bus bandwidth    : %g \n", s->bw_count ? s->bw_sum / (double)s->bw_count : 0.0);
	printf("#\n");
	fflush(stdout);
}

/* ---- the header --------------------------------------------------------------- */

struct rank_info {
	int32_t pid;
	int32_t rank;
	char host[56];
	int32_t gpu; /* -1: host memory */
	char gpu_name[60];
};

static void print_header(void)
{
	struct rank_info me = { .pid = (int32_t)getpid(), .rank = rank, .gpu = -1 }, *all;
	int rc;

	gethostname(me.host, sizeof(me.host));
	me.host[sizeof(me.host) - 1] = 0;
#ifdef HAVE_CUDA
	if (opt.on_gpu) {
		me.gpu = bench_cuda_device();
		snprintf(me.gpu_name, sizeof(me.gpu_name), "%s", bench_cuda_device_name());
	}
#endif
	all = calloc((size_t)nranks, sizeof(*all));
	if (!all) {
		tool_warn("rank %d: out of memory", rank);
		smddp_comm_abort(comm);
		exit(TOOL_EXIT_FAILURE);
	}
	rc = smddp_allgather(&me, all, sizeof(me), SMDDP_UINT8, comm, NULL);
	if (rc)
		fail("allgather of the rank table", rc);
	if (rank == 0 && !opt.json) {
		printf("# Collective test starting: %s\n", PROG);
		printf("# nRanks %d minBytes %" PRIu64 " maxBytes %" PRIu64, nranks, opt.minbytes,
		       opt.maxbytes);
		if (opt.stepfactor > 1)
			printf(" step: %ld(factor)", opt.stepfactor);
		else
			printf(" step: %" PRIu64 "(bytes)", opt.stepbytes);
		printf(" warmup iters: %ld iters: %ld validation: %d blocking: %d\n", opt.warmup,
		       opt.iters, opt.check, opt.blocking);
		printf("# libsmddp %s; %s: median over iterations of the slowest rank\n",
		       smddp_version(), opt.cputime ? "cputime (until the call returns)" : "time");
		if (opt.ignored[0])
			printf("# nccl-tests options accepted and ignored: %s\n", opt.ignored);
		printf("#\n# Using ranks\n");
		for (int r = 0; r < nranks; r++)
			if (all[r].gpu >= 0)
				printf("#  Rank %2d Pid %6d on %10s device %2d [%s]\n", r,
				       (int)all[r].pid, all[r].host, (int)all[r].gpu, all[r].gpu_name);
			else
				printf("#  Rank %2d Pid %6d on %10s\n", r, (int)all[r].pid, all[r].host);
		fflush(stdout);
	}
	free(all);
}

/* ---- --baseline and --min-busbw --------------------------------------------- */

struct base_row {
	char coll[16], type[16], redop[8];
	uint64_t bytes;
	int root;
	double busbw[2];
};

/* Reads a saved --json run; returns the number of rows, or -1 with a
 * message on stderr. */
static long load_baseline(const char *path, struct base_row **out)
{
	FILE *f = fopen(path, "r");
	struct base_row *rows = NULL;
	long n = 0, cap = 0, lineno = 0;
	char *line = NULL;
	size_t len = 0;

	if (!f) {
		tool_warn_errno("--baseline: cannot open %s", path);
		return -1;
	}
	while (getline(&line, &len, f) >= 0) {
		char *text = line;

		lineno++;
		if (strspn(line, " \t\r\n") == strlen(line))
			continue;
		/* smddp-run's "[R] " tag: `smddp-run -n 2 ... --json > f` */
		if (text[0] == '[' && isdigit((unsigned char)text[1])) {
			char *end = text + 1 + strspn(text + 1, "0123456789");
			if (end[0] == ']' && end[1] == ' ')
				text = end + 2;
		}
		cJSON *o = cJSON_Parse(text);
		cJSON *coll = cJSON_GetObjectItemCaseSensitive(o, "collective");
		cJSON *impl = cJSON_GetObjectItemCaseSensitive(o, "impl");
		cJSON *size = cJSON_GetObjectItemCaseSensitive(o, "size_bytes");
		cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
		cJSON *redop = cJSON_GetObjectItemCaseSensitive(o, "redop");
		cJSON *root = cJSON_GetObjectItemCaseSensitive(o, "root");
		cJSON *ob = cJSON_GetObjectItemCaseSensitive(o, "oop_busbw_gbps");
		cJSON *ib = cJSON_GetObjectItemCaseSensitive(o, "ip_busbw_gbps");
		if (!cJSON_IsObject(o) || !cJSON_IsString(coll) || !cJSON_IsNumber(size) ||
		    !cJSON_IsString(type) || !cJSON_IsString(redop) || !cJSON_IsNumber(root) ||
		    !cJSON_IsNumber(ob) || !(cJSON_IsNumber(ib) || cJSON_IsNull(ib))) {
			tool_warn("--baseline: %s:%ld: not a line of %s --json (needs collective, "
				  "size_bytes, type, redop, root, oop_busbw_gbps, ip_busbw_gbps)",
				  path, lineno, PROG);
			cJSON_Delete(o);
			free(rows);
			free(line);
			fclose(f);
			return -1;
		}
		if (cJSON_IsString(impl) && strcmp(impl->valuestring, "smddp") != 0) {
			cJSON_Delete(o); /* an --compare mpi row */
			continue;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			struct base_row *nr = realloc(rows, (size_t)cap * sizeof(*rows));
			if (!nr) {
				tool_warn("--baseline: out of memory");
				cJSON_Delete(o);
				free(rows);
				free(line);
				fclose(f);
				return -1;
			}
			rows = nr;
		}
		struct base_row *b = &rows[n++];
		snprintf(b->coll, sizeof(b->coll), "%s", coll->valuestring);
		snprintf(b->type, sizeof(b->type), "%s", type->valuestring);
		snprintf(b->redop, sizeof(b->redop), "%s", redop->valuestring);
		b->bytes = (uint64_t)size->valuedouble;
		b->root = (int)root->valuedouble;
		b->busbw[0] = ob->valuedouble;
		b->busbw[1] = cJSON_IsNumber(ib) ? ib->valuedouble : -1; /* alltoallv: none */
		cJSON_Delete(o);
	}
	free(line);
	fclose(f);
	*out = rows;
	return n;
}

/* Rank 0: the verdict of --baseline and --min-busbw, 0 or TOOL_EXIT_CHECK. */
static int judge(const struct sweep *s, const struct base_row *base, long nbase)
{
	static const char *const which[2] = { "out-of-place", "in-place" };
	int verdict = TOOL_EXIT_OK;
	long matched = 0, floored = 0;

	for (size_t i = 0; i < s->n; i++) {
		const struct result *r = &s->res[i];
		const char *opname = r->op < 0 ? "none" : smddp_op_name((enum smddp_op)r->op);
		if (r->skipped)
			continue;
		for (long j = 0; opt.baseline && j < nbase; j++) {
			const struct base_row *b = &base[j];
			if (b->bytes != r->bytes || b->root != r->root || strcmp(b->coll, coll_names[r->coll]) ||
			    strcmp(b->type, smddp_dtype_name(r->dtype)) || strcmp(b->redop, opname))
				continue;
			matched++;
			for (int k = 0; k < 2; k++) {
				double floor = b->busbw[k] * (1 - opt.tolerance / 100);
				if (r->m[k].none || b->busbw[k] < 0)
					continue;
				if (r->m[k].busbw < floor) {
					tool_warn("below baseline: %s %" PRIu64 " B %s %s %s busbw %.3f GB/s "
						  "< %.3f (baseline %.3f - %g%%)",
						  coll_names[r->coll], r->bytes, smddp_dtype_name(r->dtype),
						  opname, which[k], r->m[k].busbw, floor, b->busbw[k],
						  opt.tolerance);
					verdict = TOOL_EXIT_CHECK;
				}
			}
			break;
		}
		if (opt.min_busbw >= 0 && r->bytes >= MIB) {
			floored++;
			for (int k = 0; k < 2; k++) {
				if (r->m[k].none)
					continue;
				if (r->m[k].busbw < opt.min_busbw) {
					tool_warn("below --min-busbw: %s %" PRIu64 " B %s %s %s busbw "
						  "%.3f GB/s < %g",
						  coll_names[r->coll], r->bytes, smddp_dtype_name(r->dtype),
						  opname, which[k], r->m[k].busbw, opt.min_busbw);
					verdict = TOOL_EXIT_CHECK;
				}
			}
		}
	}
	if (opt.baseline && !matched) {
		tool_warn("--baseline: no size of this run is in %s (same collective, size, type, "
			  "redop and root)", opt.baseline);
		verdict = TOOL_EXIT_CHECK;
	}
	if (opt.min_busbw >= 0 && !floored) {
		tool_warn("--min-busbw: no size of 1 MiB or more was measured");
		verdict = TOOL_EXIT_CHECK;
	}
	return verdict;
}

/* ---- main ------------------------------------------------------------------- */

static void *alloc_buf(size_t bytes)
{
	void *p = NULL;

	bytes = (bytes + 4095) / 4096 * 4096;
	if (!bytes)
		bytes = 4096;
	if (posix_memalign(&p, 4096, bytes) != 0) {
		tool_warn("rank %d: cannot allocate %zu bytes for the buffers (lower -e?)", rank,
			  bytes);
		smddp_comm_abort(comm);
		exit(TOOL_EXIT_FAILURE);
	}
	memset(p, 0, bytes); /* fault the pages in before anything is timed */
	return p;
}

/* Every rank leaves with rank 0's verdict, so that a launcher that reports
 * the first failing rank reports the right code. */
static int share_verdict(int v)
{
	int32_t x = v;
	int rc = smddp_broadcast(&x, 1, SMDDP_INT32, 0, comm, NULL);

	if (rc)
		fail("broadcast of the verdict", rc);
	return x;
}

int main(int argc, char **argv)
{
	struct sweep ours = { 0 };
	struct base_row *base = NULL;
	long nbase = 0;
	int rc, verdict;

	tool_init(PROG);
	coll_from_argv0(argv[0]);
	parse_args(argc, argv);

#ifdef HAVE_MPI
	if (opt.compare_mpi) {
		char err[256];
		/* MPI first, so that its progress engine and signal handlers
		 * are in place before libsmddp starts. */
		if (bench_mpi_init(&argc, &argv, err, sizeof(err)) != 0) {
			tool_warn("--compare mpi: %s", err);
			return TOOL_EXIT_FAILURE;
		}
	}
#endif
	rc = smddp_init(&comm);
	if (rc) {
		tool_warn("smddp_init failed: %s%s%s", smddp_strerror(rc),
			  *smddp_last_error(NULL) ? ": " : "", smddp_last_error(NULL));
		return TOOL_EXIT_FAILURE;
	}
	rank = smddp_comm_rank(comm);
	nranks = smddp_comm_size(comm);
#ifdef HAVE_MPI
	if (opt.compare_mpi && (bench_mpi_rank() != rank || bench_mpi_size() != nranks)) {
		tool_warn("rank %d: MPI says rank %d of %d, libsmddp rank %d of %d: the two must agree",
			  rank, bench_mpi_rank(), bench_mpi_size(), rank, nranks);
		smddp_comm_abort(comm);
		bench_mpi_abort(TOOL_EXIT_FAILURE);
	}
#endif
	if (opt.root >= nranks) {
		if (rank == 0)
			tool_warn("-r %d: there are only %d ranks", opt.root, nranks);
		smddp_comm_destroy(comm);
		return TOOL_EXIT_USAGE;
	}
	/* Only rank 0 reads the baseline (it may be on rank 0's host only);
	 * the others learn whether it was readable. */
	verdict = TOOL_EXIT_OK;
	if (opt.baseline && rank == 0) {
		nbase = load_baseline(opt.baseline, &base);
		if (nbase < 0)
			verdict = TOOL_EXIT_USAGE;
	}
	if (opt.baseline && share_verdict(verdict) != TOOL_EXIT_OK) {
		smddp_comm_destroy(comm);
		return TOOL_EXIT_USAGE;
	}
	/* -J: rank 0 alone writes the file, as it alone prints; after the
	 * baseline was read, which may be the same file. */
	if (opt.json_file) {
		verdict = TOOL_EXIT_OK;
		if (rank == 0 && !(json_file = fopen(opt.json_file, "w"))) {
			tool_warn_errno("-J: cannot create %s", opt.json_file);
			verdict = TOOL_EXIT_FAILURE;
		}
		if (share_verdict(verdict) != TOOL_EXIT_OK) {
			smddp_comm_destroy(comm);
			return TOOL_EXIT_FAILURE;
		}
	}
	progress = rank == 0 && isatty(STDERR_FILENO);

#ifdef HAVE_CUDA
	if (opt.on_gpu) {
		char err[256];

		if (bench_cuda_init(smddp_comm_local_rank(comm), opt.gpu, err, sizeof(err)) ||
		    !(sendbuf = bench_cuda_alloc((size_t)opt.maxbytes, err, sizeof(err))) ||
		    !(recvbuf = bench_cuda_alloc((size_t)opt.maxbytes, err, sizeof(err))))
			gpu_fail(err);
		stream = bench_cuda_stream();
		stage = alloc_buf((size_t)opt.maxbytes);
	}
#endif
	if (!opt.on_gpu) {
		sendbuf = alloc_buf((size_t)opt.maxbytes);
		recvbuf = alloc_buf((size_t)opt.maxbytes);
	}
	times = calloc((size_t)opt.iters, sizeof(*times));
	cputimes = calloc((size_t)opt.iters, sizeof(*cputimes));
	vlayout = calloc(4 * (size_t)nranks, sizeof(*vlayout));
	if (!times || !cputimes || !vlayout)
		fail("allocation of the timing array", SMDDP_ENOMEM);

	print_header();
	run_sweep(&smddp_backend, &ours, NULL);
	print_footer(&ours);

#ifdef HAVE_MPI
	struct sweep theirs = { 0 };
	if (opt.compare_mpi) {
		const struct bench_backend *mpi = bench_mpi_backend();
		be_barrier(mpi);
		if (rank == 0 && !opt.json)
			printf("#\n# The same sweep through %s; ratio = busbw of libsmddp / "
			       "busbw of MPI\n", bench_mpi_version());
		run_sweep(mpi, &theirs, &ours);
		print_footer(&theirs);
		be_barrier(mpi);
	}
#endif

#ifdef HAVE_NCCL
	struct sweep ncs = { 0 };
	if (opt.compare_nccl) {
		char err[256];

		if (bench_nccl_init(comm, stream, err, sizeof(err)))
			gpu_fail(err);
		if (rank == 0 && !opt.json)
			printf("#\n# The same sweep through %s; ratio = busbw of libsmddp / "
			       "busbw of NCCL\n", bench_nccl_version());
		run_sweep(bench_nccl_backend(), &ncs, &ours);
		print_footer(&ncs);
		bench_nccl_finalize();
		free(ncs.res);
	}
#endif

	verdict = ours.wrong ? TOOL_EXIT_CHECK : TOOL_EXIT_OK;
	if (rank == 0 && (opt.baseline || opt.min_busbw >= 0)) {
		int v = judge(&ours, base, nbase);
		if (v)
			verdict = v;
	}
	if (json_file && (ferror(json_file) | fclose(json_file))) {
		tool_warn_errno("-J: cannot write %s", opt.json_file);
		if (!verdict)
			verdict = TOOL_EXIT_FAILURE;
	}
	verdict = share_verdict(verdict);

	rc = smddp_comm_destroy(comm);
	if (rc) {
		tool_warn("rank %d: smddp_comm_destroy failed: %s", rank, smddp_strerror(rc));
		if (!verdict)
			verdict = TOOL_EXIT_FAILURE;
	}
#ifdef HAVE_MPI
	if (opt.compare_mpi)
		bench_mpi_finalize();
	free(theirs.res);
#endif
	free(ours.res);
	free(base);
	free(times);
	free(cputimes);
	free(vlayout);
#ifdef HAVE_CUDA
	if (opt.on_gpu) {
		bench_cuda_free(sendbuf);
		bench_cuda_free(recvbuf);
		free(stage);
		return verdict;
	}
#endif
	free(sendbuf);
	free(recvbuf);
	return verdict;
}
