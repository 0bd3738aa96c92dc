/* smddp-run - start the ranks of a libsmddp (or torchrun-style) job on this machine */

/*
 * Design. smddp-run forks N ranks, each the leader of its own process group
 * (so that a signal reaches a rank's children too, and so that a terminal's
 * Ctrl-C reaches only smddp-run, which forwards it), and then runs a single
 * poll() loop over:
 *
 *  - a signalfd for SIGCHLD and the signals it forwards (blocked everywhere
 *    else, so no handler races with poll());
 *  - with --tag-output, the read ends of every rank's stdout and stderr pipes,
 *    whose data is cut into whole lines, prefixed "[R] " and queued;
 *  - its own stdout and stderr (POLLOUT) while a queue is not empty. A slow
 *    reader of smddp-run's output therefore never blocks smddp-run: the queue
 *    grows to a bound, then the ranks' pipes are no longer read and the ranks
 *    block in write() instead.
 *
 * Ranks' exits are observed with waitid(WNOWAIT): a finished rank stays a
 * zombie until the very end, so its pid -- which is also its process group's
 * id -- cannot be handed to a stranger while smddp-run may still signal that
 * group. smddp-run is a child subreaper: orphans of the ranks are re-parented
 * to it, reaped as they die, and killed in the final sweep, so that nothing a
 * rank started outlives the job. Ranks die with smddp-run (PR_SET_PDEATHSIG).
 *
 * The job's shape (nodes x ranks per node) is kept apart from the local
 * launch, so that the mpirun mode (one smddp-run per host, started by mpirun,
 * its node rank from OMPI_COMM_WORLD_RANK) only has to fill struct layout.
 *
 * What runs where (struct plan) comes from the command line here, from
 * SageMaker's configuration (run/sagemaker.c) or from a Slurm allocation
 * (run/slurm.c); in per-node mode the launchers of the nodes meet and watch
 * each other through run/nodes.c. See run/run.h.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdnoreturn.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "common/tool.h"
#include "run/nodes.h"
#include "run/run.h"
#include "run/slurm.h"

#define START_WAIT_MS    30000   /* a rank must reach exec() within this */
#define KILL_WAIT_MS     10000   /* ranks must be gone this long after SIGKILL */
#define SWEEP_WAIT_MS    5000    /* leftover descendants must be gone */
#define DRAIN_WAIT_MS    5000    /* pipes must reach EOF once everyone is dead */
#define OUTQ_HIGH        (1u << 20)  /* stop reading ranks above this backlog */
#define LINE_MAX_BYTES   (1u << 20)  /* a longer unterminated line is cut */
#define READ_CHUNK       65536

extern char **environ;

/* ---- options and job shape ------------------------------------------ */

/* Where this launcher's ranks sit in the job. Local mode: one node. */
struct layout {
	int nnodes;
	int node_rank;
	int local_size;
};

/* ---- run state ------------------------------------------------------- */

/* Bytes waiting to be written to smddp-run's stdout or stderr. */
struct outq {
	int fd;
	char *buf;
	size_t off, len, cap;   /* pending bytes are buf[off, len) */
	bool broken;            /* the reader went away: discard from now on */
	bool chunked;           /* not a regular file: write at most PIPE_BUF */
	bool tty;               /* a terminal: a '\r' ends a piece too (progress lines) */
};

/* One rank's stdout or stderr, read through a pipe when tagging. */
struct stream {
	int fd;                 /* -1 once closed */
	char *part;             /* the unterminated tail */
	size_t plen, pcap;
	struct outq *q;
};

struct rank {
	int rank;               /* global rank */
	pid_t pid;              /* 0: never started */
	bool exited;            /* observed with WNOWAIT; still a zombie */
	char tag[24];           /* "[R] " */
	size_t taglen;
	struct stream out, err;
};

enum phase {
	PH_RUN,                 /* ranks running */
	PH_STOP,                /* SIGTERM (or a forwarded signal) sent, grace running */
	PH_KILL,                /* SIGKILL sent, waiting for the ranks to die */
	PH_DRAIN,               /* all ranks dead: reading pipes to EOF, flushing */
};

enum cause {
	CAUSE_NONE,             /* all ranks exited 0 */
	CAUSE_RANK,             /* a rank failed: exit with its status */
	CAUSE_SIGNAL,           /* smddp-run got a signal: die by it */
	CAUSE_TIMEOUT,          /* --timeout: 124 */
	CAUSE_EXEC,             /* cannot execute PROGRAM: 126 or 127 */
	CAUSE_LAUNCH,           /* fork, pipe... failed: 1 */
	CAUSE_REMOTE,           /* per-node mode: another node failed first */
};

struct run {
	struct options opt;
	struct layout lay;
	const struct plan *plan;
	bool mpirun;            /* the one child is mpirun (or srun), not a rank */
	const char *engine;     /* its name: "mpirun" or "srun" */
	char **mpirun_env;
	pid_t self;
	int sigfd;
	sigset_t origmask;
	struct sigaction origpipe, origchld;
	struct rlimit orignofile;   /* restored in the ranks */
	bool raised_nofile;
	int devnull;
	bool out_via;           /* ranks' stdout is read by smddp-run (tagging, --unbuffered) */
	bool use_pty;           /* ... through a pseudo-terminal, so that it is line-buffered */
	struct winsize ws;      /* smddp-run's terminal's size, for the ranks' */
	bool have_ws;
	bool use_pty_err;       /* ranks' stderr too: smddp-run's is a terminal (progress) */

	char job_id[NODES_ID_MAX];
	char token[NODES_TOKEN_MAX];
	char master_port[8];
	struct nodes *nodes;    /* per-node mode: the other nodes' launchers */
	bool told_nodes;        /* our first failure went to them */

	struct rank *ranks;
	int nranks;             /* local ranks */
	cpu_set_t *cpus;        /* --bind on one machine: per local rank; else NULL */
	int nstarted;
	int nlive;              /* started and not yet exited */

	struct outq qout, qerr;
	struct outq *qmsg;      /* where smddp-run's own messages go when tagging */

	enum phase phase;
	int64_t deadline;       /* of the current phase; 0: none */
	int64_t timeout_at;     /* --timeout; 0: none */

	enum cause cause;
	int status;             /* exit status for CAUSE_RANK / EXEC / LAUNCH / REMOTE */
	int signo;              /* for CAUSE_SIGNAL */
	char why[512];          /* the first failure in a sentence, for the other nodes */
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t ms_from_s(double s)
{
	return (int64_t)(s * 1000.0 + 0.5);
}

/* ---- command line ---------------------------------------------------- */

enum {
	OPT_TAG = 256, OPT_NO_TAG, OPT_MASTER_ADDR, OPT_MASTER_PORT, OPT_GRACE,
	OPT_TIMEOUT, OPT_HOSTS, OPT_HOSTFILE, OPT_DRY_RUN, OPT_MPIRUN_ARGS, OPT_ENV,
	OPT_BIND, OPT_NETIF, OPT_SAGEMAKER, OPT_NO_SAGEMAKER, OPT_RESOURCE_CONFIG,
	OPT_HYPERPARAMETERS, OPT_DISTRIBUTION, OPT_WORKER_WAIT, OPT_NNODES, OPT_NODE_RANK,
	OPT_RDZV_ENDPOINT, OPT_RDZV_ID, OPT_RDZV_BACKEND, OPT_STANDALONE, OPT_LAUNCHER_PORT,
	OPT_JOIN_TIMEOUT, OPT_LAUNCHER, OPT_SRUN_ARGS, OPT_UNBUFFERED, OPT_NO_PYTHON,
	OPT_MAX_RESTARTS,
};

static void usage(void)
{
	printf(
"Usage: smddp-run [OPTIONS] [--] PROGRAM [ARGS...]\n"
"Start the ranks of a distributed job: on this machine; across machines with\n"
"one smddp-run per node (--nnodes), through srun inside a Slurm allocation,\n"
"through Open MPI's mpirun (--hosts), or as SageMaker's configuration says.\n"
"\n"
"Options:\n"
"  -n, --nproc, --nproc-per-node N\n"
"                          ranks per host (default: one per NVIDIA GPU, else 1;\n"
"                          with --hosts, the slots given there); also auto, gpu, cpu\n"
"      --tag-output        prefix each output line with \"[RANK] \" (default when N > 1)\n"
"      --no-tag-output     let ranks write to smddp-run's stdout and stderr directly\n"
"      --unbuffered        give each rank's stdout a pseudo-terminal even when\n"
"                          smddp-run's is not a terminal (it always gets one when\n"
"                          it is), so that C stdio writes it line by line, and set\n"
"                          PYTHONUNBUFFERED=1 (unless set)\n"
"      --master-addr ADDR  rendezvous address given to the ranks (default 127.0.0.1;\n"
"                          across hosts: the first host)\n"
"      --master-port PORT  rendezvous port (default: a free port on ADDR; across\n"
"                          hosts: 29500)\n"
"      --grace SECONDS     time between SIGTERM and SIGKILL when stopping ranks\n"
"                          (default 5)\n"
"      --timeout SECONDS   stop the job after this long and exit 124 (default: none)\n"
"      --env VAR[=VALUE]   give VAR (set to VALUE) to every rank; repeatable\n"
"      --network-interface IFNAME\n"
"                          use IFNAME between hosts (Open MPI, NCCL, Gloo)\n"
"      --bind none|core|numa     bind each rank to a core or NUMA node (default none)\n""      --dry-run           print the environment and command instead of running\n"
"\n"
"Across hosts, one smddp-run per node (torchrun's per-node mode, no ssh):\n"
"      --nnodes N          the job has N nodes, each running this command\n"
"      --node-rank I       this node's place, 0 to N-1; node 0 is --master-addr\n"
"      --rdzv-endpoint HOST[:PORT]  the same as --master-addr HOST --master-port PORT\n"
"      --rdzv-id ID        the job's id (SMDDP_JOB_ID); every node must agree\n"
"      --standalone        one node, a free port on 127.0.0.1 (the default anyway)\n"
"      --launcher-port PORT  node 0's launcher listens here for the others'\n"
"                          (default: --master-port + 1)\n"
"      --join-timeout SECONDS  how long the launchers wait for each other before\n"
"                          the ranks start (default 300)\n"
"  torchrun's spellings are accepted: --nproc_per_node, --node_rank, --master_addr,\n"
"  --master_port, --rdzv_endpoint, --rdzv_id; --rdzv-backend, --no-python and\n"
"  --max-restarts 0 are accepted and change nothing (PROGRAM runs as it is given:\n"
"  a Python script as 'python3 train.py')\n"
"\n"
"Across hosts (through mpirun):\n"
"      --hosts H1[:N],H2[:N]...  run N ranks on each of these hosts\n"
"      --hostfile FILE     the hosts, in Open MPI's format (\"HOST slots=N\")\n"
"      --mpirun-args ARGS  more options for mpirun, split into words like sh\n"
"\n"
"Slurm (auto-detected inside an allocation: SLURM_JOB_ID set, not in a job step):\n"
"      --launcher auto|slurm|none  run through srun (slurm), or here (none)\n"
"                          (default auto); srun starts one smddp-run per node\n"
"                          (per-node mode) on the hosts of SLURM_JOB_NODELIST\n"
"      --srun-args ARGS    more options for srun, split into words like sh\n"
"\n"
"SageMaker (auto-detected from /opt/ml/input/config/resourceconfig.json):\n"
"      --sagemaker         read SageMaker's configuration (files and SM_* variables)\n"
"      --no-sagemaker      do not look for it\n"
"      --resource-config FILE    instead of resourceconfig.json\n"
"      --hyperparameters FILE    instead of hyperparameters.json\n"
"      --distribution FILE|JSON  the estimator's distribution argument\n"
"      --worker-wait SECONDS     how long a host that is not the master waits\n"
"                          for mpirun to reach it (default 600)\n"
"\n"
"  -h, --help              show this help and exit\n"
"  -V, --version           show the version and exit\n"
"\n"
"Each rank gets SMDDP_RANK, SMDDP_WORLD_SIZE, SMDDP_LOCAL_RANK, RANK, WORLD_SIZE,\n"
"LOCAL_RANK, MASTER_ADDR, MASTER_PORT, SMDDP_JOB_ID, SMDDP_JOB_TOKEN and more;\n"
"see smddp-run(1). When a rank fails, the others are stopped and smddp-run exits\n"
"with the failed rank's status.\n");
}

static enum bind parse_bind(const char *s)
{
	if (strcmp(s, "none") == 0)
		return BIND_NONE;
	if (strcmp(s, "core") == 0)
		return BIND_CORE;
	if (strcmp(s, "numa") == 0)
		return BIND_NUMA;
	tool_usage_error("invalid --bind '%s': expected none, core or numa", s);
}

static bool is_rank_env_name(const char *name, size_t n);

/* -n's value: a number, or torchrun's auto (the default), gpu, cpu. */
static long parse_nproc(const char *arg)
{
	long n;
	if (strcmp(arg, "auto") == 0)
		return 0;
	if (strcmp(arg, "gpu") == 0) {
		n = count_gpus();
		if (n == 0)
			tool_usage_error("--nproc-per-node gpu: no NVIDIA GPU here (no /dev/nvidiaN); "
			                 "give a number");
		return n > MAX_NPROC ? MAX_NPROC : n;
	}
	if (strcmp(arg, "cpu") == 0) {
		n = sysconf(_SC_NPROCESSORS_ONLN);
		return n < 1 ? 1 : n > MAX_NPROC ? MAX_NPROC : n;
	}
	if (tool_parse_long(arg, 1, MAX_NPROC, &n) < 0)
		tool_usage_error("invalid number of ranks '%s': expected 1 to %d, auto, gpu or cpu",
		                 arg, MAX_NPROC);
	return n;
}

/* --rdzv-endpoint HOST[:PORT], [IPV6][:PORT] or a bare IPv6 address. */
static void parse_endpoint(const char *arg, struct options *o)
{
	const char *port = NULL;
	char *host;
	if (arg[0] == '[') {
		const char *close = strchr(arg, ']');
		if (!close || close == arg + 1 || (close[1] && close[1] != ':'))
			tool_usage_error("invalid --rdzv-endpoint '%s': expected HOST[:PORT] or "
			                 "[IPV6]:PORT", arg);
		host = strndup(arg + 1, close - arg - 1);
		port = close[1] ? close + 2 : NULL;
	} else {
		const char *colon = strchr(arg, ':');
		if (colon && strchr(colon + 1, ':'))
			colon = NULL;   /* a bare IPv6 address */
		host = colon ? strndup(arg, colon - arg) : strdup(arg);
		port = colon ? colon + 1 : NULL;
	}
	if (!host)
		out_of_memory();
	if (!*host)
		tool_usage_error("invalid --rdzv-endpoint '%s': no host", arg);
	o->master_addr = host;
	if (port && tool_parse_long(port, 1, 65535, &o->master_port) < 0)
		tool_usage_error("invalid --rdzv-endpoint '%s': the port must be 1 to 65535", arg);
}

static void parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "nproc",         required_argument, NULL, 'n' },
		{ "tag-output",    no_argument,       NULL, OPT_TAG },
		{ "no-tag-output", no_argument,       NULL, OPT_NO_TAG },
		{ "master-addr",   required_argument, NULL, OPT_MASTER_ADDR },
		{ "master-port",   required_argument, NULL, OPT_MASTER_PORT },
		{ "grace",         required_argument, NULL, OPT_GRACE },
		{ "timeout",       required_argument, NULL, OPT_TIMEOUT },
		{ "hosts",         required_argument, NULL, OPT_HOSTS },
		{ "hostfile",      required_argument, NULL, OPT_HOSTFILE },
		{ "dry-run",       no_argument,       NULL, OPT_DRY_RUN },
		{ "mpirun-args",   required_argument, NULL, OPT_MPIRUN_ARGS },
		{ "env",           required_argument, NULL, OPT_ENV },
		{ "bind",          required_argument, NULL, OPT_BIND },
		{ "network-interface", required_argument, NULL, OPT_NETIF },
		{ "sagemaker",     no_argument,       NULL, OPT_SAGEMAKER },
		{ "no-sagemaker",  no_argument,       NULL, OPT_NO_SAGEMAKER },
		{ "resource-config", required_argument, NULL, OPT_RESOURCE_CONFIG },
		{ "hyperparameters", required_argument, NULL, OPT_HYPERPARAMETERS },
		{ "distribution",  required_argument, NULL, OPT_DISTRIBUTION },
		{ "worker-wait",   required_argument, NULL, OPT_WORKER_WAIT },
		{ "nproc-per-node", required_argument, NULL, 'n' },
		{ "nproc_per_node", required_argument, NULL, 'n' },
		{ "nnodes",        required_argument, NULL, OPT_NNODES },
		{ "node-rank",     required_argument, NULL, OPT_NODE_RANK },
		{ "node_rank",     required_argument, NULL, OPT_NODE_RANK },
		{ "master_addr",   required_argument, NULL, OPT_MASTER_ADDR },
		{ "master_port",   required_argument, NULL, OPT_MASTER_PORT },
		{ "rdzv-endpoint", required_argument, NULL, OPT_RDZV_ENDPOINT },
		{ "rdzv_endpoint", required_argument, NULL, OPT_RDZV_ENDPOINT },
		{ "rdzv-id",       required_argument, NULL, OPT_RDZV_ID },
		{ "rdzv_id",       required_argument, NULL, OPT_RDZV_ID },
		{ "rdzv-backend",  required_argument, NULL, OPT_RDZV_BACKEND },
		{ "rdzv_backend",  required_argument, NULL, OPT_RDZV_BACKEND },
		{ "standalone",    no_argument,       NULL, OPT_STANDALONE },
		{ "launcher-port", required_argument, NULL, OPT_LAUNCHER_PORT },
		{ "join-timeout",  required_argument, NULL, OPT_JOIN_TIMEOUT },
		{ "launcher",      required_argument, NULL, OPT_LAUNCHER },
		{ "unbuffered",    no_argument,       NULL, OPT_UNBUFFERED },
		{ "no-python",     no_argument,       NULL, OPT_NO_PYTHON },
		{ "no_python",     no_argument,       NULL, OPT_NO_PYTHON },
		{ "max-restarts",  required_argument, NULL, OPT_MAX_RESTARTS },
		{ "max_restarts",  required_argument, NULL, OPT_MAX_RESTARTS },
		{ "srun-args",     required_argument, NULL, OPT_SRUN_ARGS },
		{ "help",          no_argument,       NULL, 'h' },
		{ "version",       no_argument,       NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof *o);
	o->tag = -1;
	o->grace_s = DEFAULT_GRACE_S;
	o->sagemaker = -1;
	o->worker_wait_s = DEFAULT_WORKER_WAIT_S;
	o->node_rank = -1;
	o->join_timeout_s = DEFAULT_JOIN_TIMEOUT_S;
	bool addr_given = false, endpoint_given = false;

	opterr = 0;
	/* '+': stop at PROGRAM, whose own options are not ours. */
	while ((c = getopt_long(argc, argv, "+:n:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'n':
			o->nproc = parse_nproc(optarg);
			break;
		case OPT_TAG:
			o->tag = 1;
			break;
		case OPT_NO_TAG:
			o->tag = 0;
			break;
		case OPT_MASTER_ADDR:
			if (!*optarg)
				tool_usage_error("empty --master-addr");
			o->master_addr = optarg;
			addr_given = true;
			break;
		case OPT_MASTER_PORT:
			if (tool_parse_long(optarg, 1, 65535, &o->master_port) < 0)
				tool_usage_error("invalid port '%s': expected 1 to 65535", optarg);
			break;
		case OPT_GRACE:
			if (tool_parse_double(optarg, 0, 86400, &o->grace_s) < 0)
				tool_usage_error("invalid --grace '%s': expected 0 to 86400 seconds",
				                 optarg);
			break;
		case OPT_TIMEOUT:
			if (tool_parse_double(optarg, 0, 1e9, &o->timeout_s) < 0 || o->timeout_s <= 0)
				tool_usage_error("invalid --timeout '%s': expected a positive number of seconds",
				                 optarg);
			o->timeout_arg = optarg;
			break;
		case OPT_HOSTS:
			o->hosts = optarg;
			break;
		case OPT_HOSTFILE:
			o->hostfile = optarg;
			break;
		case OPT_DRY_RUN:
			o->dry_run = true;
			break;
		case OPT_MPIRUN_ARGS:
			if (split_words(optarg, &o->mpirun_args) < 0)
				tool_usage_error("--mpirun-args '%s': a quote is not closed", optarg);
			break;
		case OPT_ENV: {
			size_t n = strcspn(optarg, "=");
			if (!valid_env_name(optarg, n))
				tool_usage_error("invalid --env '%s': expected VAR or VAR=VALUE, VAR made of "
				                 "letters, digits and '_'", optarg);
			if (is_rank_env_name(optarg, n))
				tool_usage_error("--env '%s': smddp-run sets %.*s itself (see --master-addr, "
				                 "--master-port, --nproc)", optarg, (int)n, optarg);
			if (!optarg[n] && !getenv(optarg))
				tool_usage_error("--env %s: %s is not set; give a value with --env %s=VALUE",
				                 optarg, optarg, optarg);
			strv_add(&o->envs, optarg);
			break;
		}
		case OPT_BIND:
			o->bind = parse_bind(optarg);
			break;
		case OPT_NETIF:
			if (!*optarg || strlen(optarg) >= 16 || strpbrk(optarg, " \t/,:'\"\\"))
				tool_usage_error("invalid --network-interface '%s': expected an interface "
				                 "name such as eth0", optarg);
			o->netif = optarg;
			break;
		case OPT_SAGEMAKER:
			o->sagemaker = 1;
			break;
		case OPT_NO_SAGEMAKER:
			o->sagemaker = 0;
			break;
		case OPT_RESOURCE_CONFIG:
			o->resource_config = optarg;
			break;
		case OPT_HYPERPARAMETERS:
			o->hyperparameters = optarg;
			break;
		case OPT_DISTRIBUTION:
			o->distribution = optarg;
			break;
		case OPT_WORKER_WAIT:
			if (tool_parse_double(optarg, 0, 1e9, &o->worker_wait_s) < 0)
				tool_usage_error("invalid --worker-wait '%s': expected a number of seconds",
				                 optarg);
			break;
		case OPT_NNODES: {
			/* torchrun's MIN:MAX, as long as it is one number */
			char *colon = strchr(optarg, ':');
			long lo, hi;
			if (colon) {
				char *a = strndup(optarg, colon - optarg);
				if (!a)
					out_of_memory();
				if (tool_parse_long(a, 1, 65536, &lo) < 0 ||
				    tool_parse_long(colon + 1, 1, 65536, &hi) < 0)
					tool_usage_error("invalid --nnodes '%s': expected N from 1 to 65536",
					                 optarg);
				free(a);
				if (lo != hi)
					tool_usage_error("--nnodes %s: elastic jobs (a range of nodes) are not "
					                 "supported; give one number", optarg);
			} else if (tool_parse_long(optarg, 1, 65536, &lo) < 0) {
				tool_usage_error("invalid --nnodes '%s': expected N from 1 to 65536", optarg);
			}
			o->nnodes = lo;
			break;
		}
		case OPT_NODE_RANK:
			if (tool_parse_long(optarg, 0, 65535, &o->node_rank) < 0)
				tool_usage_error("invalid --node-rank '%s': expected 0 to N-1", optarg);
			break;
		case OPT_RDZV_ENDPOINT:
			parse_endpoint(optarg, o);
			endpoint_given = true;
			break;
		case OPT_RDZV_ID:
			if (!*optarg || strlen(optarg) >= NODES_ID_MAX || strpbrk(optarg, " \t\n="))
				tool_usage_error("invalid --rdzv-id '%s': expected 1 to %d characters, no "
				                 "blanks", optarg, NODES_ID_MAX - 1);
			o->job_id = optarg;
			break;
		case OPT_RDZV_BACKEND:
			if (strcmp(optarg, "static") != 0 && strcmp(optarg, "c10d") != 0)
				tool_usage_error("--rdzv-backend %s: only static and c10d are accepted "
				                 "(both mean smddp-run's own rendezvous)", optarg);
			break;
		case OPT_STANDALONE:
			o->standalone = true;
			break;
		case OPT_LAUNCHER_PORT:
			if (tool_parse_long(optarg, 1, 65535, &o->launcher_port) < 0)
				tool_usage_error("invalid --launcher-port '%s': expected 1 to 65535", optarg);
			break;
		case OPT_JOIN_TIMEOUT:
			if (tool_parse_double(optarg, 0, 1e7, &o->join_timeout_s) < 0 ||
			    o->join_timeout_s <= 0)
				tool_usage_error("invalid --join-timeout '%s': expected a positive number "
				                 "of seconds", optarg);
			break;
		case OPT_UNBUFFERED:
			o->unbuffered = true;
			break;
		case OPT_NO_PYTHON:
			break;   /* smddp-run never adds a python */
		case OPT_MAX_RESTARTS: {
			long n;
			if (tool_parse_long(optarg, 0, 1000000, &n) < 0)
				tool_usage_error("invalid --max-restarts '%s': expected 0", optarg);
			if (n > 0)
				tool_usage_error("--max-restarts %s: restarting failed ranks is not "
				                 "supported; a failure ends the job (give 0)", optarg);
			break;
		}
		case OPT_LAUNCHER:
			if (strcmp(optarg, "auto") == 0)
				o->launcher = LAUNCH_AUTO;
			else if (strcmp(optarg, "slurm") == 0)
				o->launcher = LAUNCH_SLURM;
			else if (strcmp(optarg, "none") == 0)
				o->launcher = LAUNCH_NONE;
			else
				tool_usage_error("invalid --launcher '%s': expected auto, slurm or none", optarg);
			break;
		case OPT_SRUN_ARGS:
			if (split_words(optarg, &o->srun_args) < 0)
				tool_usage_error("--srun-args '%s': a quote is not closed", optarg);
			break;
		case 'h':
			usage();
			exit(TOOL_EXIT_OK);
		case 'V':
			tool_print_version();
			exit(TOOL_EXIT_OK);
		default:
			tool_getopt_error_long(c, optopt, argv, optind, longopts);
		}
	}
	if (optind >= argc)
		tool_usage_error("no program given");
	o->argv = argv + optind;

	if (o->hosts && o->hostfile)
		tool_usage_error("--hosts and --hostfile exclude each other");
	bool sm_flags = o->resource_config || o->hyperparameters || o->distribution;
	if ((o->hosts || o->hostfile) && (o->sagemaker == 1 || sm_flags))
		tool_usage_error("--%s and SageMaker's configuration exclude each other",
		                 o->hosts ? "hosts" : "hostfile");
	if (o->sagemaker == 0 && sm_flags)
		tool_usage_error("--no-sagemaker with --resource-config, --hyperparameters or "
		                 "--distribution");
	if (sm_flags)
		o->sagemaker = 1;

	if (addr_given && endpoint_given)
		tool_usage_error("--master-addr and --rdzv-endpoint exclude each other");
	if (o->standalone && (o->nnodes > 1 || o->node_rank > 0 || addr_given || endpoint_given))
		tool_usage_error("--standalone is one node on 127.0.0.1: it excludes --nnodes N > 1, "
		                 "--node-rank, --master-addr and --rdzv-endpoint");
	if (o->node_rank >= 0 && !o->nnodes)
		tool_usage_error("--node-rank needs --nnodes");
	if (o->nnodes && o->node_rank >= o->nnodes)
		tool_usage_error("--node-rank %ld: expected 0 to %ld (--nnodes %ld)", o->node_rank,
		                 o->nnodes - 1, o->nnodes);
	if (o->nnodes > 1 && slurm_in_step()) {
		/* one smddp-run per node of a Slurm step (see slurm_argv()) */
		const char *id = getenv("SLURM_NODEID"), *list = getenv("SLURM_STEP_NODELIST");
		if (o->node_rank < 0 && id && tool_parse_long(id, 0, o->nnodes - 1, &o->node_rank) < 0)
			tool_usage_error("--nnodes %ld in a Slurm step: SLURM_NODEID='%s' is not a node "
			                 "rank 0 to %ld; give --node-rank", o->nnodes, id, o->nnodes - 1);
		if (!o->master_addr && list && *list) {
			char err[256];
			size_t n;
			char **hosts = slurm_hostlist(list, 65536, &n, err, sizeof err);
			if (!hosts)
				tool_usage_error("SLURM_STEP_NODELIST: %s; give --master-addr", err);
			o->master_addr = xstrdup(hosts[0]);
			slurm_hostlist_free(hosts);
		}
	}
	if (o->nnodes > 1) {
		const char *other = o->hosts ? "--hosts" : o->hostfile ? "--hostfile" :
		                    (o->sagemaker == 1) ? "SageMaker's configuration" :
		                    o->mpirun_args.n ? "--mpirun-args" : NULL;
		if (other)
			tool_usage_error("--nnodes (one smddp-run per node) and %s exclude each other",
			                 other);
		if (!o->master_addr)
			tool_usage_error("--nnodes %ld: give node 0's address with --master-addr (or "
			                 "--rdzv-endpoint), the same on every node", o->nnodes);
		if (o->node_rank < 0)
			tool_usage_error("--nnodes %ld: give this node's place with --node-rank (0 to "
			                 "%ld)", o->nnodes, o->nnodes - 1);
		o->sagemaker = 0;
	}
	if (o->launcher == LAUNCH_SLURM) {
		const char *other = o->hosts ? "--hosts" : o->hostfile ? "--hostfile" :
		                    o->nnodes ? "--nnodes" : o->standalone ? "--standalone" :
		                    (o->sagemaker == 1) ? "SageMaker's configuration" :
		                    o->mpirun_args.n ? "--mpirun-args" : NULL;
		if (other)
			tool_usage_error("--launcher slurm and %s exclude each other", other);
		if (slurm_in_step())
			tool_usage_error("--launcher slurm: this is already a Slurm job step "
			                 "(SLURM_STEP_ID=%s): run smddp-run from the batch script or "
			                 "the salloc shell, or here with --nnodes", getenv("SLURM_STEP_ID"));
	}
}

/* ---- host lists --------------------------------------------------------- */

struct hostlist {
	struct strv names;
	long slots[MAX_HOSTS];  /* 0: not given */
};

static void hostlist_add(struct hostlist *hl, const char *name, long slots, const char *where)
{
	if (!valid_host(name))
		tool_usage_error("%s: invalid host name '%s': expected letters, digits, '.', '-' "
		                 "and '_'", where, name);
	if (strv_has(&hl->names, name))
		tool_usage_error("%s: host '%s' is given twice", where, name);
	if (hl->names.n >= MAX_HOSTS)
		tool_usage_error("%s: more than %d hosts", where, MAX_HOSTS);
	hl->slots[hl->names.n] = slots;
	strv_add(&hl->names, name);
}

/* "h1:8,h2:8" or "h1,h2". */
static void parse_hosts_arg(const char *arg, struct hostlist *hl)
{
	char *copy = xstrdup(arg), *save = NULL;
	char where[64];
	snprintf(where, sizeof where, "--hosts");
	if (!*arg || arg[0] == ',' || arg[strlen(arg) - 1] == ',' || strstr(arg, ",,"))
		tool_usage_error("malformed host list '%s': an empty host name; expected "
		                 "HOST[:N],HOST[:N]...", arg);
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		long slots = 0;
		char *colon = strchr(tok, ':');
		if (colon) {
			*colon = '\0';
			if (strchr(colon + 1, ':'))
				tool_usage_error("malformed host list '%s': '%s:%s': IPv6 addresses are "
				                 "not supported; use a host name", arg, tok, colon + 1);
			if (tool_parse_long(colon + 1, 1, MAX_NPROC, &slots) < 0)
				tool_usage_error("malformed host list '%s': '%s:%s': expected a number of "
				                 "ranks from 1 to %d after ':'", arg, tok, colon + 1,
				                 MAX_NPROC);
		}
		hostlist_add(hl, tok, slots, where);
	}
	free(copy);
}

/* Open MPI's hostfile: "HOST [slots=N] [max_slots=M]", '#' comments. */
static void parse_hostfile(const char *path, struct hostlist *hl)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
	char line[4096], where[4200];
	int lineno = 0;

	if (!f) {
		tool_warn_errno("cannot open hostfile '%s'", path);
		exit(TOOL_EXIT_USAGE);
	}
	while (fgets(line, sizeof line, f)) {
		lineno++;
		snprintf(where, sizeof where, "%s:%d", path, lineno);
		line[strcspn(line, "#\n")] = '\0';
		char *save = NULL, *host = strtok_r(line, " \t\r", &save);
		if (!host)
			continue;
		long slots = 0;
		for (char *kv; (kv = strtok_r(NULL, " \t\r", &save));) {
			long v;
			const char *val = strchr(kv, '=');
			if (!val || tool_parse_long(val + 1, 1, MAX_NPROC, &v) < 0 ||
			    (strncmp(kv, "slots=", 6) != 0 && strncmp(kv, "max_slots=", 10) != 0 &&
			     strncmp(kv, "max-slots=", 10) != 0))
				tool_usage_error("%s: malformed hostfile entry '%s': expected "
				                 "'HOST slots=N' (N from 1 to %d)", where, kv, MAX_NPROC);
			if (strncmp(kv, "slots=", 6) == 0)
				slots = v;
		}
		hostlist_add(hl, host, slots, where);
	}
	if (ferror(f)) {
		tool_warn_errno("cannot read hostfile '%s'", path);
		exit(TOOL_EXIT_USAGE);
	}
	if (f != stdin)
		fclose(f);
	if (hl->names.n == 0)
		tool_usage_error("hostfile '%s' names no host", path);
}

/* ---- the plan: what runs where ------------------------------------------ */

/* The plan from the command line (and SageMaker's configuration). */
static void make_plan(const struct options *o, struct plan *p)
{
	memset(p, 0, sizeof *p);
	p->netif = o->netif;
	p->master_port = o->master_port;

	if (o->nnodes > 1) {
		/* One smddp-run per node, each told its place: torchrun's way. */
		int gpus;
		p->kind = PLAN_LOCAL;
		p->form = "per-node";
		p->nnodes = (int)o->nnodes;
		p->node_rank = (int)o->node_rank;
		p->ppn = o->nproc ? o->nproc : (gpus = count_gpus()) > 0 ?
		         (gpus > MAX_NPROC ? MAX_NPROC : gpus) : 1;
		if ((size_t)p->nnodes * (size_t)p->ppn > (size_t)1 << 24)
			tool_usage_error("too many ranks: %d nodes x %ld", p->nnodes, p->ppn);
		p->master_addr = xstrdup(o->master_addr);
		if (!p->master_port)
			p->master_port = DEFAULT_PORT;
		return;
	}
	if (o->hosts || o->hostfile) {
		static struct hostlist hl;
		if (o->hosts)
			parse_hosts_arg(o->hosts, &hl);
		else
			parse_hostfile(o->hostfile, &hl);
		p->kind = PLAN_MPIRUN;
		p->form = "hosts";
		p->hosts = hl.names;
		p->ppn = o->nproc;
		if (!p->ppn) {
			long s = hl.slots[0];
			for (size_t i = 1; i < hl.names.n; i++)
				if (hl.slots[i] != s)
					tool_usage_error("hosts with different rank counts (%s:%ld, %s:%ld): "
					                 "give -n N to run N ranks on each",
					                 hl.names.v[0], s, hl.names.v[i], hl.slots[i]);
			if (!s) {
				int gpus = count_gpus();
				s = gpus > 0 ? (gpus > MAX_NPROC ? MAX_NPROC : gpus) : 1;
			}
			p->ppn = s;
		}
	} else if (slurm_wanted(o)) {
		slurm_plan(o, p);
	} else if (o->sagemaker == 1 || (o->sagemaker < 0 && sm_detect())) {
		sagemaker_plan(o, p);
	} else {
		int gpus;
		p->kind = PLAN_LOCAL;
		p->form = "local";
		p->node_rank = 0;
		p->ppn = o->nproc ? o->nproc : (gpus = count_gpus()) > 0 ?
		         (gpus > MAX_NPROC ? MAX_NPROC : gpus) : 1;
		p->master_addr = xstrdup(o->master_addr ? o->master_addr : "127.0.0.1");
		return;
	}
	if (p->hosts.n * (size_t)p->ppn > (size_t)1 << 24)
		tool_usage_error("too many ranks: %zu hosts x %ld", p->hosts.n, p->ppn);
	p->master_addr = xstrdup(o->master_addr ? o->master_addr : p->hosts.n ? p->hosts.v[0]
	                                                                       : "127.0.0.1");
	/* Every host must agree on the port without talking: a fixed default. */
	if (!p->master_port)
		p->master_port = DEFAULT_PORT;
}

/* The variables set beyond the rank variables: --env, the network
 * interface, EFA. An explicit --env wins over what smddp-run would set;
 * EFA settings also yield to the inherited environment. */
static void plan_env(const struct options *o, struct plan *p)
{
	for (size_t i = 0; i < o->envs.n; i++) {
		const char *e = o->envs.v[i];
		size_t n = strcspn(e, "=");
		char *name = strndup(e, n);
		if (!name)
			out_of_memory();
		if (e[n])
			envv_set(&p->env, name, e + n + 1, true);
		if (!strv_has(&p->fwd, name))
			strv_take(&p->fwd, name);
		else
			free(name);
	}
	if (p->netif) {
		envv_set(&p->env, "NCCL_SOCKET_IFNAME", p->netif, false);
		envv_set(&p->env, "GLOO_SOCKET_IFNAME", p->netif, false);
	}
	/* --unbuffered: Python's own buffering too, unless the user decided */
	if (o->unbuffered && !getenv("PYTHONUNBUFFERED") && !strv_has(&p->fwd, "PYTHONUNBUFFERED"))
		envv_set(&p->env, "PYTHONUNBUFFERED", "1", false);
	int rdma = efa_rdma(p->instance_type);
	if (rdma >= 0) {
		static const char *const efa[][2] = {
			{ "FI_PROVIDER", "efa" }, { "RDMAV_FORK_SAFE", "1" },
			{ "FI_EFA_USE_DEVICE_RDMA", "1" },
		};
		for (int i = 0; i < (rdma ? 3 : 2); i++)
			if (!getenv(efa[i][0]) && !strv_has(&p->fwd, efa[i][0]))
				envv_set(&p->env, efa[i][0], efa[i][1], false);
	}
}

/* Where this launcher's ranks sit in the job. Local plans fork this host's
 * ranks here (SageMaker's torch_distributed: one smddp-run per host, the
 * node rank from the host's place in the sorted host list); the mpirun plan
 * runs mpirun as its single child, and each rank's wrapper
 * (--rank-wrapper) derives its place from OMPI_COMM_WORLD_*. */
static void job_layout(const struct plan *p, struct layout *l)
{
	if (p->kind == PLAN_MPIRUN || p->kind == PLAN_SRUN) {
		l->nnodes = 1;
		l->node_rank = 0;
		l->local_size = 1;
		return;
	}
	l->nnodes = p->nnodes ? p->nnodes : p->hosts.n > 1 ? (int)p->hosts.n : 1;
	l->node_rank = p->node_rank;
	l->local_size = (int)p->ppn;
}

/* ---- job identity and rendezvous ------------------------------------- */

static int random_bytes(unsigned char *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = getrandom(buf + got, n - got, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		got += r;
	}
	return 0;
}

static int random_hex(char *out, size_t nhex)
{
	unsigned char b[64];
	static const char digits[] = "0123456789abcdef";
	size_t nb = (nhex + 1) / 2;
	if (nb > sizeof b || random_bytes(b, nb) < 0)
		return -1;
	for (size_t i = 0; i < nhex; i++)
		out[i] = digits[(b[i / 2] >> (i % 2 ? 0 : 4)) & 0xf];
	out[nhex] = '\0';
	return 0;
}

/* The job id as the library puts it in /dev/shm names: its letters, digits,
 * '_' and '-', at most 32 of them (lib/core/comm.c, set_jobid()). */
static void shm_job_id(const char *id, char *out, size_t outlen)
{
	size_t n = 0;
	for (; *id && n < 32 && n + 1 < outlen; id++)
		if ((*id >= 'a' && *id <= 'z') || (*id >= 'A' && *id <= 'Z') ||
		    (*id >= '0' && *id <= '9') || *id == '_' || *id == '-')
			out[n++] = *id;
	out[n] = '\0';
}

/* A free TCP port on ADDR (or, when ADDR is not local, on any address):
 * bind port 0, read what the kernel chose, close. */
static int pick_free_port(const char *addr)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	int family = AF_INET;
	int port = -1;

	if (getaddrinfo(addr, "0", &hints, &res) == 0) {
		for (struct addrinfo *ai = res; ai && port < 0; ai = ai->ai_next) {
			family = ai->ai_family;
			int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (fd < 0)
				continue;
			struct sockaddr_storage ss;
			socklen_t len = sizeof ss;
			if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
			    getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
				port = ntohs(ss.ss_family == AF_INET6
				             ? ((struct sockaddr_in6 *)&ss)->sin6_port
				             : ((struct sockaddr_in *)&ss)->sin_port);
			close(fd);
		}
		freeaddrinfo(res);
	}
	if (port < 0) {
		struct sockaddr_storage ss = { .ss_family = family };
		socklen_t len = family == AF_INET6 ? sizeof(struct sockaddr_in6)
		                                   : sizeof(struct sockaddr_in);
		int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0) {
			if (bind(fd, (struct sockaddr *)&ss, len) == 0 &&
			    getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
				port = ntohs(family == AF_INET6
				             ? ((struct sockaddr_in6 *)&ss)->sin6_port
				             : ((struct sockaddr_in *)&ss)->sin_port);
			close(fd);
		}
	}
	return port;
}

/* ---- environment of a rank ------------------------------------------- */

/* Variables an outer launcher may have set that would make the library's
 * rank discovery pick the outer job's rank instead of ours. */
static bool env_is_foreign_rank(const char *kv)
{
	static const char *const names[] = { "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID" };
	if (strncmp(kv, "OMPI_COMM_WORLD_", strlen("OMPI_COMM_WORLD_")) == 0)
		return true;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		size_t n = strlen(names[i]);
		if (strncmp(kv, names[i], n) == 0 && kv[n] == '=')
			return true;
	}
	return false;
}

static const char *const rank_env_names[] = {
	"SMDDP_RANK", "SMDDP_WORLD_SIZE", "SMDDP_LOCAL_RANK", "SMDDP_LOCAL_WORLD_SIZE",
	"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
	"ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
	"SMDDP_MASTER_ADDR", "SMDDP_MASTER_PORT", "SMDDP_JOB_TOKEN", "SMDDP_JOB_ID",
	"TORCHELASTIC_RUN_ID",
};
#define NRANK_ENV (sizeof rank_env_names / sizeof rank_env_names[0])

static bool is_rank_env_name(const char *name, size_t n)
{
	for (size_t i = 0; i < NRANK_ENV; i++)
		if (strlen(rank_env_names[i]) == n && strncmp(name, rank_env_names[i], n) == 0)
			return true;
	return false;
}

static bool env_is_ours(const char *kv)
{
	for (size_t i = 0; i < NRANK_ENV; i++) {
		size_t n = strlen(rank_env_names[i]);
		if (strncmp(kv, rank_env_names[i], n) == 0 && kv[n] == '=')
			return true;
	}
	return false;
}

static void free_env(char **env)
{
	if (!env)
		return;
	for (char **e = env; *e; e++)
		if (env_is_ours(*e))   /* only those were allocated */
			free(*e);
	free(env);
}

/* The environment of local rank LR: ours on top of the inherited one. Built
 * before fork() so that the child only calls async-signal-safe functions. */
static char **build_env(const struct run *r, int lr)
{
	const struct layout *l = &r->lay;
	int rank = l->node_rank * l->local_size + lr;
	int world = l->nnodes * l->local_size;
	char v[NRANK_ENV][80];
	size_t n = 0, k = 0;

	snprintf(v[0], sizeof v[0], "%d", rank);
	snprintf(v[1], sizeof v[1], "%d", world);
	snprintf(v[2], sizeof v[2], "%d", lr);
	snprintf(v[3], sizeof v[3], "%d", l->local_size);
	snprintf(v[4], sizeof v[4], "%d", rank);
	snprintf(v[5], sizeof v[5], "%d", world);
	snprintf(v[6], sizeof v[6], "%d", lr);
	snprintf(v[7], sizeof v[7], "%d", l->local_size);
	snprintf(v[8], sizeof v[8], "%d", l->node_rank);
	snprintf(v[9], sizeof v[9], "%d", rank);
	snprintf(v[10], sizeof v[10], "%d", world);
	/* 11, 13: the address may be long; set below */
	snprintf(v[12], sizeof v[12], "%s", r->master_port);
	snprintf(v[14], sizeof v[14], "%s", r->master_port);
	snprintf(v[15], sizeof v[15], "%s", r->token);
	snprintf(v[16], sizeof v[16], "%s", r->job_id);
	snprintf(v[17], sizeof v[17], "%s", r->job_id);

	const struct strv *extra = &r->plan->env;
	for (char **e = environ; *e; e++)
		n++;
	char **env = calloc(n + extra->n + 1 + NRANK_ENV + 1, sizeof *env);
	if (!env)
		return NULL;
	for (char **e = environ; *e; e++) {
		char name[256];
		snprintf(name, sizeof name, "%.*s", (int)strcspn(*e, "="), *e);
		if (!env_is_ours(*e) && !env_is_foreign_rank(*e) && !envv_find(extra, name) &&
		    !(r->plan->tf_config[0] && strcmp(name, "TF_CONFIG") == 0))
			env[k++] = *e;
	}
	/* not ours by name: free_env() leaves them alone */
	for (size_t i = 0; i < extra->n; i++)
		env[k++] = extra->v[i];
	if (r->plan->tf_config[0])
		env[k++] = r->plan->tf_config[lr ? 1 : 0];
	for (size_t i = 0; i < NRANK_ENV; i++) {
		const char *val = (i == 11 || i == 13) ? r->opt.master_addr : v[i];
		size_t len = strlen(rank_env_names[i]) + 1 + strlen(val) + 1;
		char *s = malloc(len);
		if (!s) {
			free_env(env);
			return NULL;
		}
		snprintf(s, len, "%s=%s", rank_env_names[i], val);
		env[k++] = s;
	}
	env[k] = NULL;
	return env;
}

/* ---- output queues ---------------------------------------------------- */

static void outq_init(struct outq *q, int fd)
{
	struct stat st;
	memset(q, 0, sizeof *q);
	q->fd = fd;
	q->chunked = !(fstat(fd, &st) == 0 && S_ISREG(st.st_mode));
	q->tty = isatty(fd);
	if (fcntl(fd, F_GETFD) < 0)
		q->broken = true;
}

static size_t outq_pending(const struct outq *q)
{
	return q->len - q->off;
}

static void outq_put(struct outq *q, const char *a, size_t alen, const char *b, size_t blen,
                     bool newline)
{
	size_t need = alen + blen + (newline ? 1 : 0);
	if (q->broken)
		return;
	if (q->off && q->off == q->len)
		q->off = q->len = 0;
	if (q->len + need > q->cap && q->off) {
		memmove(q->buf, q->buf + q->off, q->len - q->off);
		q->len -= q->off;
		q->off = 0;
	}
	if (q->len + need > q->cap) {
		size_t cap = q->cap ? q->cap : 65536;
		while (cap < q->len + need)
			cap *= 2;
		char *nb = realloc(q->buf, cap);
		if (!nb) {
			/* Out of memory for output: losing lines beats dying. */
			q->broken = true;
			return;
		}
		q->buf = nb;
		q->cap = cap;
	}
	memcpy(q->buf + q->len, a, alen);
	memcpy(q->buf + q->len + alen, b, blen);
	q->len += alen + blen;
	if (newline)
		q->buf[q->len++] = '\n';
}

/* Called when poll() says the fd is writable. On a pipe or terminal a write
 * of up to PIPE_BUF then fits without blocking; keep going while poll()
 * says it still would. */
static void outq_flush_some(struct outq *q)
{
	for (int i = 0; i < 64 && outq_pending(q) && !q->broken; i++) {
		size_t n = outq_pending(q);
		if (q->chunked && n > PIPE_BUF)
			n = PIPE_BUF;
		ssize_t w = write(q->fd, q->buf + q->off, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			q->broken = true;   /* EPIPE and friends: nobody listens */
			q->off = q->len = 0;
			return;
		}
		q->off += w;
		if (!q->chunked)
			continue;
		struct pollfd p = { .fd = q->fd, .events = POLLOUT };
		if (poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT))
			return;
	}
}

/* ---- streams ---------------------------------------------------------- */

/* Whether a piece shows anything: on a terminal, a piece of carriage
 * returns and escape sequences alone (a progress line's "\r\033[K" that
 * erases it) is passed untagged, or it would leave a "[R] " behind. */
static bool piece_visible(const struct stream *s, const char *p, size_t n)
{
	if (!s->q->tty)
		return true;
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\r' || p[i] == '\n')
			continue;
		if (p[i] != '\033')
			return true;
		if (i + 1 < n && p[i + 1] == '[') {   /* CSI: parameters, then a final byte */
			for (i += 2; i < n && !(p[i] >= 0x40 && p[i] <= 0x7e); i++)
				;
		}
	}
	return false;
}

static size_t tag_len(const struct rank *rk, const struct stream *s, const char *p, size_t n)
{
	return piece_visible(s, p, n) ? rk->taglen : 0;
}

static void stream_close(struct rank *rk, struct stream *s)
{
	if (s->fd < 0)
		return;
	close(s->fd);
	s->fd = -1;
	/* a last line without '\n' still ends a line for us; on a terminal, a
	 * last erase of a progress line goes as it is */
	if (s->plen)
		outq_put(s->q, rk->tag, tag_len(rk, s, s->part, s->plen), s->part, s->plen,
		         piece_visible(s, s->part, s->plen));
	free(s->part);
	s->part = NULL;
	s->plen = s->pcap = 0;
}

static bool stream_grow(struct stream *s, size_t need)
{
	size_t cap = s->pcap ? s->pcap : 256;
	while (cap < need)
		cap *= 2;
	char *np = realloc(s->part, cap);
	if (!np)
		return false;
	s->part = np;
	s->pcap = cap;
	return true;
}

/* Where the piece that starts at DATA ends: a '\n', or for a terminal also
 * a '\r', so that a rank's progress line ("42%\r") shows as it is redrawn. */
static const char *piece_end(const struct stream *s, const char *data, size_t n)
{
	const char *nl = memchr(data, '\n', n);
	if (s->q->tty) {
		const char *cr = memchr(data, '\r', nl ? (size_t)(nl - data) : n);
		if (cr)
			return cr;
	}
	return nl;
}

static void stream_add(struct rank *rk, struct stream *s, const char *data, size_t n)
{
	while (n) {
		const char *nl = piece_end(s, data, n);
		size_t take = nl ? (size_t)(nl - data) + 1 : n;
		if (nl && !s->plen) {
			outq_put(s->q, rk->tag, tag_len(rk, s, data, take), data, take, false);
		} else if (s->plen + take > s->pcap && !stream_grow(s, s->plen + take)) {
			/* No memory to hold the line: end it here rather than lose it. */
			outq_put(s->q, rk->tag, rk->taglen, s->part, s->plen, false);
			outq_put(s->q, "", 0, data, take, !nl);
			s->plen = 0;
		} else {
			memcpy(s->part + s->plen, data, take);
			s->plen += take;
			if (nl || s->plen >= LINE_MAX_BYTES) {
				/* an endless line is cut: a rank's bytes stay whole lines */
				outq_put(s->q, rk->tag, tag_len(rk, s, s->part, s->plen), s->part,
				         s->plen, !nl);
				s->plen = 0;
			}
		}
		data += take;
		n -= take;
	}
}

static void stream_read(struct rank *rk, struct stream *s)
{
	char buf[READ_CHUNK];
	ssize_t n = read(s->fd, buf, sizeof buf);
	if (n > 0)
		stream_add(rk, s, buf, n);
	else if (n == 0 || (errno != EINTR && errno != EAGAIN))
		stream_close(rk, s);
}

/* ---- process bookkeeping ---------------------------------------------- */

/* Signals every started rank's process group. A rank that has exited is a
 * zombie we have not reaped, so its group id is still ours to signal. */
static void signal_groups(struct run *r, int sig)
{
	for (int i = 0; i < r->nranks; i++)
		if (r->ranks[i].pid > 0)
			kill(-r->ranks[i].pid, sig);
}

/* The children of smddp-run: ranks, and orphans re-parented to it. */
static size_t list_children(struct run *r, pid_t *out, size_t max)
{
	char path[320];
	size_t n = 0;
	snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)r->self, (int)r->self);
	FILE *f = fopen(path, "re");
	if (f) {
		long pid;
		while (n < max && fscanf(f, "%ld", &pid) == 1)
			out[n++] = (pid_t)pid;
		fclose(f);
		return n;
	}
	/* Kernels without CONFIG_PROC_CHILDREN: scan /proc. */
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	struct dirent *de;
	while (n < max && (de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		char buf[512];
		snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t len = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (len <= 0)
			continue;
		buf[len] = '\0';
		char *p = strrchr(buf, ')');   /* comm may contain spaces */
		int ppid;
		char state;
		if (p && sscanf(p + 1, " %c %d", &state, &ppid) == 2 && ppid == r->self)
			out[n++] = (pid_t)atol(de->d_name);
	}
	closedir(d);
	return n;
}

static struct rank *rank_by_pid(struct run *r, pid_t pid)
{
	for (int i = 0; i < r->nranks; i++)
		if (r->ranks[i].pid == pid)
			return &r->ranks[i];
	return NULL;
}

static void stop_ranks(struct run *r);

static void rank_exited(struct run *r, struct rank *rk, const siginfo_t *si)
{
	rk->exited = true;
	r->nlive--;

	bool signaled = si->si_code == CLD_KILLED || si->si_code == CLD_DUMPED;
	if (!signaled && si->si_status == 0)
		return;
	if (r->cause != CAUSE_NONE)   /* not the first failure: expected fallout */
		return;
	r->cause = CAUSE_RANK;
	r->status = signaled ? 128 + si->si_status : si->si_status;
	if (signaled)
		snprintf(r->why, sizeof r->why, "rank %d was killed by signal %d (%s)", rk->rank,
		         si->si_status, strsignal(si->si_status));
	else
		snprintf(r->why, sizeof r->why, "rank %d exited with status %d", rk->rank,
		         si->si_status);

	char others[64] = "";
	if (r->nlive > 0)
		snprintf(others, sizeof others, "; stopping %d other rank%s",
		         r->nlive, r->nlive == 1 ? "" : "s");
	if (r->mpirun) {
		/* The rank's wrapper has named the host, rank and status already. */
		if (signaled)
			tool_warn("%s (pid %d) was killed by signal %d (%s)", r->engine, (int)rk->pid,
			          si->si_status, strsignal(si->si_status));
		else
			tool_warn("%s (pid %d) exited with status %d: the job failed", r->engine,
			          (int)rk->pid, si->si_status);
	} else if (signaled)
		tool_warn("rank %d (pid %d) was killed by signal %d (%s%s)%s", rk->rank, (int)rk->pid,
		          si->si_status, strsignal(si->si_status),
		          si->si_code == CLD_DUMPED ? ", core dumped" : "", others);
	else
		tool_warn("rank %d (pid %d) exited with status %d%s", rk->rank, (int)rk->pid,
		          si->si_status, others);
	stop_ranks(r);
}

/* After SIGCHLD: note ranks that ended (leaving them zombies), reap orphans. */
static void check_children(struct run *r)
{
	for (int i = 0; i < r->nranks; i++) {
		struct rank *rk = &r->ranks[i];
		if (rk->pid <= 0 || rk->exited)
			continue;
		siginfo_t si;
		memset(&si, 0, sizeof si);
		if (waitid(P_PID, rk->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == rk->pid)
			rank_exited(r, rk, &si);
	}

	pid_t kids[4096];
	size_t n = list_children(r, kids, sizeof kids / sizeof kids[0]);
	for (size_t i = 0; i < n; i++)
		if (!rank_by_pid(r, kids[i]))
			waitpid(kids[i], NULL, WNOHANG);
}

/* ---- phases ----------------------------------------------------------- */

static void enter_kill(struct run *r)
{
	r->phase = PH_KILL;
	signal_groups(r, SIGKILL);
	r->deadline = now_ms() + KILL_WAIT_MS;
}

/* Asks every rank to stop: SIGTERM now, SIGKILL after the grace period. */
static void stop_with(struct run *r, int sig)
{
	if (r->phase != PH_RUN)
		return;
	if (r->opt.grace_s <= 0) {
		enter_kill(r);
		return;
	}
	r->phase = PH_STOP;
	/* srun only reports on a first SIGINT; SIGTERM it forwards to the job */
	if (sig == SIGINT && r->engine && strcmp(r->engine, "srun") == 0)
		sig = SIGTERM;
	signal_groups(r, sig);
	signal_groups(r, SIGCONT);   /* a stopped rank must see it now */
	r->deadline = now_ms() + ms_from_s(r->opt.grace_s);
}

static void stop_ranks(struct run *r)
{
	stop_with(r, SIGTERM);
}

/* Everything a rank left behind dies now: each rank's process group, then any
 * other descendant (re-parented to us, the subreaper), until none is left. */
static void sweep_descendants(struct run *r)
{
	int64_t until = now_ms() + SWEEP_WAIT_MS;

	signal_groups(r, SIGKILL);
	for (;;) {
		pid_t pid;
		while ((pid = waitpid(-1, NULL, WNOHANG)) > 0) {
			struct rank *rk = rank_by_pid(r, pid);
			if (rk)
				rk->pid = -pid;   /* reaped: its group id is no longer ours */
		}
		if (pid < 0 && errno == ECHILD)
			return;
		if (now_ms() >= until) {
			tool_warn("some processes of the job did not exit after SIGKILL");
			return;
		}
		pid_t kids[4096];
		size_t n = list_children(r, kids, sizeof kids / sizeof kids[0]);
		for (size_t i = 0; i < n; i++)
			kill(kids[i], SIGKILL);
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

static void enter_drain(struct run *r)
{
	if (r->nlive > 0) {
		for (int i = 0; i < r->nranks; i++)
			if (r->ranks[i].pid > 0 && !r->ranks[i].exited)
				tool_warn("rank %d (pid %d) did not exit after SIGKILL; giving up on it",
				          r->ranks[i].rank, (int)r->ranks[i].pid);
	}
	r->phase = PH_DRAIN;
	sweep_descendants(r);
	r->deadline = now_ms() + DRAIN_WAIT_MS;
}

static void got_signal(struct run *r, int sig)
{
	if (sig == SIGCHLD) {
		check_children(r);
		return;
	}
	if (sig == SIGTSTP) {
		/* Ctrl-Z reaches only us (the ranks are not in the terminal's
		 * foreground group): stop the ranks, then ourselves, so that the
		 * shell's job control works on the whole job. */
		signal_groups(r, SIGTSTP);
		raise(SIGSTOP);
		return;
	}
	if (sig == SIGCONT) {
		signal_groups(r, SIGCONT);
		return;
	}
	if (r->phase == PH_DRAIN) {
		/* Nothing is left to stop; only output is being flushed (or, on
		 * node 0, the other nodes are awaited). */
		if (r->cause == CAUSE_NONE) {
			r->cause = CAUSE_SIGNAL;
			r->signo = sig;
			snprintf(r->why, sizeof r->why, "its smddp-run got signal %d (%s)", sig,
			         strsignal(sig));
		}
		r->qout.broken = r->qerr.broken = true;
		return;
	}
	if (r->phase != PH_RUN) {
		/* A second signal while stopping: no more patience. */
		if (r->phase == PH_STOP)
			enter_kill(r);
		return;
	}
	if (r->cause == CAUSE_NONE) {
		r->cause = CAUSE_SIGNAL;
		r->signo = sig;
		snprintf(r->why, sizeof r->why, "its smddp-run got signal %d (%s)", sig, strsignal(sig));
	}
	if (r->mpirun)
		tool_warn("got signal %d (%s); forwarding it to %s", sig, strsignal(sig), r->engine);
	else
		tool_warn("got signal %d (%s); forwarding it to %d rank%s", sig, strsignal(sig),
		          r->nlive, r->nlive == 1 ? "" : "s");
	stop_with(r, sig);
}

static void read_signals(struct run *r)
{
	struct signalfd_siginfo si[16];
	for (;;) {
		ssize_t n = read(r->sigfd, si, sizeof si);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return;   /* EAGAIN: none pending */
		}
		for (size_t i = 0; i < (size_t)n / sizeof si[0]; i++)
			got_signal(r, (int)si[i].ssi_signo);
	}
}

/* ---- starting ranks --------------------------------------------------- */

/* In the child, between fork() and exec(): async-signal-safe calls only. */
static void child_exec(const struct run *r, int errfd, int outfd, int errfd2, int infd,
                       char **env, int lr)
{
	int e;

	setpgid(0, 0);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != r->self)
		_exit(127);   /* smddp-run is already gone: so are we */
	if ((infd >= 0 && dup2(infd, 0) < 0) ||
	    (outfd >= 0 && dup2(outfd, 1) < 0) ||
	    (errfd2 >= 0 && dup2(errfd2, 2) < 0))
		goto fail;
	sigaction(SIGPIPE, &r->origpipe, NULL);
	sigaction(SIGCHLD, &r->origchld, NULL);
	sigprocmask(SIG_SETMASK, &r->origmask, NULL);
	if (r->raised_nofile)
		setrlimit(RLIMIT_NOFILE, &r->orignofile);
	if (r->cpus)   /* a CPU gone offline since: run unbound rather than not at all */
		sched_setaffinity(0, sizeof r->cpus[lr], &r->cpus[lr]);
	execvpe(r->opt.argv[0], r->opt.argv, env);
fail:
	e = errno;
	while (write(errfd, &e, sizeof e) < 0 && errno == EINTR)
		;
	_exit(e == ENOENT || e == ENOTDIR ? 127 : 126);
}

static void launch_failed(struct run *r, const char *what)
{
	tool_warn_errno("%s", what);
	if (r->cause == CAUSE_NONE) {
		r->cause = CAUSE_LAUNCH;
		r->status = TOOL_EXIT_FAILURE;
	}
	stop_ranks(r);
}

static void close_pair(int p[2])
{
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	p[0] = p[1] = -1;
}

/* A rank's stdout (or stderr): with PTY a pseudo-terminal (P[0] the master
 * we read, P[1] the rank's side), in raw mode so that '\n' stays '\n', the
 * size of ours; else, or when none can be had (no /dev/pts in a
 * container), a pipe. */
static int open_out(struct run *r, int p[2], bool pty, bool is_stdout)
{
	static bool warned;
	if (pty) {
		char name[128];
		int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (m >= 0 && grantpt(m) == 0 && unlockpt(m) == 0 &&
		    ptsname_r(m, name, sizeof name) == 0) {
			int sl = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
			if (sl >= 0) {
				struct termios t;
				if (tcgetattr(sl, &t) == 0) {
					cfmakeraw(&t);
					tcsetattr(sl, TCSANOW, &t);
				}
				if (r->have_ws)
					ioctl(sl, TIOCSWINSZ, &r->ws);
				p[0] = m;
				p[1] = sl;
				return 0;
			}
		}
		int e = errno;
		if (m >= 0)
			close(m);
		if (r->opt.unbuffered && is_stdout && !warned) {
			errno = e;
			tool_warn_errno("--unbuffered: cannot open a pseudo-terminal; the ranks' "
			                "stdout is a pipe (C programs: setvbuf, or fflush)");
		}
		if (is_stdout)
			warned = true;
	}
	return pipe2(p, O_CLOEXEC);
}

static int start_rank(struct run *r, struct rank *rk, int lr)
{
	int ep[2] = { -1, -1 }, op[2] = { -1, -1 }, xp[2] = { -1, -1 };
	bool tag = r->opt.tag > 0;
	char **env = NULL;
	int rc = -1;

	if (pipe2(ep, O_CLOEXEC) < 0 || (tag && open_out(r, xp, r->use_pty_err, false) < 0) ||
	    (r->out_via && open_out(r, op, r->use_pty, true) < 0)) {
		launch_failed(r, "cannot create a pipe");
		goto out;
	}
	env = r->mpirun ? r->mpirun_env : build_env(r, lr);
	if (!env) {
		errno = ENOMEM;
		launch_failed(r, "cannot build the environment of a rank");
		goto out;
	}
	/* Rank 0 reads smddp-run's stdin (as under mpirun) unless that is a
	 * terminal: ranks are not in the terminal's foreground group and would
	 * be stopped by SIGTTIN. */
	int infd = (lr == 0 && r->lay.node_rank == 0 && !isatty(0)) ? -1 : r->devnull;

	pid_t pid = fork();
	if (pid < 0) {
		launch_failed(r, "cannot fork");
		goto out;
	}
	if (pid == 0)
		child_exec(r, ep[1], op[1], xp[1], infd, env, lr);

	/* Also here, so that the group exists before anyone signals it. */
	setpgid(pid, pid);
	rk->pid = pid;
	r->nstarted++;
	r->nlive++;
	if (r->out_via) {
		rk->out.fd = op[0];
		op[0] = -1;
		fcntl(rk->out.fd, F_SETFL, O_NONBLOCK);
	}
	if (tag) {
		rk->err.fd = xp[0];
		xp[0] = -1;
		fcntl(rk->err.fd, F_SETFL, O_NONBLOCK);
	}
	close(ep[1]);
	ep[1] = -1;

	/* exec() closes the CLOEXEC pipe: EOF means it worked, an int its errno. */
	int err = 0;
	size_t got = 0;
	int64_t until = now_ms() + START_WAIT_MS;
	for (;;) {
		struct pollfd p = { .fd = ep[0], .events = POLLIN };
		int64_t left = until - now_ms();
		if (left <= 0) {
			tool_warn("rank %d (pid %d) did not start within %d seconds", rk->rank, (int)pid,
			          START_WAIT_MS / 1000);
			if (r->cause == CAUSE_NONE) {
				r->cause = CAUSE_LAUNCH;
				r->status = TOOL_EXIT_FAILURE;
			}
			stop_ranks(r);
			goto out;
		}
		int n = poll(&p, 1, (int)left);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		ssize_t m = read(ep[0], (char *)&err + got, sizeof err - got);
		if (m < 0 && errno == EINTR)
			continue;
		if (m <= 0)
			break;
		got += m;
		if (got == sizeof err)
			break;
	}
	if (got == sizeof err) {
		if (r->cause == CAUSE_NONE) {
			errno = err;
			tool_warn_errno("cannot execute '%s'", r->opt.argv[0]);
			size_t al = strlen(r->opt.argv[0]);
			if (al > 3 && strcmp(r->opt.argv[0] + al - 3, ".py") == 0)
				tool_warn("'%s' is a Python script: run it as 'python3 %s' (torchrun "
				          "adds the python; smddp-run runs PROGRAM as it is given)",
				          r->opt.argv[0], r->opt.argv[0]);
			snprintf(r->why, sizeof r->why, "cannot execute '%s': %s", r->opt.argv[0],
			         strerror(err));
			r->cause = CAUSE_EXEC;
			r->status = err == ENOENT || err == ENOTDIR ? 127 : 126;
		}
		stop_ranks(r);
		goto out;
	}
	rc = 0;
out:
	if (!r->mpirun)
		free_env(env);
	close_pair(ep);
	close_pair(op);
	close_pair(xp);
	return rc;
}

/* ---- the loop --------------------------------------------------------- */

static bool streams_open(const struct run *r)
{
	for (int i = 0; i < r->nranks; i++)
		if (r->ranks[i].out.fd >= 0 || r->ranks[i].err.fd >= 0)
			return true;
	return false;
}

static bool queues_pending(const struct run *r)
{
	return (!r->qout.broken && outq_pending(&r->qout)) ||
	       (!r->qerr.broken && outq_pending(&r->qerr));
}

static void close_all_streams(struct run *r)
{
	for (int i = 0; i < r->nranks; i++) {
		stream_close(&r->ranks[i], &r->ranks[i].out);
		stream_close(&r->ranks[i], &r->ranks[i].err);
	}
}

/* Returns when every rank is dead, its descendants too, and output is out. */
static int exit_status(const struct run *r);

/* Per-node mode: the first failure here goes to the other nodes, once. */
static void tell_nodes(struct run *r)
{
	if (!r->nodes || r->told_nodes || r->cause == CAUSE_NONE || r->cause == CAUSE_REMOTE)
		return;
	r->told_nodes = true;
	nodes_failed(r->nodes, exit_status(r), r->why[0] ? r->why : "its smddp-run could not "
	             "start the ranks");
}

/* Per-node mode: another node failed, or its launcher went away. */
static void remote_failure(struct run *r, int status, const char *why)
{
	if (r->cause != CAUSE_NONE)
		return;
	r->cause = CAUSE_REMOTE;
	r->status = status;
	if (r->phase == PH_RUN && r->nlive > 0)
		tool_warn("%s; stopping %d rank%s here", why, r->nlive, r->nlive == 1 ? "" : "s");
	else
		tool_warn("%s", why);
	stop_ranks(r);
}

static void event_loop(struct run *r)
{
	size_t maxfds = 3 + 2 * (size_t)r->nranks + (r->nodes ? (size_t)r->lay.nnodes : 0);
	struct pollfd *pfd = calloc(maxfds, sizeof *pfd);
	struct stream **owner = calloc(maxfds, sizeof *owner);
	struct rank **ownrank = calloc(maxfds, sizeof *ownrank);

	if (!pfd || !owner || !ownrank) {
		/* Cannot watch output: still stop and reap the ranks. */
		tool_warn("out of memory");
		if (r->cause == CAUSE_NONE) {
			r->cause = CAUSE_LAUNCH;
			r->status = TOOL_EXIT_FAILURE;
		}
		enter_kill(r);
		while (r->nlive > 0 && now_ms() < r->deadline) {
			struct timespec ts = { 0, 10 * 1000 * 1000 };
			nanosleep(&ts, NULL);
			read_signals(r);
		}
		close_all_streams(r);
		r->phase = PH_DRAIN;
		sweep_descendants(r);
		goto out;
	}

	for (;;) {
		int64_t now = now_ms();

		/* phase transitions driven by time or by the last rank's exit */
		if (r->phase == PH_RUN && r->timeout_at && now >= r->timeout_at) {
			if (r->cause == CAUSE_NONE) {
				r->cause = CAUSE_TIMEOUT;
				snprintf(r->why, sizeof r->why, "the job ran for %s seconds (--timeout)",
				         r->opt.timeout_arg);
			}
			if (r->mpirun)
				tool_warn("timeout: the job ran for %s seconds; stopping %s",
				          r->opt.timeout_arg, r->engine);
			else
				tool_warn("timeout: the job ran for %s seconds; stopping %d rank%s",
				          r->opt.timeout_arg, r->nlive, r->nlive == 1 ? "" : "s");
			stop_ranks(r);
		}
		if (r->phase == PH_STOP && now >= r->deadline)
			enter_kill(r);
		if ((r->phase != PH_DRAIN && r->nlive == 0) ||
		    (r->phase == PH_KILL && now >= r->deadline))
			enter_drain(r);
		tell_nodes(r);
		if (r->phase == PH_DRAIN) {
			if (streams_open(r) && now_ms() >= r->deadline)
				close_all_streams(r);   /* someone escaped with our pipe */
			/* node 0 stays for the other nodes, to report on the job */
			if (!streams_open(r) && !queues_pending(r) &&
			    !(r->nodes && nodes_waiting(r->nodes)))
				break;
			/* Output nobody reads may wait for the reader, and node 0 for
			 * the other nodes, but not past --timeout. */
			if (r->timeout_at && now_ms() >= r->timeout_at) {
				if (r->cause == CAUSE_NONE) {
					r->cause = CAUSE_TIMEOUT;
					snprintf(r->why, sizeof r->why, "the job ran for %s seconds "
					         "(--timeout)", r->opt.timeout_arg);
					if (r->nodes && nodes_waiting(r->nodes)) {
						/* the queues are given up on: say it directly */
						tool_set_message_sink(NULL);
						tool_warn("timeout: the job ran for %s seconds; stopping the "
						          "other nodes", r->opt.timeout_arg);
					}
				}
				tell_nodes(r);
				break;
			}
		}

		nfds_t n = 0;
		pfd[n++] = (struct pollfd){ .fd = r->sigfd, .events = POLLIN };
		if (!r->qout.broken && outq_pending(&r->qout)) {
			owner[n] = NULL;
			ownrank[n] = NULL;
			pfd[n++] = (struct pollfd){ .fd = r->qout.fd, .events = POLLOUT };
		}
		if (!r->qerr.broken && outq_pending(&r->qerr)) {
			owner[n] = NULL;
			ownrank[n] = NULL;
			pfd[n++] = (struct pollfd){ .fd = r->qerr.fd, .events = POLLOUT };
		}
		for (int i = 0; i < r->nranks; i++) {
			struct rank *rk = &r->ranks[i];
			struct stream *ss[2] = { &rk->out, &rk->err };
			for (int j = 0; j < 2; j++) {
				if (ss[j]->fd < 0 || outq_pending(ss[j]->q) >= OUTQ_HIGH)
					continue;   /* backpressure: let the rank block instead */
				owner[n] = ss[j];
				ownrank[n] = rk;
				pfd[n++] = (struct pollfd){ .fd = ss[j]->fd, .events = POLLIN };
			}
		}

		nfds_t nlocal = n;
		if (r->nodes)
			n += nodes_pollfds(r->nodes, pfd + n, maxfds - n);

		int timeout = -1;
		int64_t next = 0;
		if (r->phase == PH_STOP || r->phase == PH_KILL ||
		    (r->phase == PH_DRAIN && streams_open(r)))
			next = r->deadline;
		if ((r->phase == PH_RUN || r->phase == PH_DRAIN) && r->timeout_at &&
		    (!next || r->timeout_at < next))
			next = r->timeout_at;
		if (next) {
			int64_t left = next - now_ms();
			timeout = left < 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
		}

		int ready = poll(pfd, n, timeout);
		if (ready < 0) {
			if (errno == EINTR)
				continue;
			tool_warn_errno("poll");
			if (r->cause == CAUSE_NONE) {
				r->cause = CAUSE_LAUNCH;
				r->status = TOOL_EXIT_FAILURE;
			}
			if (r->phase == PH_DRAIN)
				break;   /* everyone is dead already: give up on output */
			if (r->phase == PH_RUN || r->phase == PH_STOP)
				enter_kill(r);
			struct timespec ts = { 0, 10 * 1000 * 1000 };
			nanosleep(&ts, NULL);
			continue;
		}
		if (ready == 0)
			continue;

		if (r->nodes) {
			int st;
			char why[1024];
			if (nodes_io(r->nodes, pfd + nlocal, n - nlocal, &st, why, sizeof why))
				remote_failure(r, st, why);
		}
		for (nfds_t i = 1; i < nlocal; i++) {
			if (!pfd[i].revents)
				continue;
			if (!owner[i]) {
				struct outq *q = pfd[i].fd == r->qout.fd ? &r->qout : &r->qerr;
				if (pfd[i].revents & (POLLERR | POLLNVAL)) {
					q->broken = true;
					q->off = q->len = 0;
				} else {
					outq_flush_some(q);
				}
			} else {
				stream_read(ownrank[i], owner[i]);
			}
		}
		if (pfd[0].revents)
			read_signals(r);
	}
out:
	free(pfd);
	free(owner);
	free(ownrank);
}

/* ---- cleanup and exit ------------------------------------------------- */

/* Shared-memory segments of this job, left behind by ranks that crashed:
 * "smddp-ID-SUFFIX" where the suffix has no '-' (the library's is hex), so
 * that job "a" never takes job "a-b"'s "smddp-a-b-SUFFIX", nor the reverse. */
static void remove_job_shm(const char *job_id)
{
	char id[40], prefix[80];
	shm_job_id(job_id, id, sizeof id);
	if (!*id)
		return;
	size_t plen = (size_t)snprintf(prefix, sizeof prefix, "smddp-%s-", id);
	DIR *d = opendir("/dev/shm");
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *rest = de->d_name + plen;
		if (strncmp(de->d_name, prefix, plen) == 0 && *rest && !strchr(rest, '-'))
			unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
}

static int exit_status(const struct run *r)
{
	switch (r->cause) {
	case CAUSE_NONE:    return 0;
	case CAUSE_TIMEOUT: return 124;
	case CAUSE_SIGNAL:  return 128 + r->signo;
	default:            return r->status;
	}
}

/* Dies by the signal we were sent, so that a calling shell sees it (and, for
 * SIGINT, stops its own loop); SIGQUIT would dump core, so it just exits. */
static void exit_like(const struct run *r)
{
	fflush(stdout);
	fflush(stderr);
	if (r->cause == CAUSE_SIGNAL && r->signo != SIGQUIT) {
		sigset_t s;
		signal(r->signo, SIG_DFL);
		sigemptyset(&s);
		sigaddset(&s, r->signo);
		raise(r->signo);
		sigprocmask(SIG_UNBLOCK, &s, NULL);
	}
	_exit(exit_status(r));
}

static struct run *the_run;

/* With tagging, smddp-run's messages join the ranks' stderr lines in order
 * rather than cutting into a half-written one. */
static void message_to_queue(const char *line, size_t len)
{
	outq_put(the_run->qmsg, "", 0, line, len, false);
}

/* NHEX hex digits that every host of PLAN computes alike from SALT, the
 * hosts and the port (FNV-1a, 64 bits per 16 digits). An identifier that
 * keeps two jobs' shared memory and logs apart, never a secret: anyone who
 * knows the host names computes it too (the job token is not made this
 * way; see shared_token()). */
static void shared_identity(const struct plan *p, const char *salt, char *out, size_t nhex)
{
	static const char digits[] = "0123456789abcdef";
	char port[16];
	snprintf(port, sizeof port, "%ld", p->master_port);
	for (size_t block = 0; block * 16 < nhex; block++) {
		uint64_t h = 0xcbf29ce484222325ull ^ (block * 0x9e3779b97f4a7c15ull);
		const char *parts[3] = { salt, port, p->master_addr };
		for (size_t i = 0; i < 3 + p->hosts.n; i++) {
			const char *t = i < 3 ? parts[i] : p->hosts.v[i - 3];
			for (; *t; t++)
				h = (h ^ (unsigned char)*t) * 0x100000001b3ull;
			h = (h ^ '\n') * 0x100000001b3ull;
		}
		for (size_t k = 0; k < 16 && block * 16 + k < nhex; k++)
			out[block * 16 + k] = digits[(h >> (60 - 4 * k)) & 0xf];
	}
	out[nhex] = '\0';
}

/* The token of a job whose hosts each start their own ranks: SMDDP_JOB_TOKEN
 * as given, the same on every host.  Such hosts share nothing secret that
 * a token could be derived from (host names, ports and the job name are
 * known outside the job), so without one the ranks run without: then
 * libsmddp's rank 0 refuses ranks of other hosts, saying to set a token,
 * unless SMDDP_ALLOW_NO_TOKEN=1 (inherited by the ranks).  Programs that
 * do not rendezvous through libsmddp's environment (the PyTorch backend
 * makes its own token; NCCL, TensorFlow) are not concerned.  0, or an
 * exit status. */
static int shared_token(struct run *r, const char *token)
{
	r->token[0] = '\0';
	if (token) {
		size_t tl = strlen(token), k;
		for (k = 0; k < tl && token[k] > ' ' && token[k] < 0x7f; k++)
			;
		if (tl < 8 || tl >= sizeof r->token || k < tl) {
			tool_warn("SMDDP_JOB_TOKEN: expected 8 to %zu printable characters without "
			          "blanks, the same on every host", sizeof r->token - 1);
			return TOOL_EXIT_USAGE;
		}
		strcpy(r->token, token);
	}
	return 0;
}

/* ---- the mpirun plan --------------------------------------------------- */

/* Inherited variables that mpirun passes on to every rank (-x), besides the
 * ones smddp-run sets: the program's search paths and the settings of the
 * libraries a rank uses. */
static bool env_forwarded(const char *kv)
{
	static const char *const prefixes[] = {
		"SMDDP_", "NCCL_", "FI_", "SM_", "SMDATAPARALLEL_", "RDMAV_", "CUDA_",
	};
	static const char *const names[] = {
		"PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "TF_CONFIG",
	};
	for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
		if (strncmp(kv, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		size_t n = strlen(names[i]);
		if (strncmp(kv, names[i], n) == 0 && kv[n] == '=')
			return true;
	}
	return false;
}

/* mpirun's environment: the inherited one without rank variables, plus the
 * job's rendezvous (SET) and the plan's variables. */
static void mpirun_environment(const struct run *r, struct strv *set, struct strv *names)
{
	const struct plan *p = r->plan;
	envv_set(set, "MASTER_ADDR", p->master_addr, true);
	envv_set(set, "MASTER_PORT", r->master_port, true);
	envv_set(set, "SMDDP_MASTER_ADDR", p->master_addr, true);
	envv_set(set, "SMDDP_MASTER_PORT", r->master_port, true);
	envv_set(set, "SMDDP_JOB_ID", r->job_id, true);
	envv_set(set, "SMDDP_JOB_TOKEN", r->token, true);
	for (size_t i = 0; i < p->env.n; i++) {
		size_t n = strcspn(p->env.v[i], "=");
		char *name = strndup(p->env.v[i], n);
		if (!name)
			out_of_memory();
		envv_set(set, name, p->env.v[i] + n + 1, true);
		free(name);
	}
	qsort(set->v, set->n, sizeof *set->v, cmp_str);

	for (size_t i = 0; i < set->n; i++)
		strv_take(names, strndup(set->v[i], strcspn(set->v[i], "=")));
	for (size_t i = 0; i < p->fwd.n; i++)
		if (!strv_has(names, p->fwd.v[i]))
			strv_add(names, p->fwd.v[i]);
	for (char **e = environ; *e; e++) {
		if (env_is_ours(*e) || env_is_foreign_rank(*e) || !env_forwarded(*e))
			continue;
		char *name = strndup(*e, strcspn(*e, "="));
		if (!name)
			out_of_memory();
		if (strv_has(names, name))
			free(name);
		else
			strv_take(names, name);
	}
	qsort(names->v, names->n, sizeof *names->v, cmp_str);
}

static const char *mpirun_program(void)
{
	const char *m = getenv("SMDDP_MPIRUN");
	return m && *m ? m : "mpirun";
}

/* Whether mpirun (or SMDDP_MPIRUN) can be executed. */
static bool mpirun_found(const char *prog)
{
	if (strchr(prog, '/'))
		return access(prog, X_OK) == 0;
	const char *path = getenv("PATH");
	char *copy = xstrdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	char *save = NULL, full[4200];
	bool found = false;
	for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
		snprintf(full, sizeof full, "%s/%s", *d ? d : ".", prog);
		struct stat st;
		found = stat(full, &st) == 0 && S_ISREG(st.st_mode) && access(full, X_OK) == 0;
	}
	free(copy);
	return found;
}

static void mpirun_argv(const struct run *r, const struct strv *names, struct strv *av)
{
	const struct plan *p = r->plan;
	const char *bind[] = { "none", "none", "core", "numa" };
	size_t need = 1;

	for (size_t i = 0; i < p->hosts.n; i++)
		need += strlen(p->hosts.v[i]) + 8;
	char *hosts = malloc(need);
	if (!hosts)
		out_of_memory();
	hosts[0] = '\0';
	size_t off = 0;
	for (size_t i = 0; i < p->hosts.n; i++)
		off += snprintf(hosts + off, need - off, "%s%s:%ld", i ? "," : "", p->hosts.v[i],
		                p->ppn);

	strv_add(av, mpirun_program());
	/* Containers run as root; mpirun refuses that without this. */
	strv_add(av, "--allow-run-as-root");
	strv_add(av, "-np");
	strv_take(av, xasprintf("%zu", p->hosts.n * (size_t)p->ppn));
	strv_add(av, "--host");
	strv_take(av, hosts);
	strv_add(av, "--bind-to");
	strv_add(av, bind[r->opt.bind]);
	if (r->opt.tag > 0)
		strv_add(av, "--tag-output");
	if (p->netif) {
		strv_add(av, "--mca");
		strv_add(av, "btl_tcp_if_include");
		strv_add(av, p->netif);
		strv_add(av, "--mca");
		strv_add(av, "oob_tcp_if_include");
		strv_add(av, p->netif);
	}
	for (size_t i = 0; i < names->n; i++) {
		strv_add(av, "-x");
		strv_add(av, names->v[i]);
	}
	for (size_t i = 0; i < p->mpi_opts.n; i++)
		strv_add(av, p->mpi_opts.v[i]);
	for (size_t i = 0; i < r->opt.mpirun_args.n; i++)
		strv_add(av, r->opt.mpirun_args.v[i]);
	strv_take(av, self_path());
	strv_add(av, "--rank-wrapper");
	strv_add(av, "--");
	for (char **a = r->opt.argv; *a; a++)
		strv_add(av, *a);
}

/* ---- --dry-run ----------------------------------------------------------
 *
 * A sh(1) script, stable for scripts and tests: '#' lines describe the plan;
 * "export NAME=VALUE" lines are the variables smddp-run sets (sorted; all
 * else is inherited); then the command, one word per line joined by " \".
 * A local plan lists each rank's own variables on "# rank" lines. */

static void print_exports(const struct strv *set)
{
	for (size_t i = 0; i < set->n; i++) {
		size_t n = strcspn(set->v[i], "=");
		printf("export %.*s=", (int)n, set->v[i]);
		print_quoted(stdout, set->v[i] + n + 1);
		putchar('\n');
	}
}

static void print_command(char *const *av)
{
	size_t n = 0;
	while (av[n])
		n++;
	bool *nl = calloc(n + 1, sizeof *nl);
	if (!nl)
		out_of_memory();
	print_words(av, nl);
	free(nl);
}

/* mpirun's options one per line with their values (known arities), then
 * the command that it runs on one line. */
static void print_mpirun_command(char *const *av)
{
	static const struct { const char *opt; int nargs; } arity[] = {
		{ "-np", 1 }, { "--host", 1 }, { "--bind-to", 1 }, { "--mca", 2 }, { "-x", 1 },
	};
	size_t n = 0;
	while (av[n])
		n++;
	bool *nl = calloc(n + 1, sizeof *nl);
	if (!nl)
		out_of_memory();
	for (size_t i = 1; i < n; i++) {
		nl[i] = true;
		if (strcmp(av[i], "--rank-wrapper") == 0) {
			nl[i] = false;
			nl[i - 1] = true;
			break;
		}
		for (size_t k = 0; k < sizeof arity / sizeof arity[0]; k++)
			if (strcmp(av[i], arity[k].opt) == 0 && av[i + 1]) {
				i += arity[k].nargs;
				break;
			}
	}
	print_words(av, nl);
	free(nl);
}

static void dry_run_mpirun(const struct run *r, const struct strv *set, const struct strv *av)
{
	const struct plan *p = r->plan;
	printf("# smddp-run --dry-run: %s through mpirun, %zu host%s x %ld rank%s\n", p->form,
	       p->hosts.n, p->hosts.n == 1 ? "" : "s", p->ppn, p->ppn == 1 ? "" : "s");
	print_exports(set);
	print_mpirun_command(av->v);
}

static void dry_run_local(const struct run *r)
{
	const struct plan *p = r->plan;
	const struct layout *l = &r->lay;
	int world = l->nnodes * l->local_size;
	struct strv set = { 0 };
	char num[32];

	printf("# smddp-run --dry-run: %s on %s, node rank %d of %d host%s, %d rank%s here\n",
	       p->form, p->current_host ? p->current_host : "this host", l->node_rank, l->nnodes,
	       l->nnodes == 1 ? "" : "s", l->local_size, l->local_size == 1 ? "" : "s");
	bool from_node0 = p->nnodes > 1;
	if (from_node0) {
		long lport = r->opt.launcher_port ? r->opt.launcher_port : atol(r->master_port) + 1;
		if (l->node_rank == 0)
			printf("# waits (at most %g s) for nodes 1..%d on launcher port %ld, then hands "
			       "out the job id and token\n", r->opt.join_timeout_s, l->nnodes - 1, lport);
		else
			printf("# joins node 0's launcher at %s:%ld (at most %g s) and takes the job id "
			       "and token from it\n", p->master_addr, lport, r->opt.join_timeout_s);
	}
	bool own_id = !from_node0 || r->opt.job_id || getenv("SMDDP_JOB_ID");
	bool own_token = !from_node0 || getenv("SMDDP_JOB_TOKEN");
	for (size_t i = 0; i < p->env.n; i++)
		strv_add(&set, p->env.v[i]);
	snprintf(num, sizeof num, "%d", world);
	envv_set(&set, "WORLD_SIZE", num, true);
	envv_set(&set, "SMDDP_WORLD_SIZE", num, true);
	envv_set(&set, "ROLE_WORLD_SIZE", num, true);
	snprintf(num, sizeof num, "%d", l->local_size);
	envv_set(&set, "LOCAL_WORLD_SIZE", num, true);
	envv_set(&set, "SMDDP_LOCAL_WORLD_SIZE", num, true);
	snprintf(num, sizeof num, "%d", l->node_rank);
	envv_set(&set, "GROUP_RANK", num, true);
	envv_set(&set, "MASTER_ADDR", p->master_addr, true);
	envv_set(&set, "SMDDP_MASTER_ADDR", p->master_addr, true);
	envv_set(&set, "MASTER_PORT", r->master_port, true);
	envv_set(&set, "SMDDP_MASTER_PORT", r->master_port, true);
	if (own_id) {
		envv_set(&set, "SMDDP_JOB_ID", r->job_id, true);
		envv_set(&set, "TORCHELASTIC_RUN_ID", r->job_id, true);
	}
	if (own_token && r->token[0])
		envv_set(&set, "SMDDP_JOB_TOKEN", r->token, true);
	qsort(set.v, set.n, sizeof *set.v, cmp_str);
	print_exports(&set);
	for (int lr = 0; lr < l->local_size; lr++) {
		int rank = l->node_rank * l->local_size + lr;
		printf("# rank %d: RANK=%d SMDDP_RANK=%d ROLE_RANK=%d LOCAL_RANK=%d SMDDP_LOCAL_RANK=%d",
		       rank, rank, rank, rank, lr, lr);
		if (p->tf_config[0]) {
			fputs(" ", stdout);
			print_quoted(stdout, p->tf_config[lr ? 1 : 0]);
		}
		putchar('\n');
	}
	print_command(r->opt.argv);
	strv_free(&set);
}

/* ---- --rank-wrapper: one rank under mpirun --------------------------------
 *
 * mpirun starts "smddp-run --rank-wrapper -- PROGRAM ARGS" once per rank.
 * The wrapper gives PROGRAM the variables of local mode, computed from Open
 * MPI's OMPI_COMM_WORLD_* (which stay, so that MPI programs work), runs it
 * as its child, passes on the signals it gets, and when PROGRAM fails while
 * nobody asked it to stop, names host, rank and status on stderr and exits
 * with that status, for mpirun to end the job and return it. */

static int wrapper_int(const char *name)
{
	const char *v = getenv(name);
	long x;
	if (!v || tool_parse_long(v, 0, 1 << 24, &x) < 0) {
		tool_warn("--rank-wrapper: %s is %s: this mode runs under Open MPI's mpirun only",
		          name, v ? "not a number" : "not set");
		exit(TOOL_EXIT_USAGE);
	}
	return (int)x;
}

static int rank_wrapper(int argc, char **argv)
{
	int rank = wrapper_int("OMPI_COMM_WORLD_RANK");
	int size = wrapper_int("OMPI_COMM_WORLD_SIZE");
	int lrank = wrapper_int("OMPI_COMM_WORLD_LOCAL_RANK");
	int lsize = wrapper_int("OMPI_COMM_WORLD_LOCAL_SIZE");
	char host[256] = "?", num[32];

	if (argc > 0 && strcmp(argv[0], "--") == 0) {
		argc--;
		argv++;
	}
	if (argc < 1) {
		tool_warn("--rank-wrapper: no program given");
		return TOOL_EXIT_USAGE;
	}
	if (lsize < 1 || lrank >= lsize || rank >= size) {
		tool_warn("--rank-wrapper: inconsistent OMPI_COMM_WORLD_* variables");
		return TOOL_EXIT_USAGE;
	}
	gethostname(host, sizeof host - 1);

	/* mpirun places ranks by slot: host k has ranks k*L .. k*L+L-1. */
	const struct { const char *name; int v; } vars[] = {
		{ "SMDDP_RANK", rank }, { "RANK", rank }, { "ROLE_RANK", rank },
		{ "SMDDP_WORLD_SIZE", size }, { "WORLD_SIZE", size }, { "ROLE_WORLD_SIZE", size },
		{ "SMDDP_LOCAL_RANK", lrank }, { "LOCAL_RANK", lrank },
		{ "SMDDP_LOCAL_WORLD_SIZE", lsize }, { "LOCAL_WORLD_SIZE", lsize },
		{ "GROUP_RANK", rank / lsize },
	};
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		snprintf(num, sizeof num, "%d", vars[i].v);
		setenv(vars[i].name, num, 1);
	}
	const char *id = getenv("SMDDP_JOB_ID");
	if (id)
		setenv("TORCHELASTIC_RUN_ID", id, 1);

	sigset_t mask, orig;
	sigemptyset(&mask);
	static const int sigs[] = { SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
	                            SIGCONT };
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		sigaddset(&mask, sigs[i]);
	sigprocmask(SIG_BLOCK, &mask, &orig);

	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0) {
		tool_warn_errno("rank %d on host %s: cannot create a pipe", rank, host);
		return TOOL_EXIT_FAILURE;
	}
	pid_t self = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		tool_warn_errno("rank %d on host %s: cannot fork", rank, host);
		return TOOL_EXIT_FAILURE;
	}
	if (pid == 0) {
		close(ep[0]);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != self)
			_exit(127);
		sigprocmask(SIG_SETMASK, &orig, NULL);
		execvp(argv[0], argv);
		int e = errno;
		while (write(ep[1], &e, sizeof e) < 0 && errno == EINTR)
			;
		_exit(e == ENOENT || e == ENOTDIR ? 127 : 126);
	}
	close(ep[1]);
	int err = 0;
	ssize_t got;
	while ((got = read(ep[0], &err, sizeof err)) < 0 && errno == EINTR)
		;
	close(ep[0]);
	if (got == sizeof err) {
		errno = err;
		tool_warn_errno("rank %d on host %s: cannot execute '%s'", rank, host, argv[0]);
	}

	int stopped_by = 0;   /* the signal mpirun (or someone) sent us */
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&mask, &si);
		if (sig < 0)
			continue;   /* EINTR */
		if (sig != SIGCHLD) {
			if (sig != SIGCONT && !stopped_by)
				stopped_by = sig;
			kill(pid, sig);
			continue;
		}
		int st;
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w != pid)
			continue;
		if (WIFEXITED(st)) {
			int code = WEXITSTATUS(st);
			if (code && !stopped_by && got != sizeof err)
				tool_warn("rank %d on host %s (pid %d) exited with status %d", rank, host,
				          (int)pid, code);
			return code;
		}
		if (WIFSIGNALED(st)) {
			int s = WTERMSIG(st);
			if (!stopped_by)
				tool_warn("rank %d on host %s (pid %d) was killed by signal %d (%s%s)", rank,
				          host, (int)pid, s, strsignal(s), WCOREDUMP(st) ? ", core dumped" : "");
			return 128 + s;
		}
	}
}

/* ---- a SageMaker host that is not the master ----------------------------
 *
 * With an mpirun form, the master host's smddp-run starts mpirun, which
 * reaches the other hosts (ssh, by default) and starts Open MPI's daemon
 * there. The others' smddp-run must keep their container alive meanwhile:
 * it waits (at most --worker-wait) for that daemon to appear, then for it
 * to exit, without polling. */

/* Open MPI's daemon on this host: in our network namespace, so that hosts
 * that share a kernel (containers, the test cluster) keep theirs apart. */
static pid_t find_daemon(void)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	struct stat self_net, st;
	pid_t found = 0;
	if (!d)
		return 0;
	bool have_net = stat("/proc/self/ns/net", &self_net) == 0;
	while (!found && (de = readdir(d))) {
		char path[300], comm[64] = "";
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/ns/net", de->d_name);
		if (have_net && (stat(path, &st) != 0 || st.st_ino != self_net.st_ino ||
		                 st.st_dev != self_net.st_dev))
			continue;
		snprintf(path, sizeof path, "/proc/%s/comm", de->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(comm, sizeof comm, f)) {
			comm[strcspn(comm, "\n")] = '\0';
			if (strcmp(comm, "orted") == 0 || strcmp(comm, "prted") == 0)
				found = (pid_t)atol(de->d_name);
		}
		fclose(f);
	}
	closedir(d);
	return found;
}

static int worker_wait(const struct options *o, const struct plan *p)
{
	int64_t until = now_ms() + ms_from_s(o->worker_wait_s);
	int64_t stop = o->timeout_s > 0 ? now_ms() + ms_from_s(o->timeout_s) : 0;
	pid_t pid;

	tool_warn("host %s runs ranks %ld..%ld of this %s job; waiting for mpirun on %s to "
	          "start them", p->current_host, p->node_rank * p->ppn,
	          p->node_rank * p->ppn + p->ppn - 1, p->form, p->hosts.v[0]);
	while (!(pid = find_daemon())) {
		if (now_ms() >= until) {
			tool_warn("mpirun on %s did not reach host %s within %g seconds (--worker-wait)",
			          p->hosts.v[0], p->current_host, o->worker_wait_s);
			return TOOL_EXIT_FAILURE;
		}
		struct timespec ts = { 0, 200 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	for (;;) {
		int left = -1;
		if (stop) {
			int64_t l = stop - now_ms();
			if (l <= 0)
				return 124;
			left = l > INT_MAX ? INT_MAX : (int)l;
		}
		if (fd >= 0) {
			struct pollfd pf = { .fd = fd, .events = POLLIN };
			if (poll(&pf, 1, left) > 0)
				return 0;
		} else {
			/* no pidfd (Linux < 5.3): the daemon is not our child */
			if (kill(pid, 0) < 0 && errno == ESRCH)
				return 0;
			struct timespec ts = { 0, 500 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
}

/* ---- --bind on one machine --------------------------------------------
 *
 * What mpirun's --bind-to does, for the ranks smddp-run starts itself: the
 * CPUs this process may use are grouped by core (a CPU and its hardware
 * threads, from sysfs) or by NUMA node, and local rank i gets group
 * i mod groups. */

static int parse_cpulist(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	while (*s && *s != '\n') {
		char *end;
		long a = strtol(s, &end, 10), b = a;
		if (end == s)
			return -1;
		if (*end == '-') {
			s = end + 1;
			b = strtol(s, &end, 10);
			if (end == s)
				return -1;
		}
		for (long c = a; c <= b && c < CPU_SETSIZE; c++)
			CPU_SET((int)c, set);
		s = end + (*end == ',');
	}
	return 0;
}

static bool read_cpulist(const char *path, cpu_set_t *set)
{
	char buf[4096];
	FILE *f = fopen(path, "re");
	bool ok = false;
	if (f) {
		ok = fgets(buf, sizeof buf, f) && parse_cpulist(buf, set) == 0;
		fclose(f);
	}
	return ok;
}

static int add_group(cpu_set_t *groups, int n, const cpu_set_t *g)
{
	for (int i = 0; i < n; i++)
		if (CPU_EQUAL(&groups[i], g))
			return n;
	groups[n] = *g;
	return n + 1;
}

static cpu_set_t *bind_sets(enum bind how, int nranks)
{
	cpu_set_t allowed, g;
	if (sched_getaffinity(0, sizeof allowed, &allowed) < 0) {
		tool_warn_errno("--bind: cannot read this process's CPUs");
		return NULL;
	}
	cpu_set_t *groups = calloc(CPU_SETSIZE, sizeof *groups);
	cpu_set_t *out = calloc(nranks, sizeof *out);
	if (!groups || !out)
		out_of_memory();
	int n = 0;
	if (how == BIND_NUMA) {
		char path[128];
		for (int node = 0; node < 1024; node++) {
			snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
			if (!read_cpulist(path, &g))
				continue;
			CPU_AND(&g, &g, &allowed);
			if (CPU_COUNT(&g))
				n = add_group(groups, n, &g);
		}
	} else {
		char path[128];
		for (int c = 0; c < CPU_SETSIZE; c++) {
			if (!CPU_ISSET(c, &allowed))
				continue;
			snprintf(path, sizeof path,
			         "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c);
			if (!read_cpulist(path, &g)) {
				CPU_ZERO(&g);
				CPU_SET(c, &g);
			}
			CPU_AND(&g, &g, &allowed);
			n = add_group(groups, n, &g);
		}
	}
	if (n == 0)
		groups[n++] = allowed;
	if (how == BIND_CORE && nranks > n)
		tool_warn("--bind core: %d ranks on %d core%s; ranks share them", nranks, n,
		          n == 1 ? "" : "s");
	for (int i = 0; i < nranks; i++)
		out[i] = groups[i % n];
	free(groups);
	return out;
}

/* ---- main -------------------------------------------------------------- */

int main(int argc, char **argv)
{
	static struct run run;
	struct run *r = &run;
	sigset_t mask;

	static struct plan plan;

	tool_init("smddp-run");
	if (argc > 1 && strcmp(argv[1], "--rank-wrapper") == 0)
		return rank_wrapper(argc - 2, argv + 2);
	parse_options(argc, argv, &r->opt);
	make_plan(&r->opt, &plan);
	r->plan = &plan;
	if (plan.kind == PLAN_IDLE) {
		tool_warn("host %s is not in the instance groups that train; nothing to run here",
		          plan.current_host);
		return TOOL_EXIT_OK;
	}
	plan_env(&r->opt, &plan);
	if (plan.kind == PLAN_LOCAL && r->opt.mpirun_args.n)
		tool_usage_error("--mpirun-args applies to jobs across hosts (--hosts, --hostfile, "
		                 "or SageMaker's mpirun forms)");
	if (plan.kind == PLAN_WORKER) {
		if (r->opt.dry_run) {
			printf("# smddp-run --dry-run: %s through mpirun, started on %s; %s (node rank "
			       "%d of %zu hosts) waits for it\n", plan.form, plan.hosts.v[0],
			       plan.current_host, plan.node_rank, plan.hosts.n);
			return TOOL_EXIT_OK;
		}
		return worker_wait(&r->opt, &plan);
	}
	r->opt.master_addr = plan.master_addr;
	r->opt.master_port = plan.master_port;
	int user_tag = r->opt.tag;
	bool pernode = plan.kind == PLAN_LOCAL && plan.nnodes > 1;
	r->opt.nproc = plan.kind == PLAN_MPIRUN || plan.kind == PLAN_SRUN ? 1 : plan.ppn;
	if (r->opt.tag < 0)
		r->opt.tag = plan.kind == PLAN_MPIRUN ? plan.hosts.n * plan.ppn > 1 : plan.ppn > 1;
	job_layout(&plan, &r->lay);
	r->self = getpid();

	/* Signals are taken from a signalfd only; SIGPIPE becomes EPIPE. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGCONT);
	/* A signal ignored on entry (SIGHUP under nohup) stays ignored and is
	 * not forwarded: Linux queues a blocked signal even when ignored, so it
	 * must stay out of the mask. */
	static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP };
	for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) {
		struct sigaction old;
		if (sigaction(forwarded[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue;
		sigaddset(&mask, forwarded[i]);
	}
	if (sigprocmask(SIG_BLOCK, &mask, &r->origmask) < 0) {
		tool_warn_errno("sigprocmask");
		return TOOL_EXIT_FAILURE;
	}
	r->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (r->sigfd < 0) {
		tool_warn_errno("signalfd");
		return TOOL_EXIT_FAILURE;
	}
	struct sigaction ign = { .sa_handler = SIG_IGN }, dfl = { .sa_handler = SIG_DFL };
	sigaction(SIGPIPE, &ign, &r->origpipe);
	/* SIGCHLD ignored on entry would reap the ranks behind our back. */
	sigaction(SIGCHLD, &dfl, &r->origchld);
	/* Orphans of the ranks become ours, so that none can outlive the job. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		tool_warn_errno("cannot become a child subreaper; orphans of ranks may survive");

	/* Two pipes per rank: 1024 ranks need more than the usual soft limit
	 * of 1024 descriptors. The ranks get the limit they would have had. */
	if (getrlimit(RLIMIT_NOFILE, &r->orignofile) == 0 &&
	    r->orignofile.rlim_cur < r->orignofile.rlim_max &&
	    r->orignofile.rlim_cur < (rlim_t)(2 * r->opt.nproc + 64)) {
		struct rlimit more = r->orignofile;
		more.rlim_cur = more.rlim_max;
		r->raised_nofile = setrlimit(RLIMIT_NOFILE, &more) == 0;
	}
	r->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);

	/* A job whose hosts each start their own ranks (SageMaker's
	 * torch_distributed) has no one to hand out an id and a token: every
	 * host derives the same ones (see shared_identity()). */
	bool shared = plan.kind == PLAN_LOCAL && plan.hosts.n > 1;
	const char *id = r->opt.job_id ? r->opt.job_id : getenv("SMDDP_JOB_ID");
	const char *jobname = getenv("TRAINING_JOB_NAME");   /* set by SageMaker */
	if (!(id && *id) && shared && jobname && *jobname)
		id = jobname;
	if (id && *id) {
		if (strlen(id) >= sizeof r->job_id) {
			tool_warn("%s is too long (at most %zu characters)",
			          id == jobname ? "TRAINING_JOB_NAME" : "SMDDP_JOB_ID", sizeof r->job_id - 1);
			return TOOL_EXIT_FAILURE;
		}
		if (pernode && strpbrk(id, " \t\n")) {
			tool_warn("SMDDP_JOB_ID '%s' has blanks: per-node mode needs an id without", id);
			return TOOL_EXIT_FAILURE;
		}
		strcpy(r->job_id, id);
	} else if (shared) {
		shared_identity(&plan, "", r->job_id, 12);
	} else if (random_hex(r->job_id, 12) < 0) {
		tool_warn_errno("getrandom");
		return TOOL_EXIT_FAILURE;
	}
	const char *token = getenv("SMDDP_JOB_TOKEN");
	if (token && !*token)
		token = NULL;
	if (pernode && token) {
		/* the nodes' launchers check it, and the ranks present it */
		size_t tl = strlen(token), k;
		for (k = 0; k < tl && token[k] > ' ' && token[k] < 0x7f; k++)
			;
		if (tl < 8 || tl >= sizeof r->token || k < tl) {
			tool_warn("SMDDP_JOB_TOKEN: expected 8 to %zu printable characters without "
			          "blanks, the same on every node", sizeof r->token - 1);
			return TOOL_EXIT_USAGE;
		}
		strcpy(r->token, token);
	} else if (shared) {
		/* SMDDP_JOB_TOKEN or none: never one derived from public names */
		int rc = shared_token(r, token);
		if (rc)
			return rc;
	} else if (random_hex(r->token, 32) < 0) {
		tool_warn_errno("getrandom");
		return TOOL_EXIT_FAILURE;
	}
	long port = r->opt.master_port;
	if (!port) {
		port = pick_free_port(r->opt.master_addr);
		if (port <= 0) {
			tool_warn("cannot find a free TCP port on %s; give one with --master-port",
			          r->opt.master_addr);
			return TOOL_EXIT_FAILURE;
		}
	}
	snprintf(r->master_port, sizeof r->master_port, "%ld", port);

	if (pernode && !r->opt.dry_run) {
		char host[256] = "?";
		gethostname(host, sizeof host - 1);
		long lport = r->opt.launcher_port ? r->opt.launcher_port : port + 1;
		if (lport > 65535) {
			tool_warn("--master-port %ld leaves no port above it for the launchers: give "
			          "--launcher-port", port);
			return TOOL_EXIT_USAGE;
		}
		bool user_id = (r->opt.job_id || (id && *id));
		struct nodes_config nc = {
			.nnodes = plan.nnodes, .node_rank = plan.node_rank, .nproc = plan.ppn,
			.master_addr = plan.master_addr, .master_port = port, .launcher_port = lport,
			.join_timeout_s = r->opt.join_timeout_s, .host = host,
			.job_id = user_id ? r->job_id : NULL,
			.token = token ? r->token : NULL, .token_given = token != NULL,
		};
		int rc = nodes_join(&nc, r->sigfd, &r->nodes, r->job_id, r->token);
		if (rc < 0) {
			r->cause = CAUSE_SIGNAL;
			r->signo = -rc;
			exit_like(r);
		}
		if (rc > 0)
			return rc;
	}

	if (plan.kind == PLAN_MPIRUN) {
		struct strv set = { 0 }, names = { 0 }, av = { 0 };
		mpirun_environment(r, &set, &names);
		mpirun_argv(r, &names, &av);
		if (r->opt.dry_run || !mpirun_found(av.v[0])) {
			int rc = TOOL_EXIT_OK;
			if (r->opt.dry_run) {
				dry_run_mpirun(r, &set, &av);
			} else {
				tool_warn("%s not found%s: runs across hosts go through Open MPI's "
				          "mpirun; install it (Debian, Ubuntu: apt-get install "
				          "openmpi-bin; Amazon Linux, Fedora: dnf install openmpi) or "
				          "set SMDDP_MPIRUN to its path",
				          av.v[0], strchr(av.v[0], '/') ? "" : " in PATH");
				rc = TOOL_EXIT_USAGE;
			}
			strv_free(&set);
			strv_free(&names);
			strv_free(&av);
			return rc;
		}
		/* mpirun's environment: inherited, less rank variables, plus SET */
		struct strv env = { 0 };
		for (char **e = environ; *e; e++) {
			char name[256];
			snprintf(name, sizeof name, "%.*s", (int)strcspn(*e, "="), *e);
			if (!env_is_ours(*e) && !env_is_foreign_rank(*e) && !envv_find(&set, name))
				strv_add(&env, *e);
		}
		for (size_t i = 0; i < set.n; i++)
			strv_add(&env, set.v[i]);
		strv_free(&set);     /* copied into env */
		strv_free(&names);   /* copied into av */
		r->mpirun = true;
		r->engine = "mpirun";
		r->mpirun_env = env.v;
		r->opt.tag = 0;   /* mpirun's --tag-output does it */
		r->opt.argv = av.v;
	} else if (plan.kind == PLAN_SRUN) {
		struct strv av = { 0 };
		slurm_argv(&r->opt, r->plan, user_tag, &av);
		if (r->opt.dry_run) {
			slurm_dry_run(r->plan, &av);
			return TOOL_EXIT_OK;
		}
		if (!mpirun_found(av.v[0])) {
			tool_warn("%s not found%s: inside a Slurm allocation, smddp-run runs the job "
			          "through srun (one smddp-run per node); put Slurm's srun in PATH, set "
			          "SMDDP_SRUN to it, or run the job here with --launcher none", av.v[0],
			          strchr(av.v[0], '/') ? "" : " in PATH");
			return TOOL_EXIT_USAGE;
		}
		/* srun needs the allocation's SLURM_* as they are */
		r->mpirun = true;
		r->engine = "srun";
		r->mpirun_env = environ;
		r->opt.tag = 0;   /* the smddp-run on each node tags */
		r->opt.argv = av.v;
	} else if (r->opt.dry_run) {
		dry_run_local(r);
		return TOOL_EXIT_OK;
	}

	/* When stdout and stderr are one file, one queue keeps lines whole. */
	outq_init(&r->qout, 1);
	outq_init(&r->qerr, 2);
	struct stat s1, s2;
	bool same = fstat(1, &s1) == 0 && fstat(2, &s2) == 0 &&
	            s1.st_dev == s2.st_dev && s1.st_ino == s2.st_ino;

	r->qmsg = same ? &r->qout : &r->qerr;
	if (r->opt.tag) {
		the_run = r;
		tool_set_message_sink(message_to_queue);
	}
	/* A rank's stdio buffers a pipe by blocks: a terminal's worth of lines
	 * would come at exit. On a terminal (or asked) it gets one of its own. */
	r->out_via = !r->mpirun && (r->opt.tag > 0 || r->opt.unbuffered);
	r->use_pty = r->out_via && (r->opt.unbuffered || isatty(1));
	/* and a rank's progress on stderr reaches a terminal as it does without
	 * smddp-run: it sees a terminal, and its '\r' ends a piece */
	r->use_pty_err = !r->mpirun && r->opt.tag > 0 && isatty(2);
	r->have_ws = (r->use_pty && ioctl(1, TIOCGWINSZ, &r->ws) == 0) ||
	             (r->use_pty_err && ioctl(2, TIOCGWINSZ, &r->ws) == 0);

	r->nranks = r->lay.local_size;
	if (!r->mpirun && r->opt.bind > BIND_NONE)
		r->cpus = bind_sets(r->opt.bind, r->nranks);
	r->ranks = calloc(r->nranks, sizeof *r->ranks);
	if (!r->ranks) {
		tool_warn("out of memory");
		return TOOL_EXIT_FAILURE;
	}
	for (int i = 0; i < r->nranks; i++) {
		struct rank *rk = &r->ranks[i];
		rk->rank = r->lay.node_rank * r->lay.local_size + i;
		rk->taglen = snprintf(rk->tag, sizeof rk->tag, "[%d] ", rk->rank);
		if (!r->opt.tag)
			rk->taglen = 0;   /* --unbuffered alone: lines pass as they are */
		rk->out = (struct stream){ .fd = -1, .q = &r->qout };
		rk->err = (struct stream){ .fd = -1, .q = same ? &r->qout : &r->qerr };
	}

	if (r->opt.timeout_s > 0)
		r->timeout_at = now_ms() + ms_from_s(r->opt.timeout_s);
	r->phase = PH_RUN;
	for (int i = 0; i < r->nranks && r->phase == PH_RUN; i++) {
		if (start_rank(r, &r->ranks[i], i) < 0)
			break;
		read_signals(r);   /* a fast failure or a Ctrl-C stops the launch */
	}

	event_loop(r);
	if (r->nodes) {
		nodes_done(r->nodes, exit_status(r));
		nodes_free(r->nodes);
	}
	remove_job_shm(r->job_id);
	exit_like(r);
	return 0;
}
