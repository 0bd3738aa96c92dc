/* cmd/bench/bench_options.c - the benchmark's command line: its options, their checks, --help */
#include "config.h"

#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <smddp/smddp.h>

#include "bench.h"
#include "sweep.h"
#include "../common/tool.h"

const char *const coll_names[NUM_COLLS] = {
	"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall",
	"sendrecv", "alltoallv"
};

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

struct bench_options opt = {
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
	       "      --offset SIZE         rank r's buffers start r x SIZE bytes into their\n"
	       "                            allocations (a multiple of 16, default 0): tells\n"
	       "                            a slow size that comes from where the buffers lie\n"
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

void coll_from_argv0(const char *argv0)
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

enum { OPT_COLL = 256, OPT_JSON, OPT_BASELINE, OPT_TOLERANCE, OPT_MIN_BUSBW, OPT_COMPARE, OPT_DEVICE, OPT_GPU, OPT_OFFSET };

void parse_args(int argc, char **argv)
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
		{ "offset", required_argument, NULL, OPT_OFFSET },
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
		case OPT_OFFSET:
			opt.offset = parse_size_arg("--offset", optarg);
			if (opt.offset > (1ull << 30))
				tool_usage_error("--offset: %s is more than 1G", optarg);
			/* Aligned for every type, and for the kernels' 16-byte
			 * loads: only where the buffers lie changes. */
			if (opt.offset % 16)
				tool_usage_error("--offset: %s is not a multiple of 16", optarg);
			break;
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
