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
 * The launch goes in steps, each in main() below: the command line
 * (run/options.c); the plan, from it, SageMaker's configuration
 * (run/sagemaker.c) or a Slurm allocation (run/slurm.c), in run/plan.c;
 * signals; the job's id and token, and in per-node mode the other nodes
 * (run/nodes.c); then mpirun or srun (run/mpirun.c) or this host's ranks
 * (run/local.c), their output (run/output.c), and the loop that watches
 * them to the end (run/loop.c); when the job failed, the verdict of the
 * ranks' flight recorders (run/trace.c). See run/run.h and run/launch.h.
 */

#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>

#include "common/tool.h"
#include "run/launch.h"
#include "run/run.h"
#include "run/store.h"

/* What the launch needs of this process: signals through a signalfd,
 * orphans, descriptors. 0, or an exit status. */
static int prepare(struct run *r)
{
	sigset_t mask;

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
	return 0;
}

/* Whether smddp-run serves torch's store (--store launcher, the default
 * with --on-failure continue where smddp-run starts the ranks itself).
 * -1: asked where it cannot be (through mpirun or srun), said on stderr. */
static int store_here(const struct run *r)
{
	bool here = r->plan->kind == PLAN_LOCAL;
	int want = r->opt.store < 0 ? r->opt.keep_going && here : r->opt.store;

	if (want && !here) {
		tool_warn("--store launcher: only for the ranks smddp-run starts itself (this "
		          "host's, or one smddp-run per node with --nnodes); through mpirun or "
		          "srun, torch's store stays in rank 0");
		return -1;
	}
	return want;
}

/* torch's store served at MASTER_PORT, outside every rank: here, or in per-
 * node mode by node 0's launcher (the others only tell their ranks).
 * libsmddp's own rendezvous (SMDDP_MASTER_PORT) moves to another port: a
 * free one on one host; across nodes, which must agree without talking,
 * the launcher port + 1. 0, or an exit status. */
static int host_store(struct run *r, bool pernode)
{
	long port;

	r->agent_store = true;
	if (!r->opt.dry_run && (!pernode || r->plan->node_rank == 0)) {
		long bound;
		if (store_open(atol(r->master_port), &r->store, &bound) < 0) {
			tool_warn_errno("cannot serve torch's store on port %s (--store launcher; "
			                "give another --master-port)", r->master_port);
			return TOOL_EXIT_FAILURE;
		}
	}
	if (pernode) {
		port = (r->opt.launcher_port ? r->opt.launcher_port : atol(r->master_port) + 1) + 1;
		if (port > 65535) {
			tool_warn("--store launcher: no port above the launcher port for libsmddp's "
			          "rendezvous: give a lower --launcher-port");
			return TOOL_EXIT_USAGE;
		}
	} else {
		port = pick_free_port(r->opt.master_addr);
		if (port <= 0) {
			tool_warn("cannot find a free TCP port on %s for libsmddp's rendezvous",
			          r->opt.master_addr);
			return TOOL_EXIT_FAILURE;
		}
	}
	snprintf(r->smddp_port, sizeof r->smddp_port, "%ld", port);
	if (r->store && store_start(r->store) < 0) {
		tool_warn_errno("cannot start the thread of torch's store");
		return TOOL_EXIT_FAILURE;
	}
	return 0;
}

/* The job's id, token and port, torch's store with STORE, and in per-node
 * mode the meeting of the nodes' launchers. 0, or an exit status. */
static int job_identity(struct run *r, bool pernode, bool store)
{
	const struct plan *p = r->plan;

	/* A job whose hosts each start their own ranks (SageMaker's
	 * torch_distributed) has no one to hand out an id and a token: every
	 * host derives the same ones (see shared_identity()). */
	bool shared = p->kind == PLAN_LOCAL && p->hosts.n > 1;
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
		shared_identity(p, "", r->job_id, 12);
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
	/* listening before the nodes meet: the others' ranks may come at once */
	if (store) {
		int rc = host_store(r, pernode);
		if (rc)
			return rc;
	}

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
			.nnodes = p->nnodes, .node_rank = p->node_rank, .nproc = p->ppn,
			.master_addr = p->master_addr, .master_port = port, .launcher_port = lport,
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
	return 0;
}

/* mpirun or srun starts the ranks, or smddp-run does; --dry-run ends here.
 * -1: go on and start this host's ranks; else the exit status. */
static int choose_engine(struct run *r, int user_tag)
{
	const struct plan *p = r->plan;

	if (r->opt.keep_going && (p->kind == PLAN_MPIRUN || p->kind == PLAN_SRUN)) {
		/* mpirun and srun stop the whole job at a rank's death themselves */
		tool_warn("--on-failure continue: only for the ranks smddp-run starts itself "
		          "(this host's, or one smddp-run per node with --nnodes), not through "
		          "%s", p->kind == PLAN_MPIRUN ? "mpirun (--hosts, --hostfile, SageMaker)"
		                                       : "srun (give --launcher none, or --nnodes)");
		return TOOL_EXIT_USAGE;
	}
	if (p->kind == PLAN_MPIRUN) {
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
	} else if (p->kind == PLAN_SRUN) {
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
	return -1;
}

/* This host's ranks, not started yet. 0, or an exit status. */
static int make_ranks(struct run *r, bool same)
{
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
	return 0;
}

/* ---- main -------------------------------------------------------------- */

int main(int argc, char **argv)
{
	static struct run run;
	struct run *r = &run;

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
	int rc = prepare(r);
	if (rc)
		return rc;
	int store = store_here(r);   /* refused before the nodes meet */
	if (store < 0)
		return TOOL_EXIT_USAGE;
	rc = job_identity(r, pernode, store);
	if (rc)
		return rc;
	rc = trace_env(r, &plan);
	if (rc)
		return rc;
	rc = choose_engine(r, user_tag);
	if (rc >= 0)
		return rc;
	bool same = output_open(r);
	rc = make_ranks(r, same);
	if (rc)
		return rc;
	trace_start(r, &plan, pernode);

	if (r->opt.timeout_s > 0)
		r->timeout_at = sd_now_ms() + sd_ms_from_s(r->opt.timeout_s);
	r->phase = PH_RUN;
	for (int i = 0; i < r->nranks && r->phase == PH_RUN; i++) {
		if (start_rank(r, &r->ranks[i], i) < 0)
			break;
		read_signals(r);   /* a fast failure or a Ctrl-C stops the launch */
	}

	event_loop(r);
	trace_nodes(r);
	if (r->nodes) {
		nodes_done(r->nodes, exit_status(r));
		nodes_free(r->nodes);
	}
	trace_finish(r);
	store_stop(r->store);
	remove_job_shm(r->job_id);
	exit_like(r);
	return 0;
}
