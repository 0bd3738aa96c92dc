/* cmd/common/flight.c - reads the flight recorder dumps of a job and says who was behind */
#include "config.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "flight.h"

/* ---- reading ---------------------------------------------------------- */

struct loader {
	struct flight_job *jobs;  /* one per job id seen, in order */
	size_t njobs;
	char *err;
	size_t errlen;
};

static int fail(struct loader *l, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(l->err, l->errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static const cJSON *item(const cJSON *o, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* A number that fits: 0, or -1. */
static int num(const cJSON *o, const char *key, double lo, double hi, double *out)
{
	const cJSON *v = item(o, key);

	if (!cJSON_IsNumber(v) || v->valuedouble < lo || v->valuedouble > hi)
		return -1;
	*out = v->valuedouble;
	return 0;
}

static int str(const cJSON *o, const char *key, char *buf, size_t len)
{
	const cJSON *v = item(o, key);

	if (!cJSON_IsString(v) || strlen(v->valuestring) >= len)
		return -1;
	strcpy(buf, v->valuestring);
	return 0;
}

static struct flight_comm *comm_of(struct flight_job *j, const char *id, int size)
{
	for (size_t i = 0; i < j->ncomm; i++)
		if (!strcmp(j->comm[i].id, id))
			return j->comm[i].size == size ? &j->comm[i] : NULL;
	struct flight_comm *c = realloc(j->comm, (j->ncomm + 1) * sizeof(*c));
	if (!c)
		return NULL;
	j->comm = c;
	c = &j->comm[j->ncomm];
	memset(c, 0, sizeof(*c));
	snprintf(c->id, sizeof(c->id), "%s", id);
	c->size = size;
	c->part = calloc((size_t)size, sizeof(*c->part));
	if (!c->part)
		return NULL;
	j->ncomm++;
	return c;
}

static int parse_call(const cJSON *o, struct flight_call *c)
{
	double v;
	const cJSON *w;

	memset(c, 0, sizeof(*c));
	if (num(o, "seq", 1, 9e15, &v))
		return -1;
	c->seq = (uint64_t)v;
	if (str(o, "coll", c->coll, sizeof(c->coll)) || str(o, "state", c->state, sizeof(c->state)))
		return -1;
	if (item(o, "count")) {
		if (num(o, "count", 0, 1.8e19, &v) || str(o, "dtype", c->dtype, sizeof(c->dtype)))
			return -1;
		c->count = (uint64_t)v;
		c->has_count = 1;
	}
	if (item(o, "op")) {
		if (str(o, "op", c->op, sizeof(c->op)))
			return -1;
		c->has_op = 1;
	}
	if (item(o, "root")) {
		if (num(o, "root", -1, 1 << 24, &v))
			return -1;
		c->root = (int)v;
		c->has_root = 1;
	}
	if (item(o, "error") && str(o, "error", c->error, sizeof(c->error)))
		return -1;
	w = item(o, "waited_on");
	if (w) {
		const cJSON *x;

		if (!cJSON_IsArray(w))
			return -1;
		cJSON_ArrayForEach(x, w) {
			if (!cJSON_IsNumber(x) || x->valuedouble < 0)
				return -1;
			if (c->nwaited < 8)
				c->waited[c->nwaited++] = (int)x->valuedouble;
		}
	}
	if (num(o, "start_us", 0, 9e18, &v))
		return -1;
	c->start_us = (int64_t)v;
	if (item(o, "end_us")) {
		if (num(o, "end_us", 0, 9e18, &v))
			return -1;
		c->end_us = (int64_t)v;
	}
	return 0;
}

static int load_file(struct loader *l, const char *path)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long lineno = 0;
	int rc = -1, wrank = -1;
	struct flight_job *j = NULL;
	struct flight_part *part = NULL;
	struct flight_comm *comm = NULL;
	cJSON *o = NULL;

	if (!f)
		return fail(l, "cannot open %s: %s", path, strerror(errno));
	while ((len = getline(&line, &cap, f)) >= 0) {
		double v;
		char id[48];

		lineno++;
		if (len > 0 && line[len - 1] == '\n')
			line[--len] = 0;
		if (!len)
			continue;
		cJSON_Delete(o);
		o = cJSON_Parse(line);
		if (!cJSON_IsObject(o)) {
			fail(l, "%s:%ld: not a JSON object", path, lineno);
			goto out;
		}
		if (lineno == 1) {
			char job[64];
			double nranks;

			if (num(o, "smddp_trace", 1, 1, &v)) {
				fail(l, "%s:1: not a flight recorder dump (no \"smddp_trace\":1 header)",
				     path);
				goto out;
			}
			if (str(o, "job", job, sizeof(job)) || num(o, "nranks", 1, 1 << 24, &nranks) ||
			    num(o, "rank", 0, nranks - 1, &v)) {
				fail(l, "%s:1: the header lacks a job, nranks or a rank below nranks",
				     path);
				goto out;
			}
			wrank = (int)v;
			for (size_t i = 0; i < l->njobs && !j; i++)
				if (!strcmp(l->jobs[i].job, job))
					j = &l->jobs[i];
			if (!j) {
				struct flight_job *nj = realloc(l->jobs, (l->njobs + 1) * sizeof(*nj));

				if (!nj) {
					fail(l, "out of memory");
					goto out;
				}
				l->jobs = nj;
				j = &nj[l->njobs++];
				memset(j, 0, sizeof(*j));
				strcpy(j->job, job);
				j->nranks = (int)nranks;
				j->rank = calloc((size_t)j->nranks, sizeof(*j->rank));
				if (!j->rank) {
					fail(l, "out of memory");
					goto out;
				}
			}
			if (j->nranks != (int)nranks) {
				fail(l, "%s:1: job %s has %d ranks here and %d in %s", path, job,
				     (int)nranks, j->nranks, j->rank[0].present ? j->rank[0].file : "another dump");
				goto out;
			}
			if (j->rank[wrank].present) {
				fail(l, "%s and %s are both rank %d of job %s", j->rank[wrank].file, path,
				     wrank, job);
				goto out;
			}
			struct flight_rank *fr = &j->rank[wrank];
			fr->present = 1;
			snprintf(fr->file, sizeof(fr->file), "%s", path);
			if (str(o, "host", fr->host, sizeof(fr->host)))
				strcpy(fr->host, "?");
			if (str(o, "reason", fr->reason, sizeof(fr->reason)))
				strcpy(fr->reason, "?");
			fr->pid = num(o, "pid", 0, 1e12, &v) ? -1 : (long)v;
			continue;
		}
		if (str(o, "comm", id, sizeof(id))) {
			fail(l, "%s:%ld: no \"comm\"", path, lineno);
			goto out;
		}
		if (item(o, "comm_rank")) {
			double r, n, calls;

			if (num(o, "comm_size", 1, 1 << 24, &n) || num(o, "comm_rank", 0, n - 1, &r) ||
			    num(o, "calls", 0, 9e15, &calls)) {
				fail(l, "%s:%ld: a communicator line needs comm_rank below comm_size, and "
					"calls", path, lineno);
				goto out;
			}
			comm = comm_of(j, id, (int)n);
			if (!comm) {
				fail(l, "%s:%ld: communicator %s has another size in another dump", path,
				     lineno, id);
				goto out;
			}
			part = &comm->part[(int)r];
			if (part->present) {
				fail(l, "%s:%ld: rank %d of communicator %s appears twice", path, lineno,
				     (int)r, id);
				goto out;
			}
			part->present = 1;
			part->world_rank = wrank;
			part->calls = (uint64_t)calls;
			continue;
		}
		if (!part || strcmp(id, comm->id)) {
			fail(l, "%s:%ld: a call of communicator %s outside its section", path, lineno,
			     id);
			goto out;
		}
		struct flight_call *nc = realloc(part->call, (part->ncall + 1) * sizeof(*nc));
		if (!nc) {
			fail(l, "out of memory");
			goto out;
		}
		part->call = nc;
		if (parse_call(o, &nc[part->ncall])) {
			fail(l, "%s:%ld: a call needs seq, coll, state and start_us (and count with "
				"dtype)", path, lineno);
			goto out;
		}
		if (part->ncall && nc[part->ncall].seq <= nc[part->ncall - 1].seq) {
			fail(l, "%s:%ld: call %llu after call %llu: calls go oldest first", path,
			     lineno, (unsigned long long)nc[part->ncall].seq,
			     (unsigned long long)nc[part->ncall - 1].seq);
			goto out;
		}
		part->ncall++;
	}
	if (ferror(f)) {
		fail(l, "cannot read %s: %s", path, strerror(errno));
		goto out;
	}
	if (lineno == 0) {
		fail(l, "%s: empty, not a flight recorder dump", path);
		goto out;
	}
	rc = 0;
out:
	cJSON_Delete(o);
	free(line);
	fclose(f);
	return rc;
}

static int is_dump_name(const char *n)
{
	size_t len = strlen(n);

	return !strncmp(n, "smddp-trace.", 12) && len > 18 && !strcmp(n + len - 6, ".jsonl") &&
	       !strstr(n, ".tmp.");
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int load_dir(struct loader *l, const char *dir, int *found)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0;
	int rc = 0;

	if (!d)
		return fail(l, "cannot open %s: %s", dir, strerror(errno));
	while ((de = readdir(d))) {
		char **nn;

		if (!is_dump_name(de->d_name))
			continue;
		nn = realloc(names, (n + 1) * sizeof(*nn));
		if (!nn || !(nn[n] = malloc(strlen(dir) + strlen(de->d_name) + 2))) {
			names = nn ? nn : names;
			rc = fail(l, "out of memory");
			break;
		}
		names = nn;
		sprintf(names[n++], "%s/%s", dir, de->d_name);
	}
	closedir(d);
	if (!rc && n)
		qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		if (!rc)
			rc = load_file(l, names[i]);
		free(names[i]);
	}
	free(names);
	*found += (int)n;
	return rc;
}

void flight_free(struct flight_job *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->ncomm; i++) {
		for (int r = 0; r < j->comm[i].size; r++)
			free(j->comm[i].part[r].call);
		free(j->comm[i].part);
	}
	free(j->comm);
	free(j->rank);
	free(j);
}

int flight_load(const char *const *paths, int npaths, const char *job, struct flight_job **out,
		int *several, char *err, size_t errlen)
{
	struct loader l = {.err = err, .errlen = errlen};
	int rc = 0, found = 0;
	size_t pick = 0;

	*out = NULL;
	*several = 0;
	for (int i = 0; i < npaths && !rc; i++) {
		struct stat st;

		if (stat(paths[i], &st) != 0)
			rc = fail(&l, "cannot read %s: %s", paths[i], strerror(errno));
		else if (S_ISDIR(st.st_mode))
			rc = load_dir(&l, paths[i], &found);
		else if (!(rc = load_file(&l, paths[i])))
			found++;
	}
	if (!rc && !found)
		rc = fail(&l, "no flight recorder dumps (smddp-trace.*.jsonl) in %s%s", paths[0],
			  npaths > 1 ? " and the others" : "");
	if (!rc && job) {
		for (pick = 0; pick < l.njobs && strcmp(l.jobs[pick].job, job); pick++)
			;
		if (pick == l.njobs)
			rc = fail(&l, "no dumps of job %s", job);
	} else if (!rc && l.njobs > 1) {
		size_t off = (size_t)snprintf(err, errlen, "dumps of %zu jobs:", l.njobs);

		for (size_t i = 0; i < l.njobs && off < errlen; i++)
			off += (size_t)snprintf(err + off, errlen - off, " %s", l.jobs[i].job);
		*several = 1;
		rc = -1;
	}
	for (size_t i = 0; i < l.njobs; i++) {
		if (!rc && i == pick) {
			*out = malloc(sizeof(**out));
			if (*out) {
				**out = l.jobs[i];
				continue;
			}
			rc = fail(&l, "out of memory");
		}
		struct flight_job *j = malloc(sizeof(*j));
		if (j) {
			*j = l.jobs[i];
			flight_free(j);
		}
	}
	free(l.jobs);
	return rc;
}

/* ---- analysis --------------------------------------------------------- */

void flight_describe(const struct flight_call *c, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s", c->coll);

	if (c->has_count && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ", %llu x %s", (unsigned long long)c->count,
			      c->dtype);
	if (c->has_op && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ", %s", c->op);
	if (c->has_root && n >= 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, ", root %d", c->root);
}

const struct flight_call *flight_last(const struct flight_part *p)
{
	return p->present && p->ncall ? &p->call[p->ncall - 1] : NULL;
}

static uint64_t last_seq(const struct flight_part *p)
{
	const struct flight_call *c = flight_last(p);

	return c ? c->seq : p->calls;
}

static const struct flight_call *call_at(const struct flight_part *p, uint64_t seq)
{
	for (size_t i = p->ncall; i-- > 0;)
		if (p->call[i].seq == seq)
			return &p->call[i];
	return NULL;
}

static int same_call(const struct flight_call *a, const struct flight_call *b)
{
	return !strcmp(a->coll, b->coll) && a->has_count == b->has_count &&
	       (!a->has_count || (a->count == b->count && !strcmp(a->dtype, b->dtype))) &&
	       a->has_op == b->has_op && (!a->has_op || !strcmp(a->op, b->op)) &&
	       a->has_root == b->has_root && (!a->has_root || a->root == b->root);
}

static int finished(const struct flight_call *c)
{
	return !strcmp(c->state, "done") || !strcmp(c->state, "queued");
}

/* "0", "0,2", "0-3,5" into buf: runs of three or more as a range. */
static void rank_list(const int *r, int n, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	for (int i = 0; i < n && off < len;) {
		int j = i;

		while (j + 1 < n && r[j + 1] == r[j] + 1)
			j++;
		if (j - i >= 2) {
			off += (size_t)snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", r[i],
						r[j]);
		} else {
			for (int k = i; k <= j && off < len; k++)
				off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? "," : "",
							r[k]);
		}
		i = j + 1;
	}
}

static void add_rank(int *list, int *n, int r)
{
	for (int i = 0; i < *n; i++)
		if (list[i] == r)
			return;
	int i = *n;
	while (i > 0 && list[i - 1] > r) {
		list[i] = list[i - 1];
		i--;
	}
	list[i] = r;
	(*n)++;
}

static struct flight_finding *new_finding(struct flight_finding **f, size_t *n, size_t *cap,
					  enum flight_kind kind, const struct flight_comm *c,
					  uint64_t seq)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 8;
		struct flight_finding *nf = realloc(*f, nc * sizeof(*nf));

		if (!nf)
			return NULL;
		*f = nf;
		*cap = nc;
	}
	struct flight_finding *x = &(*f)[(*n)++];
	memset(x, 0, sizeof(*x));
	x->kind = kind;
	x->comm = c;
	x->seq = seq;
	x->behind = calloc((size_t)c->size, sizeof(int));
	x->waiting = calloc((size_t)c->size, sizeof(int));
	if (!x->behind || !x->waiting) {
		free(x->behind);
		free(x->waiting);
		(*n)--;
		return NULL;
	}
	return x;
}

static const char *comm_prefix(const struct flight_comm *c, char *buf, size_t len)
{
	if (!strcmp(c->id, "0"))
		buf[0] = 0;
	else
		snprintf(buf, len, "communicator %s: ", c->id);
	return buf;
}

/* The first call at which the ranks of c disagree. */
static int find_mismatch(const struct flight_comm *c, struct flight_finding **f, size_t *n,
			 size_t *cap)
{
	uint64_t lo = UINT64_MAX, hi = 0;

	for (int r = 0; r < c->size; r++) {
		const struct flight_part *p = &c->part[r];

		if (p->present && p->ncall) {
			lo = p->call[0].seq < lo ? p->call[0].seq : lo;
			hi = flight_last(p)->seq > hi ? flight_last(p)->seq : hi;
		}
	}
	for (uint64_t s = lo; s <= hi && lo != UINT64_MAX; s++) {
		const struct flight_call *ref = NULL;
		int differ = 0;

		for (int r = 0; r < c->size && !differ; r++) {
			const struct flight_call *k = c->part[r].present ? call_at(&c->part[r], s) : NULL;

			if (!k)
				continue;
			if (!ref)
				ref = k;
			else
				differ = !same_call(ref, k);
		}
		if (!differ)
			continue;
		/* Group the ranks by what they called, in rank order. */
		struct flight_finding *x = new_finding(f, n, cap, FLIGHT_MISMATCH, c, s);
		char pre[80], *t;
		size_t off, len;
		int *done;

		if (!x)
			return -1;
		done = calloc((size_t)c->size, sizeof(int));
		if (!done)
			return -1;
		t = x->text;
		len = sizeof(x->text);
		off = (size_t)snprintf(t, len, "%sranks disagree in call %llu (",
				       comm_prefix(c, pre, sizeof(pre)), (unsigned long long)s);
		for (int r = 0; r < c->size; r++) {
			const struct flight_call *k = c->part[r].present ? call_at(&c->part[r], s) : NULL;
			int grp[64], ng = 0;
			char ranks[256], what[160];

			if (!k || done[r])
				continue;
			for (int q = r; q < c->size; q++) {
				const struct flight_call *o =
					c->part[q].present ? call_at(&c->part[q], s) : NULL;

				if (o && !done[q] && same_call(k, o)) {
					done[q] = 1;
					if (ng < 64)
						grp[ng++] = q;
				}
			}
			rank_list(grp, ng, ranks, sizeof(ranks));
			flight_describe(k, what, sizeof(what));
			if (off < len)
				off += (size_t)snprintf(t + off, len - off, "%srank%s %s: %s",
							t[off - 1] == '(' ? "" : "; ",
							ng > 1 ? "s" : "", ranks, what);
		}
		if (off < len)
			snprintf(t + off, len - off, ")");
		free(done);
		return 0;
	}
	return 0;
}

/* Ranks that never entered a call others were in; or a call none finished. */
static int find_behind(const struct flight_job *j, const struct flight_comm *c,
		       struct flight_finding **f, size_t *n, size_t *cap)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	int npresent = 0;
	char pre[80];

	for (int r = 0; r < c->size; r++) {
		if (!c->part[r].present)
			continue;
		uint64_t s = last_seq(&c->part[r]);
		lo = s < lo ? s : lo;
		hi = s > hi ? s : hi;
		npresent++;
	}
	(void)j;
	if (!npresent)
		return 0;
	uint64_t s = lo < hi ? lo + 1 : hi;
	struct flight_finding *x = new_finding(f, n, cap, FLIGHT_BEHIND, c, s);
	const struct flight_call *what = NULL;
	int nodump[64], nnodump = 0, unfinished = 0;

	if (!x)
		return -1;
	for (int r = 0; r < c->size; r++) {
		const struct flight_part *p = &c->part[r];
		const struct flight_call *k;

		if (!p->present)
			continue;
		if (last_seq(p) < s) {
			add_rank(x->behind, &x->nbehind, r);
			continue;
		}
		k = call_at(p, s);
		if (!k)
			continue;
		what = what ? what : k;
		if (!finished(k)) {
			add_rank(x->waiting, &x->nwaiting, r);
			unfinished++;
			/* Whom it waited for: a rank without a dump is behind. */
			for (int i = 0; i < k->nwaited; i++) {
				int q = k->waited[i];

				if (q >= 0 && q < c->size && !c->part[q].present) {
					add_rank(x->behind, &x->nbehind, q);
					if (nnodump < 64)
						add_rank(nodump, &nnodump, q);
				}
			}
		}
	}
	/* Everyone got as far and finished; or all stopped in a call they
	 * disagreed on, which the mismatch says. */
	int mismatch_here = 0;

	for (size_t i = 0; i + 1 < *n; i++)
		mismatch_here |= (*f)[i].kind == FLIGHT_MISMATCH && (*f)[i].comm == c &&
				 (*f)[i].seq == s;
	if ((!x->nbehind && !unfinished) || (!x->nbehind && mismatch_here)) {
		free(x->behind);
		free(x->waiting);
		(*n)--;
		return 0;
	}
	char call[200] = "?", behind[256], waiting[256], ndl[256];

	if (what)
		flight_describe(what, call, sizeof(call));
	rank_list(x->behind, x->nbehind, behind, sizeof(behind));
	rank_list(x->waiting, x->nwaiting, waiting, sizeof(waiting));
	rank_list(nodump, nnodump, ndl, sizeof(ndl));
	comm_prefix(c, pre, sizeof(pre));
	if (x->nbehind) {
		/* In a split, which processes those are. */
		char wl[256] = "", wtext[300] = "";
		int w[64], nw = 0;

		for (int i = 0; strcmp(c->id, "0") && i < x->nbehind && nw < 64; i++)
			if (c->part[x->behind[i]].present)
				w[nw++] = c->part[x->behind[i]].world_rank;
		rank_list(w, nw, wl, sizeof(wl));
		if (nw)
			snprintf(wtext, sizeof(wtext), " (world rank%s %s)", nw > 1 ? "s" : "", wl);
		int off = snprintf(x->text, sizeof(x->text), "%srank%s %s%s never entered call %llu (%s)",
				   pre, x->nbehind > 1 ? "s" : "", behind, wtext, (unsigned long long)s,
				   call);
		if (x->nwaiting && off > 0 && (size_t)off < sizeof(x->text))
			off += snprintf(x->text + off, sizeof(x->text) - (size_t)off,
					"; rank%s %s waited in it", x->nwaiting > 1 ? "s" : "", waiting);
		if (nnodump && off > 0 && (size_t)off < sizeof(x->text))
			snprintf(x->text + off, sizeof(x->text) - (size_t)off,
				 "; no dump from rank%s %s", nnodump > 1 ? "s" : "", ndl);
	} else {
		x->kind = FLIGHT_STUCK;
		snprintf(x->text, sizeof(x->text),
			 "every rank with a dump entered call %llu (%s), and rank%s %s did not finish it",
			 (unsigned long long)s, call, x->nwaiting > 1 ? "s" : "", waiting);
	}
	return 0;
}

static int rank_order(const struct flight_finding *a)
{
	return a->kind == FLIGHT_NODUMP ? 3 : a->kind == FLIGHT_MISMATCH ? 0 : 1;
}

static int cmp_finding(const void *pa, const void *pb)
{
	const struct flight_finding *a = pa, *b = pb;
	int wa = strcmp(a->comm->id, "0") != 0, wb = strcmp(b->comm->id, "0") != 0;

	if (wa != wb)
		return wa - wb;
	if (a->comm != b->comm)
		return strcmp(a->comm->id, b->comm->id);
	if (a->seq != b->seq)
		return a->seq < b->seq ? -1 : 1;
	return rank_order(a) - rank_order(b);
}

int flight_analyze(const struct flight_job *j, struct flight_finding **out, size_t *n)
{
	struct flight_finding *f = NULL;
	size_t cap = 0;

	*n = 0;
	for (size_t i = 0; i < j->ncomm; i++) {
		if (find_mismatch(&j->comm[i], &f, n, &cap) || find_behind(j, &j->comm[i], &f, n, &cap)) {
			flight_findings_free(f, *n);
			*out = NULL;
			*n = 0;
			return -1;
		}
	}
	/* Ranks of the job without a dump, when nothing else names them. */
	if (j->ncomm) {
		const struct flight_comm *w = &j->comm[0];
		int miss[64], nmiss = 0;

		for (size_t i = 0; i < j->ncomm; i++)
			if (!strcmp(j->comm[i].id, "0"))
				w = &j->comm[i];
		for (int r = 0; r < j->nranks; r++) {
			int named = 0;

			for (size_t i = 0; i < *n && !named; i++)
				for (int k = 0; k < f[i].nbehind; k++)
					named |= f[i].comm == w && f[i].behind[k] == r;
			if (!j->rank[r].present && !named && nmiss < 64)
				miss[nmiss++] = r;
		}
		if (nmiss) {
			struct flight_finding *x = new_finding(&f, n, &cap, FLIGHT_NODUMP, w, UINT64_MAX);
			char list[256];

			if (!x) {
				flight_findings_free(f, *n);
				return -1;
			}
			for (int i = 0; i < nmiss; i++)
				add_rank(x->behind, &x->nbehind, miss[i]);
			rank_list(miss, nmiss, list, sizeof(list));
			snprintf(x->text, sizeof(x->text), "no dump from rank%s %s of %d",
				 nmiss > 1 ? "s" : "", list, j->nranks);
		}
	}
	if (*n > 1)
		qsort(f, *n, sizeof(*f), cmp_finding);
	*out = f;
	return 0;
}

void flight_findings_free(struct flight_finding *f, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(f[i].behind);
		free(f[i].waiting);
	}
	free(f);
}
