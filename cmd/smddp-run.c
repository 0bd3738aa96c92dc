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
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "common/tool.h"

#define MAX_NPROC        1024
#define DEFAULT_GRACE_S  5.0
#define START_WAIT_MS    30000   /* a rank must reach exec() within this */
#define KILL_WAIT_MS     10000   /* ranks must be gone this long after SIGKILL */
#define SWEEP_WAIT_MS    5000    /* leftover descendants must be gone */
#define DRAIN_WAIT_MS    5000    /* pipes must reach EOF once everyone is dead */
#define OUTQ_HIGH        (1u << 20)  /* stop reading ranks above this backlog */
#define LINE_MAX_BYTES   (1u << 20)  /* a longer unterminated line is cut */
#define READ_CHUNK       65536

extern char **environ;

/* ---- options and job shape ------------------------------------------ */

struct options {
	long nproc;             /* 0: detect */
	int tag;                /* -1: default (on when nproc > 1) */
	const char *master_addr;
	long master_port;       /* 0: pick a free one */
	double grace_s;
	double timeout_s;       /* 0: none */
	const char *timeout_arg;
	char **argv;            /* PROGRAM ARGS... */
};

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
};

struct run {
	struct options opt;
	struct layout lay;
	pid_t self;
	int sigfd;
	sigset_t origmask;
	struct sigaction origpipe, origchld;
	struct rlimit orignofile;   /* restored in the ranks */
	bool raised_nofile;
	int devnull;

	char job_id[64];
	char token[33];
	char master_port[8];

	struct rank *ranks;
	int nranks;             /* local ranks */
	int nstarted;
	int nlive;              /* started and not yet exited */

	struct outq qout, qerr;
	struct outq *qmsg;      /* where smddp-run's own messages go when tagging */

	enum phase phase;
	int64_t deadline;       /* of the current phase; 0: none */
	int64_t timeout_at;     /* --timeout; 0: none */

	enum cause cause;
	int status;             /* exit status for CAUSE_RANK / EXEC / LAUNCH */
	int signo;              /* for CAUSE_SIGNAL */
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
	OPT_TIMEOUT,
};

static void usage(void)
{
	printf(
"Usage: smddp-run [OPTIONS] [--] PROGRAM [ARGS...]\n"
"Start the ranks of a distributed job as processes of PROGRAM on this machine.\n"
"\n"
"Options:\n"
"  -n, --nproc N           number of ranks (default: one per NVIDIA GPU, else 1)\n"
"      --tag-output        prefix each output line with \"[RANK] \" (default when N > 1)\n"
"      --no-tag-output     let ranks write to smddp-run's stdout and stderr directly\n"
"      --master-addr ADDR  rendezvous address given to the ranks (default 127.0.0.1)\n"
"      --master-port PORT  rendezvous port (default: a free port on ADDR)\n"
"      --grace SECONDS     time between SIGTERM and SIGKILL when stopping ranks\n"
"                          (default 5)\n"
"      --timeout SECONDS   stop the job after this long and exit 124 (default: none)\n"
"  -h, --help              show this help and exit\n"
"  -V, --version           show the version and exit\n"
"\n"
"Each rank gets SMDDP_RANK, SMDDP_WORLD_SIZE, SMDDP_LOCAL_RANK, RANK, WORLD_SIZE,\n"
"LOCAL_RANK, MASTER_ADDR, MASTER_PORT, SMDDP_JOB_ID, SMDDP_JOB_TOKEN and more;\n"
"see smddp-run(1). When a rank fails, the others are stopped and smddp-run exits\n"
"with the failed rank's status.\n");
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
		{ "help",          no_argument,       NULL, 'h' },
		{ "version",       no_argument,       NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(o, 0, sizeof *o);
	o->tag = -1;
	o->master_addr = "127.0.0.1";
	o->grace_s = DEFAULT_GRACE_S;

	opterr = 0;
	/* '+': stop at PROGRAM, whose own options are not ours. */
	while ((c = getopt_long(argc, argv, "+:n:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (tool_parse_long(optarg, 1, MAX_NPROC, &o->nproc) < 0)
				tool_usage_error("invalid number of ranks '%s': expected 1 to %d",
				                 optarg, MAX_NPROC);
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
}

/* One rank per NVIDIA GPU device node (/dev/nvidia0, /dev/nvidia1...). */
static int count_gpus(void)
{
	glob_t g;
	int n = 0;
	if (glob("/dev/nvidia[0-9]*", 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			if (strspn(g.gl_pathv[i] + strlen("/dev/nvidia"), "0123456789") ==
			    strlen(g.gl_pathv[i] + strlen("/dev/nvidia")))
				n++;
		globfree(&g);
	}
	return n;
}

/* Where this launcher's ranks sit in the job. Today the whole job runs on
 * this machine. The mpirun mode will start one smddp-run per host and take
 * nnodes and node_rank from OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_RANK
 * here (they are then removed from the ranks' environment, as now); the
 * master port then has to be given, or picked by node 0 and shared. */
static void job_layout(const struct options *o, struct layout *l)
{
	l->nnodes = 1;
	l->node_rank = 0;
	l->local_size = (int)o->nproc;
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

	for (char **e = environ; *e; e++)
		n++;
	char **env = calloc(n + NRANK_ENV + 1, sizeof *env);
	if (!env)
		return NULL;
	for (char **e = environ; *e; e++)
		if (!env_is_ours(*e) && !env_is_foreign_rank(*e))
			env[k++] = *e;
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

static void stream_close(struct rank *rk, struct stream *s)
{
	if (s->fd < 0)
		return;
	close(s->fd);
	s->fd = -1;
	if (s->plen)    /* a last line without '\n' still ends a line for us */
		outq_put(s->q, rk->tag, rk->taglen, s->part, s->plen, true);
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

static void stream_add(struct rank *rk, struct stream *s, const char *data, size_t n)
{
	while (n) {
		const char *nl = memchr(data, '\n', n);
		size_t take = nl ? (size_t)(nl - data) + 1 : n;
		if (nl && !s->plen) {
			outq_put(s->q, rk->tag, rk->taglen, data, take, false);
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
				outq_put(s->q, rk->tag, rk->taglen, s->part, s->plen, !nl);
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

	char others[64] = "";
	if (r->nlive > 0)
		snprintf(others, sizeof others, "; stopping %d other rank%s",
		         r->nlive, r->nlive == 1 ? "" : "s");
	if (signaled)
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
		/* Nothing is left to stop; only output is being flushed. */
		if (r->cause == CAUSE_NONE) {
			r->cause = CAUSE_SIGNAL;
			r->signo = sig;
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
	}
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
                       char **env)
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

static int start_rank(struct run *r, struct rank *rk, int lr)
{
	int ep[2] = { -1, -1 }, op[2] = { -1, -1 }, xp[2] = { -1, -1 };
	bool tag = r->opt.tag > 0;
	char **env = NULL;
	int rc = -1;

	if (pipe2(ep, O_CLOEXEC) < 0 ||
	    (tag && (pipe2(op, O_CLOEXEC) < 0 || pipe2(xp, O_CLOEXEC) < 0))) {
		launch_failed(r, "cannot create a pipe");
		goto out;
	}
	env = build_env(r, lr);
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
		child_exec(r, ep[1], op[1], xp[1], infd, env);

	/* Also here, so that the group exists before anyone signals it. */
	setpgid(pid, pid);
	rk->pid = pid;
	r->nstarted++;
	r->nlive++;
	if (tag) {
		rk->out.fd = op[0];
		rk->err.fd = xp[0];
		op[0] = xp[0] = -1;
		fcntl(rk->out.fd, F_SETFL, O_NONBLOCK);
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
			r->cause = CAUSE_EXEC;
			r->status = err == ENOENT || err == ENOTDIR ? 127 : 126;
		}
		stop_ranks(r);
		goto out;
	}
	rc = 0;
out:
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
static void event_loop(struct run *r)
{
	size_t maxfds = 3 + 2 * (size_t)r->nranks;
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
			if (r->cause == CAUSE_NONE)
				r->cause = CAUSE_TIMEOUT;
			tool_warn("timeout: the job ran for %s seconds; stopping %d rank%s",
			          r->opt.timeout_arg, r->nlive, r->nlive == 1 ? "" : "s");
			stop_ranks(r);
		}
		if (r->phase == PH_STOP && now >= r->deadline)
			enter_kill(r);
		if ((r->phase != PH_DRAIN && r->nlive == 0) ||
		    (r->phase == PH_KILL && now >= r->deadline))
			enter_drain(r);
		if (r->phase == PH_DRAIN) {
			if (streams_open(r) && now_ms() >= r->deadline)
				close_all_streams(r);   /* someone escaped with our pipe */
			if (!streams_open(r) && !queues_pending(r))
				break;
			/* Output nobody reads may wait for the reader, but not past
			 * --timeout. */
			if (r->timeout_at && now_ms() >= r->timeout_at) {
				if (r->cause == CAUSE_NONE)
					r->cause = CAUSE_TIMEOUT;
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

		for (nfds_t i = 1; i < n; i++) {
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

/* ---- main -------------------------------------------------------------- */

int main(int argc, char **argv)
{
	static struct run run;
	struct run *r = &run;
	sigset_t mask;

	tool_init("smddp-run");
	parse_options(argc, argv, &r->opt);

	if (r->opt.nproc == 0) {
		int gpus = count_gpus();
		r->opt.nproc = gpus > 0 ? (gpus > MAX_NPROC ? MAX_NPROC : gpus) : 1;
	}
	if (r->opt.tag < 0)
		r->opt.tag = r->opt.nproc > 1;
	job_layout(&r->opt, &r->lay);
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

	const char *id = getenv("SMDDP_JOB_ID");
	if (id && *id) {
		if (strlen(id) >= sizeof r->job_id) {
			tool_warn("SMDDP_JOB_ID is too long (at most %zu characters)", sizeof r->job_id - 1);
			return TOOL_EXIT_FAILURE;
		}
		strcpy(r->job_id, id);
	} else if (random_hex(r->job_id, 12) < 0) {
		tool_warn_errno("getrandom");
		return TOOL_EXIT_FAILURE;
	}
	if (random_hex(r->token, 32) < 0) {
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

	r->nranks = r->lay.local_size;
	r->ranks = calloc(r->nranks, sizeof *r->ranks);
	if (!r->ranks) {
		tool_warn("out of memory");
		return TOOL_EXIT_FAILURE;
	}
	for (int i = 0; i < r->nranks; i++) {
		struct rank *rk = &r->ranks[i];
		rk->rank = r->lay.node_rank * r->lay.local_size + i;
		rk->taglen = snprintf(rk->tag, sizeof rk->tag, "[%d] ", rk->rank);
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
	remove_job_shm(r->job_id);
	exit_like(r);
	return 0;
}
