/* cmd/run/loop.c - the event loop: children, signals, fail-fast, stopping, the exit */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>

#include "common/tool.h"
#include "run/launch.h"
#include "run/run.h"

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

/* --on-failure continue: once every rank has ended, the job failed if none
 * of them exited 0 (the first failure's status), else it went on to its end
 * without the lost ones. */
static void settle_lost(struct run *r)
{
	if (!r->nlost || r->cause != CAUSE_NONE)
		return;
	if (r->nfinished == 0) {
		r->cause = CAUSE_RANK;
		r->status = r->lost_status;
		snprintf(r->why, sizeof r->why, "%s", r->lost_why);
		tool_warn("no rank exited 0: the job failed (--on-failure continue); the first "
		          "failure: %s", r->lost_why);
		return;
	}
	tool_warn("%d rank%s failed and the job went on without %s (--on-failure continue); "
	          "%d exited 0; the first failure: %s", r->nlost, r->nlost == 1 ? "" : "s",
	          r->nlost == 1 ? "it" : "them", r->nfinished, r->lost_why);
}

/* --on-failure continue: a rank failed; the others are left running. */
static void lose_rank(struct run *r, struct rank *rk, const siginfo_t *si, bool signaled)
{
	if (r->nlost++ == 0) {
		r->lost_status = signaled ? 128 + si->si_status : si->si_status;
		if (signaled)
			snprintf(r->lost_why, sizeof r->lost_why, "rank %d was killed by signal %d "
			         "(%s)", rk->rank, si->si_status, strsignal(si->si_status));
		else
			snprintf(r->lost_why, sizeof r->lost_why, "rank %d exited with status %d",
			         rk->rank, si->si_status);
	}
	char others[96] = "";
	if (r->nlive > 0)
		snprintf(others, sizeof others, "; the other %d rank%s go%s on (--on-failure "
		         "continue)", r->nlive, r->nlive == 1 ? "" : "s", r->nlive == 1 ? "es" : "");
	if (signaled)
		tool_warn("rank %d (pid %d) was killed by signal %d (%s%s)%s", rk->rank,
		          (int)rk->pid, si->si_status, strsignal(si->si_status),
		          si->si_code == CLD_DUMPED ? ", core dumped" : "", others);
	else
		tool_warn("rank %d (pid %d) exited with status %d%s", rk->rank, (int)rk->pid,
		          si->si_status, others);
	if (r->nlive == 0)
		settle_lost(r);
}

static void rank_exited(struct run *r, struct rank *rk, const siginfo_t *si)
{
	rk->exited = true;
	r->nlive--;

	bool signaled = si->si_code == CLD_KILLED || si->si_code == CLD_DUMPED;
	if (!signaled && si->si_status == 0) {
		r->nfinished++;
		if (r->nlive == 0)
			settle_lost(r);
		return;
	}
	if (r->cause != CAUSE_NONE)   /* not the first failure: expected fallout */
		return;
	if (r->opt.keep_going && !r->mpirun && r->phase == PH_RUN) {
		lose_rank(r, rk, si, signaled);
		return;
	}
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

/* A rank (or mpirun) stopped. Reading the terminal (SIGTTIN), or writing to
 * it with SIGTTOU set back to the default, stops it for good: nobody can
 * bring its group to the foreground, so the job fails instead of hanging.
 * SIGSTOP or SIGTSTP from elsewhere is a pause asked for (kill -STOP, a
 * debugger): said, and waited out. */
static void rank_stopped(struct run *r, struct rank *rk, int sig)
{
	char who[64];
	if (r->mpirun)
		snprintf(who, sizeof who, "%s (pid %d)", r->engine, (int)rk->pid);
	else
		snprintf(who, sizeof who, "rank %d (pid %d)", rk->rank, (int)rk->pid);

	if (sig != SIGTTIN && sig != SIGTTOU) {
		if (sig == SIGTSTP && r->tstp_sent)
			return;   /* our own Ctrl-Z, on its way to the whole job */
		if (r->phase == PH_RUN)
			tool_warn("%s was stopped by signal %d (%s); the job waits for it "
			          "('kill -CONT %d' resumes it)", who, sig, strsignal(sig), (int)rk->pid);
		return;
	}
	if (r->cause != CAUSE_NONE) {
		/* already stopping: SIGKILL ends it after the grace period */
		return;
	}
	const char *name = sig == SIGTTIN ? "SIGTTIN" : "SIGTTOU";
	const char *what = sig == SIGTTIN
		? "it read from the terminal, which smddp-run's ranks do not own; "
		  "give it stdin from a file"
		: "it wrote to the terminal or set its modes with SIGTTOU not ignored, "
		  "and smddp-run's ranks do not own the terminal";
	r->cause = CAUSE_RANK;
	r->status = 128 + sig;   /* as a shell reports a stopped job */
	snprintf(r->why, sizeof r->why, "%s was stopped by %s (%s)", who, name, what);
	if (r->nlive > 1)
		tool_warn("%s; stopping %d other rank%s", r->why, r->nlive - 1,
		          r->nlive == 2 ? "" : "s");
	else
		tool_warn("%s", r->why);
	stop_ranks(r);   /* SIGTERM, then SIGCONT so that the stopped rank sees it */
}

/* After SIGCHLD: note ranks that ended (leaving them zombies) or stopped,
 * reap orphans. */
static void check_children(struct run *r)
{
	for (int i = 0; i < r->nranks; i++) {
		struct rank *rk = &r->ranks[i];
		if (rk->pid <= 0 || rk->exited)
			continue;
		siginfo_t si;
		memset(&si, 0, sizeof si);
		if (waitid(P_PID, rk->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == rk->pid) {
			rank_exited(r, rk, &si);
			continue;
		}
		/* A stop is reported once (no WNOWAIT): it is consumed here. */
		memset(&si, 0, sizeof si);
		if (waitid(P_PID, rk->pid, &si, WSTOPPED | WNOHANG) == 0 && si.si_pid == rk->pid &&
		    si.si_code == CLD_STOPPED)
			rank_stopped(r, rk, si.si_status);
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
	r->deadline = sd_now_ms() + KILL_WAIT_MS;
}

/* Asks every rank to stop: SIGTERM now, SIGKILL after the grace period. */
static void stop_with(struct run *r, int sig)
{
	if (r->phase != PH_RUN)
		return;
	/* Where each rank is, before it goes (run/trace.c). */
	trace_signal_ranks(r);
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
	r->deadline = sd_now_ms() + sd_ms_from_s(r->opt.grace_s);
}

void stop_ranks(struct run *r)
{
	stop_with(r, SIGTERM);
}

/* Everything a rank left behind dies now: each rank's process group, then any
 * other descendant (re-parented to us, the subreaper), until none is left. */
static void sweep_descendants(struct run *r)
{
	int64_t until = sd_now_ms() + SWEEP_WAIT_MS;

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
		if (sd_now_ms() >= until) {
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
	r->deadline = sd_now_ms() + DRAIN_WAIT_MS;
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
		r->tstp_sent = true;
		signal_groups(r, SIGTSTP);
		raise(SIGSTOP);
		return;
	}
	if (sig == SIGCONT) {
		/* the ranks' stops by our SIGTSTP were read before this (SIGCHLD
		 * is dequeued first: lower number) */
		r->tstp_sent = false;
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

void read_signals(struct run *r)
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

void event_loop(struct run *r)
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
		while (r->nlive > 0 && sd_now_ms() < r->deadline) {
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
		int64_t now = sd_now_ms();

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
			if (streams_open(r) && sd_now_ms() >= r->deadline)
				close_all_streams(r);   /* someone escaped with our pipe */
			/* node 0 stays for the other nodes, to report on the job */
			if (!streams_open(r) && !queues_pending(r) &&
			    !(r->nodes && nodes_waiting(r->nodes)))
				break;
			/* Output nobody reads may wait for the reader, and node 0 for
			 * the other nodes, but not past --timeout. */
			if (r->timeout_at && sd_now_ms() >= r->timeout_at) {
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
			int64_t left = next - sd_now_ms();
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
void remove_job_shm(const char *job_id)
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

int exit_status(const struct run *r)
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
void exit_like(const struct run *r)
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
