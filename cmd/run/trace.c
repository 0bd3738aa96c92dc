/* cmd/run/trace.c - the ranks' flight recorders: where they dump, asking for dumps, the verdict */

/*
 * The library writes a rank's last calls to SMDDP_TRACE_DIR when one of its
 * calls fails; a rank that is stuck in its own code (the usual culprit of a
 * hang) writes them on SIGUSR1 (SMDDP_TRACE_SIGNAL=1). So that every job
 * can say what went wrong, smddp-run gives its ranks a private directory
 * (unless the user named one, with --trace-dir or SMDDP_TRACE_DIR), turns
 * the signal on (unless SMDDP_TRACE_SIGNAL is set), sends SIGUSR1 to the
 * ranks that handle it just before it stops them, and once they are all
 * gone reads the dumps (cmd/common/flight.c, as smddp-trace does) and
 * prints the first finding.
 *
 * Across hosts the dumps are spread over them. In per-node mode (and so
 * under Slurm, whose srun runs smddp-run per node) every node's launcher
 * does the above for its own ranks, and once they are gone sends its
 * dumps, trimmed to the last SEND_CALLS calls of each communicator, to
 * node 0 over the launchers' channel (nodes.h: DUMP, DUMPS); node 0
 * writes them beside its own and gives the one verdict. It waits for them
 * at most --grace + GATHER_SLACK_MS past its own ranks: a node that is
 * late or gone is a rank without a dump, which the verdict says. Through
 * mpirun nobody here can read the other hosts: a --trace-dir (on a shared
 * file system) is read as it is, else the ranks dump to a directory of
 * their own host and the failure says where.
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "common/flight.h"
#include "common/tool.h"
#include "run/launch.h"
#include "run/run.h"

/* The job id as the library puts it in file names (comm.c, set_jobid). */
static void file_job_id(const char *id, char *out, size_t len)
{
	size_t n = 0;

	for (; *id && n < 32 && n + 1 < len; id++)
		if (isalnum((unsigned char)*id) || *id == '_' || *id == '-')
			out[n++] = *id;
	out[n] = 0;
}

/* A rank's dump file, "smddp-trace.JOB.RANK.jsonl" (lib/core/trace.c). */
static void dump_name(char *out, size_t len, const char *job, int rank)
{
	snprintf(out, len, "smddp-trace.%s.%d.jsonl", job, rank);
}

/* Through mpirun without a dump directory: the one each rank's wrapper
 * names on its host, "TMPDIR/smddp-trace.JOB" (TMPDIR as the process
 * sees it, else /tmp; the library makes it at the first dump, so that a
 * job with nothing to say leaves none). */
void trace_host_dir(const char *job_id, char *out, size_t len)
{
	const char *tmp = getenv("TMPDIR");
	char job[40];

	file_job_id(job_id, job, sizeof job);
	snprintf(out, len, "%s/smddp-trace.%s", tmp && *tmp == '/' && strlen(tmp) < 800 ? tmp : "/tmp",
	         job[0] ? job : "job");
}

/* --trace-dir: the ranks get it wherever they run. 0, or an exit status. */
int trace_env(struct run *r, struct plan *p)
{
	if (!r->opt.trace_dir)
		return 0;
	if (!r->opt.dry_run && mkdir(r->opt.trace_dir, 0700) != 0 && errno != EEXIST) {
		tool_warn_errno("--trace-dir: cannot create %s", r->opt.trace_dir);
		return TOOL_EXIT_FAILURE;
	}
	snprintf(r->trace_dir, sizeof r->trace_dir, "%s", r->opt.trace_dir);
	envv_set(&p->env, "SMDDP_TRACE_DIR", r->trace_dir, true);
	return 0;
}

/* ---- per-node mode: the dumps of the other nodes come to node 0 ---------- */

#define SEND_CALLS       32          /* per communicator: the verdict needs the last few */
#define SEND_MAX_BYTES   (1u << 20)  /* per node */
#define SEND_LINE_MAX    1800        /* the channel's lines are at most 2 KiB */
#define SEND_WAIT_MS     10000       /* a node gives up sending after this */
#define RECV_MAX_BYTES   (4u << 20)  /* per node, whatever it sends */
#define GATHER_SLACK_MS  15000       /* node 0 waits --grace + this for the others */

/* One node's file in the making (node 0). */
struct incoming {
	bool in;                /* said DUMPS, or went away */
	int fd;                 /* -1: none open (or skipping one) */
	char name[128];         /* the file's name, "" when none */
	char tmp[1200];
	size_t bytes;
};

struct gather {
	struct run *r;
	char job[40];
	int nnodes;
	struct incoming *node;  /* [nnodes] */
};

/* "smddp-trace.JOB.RANK.jsonl" of this job, nothing else (a name that
 * came over the network becomes a path here). */
static bool dump_name_ok(const char *job, const char *name)
{
	size_t jl = strlen(job), i = 12 + jl + 1;

	if (strncmp(name, "smddp-trace.", 12) || strncmp(name + 12, job, jl) || name[12 + jl] != '.')
		return false;
	if (!isdigit((unsigned char)name[i]))
		return false;
	while (isdigit((unsigned char)name[i]))
		i++;
	return strcmp(name + i, ".jsonl") == 0;
}

/* The file of that node is complete (keep it) or cut short (drop it). */
static void incoming_close(struct gather *g, struct incoming *in, bool keep)
{
	if (in->fd >= 0) {
		char path[1200];

		snprintf(path, sizeof path, "%s/%s", g->r->trace_dir, in->name);
		if (close(in->fd) != 0 || !keep || rename(in->tmp, path) != 0)
			unlink(in->tmp);
	}
	in->fd = -1;
	in->name[0] = 0;
}

static void incoming_line(void *ctx, int node, const char *line)
{
	struct gather *g = ctx;
	struct incoming *in;
	char name[128];

	if (node <= 0 || node >= g->nnodes)
		return;
	in = &g->node[node];
	if (in->in)
		return;   /* after its end: nothing more counts */
	if (!line || strncmp(line, "DUMPS ", 6) == 0) {
		/* the end; or the node went away, and a file still open was cut */
		incoming_close(g, in, line != NULL);
		in->in = true;
		return;
	}
	/* DUMP file=NAME msg=LINE */
	size_t nl;
	const char *msg;
	if (strncmp(line, "DUMP file=", 10) || (nl = strcspn(line + 10, " ")) >= sizeof name ||
	    strncmp(line + 10 + nl, " msg=", 5))
		return;
	memcpy(name, line + 10, nl);
	name[nl] = 0;
	msg = line + 10 + nl + 5;
	in->bytes += strlen(msg) + 1;
	if (in->bytes > RECV_MAX_BYTES || !dump_name_ok(g->job, name))
		return;
	if (strcmp(name, in->name)) {
		struct stat st;
		char path[1200];

		incoming_close(g, in, true);
		snprintf(in->name, sizeof in->name, "%s", name);
		snprintf(path, sizeof path, "%s/%s", g->r->trace_dir, name);
		/* a --trace-dir that all nodes share has it already, whole */
		if (lstat(path, &st) == 0)
			return;
		snprintf(in->tmp, sizeof in->tmp, "%s.tmp.node%d", path, node);
		unlink(in->tmp);
		in->fd = open(in->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	if (in->fd >= 0 && (dprintf(in->fd, "%s\n", msg) < 0)) {
		close(in->fd);
		unlink(in->tmp);
		in->fd = -1;
	}
}

static bool all_in(void *ctx)
{
	struct gather *g = ctx;

	for (int i = 1; i < g->nnodes; i++)
		if (!g->node[i].in)
			return false;
	return true;
}

/* Node 0, before the ranks start: take the other nodes' dumps whenever they come. */
static void gather_start(struct run *r)
{
	struct gather *g = calloc(1, sizeof *g);

	if (g)
		g->node = calloc(r->lay.nnodes, sizeof *g->node);
	if (!g || !g->node) {
		free(g);
		return;   /* no verdict from the other nodes; not worth failing for */
	}
	g->r = r;
	g->nnodes = r->lay.nnodes;
	for (int i = 0; i < g->nnodes; i++)
		g->node[i].fd = -1;
	file_job_id(r->job_id, g->job, sizeof g->job);
	r->trace_gather = g;
	nodes_on_dump(r->nodes, incoming_line, g);
}

/* A call line of a dump (not the header, not a communicator's line). */
static bool is_call_line(const char *l)
{
	return strncmp(l, "{\"comm\":", 8) == 0 && !strstr(l, "\"comm_rank\":");
}

/* What a node sends: a budget in bytes and time, and the last SEND_CALLS
 * call lines of the communicator being read (a ring: a file holds
 * SMDDP_TRACE_ENTRIES calls per communicator, which may be many). */
struct sender {
	struct run *r;
	const char *name;
	int64_t until;
	size_t budget;
	bool ok;
	char *ring[SEND_CALLS];
	size_t nring;           /* lines pushed in this communicator */
};

static void send_one(struct sender *s, const char *line)
{
	size_t len = strlen(line) + 1;

	if (!s->ok || len > SEND_LINE_MAX)
		return;   /* a line the channel cannot carry is left out */
	if (len > s->budget) {
		s->ok = false;
		return;
	}
	s->budget -= len;
	s->ok = nodes_send_dump(s->r->nodes, s->name, line, s->until) == 0;
}

/* The communicator's last calls, oldest first. */
static void send_ring(struct sender *s)
{
	size_t n = s->nring < SEND_CALLS ? s->nring : SEND_CALLS;

	for (size_t k = s->nring - n; k < s->nring; k++) {
		if (s->ring[k % SEND_CALLS])
			send_one(s, s->ring[k % SEND_CALLS]);
		free(s->ring[k % SEND_CALLS]);
		s->ring[k % SEND_CALLS] = NULL;
	}
	s->nring = 0;
}

/* Another node: its ranks' dump files, the last SEND_CALLS calls of each
 * communicator, then the end. */
static void send_dumps(struct run *r)
{
	struct sender s = { .r = r, .until = sd_now_ms() + SEND_WAIT_MS, .budget = SEND_MAX_BYTES,
	                    .ok = true };
	char job[40], num[16];
	int files = 0;

	file_job_id(r->job_id, job, sizeof job);
	for (int i = 0; i < r->nranks && s.ok; i++) {
		char name[128], path[1200], *line = NULL;
		size_t cap = 0;
		ssize_t len;
		bool first = true;

		dump_name(name, sizeof name, job, r->ranks[i].rank);
		snprintf(path, sizeof path, "%s/%s", r->trace_dir, name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		s.name = name;
		while (s.ok && (len = getline(&line, &cap, f)) > 0) {
			if (line[len - 1] == '\n')
				line[--len] = 0;
			if (!first && is_call_line(line)) {
				size_t k = s.nring++ % SEND_CALLS;
				free(s.ring[k]);
				s.ring[k] = strdup(line);
				if (!s.ring[k])
					s.ok = false;
				continue;
			}
			send_ring(&s);   /* the calls of the communicator before */
			send_one(&s, line);
			first = false;
		}
		send_ring(&s);
		free(line);
		fclose(f);
		files++;
	}
	for (size_t k = 0; k < SEND_CALLS; k++)
		free(s.ring[k]);
	/* the end, also after the budget ran out (node 0 keeps whole lines) */
	snprintf(num, sizeof num, "%d", files);
	nodes_send_dump(r->nodes, NULL, num, s.until);
}

/* Per-node mode, this node's ranks over: the other nodes send their dumps,
 * node 0 waits for them (bounded) before the verdict. */
void trace_nodes(struct run *r)
{
	if (!r->nodes || !r->trace_dir[0])
		return;
	if (r->lay.node_rank != 0) {
		send_dumps(r);
		return;
	}
	if (!r->trace_gather || r->cause == CAUSE_NONE)
		return;
	int64_t until = sd_now_ms() + sd_ms_from_s(r->opt.grace_s) + GATHER_SLACK_MS;
	nodes_wait_dumps(r->nodes, r->sigfd, until, all_in);
	for (int i = 1; i < r->trace_gather->nnodes; i++)
		incoming_close(r->trace_gather, &r->trace_gather->node[i], false);
}

/* This host's ranks, about to start: a private directory unless one was
 * named, the signal, the verdict (in per-node mode, node 0's, with the
 * other nodes' dumps). 0, or an exit status. */
/* NAME's value for the ranks: --env first (it wins over what smddp-run
 * would set), else the inherited environment. */
static const char *rank_env(const struct plan *p, const char *name)
{
	const char *e = envv_find(&p->env, name);

	return e ? e + strlen(name) + 1 : getenv(name);
}

int trace_start(struct run *r, struct plan *p, bool pernode)
{
	const char *env = rank_env(p, "SMDDP_TRACE_DIR"), *sig = rank_env(p, "SMDDP_TRACE_SIGNAL");

	if (r->mpirun && strcmp(r->engine, "mpirun") == 0) {
		/* Nobody here reads the other hosts: a directory they share is
		 * read as it is; else each host keeps its ranks' dumps. */
		if (!r->trace_dir[0] && env && *env)
			snprintf(r->trace_dir, sizeof r->trace_dir, "%s", env);
		if (r->trace_dir[0]) {
			r->trace_verdict = true;
		} else {
			char dir[1024];

			trace_host_dir(r->job_id, dir, sizeof dir);
			snprintf(r->trace_hint, sizeof r->trace_hint,
			         "flight recorder: the ranks' dumps are in %s on each host (or under "
			         "its TMPDIR): gather them and run smddp-trace on them, or give "
			         "--trace-dir on a file system all hosts share", dir);
		}
		return 0;
	}
	if (r->mpirun)
		return 0;   /* srun: each node's smddp-run, in per-node mode */
	if (!r->trace_dir[0] && env && *env) {
		snprintf(r->trace_dir, sizeof r->trace_dir, "%s", env);
	} else if (!r->trace_dir[0]) {
		const char *tmp = getenv("TMPDIR");

		snprintf(r->trace_dir, sizeof r->trace_dir, "%s/smddp-run-trace.XXXXXX",
		         tmp && *tmp && strlen(tmp) < 800 ? tmp : "/tmp");
		if (!mkdtemp(r->trace_dir)) {
			/* Not worth failing the job for: no verdict, that is all. */
			tool_warn_errno("cannot create a directory for the flight recorders (%s)",
			                r->trace_dir);
			r->trace_dir[0] = 0;
			return 0;
		}
		r->trace_private = true;
		envv_set(&p->env, "SMDDP_TRACE_DIR", r->trace_dir, true);
	}
	if (!sig) {
		envv_set(&p->env, "SMDDP_TRACE_SIGNAL", "1", true);
		r->trace_signal = true;
	} else {
		r->trace_signal = strcmp(sig, "1") == 0 || strcasecmp(sig, "true") == 0 ||
		                  strcasecmp(sig, "yes") == 0 || strcasecmp(sig, "on") == 0;
	}
	r->trace_verdict = !pernode || r->lay.node_rank == 0;
	if (pernode && r->lay.node_rank == 0 && r->nodes)
		gather_start(r);
	return 0;
}

/* Whether process pid has a handler for sig (/proc/PID/status, SigCgt). */
static bool catches(pid_t pid, int sig)
{
	char path[64], line[256];
	bool yes = false;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof line, f)) {
		unsigned long long mask;

		if (sscanf(line, "SigCgt: %llx", &mask) == 1) {
			yes = (mask >> (sig - 1)) & 1;
			break;
		}
	}
	fclose(f);
	return yes;
}

/* The inode of rank's dump in the trace directory, 0 while there is none:
 * the library writes a dump aside and renames it into place, so a new
 * inode is a whole new dump. */
static ino_t dump_inode(const struct run *r, const char *job, int rank)
{
	char name[96], path[sizeof r->trace_dir + sizeof name];
	struct stat st;

	dump_name(name, sizeof name, job, rank);
	snprintf(path, sizeof path, "%s/%s", r->trace_dir, name);
	return stat(path, &st) == 0 ? st.st_ino : 0;
}

/* Just before the ranks are stopped: those that handle SIGUSR1 (the
 * library's handler, where SMDDP_TRACE_SIGNAL=1) write their recorders.
 * A process that does not handle SIGUSR1 never gets it, so this never
 * kills a rank early.  The handler blocks the stopping signals, but only
 * once it runs: Linux delivers a pending SIGHUP or SIGINT (lower numbers)
 * before SIGUSR1, and in a threaded rank another thread takes a SIGTERM
 * while one dumps.  So the stopping signal waits, at most DUMP_WAIT_MS,
 * until each signalled rank has a new dump or has ended. */
#define DUMP_WAIT_MS 1000
void trace_signal_ranks(struct run *r)
{
	ino_t before[r->nranks > 0 ? r->nranks : 1];
	bool asked[r->nranks > 0 ? r->nranks : 1];
	char job[40];
	int pending = 0;

	if (!r->trace_signal || r->mpirun)
		return;
	file_job_id(r->job_id, job, sizeof job);
	for (int i = 0; i < r->nranks; i++) {
		struct rank *rk = &r->ranks[i];

		asked[i] = rk->pid > 0 && !rk->exited && catches(rk->pid, SIGUSR1);
		if (!asked[i])
			continue;
		before[i] = r->trace_dir[0] ? dump_inode(r, job, rk->rank) : 0;
		if (kill(rk->pid, SIGUSR1) == 0)
			pending++;
		else
			asked[i] = false;
	}
	if (!r->trace_dir[0] || !job[0])
		return; /* nowhere to look: the handler's own blocking must do */
	for (int64_t end = sd_now_ms() + DUMP_WAIT_MS; pending && sd_now_ms() < end;) {
		struct timespec ts = {0, 5 * 1000000L};

		nanosleep(&ts, NULL);
		for (int i = 0; i < r->nranks; i++) {
			struct rank *rk = &r->ranks[i];
			siginfo_t si;

			if (!asked[i])
				continue;
			memset(&si, 0, sizeof si);
			if (dump_inode(r, job, rk->rank) != before[i] ||
			    (waitid(P_PID, rk->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
			     si.si_pid == rk->pid)) {
				asked[i] = false;
				pending--;
			}
		}
	}
}

static void remove_private(struct run *r)
{
	DIR *d = opendir(r->trace_dir);
	struct dirent *de;

	if (d) {
		while ((de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
	}
	if (rmdir(r->trace_dir) != 0)
		tool_warn_errno("cannot remove %s", r->trace_dir);
}

/* After the job: if it failed, the first finding of the dumps, in one
 * line; then the private directory goes. */
void trace_finish(struct run *r)
{
	if (r->trace_verdict && r->cause != CAUSE_NONE && r->trace_dir[0]) {
		const char *paths[1] = { r->trace_dir };
		struct flight_job *j = NULL;
		struct flight_finding *f = NULL;
		size_t nf = 0;
		char job[40], err[1024];
		int several = 0;

		file_job_id(r->job_id, job, sizeof job);
		/* The queues are empty now: straight to stderr. */
		tool_set_message_sink(NULL);
		if (flight_load(paths, 1, job[0] ? job : NULL, &j, &several, err, sizeof err) == 0) {
			if (flight_analyze(j, &f, &nf) == 0 && nf)
				tool_warn("verdict: %s", f[0].text);
			flight_findings_free(f, nf);
			flight_free(j);
		} else if (!strstr(err, "no flight recorder dumps") && !strstr(err, "no dumps of job")) {
			tool_warn("flight recorder: %s", err);
		} else if (r->mpirun) {
			tool_warn("flight recorder: no dumps of this job in %s: is it on a file system "
			          "that every host shares?", r->trace_dir);
		}
	}
	if (r->cause != CAUSE_NONE && r->trace_hint[0]) {
		tool_set_message_sink(NULL);
		tool_warn("%s", r->trace_hint);
	}
	if (r->trace_private)
		remove_private(r);
	if (r->trace_gather) {
		free(r->trace_gather->node);
		free(r->trace_gather);
		r->trace_gather = NULL;
	}
}
