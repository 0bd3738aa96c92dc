/* cmd/run/mpirun.c - jobs across hosts through mpirun, --dry-run, --rank-wrapper */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/tool.h"
#include "run/launch.h"
#include "run/run.h"

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
void mpirun_environment(const struct run *r, struct strv *set, struct strv *names)
{
	const struct plan *p = r->plan;
	envv_set(set, "MASTER_ADDR", p->master_addr, true);
	envv_set(set, "MASTER_PORT", r->master_port, true);
	envv_set(set, "SMDDP_MASTER_ADDR", p->master_addr, true);
	envv_set(set, "SMDDP_MASTER_PORT", r->master_port, true);
	envv_set(set, "SMDATAPARALLEL_SERVER_ADDR", p->master_addr, true);
	envv_set(set, "SMDATAPARALLEL_SERVER_PORT", r->master_port, true);
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
bool mpirun_found(const char *prog)
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

void mpirun_argv(const struct run *r, const struct strv *names, struct strv *av)
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

void dry_run_mpirun(const struct run *r, const struct strv *set, const struct strv *av)
{
	const struct plan *p = r->plan;
	printf("# smddp-run --dry-run: %s through mpirun, %zu host%s x %ld rank%s\n", p->form,
	       p->hosts.n, p->hosts.n == 1 ? "" : "s", p->ppn, p->ppn == 1 ? "" : "s");
	print_exports(set);
	print_mpirun_command(av->v);
}

void dry_run_local(const struct run *r)
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
	envv_set(&set, "SMDDP_MASTER_PORT", r->smddp_port[0] ? r->smddp_port : r->master_port, true);
	envv_set(&set, "SMDATAPARALLEL_SERVER_ADDR", p->master_addr, true);
	envv_set(&set, "SMDATAPARALLEL_SERVER_PORT", r->master_port, true);
	if (r->agent_store) {
		envv_set(&set, "TORCHELASTIC_USE_AGENT_STORE", "True", true);
		envv_set(&set, "TORCHELASTIC_RESTART_COUNT", "0", true);
	}
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
		printf("# rank %d: RANK=%d SMDDP_RANK=%d ROLE_RANK=%d LOCAL_RANK=%d SMDDP_LOCAL_RANK=%d "
		       "SMDATAPARALLEL_LOCAL_RANK=%d", rank, rank, rank, rank, lr, lr, lr);
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

int rank_wrapper(int argc, char **argv)
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
		{ "SMDATAPARALLEL_LOCAL_RANK", lrank },
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

	/* Without --trace-dir the flight recorder dumps to a directory of
	 * this host's, which smddp-run names when the job fails (run/trace.c);
	 * the library makes it at the first dump. */
	const char *td = getenv("SMDDP_TRACE_DIR");
	if (!td || !*td) {
		char tdir[1024];
		trace_host_dir(id ? id : "", tdir, sizeof tdir);
		setenv("SMDDP_TRACE_DIR", tdir, 1);
	}

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

	/* The stop signal mpirun (or someone) sent us: the rank's end is then
	 * expected, and mpirun reports the job. SIGUSR1/SIGUSR2, which mpirun
	 * forwards too, ask the rank for something else (a flight-recorder
	 * dump): a crash after them is still the rank's to report.
	 *
	 * The rank stays in our process group: Open MPI's orted makes each
	 * process it starts (us) a group leader and signals, and at the end
	 * kills, the whole group, which so reaches the rank's own children. */
	int stopped_by = 0;
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&mask, &si);
		if (sig < 0)
			continue;   /* EINTR */
		if (sig != SIGCHLD) {
			if ((sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT) &&
			    !stopped_by)
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
