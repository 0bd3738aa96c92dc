/* cmd/run/slurm.c - smddp-run inside Slurm: host lists, the plan, srun's command line */

/*
 * The syntax, as Slurm writes SLURM_JOB_NODELIST: names separated by
 * commas outside brackets; within a name, any number of bracket groups,
 * each a comma-separated list of numbers N or ranges N-M, expanded in
 * order, left to right, the rightmost group varying fastest. A range keeps
 * the width of its lower bound ("[08-10]": 08 09 10), as Slurm does.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run/run.h"
#include "run/slurm.h"

struct list {
	char **v;
	size_t n, cap, max;
	char *err;
	size_t errlen;
};

static int push(struct list *l, const char *s, size_t len)
{
	if (l->n >= l->max) {
		snprintf(l->err, l->errlen, "more than %zu hosts", l->max);
		return -1;
	}
	if (l->n + 2 > l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char **nv = realloc(l->v, cap * sizeof *nv);
		if (!nv)
			goto nomem;
		l->v = nv;
		l->cap = cap;
	}
	if (!(l->v[l->n] = strndup(s, len)))
		goto nomem;
	l->v[++l->n] = NULL;
	return 0;
nomem:
	snprintf(l->err, l->errlen, "out of memory");
	return -1;
}

/* Expands NAME[0..len) after the already expanded PREFIX. */
static int expand(struct list *l, char *prefix, size_t plen, const char *name, size_t len)
{
	const char *open = memchr(name, '[', len);
	if (!open) {
		if (plen + len >= 256) {
			snprintf(l->err, l->errlen, "a host name longer than 255 characters");
			return -1;
		}
		memcpy(prefix + plen, name, len);
		return push(l, prefix, plen + len);
	}
	const char *close = memchr(open, ']', len - (open - name));
	size_t lit = open - name;
	if (!close || close == open + 1 || plen + lit >= 256) {
		snprintf(l->err, l->errlen, "'%.*s': a '[' without its ']', or empty brackets",
		         (int)len, name);
		return -1;
	}
	memcpy(prefix + plen, name, lit);
	plen += lit;
	const char *rest = close + 1;
	size_t rlen = len - (rest - name);

	for (const char *p = open + 1; p < close;) {
		const char *end = memchr(p, ',', close - p);
		if (!end)
			end = close;
		const char *dash = memchr(p, '-', end - p);
		const char *lo_end = dash ? dash : end;
		size_t width = lo_end - p;
		char *stop;
		if (width == 0 || width > 18 || strspn(p, "0123456789") < width)
			goto bad;
		unsigned long long lo = strtoull(p, &stop, 10), hi = lo;
		if (dash) {
			size_t hw = end - dash - 1;
			if (hw == 0 || hw > 18 || strspn(dash + 1, "0123456789") < hw)
				goto bad;
			hi = strtoull(dash + 1, &stop, 10);
			if (hi < lo)
				goto bad;
		}
		for (unsigned long long x = lo; x <= hi; x++) {
			char num[32];
			int nl = snprintf(num, sizeof num, "%0*llu", (int)width, x);
			if (plen + nl >= 256) {
				snprintf(l->err, l->errlen, "a host name longer than 255 characters");
				return -1;
			}
			memcpy(prefix + plen, num, nl);
			if (expand(l, prefix, plen + nl, rest, rlen) < 0)
				return -1;
		}
		p = end + (end < close);
	}
	return 0;
bad:
	snprintf(l->err, l->errlen, "'%.*s': expected numbers and ranges N-M (N <= M) within "
	         "the brackets", (int)(close - open + 1), open);
	return -1;
}

char **slurm_hostlist(const char *list, size_t max, size_t *n, char *err, size_t errlen)
{
	struct list l = { .max = max, .err = err, .errlen = errlen };
	char prefix[512];
	const char *p = list;

	*n = 0;
	if (!*list) {
		snprintf(err, errlen, "an empty host list");
		return NULL;
	}
	while (*p) {
		/* the next name ends at a comma outside brackets */
		const char *q = p;
		int depth = 0;
		for (; *q && (depth || *q != ','); q++) {
			if (*q == '[')
				depth++;
			else if (*q == ']')
				depth--;
			if (depth < 0 || depth > 1)
				break;
		}
		if (depth > 0 || (depth == 0 && *q == '[')) {
			snprintf(err, errlen, "a '[' without its ']'");
			goto fail;
		}
		if (depth < 0) {
			snprintf(err, errlen, "a ']' without its '['");
			goto fail;
		}
		if (q == p) {
			snprintf(err, errlen, "an empty host name");
			goto fail;
		}
		if (expand(&l, prefix, 0, p, q - p) < 0)
			goto fail;
		if (*q == ',' && !q[1]) {
			snprintf(err, errlen, "'%s': ends with a comma", list);
			goto fail;
		}
		p = *q ? q + 1 : q;
	}
	*n = l.n;
	return l.v;
fail:
	slurm_hostlist_free(l.v);
	return NULL;
}

void slurm_hostlist_free(char **hosts)
{
	if (!hosts)
		return;
	for (char **h = hosts; *h; h++)
		free(*h);
	free(hosts);
}

bool slurm_in_step(void)
{
	const char *s = getenv("SLURM_STEP_ID");
	return s && *s && strspn(s, "0123456789") == strlen(s);
}

/* ---- the plan ------------------------------------------------------------- */

/* Whether to run through srun: asked, or inside a Slurm allocation (but
 * not in a job step: that is where srun has put us) with no other way
 * across hosts asked for. */
bool slurm_wanted(const struct options *o)
{
	if (o->launcher != LAUNCH_AUTO)
		return o->launcher == LAUNCH_SLURM;
	const char *job = getenv("SLURM_JOB_ID");
	return job && *job && !slurm_in_step() && !o->hosts && !o->hostfile && !o->nnodes &&
	       !o->standalone && o->sagemaker != 1 && !o->mpirun_args.n;
}

/* A positive number from the environment, or 0. Slurm's per-node counts
 * may read "4(x3)": the first count is ours. */
static long env_count(const char *name)
{
	const char *v = getenv(name);
	long x;
	if (!v || !*v)
		return 0;
	char *num = strndup(v, strspn(v, "0123456789"));
	if (!num)
		out_of_memory();
	if (tool_parse_long(num, 1, MAX_NPROC, &x) < 0)
		x = 0;
	free(num);
	return x;
}

/* Inside a Slurm allocation: its hosts, in Slurm's order; srun starts one
 * smddp-run per host, which run as per-node mode. */
void slurm_plan(const struct options *o, struct plan *p)
{
	const char *list = getenv("SLURM_JOB_NODELIST");
	const char *what = "SLURM_JOB_NODELIST";
	char err[512];
	size_t n;

	if (!list || !*list) {
		list = getenv("SLURM_NODELIST");   /* Slurm before 20.x */
		what = "SLURM_NODELIST";
	}
	if (!list || !*list)
		tool_usage_error("--launcher slurm: SLURM_JOB_NODELIST is not set: run inside a Slurm "
		                 "allocation (sbatch, salloc)");
	char **hosts = slurm_hostlist(list, MAX_HOSTS, &n, err, sizeof err);
	if (!hosts)
		tool_usage_error("%s='%s': %s", what, list, err);
	for (size_t i = 0; i < n; i++) {
		if (!valid_host(hosts[i]))
			tool_usage_error("%s='%s': invalid host name '%s'", what, list, hosts[i]);
		if (strv_has(&p->hosts, hosts[i]))
			tool_usage_error("%s='%s': host '%s' is given twice", what, list, hosts[i]);
		strv_add(&p->hosts, hosts[i]);
	}
	slurm_hostlist_free(hosts);
	const char *nn = getenv("SLURM_JOB_NUM_NODES");
	if (!nn || !*nn)
		nn = getenv("SLURM_NNODES");
	long k;
	if (nn && *nn && (tool_parse_long(nn, 1, MAX_HOSTS, &k) < 0 || (size_t)k != n))
		tool_usage_error("%s names %zu host%s but SLURM_JOB_NUM_NODES (or SLURM_NNODES) is "
		                 "'%s'", what, n, n == 1 ? "" : "s", nn);

	p->kind = PLAN_SRUN;
	p->form = "slurm";
	p->nnodes = (int)n;
	/* ranks per node: asked for, else as the allocation says, else GPUs */
	long gpus;
	p->ppn = o->nproc ? o->nproc : env_count("SLURM_NTASKS_PER_NODE");
	if (!p->ppn)
		p->ppn = env_count("SLURM_GPUS_ON_NODE");
	if (!p->ppn)
		p->ppn = (gpus = count_gpus()) > 0 ? (gpus > MAX_NPROC ? MAX_NPROC : gpus) : 1;
}


/* ---- srun's command line --------------------------------------------------
 *
 * srun starts one smddp-run per node of the allocation (one task per node,
 * with all of the node's CPUs, so that its ranks are not squeezed onto the
 * one CPU of a default task); each runs per-node mode, its node rank from
 * SLURM_NODEID and node 0 at the first host (see parse_options()). TAG is
 * the user's --tag-output choice (-1: none): the job's output comes back
 * together through srun, so it is tagged whenever the job has several ranks. */
void slurm_argv(const struct options *o, const struct plan *p, int tag, struct strv *av)
{
	const char *srun = getenv("SMDDP_SRUN");
	static const char *const bind[] = { "none", "none", "core", "numa" };
	size_t n = p->hosts.n;
	long cpus;

	strv_add(av, srun && *srun ? srun : "srun");
	strv_take(av, xasprintf("--nodes=%zu", n));
	strv_take(av, xasprintf("--ntasks=%zu", n));
	strv_add(av, "--ntasks-per-node=1");
	const char *c = getenv("SLURM_CPUS_ON_NODE");
	if (c && tool_parse_long(c, 1, 1 << 20, &cpus) == 0)
		strv_take(av, xasprintf("--cpus-per-task=%ld", cpus));
	for (size_t i = 0; i < o->srun_args.n; i++)
		strv_add(av, o->srun_args.v[i]);
	strv_take(av, self_path());
	strv_add(av, "--launcher");
	strv_add(av, "none");
	strv_add(av, "--nnodes");
	strv_take(av, xasprintf("%zu", n));
	strv_add(av, "-n");
	strv_take(av, xasprintf("%ld", p->ppn));
	strv_add(av, "--master-addr");
	strv_add(av, p->master_addr);
	strv_add(av, "--master-port");
	strv_take(av, xasprintf("%ld", p->master_port));
	if (o->launcher_port) {
		strv_add(av, "--launcher-port");
		strv_take(av, xasprintf("%ld", o->launcher_port));
	}
	strv_add(av, "--join-timeout");
	strv_take(av, xasprintf("%g", o->join_timeout_s));
	if (tag > 0 || (tag < 0 && n * (size_t)p->ppn > 1))
		strv_add(av, "--tag-output");
	else if (tag == 0)
		strv_add(av, "--no-tag-output");
	/* srun's output is a pipe: our terminal's line buffering goes along */
	if (o->unbuffered || isatty(1))
		strv_add(av, "--unbuffered");
	if (o->grace_s != DEFAULT_GRACE_S) {
		strv_add(av, "--grace");
		strv_take(av, xasprintf("%g", o->grace_s));
	}
	if (o->timeout_arg) {
		strv_add(av, "--timeout");
		strv_add(av, o->timeout_arg);
	}
	for (size_t i = 0; i < o->envs.n; i++) {
		strv_add(av, "--env");
		strv_add(av, o->envs.v[i]);
	}
	if (o->netif) {
		strv_add(av, "--network-interface");
		strv_add(av, o->netif);
	}
	if (o->bind > BIND_NONE) {
		strv_add(av, "--bind");
		strv_add(av, bind[o->bind]);
	}
	if (o->job_id) {
		strv_add(av, "--rdzv-id");
		strv_add(av, o->job_id);
	}
	/* each node's smddp-run gives its ranks the dump directory, and node
	 * 0's gathers the verdict (run/trace.c) */
	if (o->trace_dir) {
		strv_add(av, "--trace-dir");
		strv_add(av, o->trace_dir);
	}
	strv_add(av, "--");
	for (char **a = o->argv; *a; a++)
		strv_add(av, *a);
}

/* srun's options one per line, then the command it runs on one line. */
void slurm_dry_run(const struct plan *p, const struct strv *av)
{
	printf("# smddp-run --dry-run: slurm through srun, %zu host%s x %ld rank%s; node 0 is "
	       "%s%s\n", p->hosts.n, p->hosts.n == 1 ? "" : "s", p->ppn, p->ppn == 1 ? "" : "s",
	       p->hosts.v[0], p->hosts.n > 1 ? ", the others' node rank from SLURM_NODEID" : "");
	fputs("# hosts:", stdout);
	for (size_t i = 0; i < p->hosts.n; i++)
		printf(" %s", p->hosts.v[i]);
	putchar('\n');
	bool *nl = calloc(av->n + 1, sizeof *nl);
	if (!nl)
		out_of_memory();
	for (size_t i = 1; i < av->n && strcmp(av->v[i], "--launcher") != 0; i++)
		nl[i] = true;
	print_words(av->v, nl);
	free(nl);
}
