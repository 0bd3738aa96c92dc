/* cmd/run/options.c - smddp-run's command line: its options, their checks, --help */
#include "config.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tool.h"
#include "run/launch.h"
#include "run/run.h"
#include "run/slurm.h"

/* ---- command line ---------------------------------------------------- */

enum {
	OPT_TAG = 256, OPT_NO_TAG, OPT_MASTER_ADDR, OPT_MASTER_PORT, OPT_GRACE,
	OPT_TIMEOUT, OPT_HOSTS, OPT_HOSTFILE, OPT_DRY_RUN, OPT_MPIRUN_ARGS, OPT_ENV,
	OPT_BIND, OPT_NETIF, OPT_SAGEMAKER, OPT_NO_SAGEMAKER, OPT_RESOURCE_CONFIG,
	OPT_HYPERPARAMETERS, OPT_DISTRIBUTION, OPT_WORKER_WAIT, OPT_NNODES, OPT_NODE_RANK,
	OPT_RDZV_ENDPOINT, OPT_RDZV_ID, OPT_RDZV_BACKEND, OPT_STANDALONE, OPT_LAUNCHER_PORT,
	OPT_JOIN_TIMEOUT, OPT_LAUNCHER, OPT_SRUN_ARGS, OPT_UNBUFFERED, OPT_NO_PYTHON,
	OPT_MAX_RESTARTS, OPT_TRACE_DIR, OPT_ON_FAILURE, OPT_STORE,
	OPT_END
};

/* torchrun reads each of its options from PET_<OPTION> when the command line
 * lacks it (torch/distributed/argparse_util.py); the Kubeflow PyTorchJob
 * operator sets these instead of passing options. Flags take an integer,
 * non-zero for on. The command line wins over them. */
static const struct pet {
	const char *var;
	int opt;
	const char *name;       /* the option, for messages */
	bool flag;
} pet_vars[] = {
	{ "PET_NPROC_PER_NODE", 'n',               "--nproc-per-node", false },
	{ "PET_NNODES",         OPT_NNODES,        "--nnodes",         false },
	{ "PET_NODE_RANK",      OPT_NODE_RANK,     "--node-rank",      false },
	{ "PET_MASTER_ADDR",    OPT_MASTER_ADDR,   "--master-addr",    false },
	{ "PET_MASTER_PORT",    OPT_MASTER_PORT,   "--master-port",    false },
	{ "PET_RDZV_ENDPOINT",  OPT_RDZV_ENDPOINT, "--rdzv-endpoint",  false },
	{ "PET_RDZV_ID",        OPT_RDZV_ID,       "--rdzv-id",        false },
	{ "PET_RDZV_BACKEND",   OPT_RDZV_BACKEND,  "--rdzv-backend",   false },
	{ "PET_MAX_RESTARTS",   OPT_MAX_RESTARTS,  "--max-restarts",   false },
	{ "PET_STANDALONE",     OPT_STANDALONE,    "--standalone",     true },
	{ "PET_NO_PYTHON",      OPT_NO_PYTHON,     "--no-python",      true },
};

/* The PET_ variable whose value is being parsed; NULL: the command line's. */
static const struct pet *from_env;

/* A bad option value, named as it was given: on the command line, or in a
 * PET_ variable. */
static noreturn TOOL_PRINTF(1, 2) void opt_error(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (from_env)
		tool_usage_error("%s: %s (torchrun's %s, from the environment; fix or unset %s)",
		                 from_env->var, msg, from_env->name, from_env->var);
	tool_usage_error("%s", msg);
}

/* What the checks after the command line need to know of it. */
struct seen {
	bool addr, endpoint;    /* --master-addr, --rdzv-endpoint (or from PET_) */
	bool cmdline[OPT_END];  /* options given on the command line */
	const struct pet *env[OPT_END]; /* options taken from a PET_ variable */
};

/* How option OPT (FLAG on the command line) was given, for the checks made
 * once all are parsed: "--nnodes", or "PET_NNODES". */
static const char *given(const struct seen *s, int opt, const char *flag)
{
	return opt > 0 && opt < OPT_END && s->env[opt] ? s->env[opt]->var : flag;
}

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
"      --on-failure stop|continue\n"
"                          when a rank fails: stop the others (stop, the default),\n"
"                          or let them go on without it (continue: for jobs that\n"
"                          shrink their groups, dist.shrink_group); then the job\n"
"                          ends when every rank has, and fails only if no rank\n"
"                          exited 0 (this host's ranks or --nnodes only)\n"
"      --store launcher|rank0\n"
"                          where torch's TCPStore lives: in smddp-run, at\n"
"                          MASTER_PORT, every rank its client\n"
"                          (TORCHELASTIC_USE_AGENT_STORE=True, as under torchrun),\n"
"                          so that it outlives any rank; or in rank 0 (env://'s\n"
"                          own way); default: launcher with --on-failure continue\n"
"                          (with --nnodes, node 0's launcher serves every node),\n"
"                          else rank0\n"
"      --timeout SECONDS   stop the job after this long and exit 124 (default: none)\n"
"      --env VAR[=VALUE]   give VAR (set to VALUE) to every rank; repeatable\n"
"      --network-interface IFNAME\n"
"                          use IFNAME between hosts (Open MPI, NCCL, Gloo)\n"
"      --bind none|core|numa     bind each rank to a core or NUMA node (default none)\n""      --trace-dir DIR     keep the ranks' flight recorder dumps in DIR\n"
"                          (SMDDP_TRACE_DIR; default: a private directory, removed\n"
"                          at the end); when the job fails, smddp-run reads them\n"
"                          and prints a verdict: which rank was behind, in which call\n"
"                          (per-node mode and Slurm: node 0, from every node's dumps;\n"
"                          through mpirun: give a DIR that all hosts share)\n"
"      --dry-run           print the environment and command instead of running\n"
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
"  Set SMDDP_JOB_TOKEN, the same on every node, on a network others can reach:\n"
"  the launchers then prove it to each other without sending it; without it,\n"
"  node 0 makes the token and sends it to the others in clear (smddp(7)).\n"
"  torchrun's spellings are accepted: --nproc_per_node, --node_rank, --master_addr,\n"
"  --master_port, --rdzv_endpoint, --rdzv_id; --rdzv-backend, --no-python and\n"
"  --max-restarts 0 are accepted and change nothing (PROGRAM runs as it is given:\n"
"  a Python script as 'python3 train.py')\n"
"  As with torchrun, PET_NNODES, PET_NODE_RANK, PET_NPROC_PER_NODE, PET_MASTER_ADDR,\n"
"  PET_MASTER_PORT, PET_RDZV_ENDPOINT, PET_RDZV_ID... give the options the command\n"
"  line does not (Kubeflow's PyTorchJob sets them)\n"
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
"LOCAL_RANK, MASTER_ADDR, MASTER_PORT, SMDDP_JOB_ID, SMDDP_JOB_TOKEN, SageMaker's\n"
"SMDATAPARALLEL_LOCAL_RANK and more;\n"
"see smddp-run(1). When a rank fails, the others are stopped and smddp-run exits\n"
"with the failed rank's status, after a verdict from the ranks' flight recorders\n"
"(unless --on-failure continue).\n");
}

static enum bind parse_bind(const char *s)
{
	if (strcmp(s, "none") == 0)
		return BIND_NONE;
	if (strcmp(s, "core") == 0)
		return BIND_CORE;
	if (strcmp(s, "numa") == 0)
		return BIND_NUMA;
	opt_error("invalid --bind '%s': expected none, core or numa", s);
}

/* -n's value: a number, or torchrun's auto (the default), gpu, cpu. */
static long parse_nproc(const char *arg)
{
	long n;
	if (strcmp(arg, "auto") == 0)
		return 0;
	if (strcmp(arg, "gpu") == 0) {
		n = count_gpus();
		if (n == 0)
			opt_error("--nproc-per-node gpu: no NVIDIA GPU here (no /dev/nvidiaN); "
			                 "give a number");
		return n > MAX_NPROC ? MAX_NPROC : n;
	}
	if (strcmp(arg, "cpu") == 0) {
		n = sysconf(_SC_NPROCESSORS_ONLN);
		return n < 1 ? 1 : n > MAX_NPROC ? MAX_NPROC : n;
	}
	if (tool_parse_long(arg, 1, MAX_NPROC, &n) < 0)
		opt_error("invalid number of ranks '%s': expected 1 to %d, auto, gpu or cpu",
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
			opt_error("invalid --rdzv-endpoint '%s': expected HOST[:PORT] or "
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
		opt_error("invalid --rdzv-endpoint '%s': no host", arg);
	o->master_addr = host;
	if (port && tool_parse_long(port, 1, 65535, &o->master_port) < 0)
		opt_error("invalid --rdzv-endpoint '%s': the port must be 1 to 65535", arg);
}

/* Option C with its value ARG (NULL for a flag), from the command line or a
 * PET_ variable. */
static void set_option(struct options *o, struct seen *s, int c, const char *arg)
{
	switch (c) {
	case 'n':
		o->nproc = parse_nproc(arg);
		break;
	case OPT_TAG:
		o->tag = 1;
		break;
	case OPT_NO_TAG:
		o->tag = 0;
		break;
	case OPT_MASTER_ADDR:
		if (!*arg)
			opt_error("empty --master-addr");
		o->master_addr = arg;
		s->addr = true;
		break;
	case OPT_MASTER_PORT:
		if (tool_parse_long(arg, 1, 65535, &o->master_port) < 0)
			opt_error("invalid port '%s': expected 1 to 65535", arg);
		break;
	case OPT_GRACE:
		if (tool_parse_double(arg, 0, 86400, &o->grace_s) < 0)
			opt_error("invalid --grace '%s': expected 0 to 86400 seconds",
			                 arg);
		break;
	case OPT_ON_FAILURE:
		if (strcmp(arg, "stop") == 0)
			o->keep_going = false;
		else if (strcmp(arg, "continue") == 0)
			o->keep_going = true;
		else
			opt_error("invalid --on-failure '%s': expected stop or continue", arg);
		break;
	case OPT_STORE:
		if (strcmp(arg, "launcher") == 0)
			o->store = 1;
		else if (strcmp(arg, "rank0") == 0)
			o->store = 0;
		else
			opt_error("invalid --store '%s': expected launcher or rank0", arg);
		break;
	case OPT_TIMEOUT:
		if (tool_parse_double(arg, 0, 1e9, &o->timeout_s) < 0 || o->timeout_s <= 0)
			opt_error("invalid --timeout '%s': expected a positive number of seconds",
			                 arg);
		o->timeout_arg = arg;
		break;
	case OPT_HOSTS:
		o->hosts = arg;
		break;
	case OPT_HOSTFILE:
		o->hostfile = arg;
		break;
	case OPT_DRY_RUN:
		o->dry_run = true;
		break;
	case OPT_MPIRUN_ARGS:
		if (split_words(arg, &o->mpirun_args) < 0)
			opt_error("--mpirun-args '%s': a quote is not closed", arg);
		break;
	case OPT_ENV: {
		size_t n = strcspn(arg, "=");
		if (!valid_env_name(arg, n))
			opt_error("invalid --env '%s': expected VAR or VAR=VALUE, VAR made of "
			                 "letters, digits and '_'", arg);
		if (is_rank_env_name(arg, n))
			opt_error("--env '%s': smddp-run sets %.*s itself (see --master-addr, "
			                 "--master-port, --nproc)", arg, (int)n, arg);
		if (!arg[n] && !getenv(arg))
			opt_error("--env %s: %s is not set; give a value with --env %s=VALUE",
			                 arg, arg, arg);
		strv_add(&o->envs, arg);
		break;
	}
	case OPT_BIND:
		o->bind = parse_bind(arg);
		break;
	case OPT_NETIF:
		if (!*arg || strlen(arg) >= 16 || strpbrk(arg, " \t/,:'\"\\"))
			opt_error("invalid --network-interface '%s': expected an interface "
			                 "name such as eth0", arg);
		o->netif = arg;
		break;
	case OPT_SAGEMAKER:
		o->sagemaker = 1;
		break;
	case OPT_NO_SAGEMAKER:
		o->sagemaker = 0;
		break;
	case OPT_RESOURCE_CONFIG:
		o->resource_config = arg;
		break;
	case OPT_HYPERPARAMETERS:
		o->hyperparameters = arg;
		break;
	case OPT_DISTRIBUTION:
		o->distribution = arg;
		break;
	case OPT_WORKER_WAIT:
		if (tool_parse_double(arg, 0, 1e9, &o->worker_wait_s) < 0)
			opt_error("invalid --worker-wait '%s': expected a number of seconds",
			                 arg);
		break;
	case OPT_NNODES: {
		/* torchrun's MIN:MAX, as long as it is one number */
		char *colon = strchr(arg, ':');
		long lo, hi;
		if (colon) {
			char *a = strndup(arg, colon - arg);
			if (!a)
				out_of_memory();
			if (tool_parse_long(a, 1, 65536, &lo) < 0 ||
			    tool_parse_long(colon + 1, 1, 65536, &hi) < 0)
				opt_error("invalid --nnodes '%s': expected N from 1 to 65536",
				                 arg);
			free(a);
			if (lo != hi)
				opt_error("--nnodes %s: elastic jobs (a range of nodes) are not "
				                 "supported; give one number", arg);
		} else if (tool_parse_long(arg, 1, 65536, &lo) < 0) {
			opt_error("invalid --nnodes '%s': expected N from 1 to 65536", arg);
		}
		o->nnodes = lo;
		break;
	}
	case OPT_NODE_RANK:
		if (tool_parse_long(arg, 0, 65535, &o->node_rank) < 0)
			opt_error("invalid --node-rank '%s': expected 0 to N-1", arg);
		break;
	case OPT_RDZV_ENDPOINT:
		parse_endpoint(arg, o);
		s->endpoint = true;
		break;
	case OPT_RDZV_ID:
		if (!*arg || strlen(arg) >= NODES_ID_MAX || strpbrk(arg, " \t\n="))
			opt_error("invalid --rdzv-id '%s': expected 1 to %d characters, no "
			                 "blanks", arg, NODES_ID_MAX - 1);
		o->job_id = arg;
		break;
	case OPT_RDZV_BACKEND:
		if (strcmp(arg, "static") != 0 && strcmp(arg, "c10d") != 0)
			opt_error("--rdzv-backend %s: only static and c10d are accepted "
			                 "(both mean smddp-run's own rendezvous)", arg);
		break;
	case OPT_STANDALONE:
		o->standalone = true;
		break;
	case OPT_LAUNCHER_PORT:
		if (tool_parse_long(arg, 1, 65535, &o->launcher_port) < 0)
			opt_error("invalid --launcher-port '%s': expected 1 to 65535", arg);
		break;
	case OPT_JOIN_TIMEOUT:
		if (tool_parse_double(arg, 0, 1e7, &o->join_timeout_s) < 0 ||
		    o->join_timeout_s <= 0)
			opt_error("invalid --join-timeout '%s': expected a positive number "
			                 "of seconds", arg);
		break;
	case OPT_UNBUFFERED:
		o->unbuffered = true;
		break;
	case OPT_TRACE_DIR:
		if (!*arg)
			opt_error("--trace-dir: empty directory name");
		if (strlen(arg) > 900)
			opt_error("--trace-dir: a name of at most 900 characters");
		o->trace_dir = arg;
		break;
	case OPT_NO_PYTHON:
		break;   /* smddp-run never adds a python */
	case OPT_MAX_RESTARTS: {
		long n;
		if (tool_parse_long(arg, 0, 1000000, &n) < 0)
			opt_error("invalid --max-restarts '%s': expected 0", arg);
		if (n > 0)
			opt_error("--max-restarts %s: restarting failed ranks is not "
			                 "supported; a failure ends the job (give 0)", arg);
		break;
	}
	case OPT_LAUNCHER:
		if (strcmp(arg, "auto") == 0)
			o->launcher = LAUNCH_AUTO;
		else if (strcmp(arg, "slurm") == 0)
			o->launcher = LAUNCH_SLURM;
		else if (strcmp(arg, "none") == 0)
			o->launcher = LAUNCH_NONE;
		else
			opt_error("invalid --launcher '%s': expected auto, slurm or none", arg);
		break;
	case OPT_SRUN_ARGS:
		if (split_words(arg, &o->srun_args) < 0)
			opt_error("--srun-args '%s': a quote is not closed", arg);
		break;
	}
}

/* torchrun's PET_ variables, for the options the command line did not give. */
static void options_from_env(struct options *o, struct seen *s)
{
	/* One rendezvous address: a command line that names one (or a
	 * --standalone job) leaves every PET_ address and size alone, and
	 * PET_MASTER_ADDR wins over PET_RDZV_ENDPOINT. */
	bool addr_cmdline = s->cmdline[OPT_MASTER_ADDR] || s->cmdline[OPT_RDZV_ENDPOINT];
	bool standalone = s->cmdline[OPT_STANDALONE];
	for (size_t i = 0; i < sizeof pet_vars / sizeof pet_vars[0]; i++) {
		const struct pet *p = &pet_vars[i];
		const char *v = getenv(p->var);
		if (!v || !*v || s->cmdline[p->opt])
			continue;
		bool addr = p->opt == OPT_MASTER_ADDR || p->opt == OPT_RDZV_ENDPOINT ||
		            p->opt == OPT_MASTER_PORT;
		if (addr && addr_cmdline)
			continue;
		if (standalone && (addr || p->opt == OPT_NNODES || p->opt == OPT_NODE_RANK))
			continue;
		if (p->opt == OPT_RDZV_ENDPOINT && s->addr)
			continue;
		from_env = p;
		if (p->flag) {
			long on;
			if (tool_parse_long(v, 0, LONG_MAX, &on) < 0)
				opt_error("invalid value '%s': expected 0 (off) or 1 (on)", v);
			if (on)
				set_option(o, s, p->opt, NULL);
		} else {
			set_option(o, s, p->opt, v);
		}
		s->env[p->opt] = p;
		from_env = NULL;
	}
}

void parse_options(int argc, char **argv, struct options *o)
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
		{ "trace-dir",     required_argument, NULL, OPT_TRACE_DIR },
		{ "on-failure",    required_argument, NULL, OPT_ON_FAILURE },
		{ "store",         required_argument, NULL, OPT_STORE },
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
	o->store = -1;
	o->grace_s = DEFAULT_GRACE_S;
	o->sagemaker = -1;
	o->worker_wait_s = DEFAULT_WORKER_WAIT_S;
	o->node_rank = -1;
	o->join_timeout_s = DEFAULT_JOIN_TIMEOUT_S;
	struct seen s;
	memset(&s, 0, sizeof s);

	opterr = 0;
	/* '+': stop at PROGRAM, whose own options are not ours. */
	while ((c = getopt_long(argc, argv, "+:n:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage();
			exit(TOOL_EXIT_OK);
		case 'V':
			tool_print_version();
			exit(TOOL_EXIT_OK);
		case ':':
		case '?':
			tool_getopt_error_long(c, optopt, argv, optind, longopts);
		default:
			if (c > 0 && c < OPT_END)
				s.cmdline[c] = true;
			set_option(o, &s, c, optarg);
		}
	}
	options_from_env(o, &s);
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

	if (s.addr && s.endpoint)
		tool_usage_error("--master-addr and --rdzv-endpoint exclude each other");
	const char *nnodes = given(&s, OPT_NNODES, "--nnodes");
	const char *node_rank = given(&s, OPT_NODE_RANK, "--node-rank");
	if (o->standalone && (o->nnodes > 1 || o->node_rank > 0 || s.addr || s.endpoint))
		tool_usage_error("%s is one node on 127.0.0.1: it excludes --nnodes N > 1, "
		                 "--node-rank, --master-addr and --rdzv-endpoint (%s)",
		                 given(&s, OPT_STANDALONE, "--standalone"),
		                 o->nnodes > 1 ? nnodes : o->node_rank > 0 ? node_rank :
		                 s.addr ? given(&s, OPT_MASTER_ADDR, "--master-addr") :
		                 given(&s, OPT_RDZV_ENDPOINT, "--rdzv-endpoint"));
	if (o->node_rank >= 0 && !o->nnodes)
		tool_usage_error("%s needs --nnodes", node_rank);
	if (o->nnodes && o->node_rank >= o->nnodes)
		tool_usage_error("%s %ld: expected 0 to %ld (%s %ld)", node_rank, o->node_rank,
		                 o->nnodes - 1, nnodes, o->nnodes);
	if (o->nnodes > 1 && slurm_in_step()) {
		/* one smddp-run per node of a Slurm step (see slurm_argv()) */
		const char *id = getenv("SLURM_NODEID"), *list = getenv("SLURM_STEP_NODELIST");
		if (o->node_rank < 0 && id && tool_parse_long(id, 0, o->nnodes - 1, &o->node_rank) < 0)
			tool_usage_error("%s %ld in a Slurm step: SLURM_NODEID='%s' is not a node "
			                 "rank 0 to %ld; give --node-rank", nnodes, o->nnodes, id,
			                 o->nnodes - 1);
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
			tool_usage_error("%s (one smddp-run per node) and %s exclude each other",
			                 nnodes, other);
		if (!o->master_addr)
			tool_usage_error("%s %ld: give node 0's address with --master-addr (or "
			                 "--rdzv-endpoint), the same on every node", nnodes, o->nnodes);
		if (o->node_rank < 0)
			tool_usage_error("%s %ld: give this node's place with --node-rank (0 to "
			                 "%ld)", nnodes, o->nnodes, o->nnodes - 1);
		o->sagemaker = 0;
	}
	if (o->launcher == LAUNCH_SLURM) {
		const char *other = o->hosts ? "--hosts" : o->hostfile ? "--hostfile" :
		                    o->nnodes ? nnodes :
		                    o->standalone ? given(&s, OPT_STANDALONE, "--standalone") :
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
