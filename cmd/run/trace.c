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
 * prints the first finding. Only where all ranks run on this host: in the
 * other modes the dumps are spread over the hosts.
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/stat.h>

#include "common/flight.h"
#include "common/tool.h"
#include "run/launch.h"
#include "run/run.h"

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

/* This host's ranks, about to start: a private directory unless one was
 * named, the signal, the verdict. 0, or an exit status. */
int trace_start(struct run *r, struct plan *p, bool pernode)
{
	const char *env = getenv("SMDDP_TRACE_DIR"), *sig = getenv("SMDDP_TRACE_SIGNAL");

	if (r->mpirun || pernode)
		return 0;
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
	r->trace_verdict = true;
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

/* Just before the ranks are stopped: those that handle SIGUSR1 (the
 * library's handler, where SMDDP_TRACE_SIGNAL=1) write their recorders.
 * The stopping signal sent next waits for the handler (it blocks them),
 * and a process that does not handle SIGUSR1 never gets it, so this never
 * kills a rank early. */
void trace_signal_ranks(struct run *r)
{
	if (!r->trace_signal || r->mpirun)
		return;
	for (int i = 0; i < r->nranks; i++) {
		struct rank *rk = &r->ranks[i];

		if (rk->pid > 0 && !rk->exited && catches(rk->pid, SIGUSR1))
			kill(rk->pid, SIGUSR1);
	}
}

/* The job id as the library puts it in file names (comm.c, set_jobid). */
static void file_job_id(const char *id, char *out, size_t len)
{
	size_t n = 0;

	for (; *id && n < 32 && n + 1 < len; id++)
		if (isalnum((unsigned char)*id) || *id == '_' || *id == '-')
			out[n++] = *id;
	out[n] = 0;
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
		}
	}
	if (r->trace_private)
		remove_private(r);
}
