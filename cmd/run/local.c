/* cmd/run/local.c - starting this host's ranks: their environment, stdio and CPUs */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "common/tool.h"
#include "run/launch.h"
#include "run/run.h"
#include "text/cpulist.h"

/* ---- environment of a rank ------------------------------------------- */

/* Variables an outer launcher may have set that would make the library's
 * rank discovery pick the outer job's rank instead of ours. */
bool env_is_foreign_rank(const char *kv)
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
	/* what SageMaker's launcher (smddprun) sets, for scripts written for it:
	 * Hugging Face's Trainer reads SMDATAPARALLEL_LOCAL_RANK */
	"SMDATAPARALLEL_LOCAL_RANK", "SMDATAPARALLEL_SERVER_ADDR", "SMDATAPARALLEL_SERVER_PORT",
	/* set only when smddp-run serves torch's store (--store launcher); an
	 * inherited one would send the ranks to a store nobody serves */
	"TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT",
};
#define NRANK_ENV (sizeof rank_env_names / sizeof rank_env_names[0])

bool is_rank_env_name(const char *name, size_t n)
{
	for (size_t i = 0; i < NRANK_ENV; i++)
		if (strlen(rank_env_names[i]) == n && strncmp(name, rank_env_names[i], n) == 0)
			return true;
	return false;
}

bool env_is_ours(const char *kv)
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
	snprintf(v[14], sizeof v[14], "%s", r->smddp_port[0] ? r->smddp_port : r->master_port);
	snprintf(v[15], sizeof v[15], "%s", r->token);
	snprintf(v[16], sizeof v[16], "%s", r->job_id);
	snprintf(v[17], sizeof v[17], "%s", r->job_id);
	snprintf(v[18], sizeof v[18], "%d", lr);
	/* 19: the address, below */
	snprintf(v[20], sizeof v[20], "%s", r->master_port);
	/* torch reads the restart count with the agent's store before 2.15 */
	snprintf(v[21], sizeof v[21], "%s", r->agent_store ? "True" : "");
	snprintf(v[22], sizeof v[22], "%s", r->agent_store ? "0" : "");

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
		const char *val = (i == 11 || i == 13 || i == 19) ? r->opt.master_addr : v[i];
		if (i >= 21 && !*val)
			continue;
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

/* ---- starting ranks --------------------------------------------------- */

/* In the child, between fork() and exec(): async-signal-safe calls only. */
static void child_exec(const struct run *r, int errfd, int outfd, int errfd2, int infd,
                       char **env, int lr)
{
	struct sigaction ign = { .sa_handler = SIG_IGN };
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
	/* A rank is not in the terminal's foreground group (its own, above):
	 * writing to the terminal under "stty tostop", or setting its modes,
	 * would stop it for good. Ignored, both work as from a foreground job. */
	sigaction(SIGTTOU, &ign, NULL);
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

int start_rank(struct run *r, struct rank *rk, int lr)
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
	 * be stopped by SIGTTIN (loop.c fails the job if one is anyway). */
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
	int64_t until = sd_now_ms() + START_WAIT_MS;
	for (;;) {
		struct pollfd p = { .fd = ep[0], .events = POLLIN };
		int64_t left = until - sd_now_ms();
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

/* ---- --bind on one machine --------------------------------------------
 *
 * What mpirun's --bind-to does, for the ranks smddp-run starts itself: the
 * CPUs this process may use are grouped by core (a CPU and its hardware
 * threads, from sysfs) or by NUMA node, and local rank i gets group
 * i mod groups. */

static int set_cpu(void *arg, int cpu)
{
	if (cpu >= 0 && cpu < CPU_SETSIZE)
		CPU_SET(cpu, (cpu_set_t *)arg);
	return 0;
}

static int parse_cpulist(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	return sd_text_cpulist(s, set_cpu, set);
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

cpu_set_t *bind_sets(enum bind how, int nranks)
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
