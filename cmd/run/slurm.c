/* cmd/run/slurm.c - Slurm's compressed host lists ("node[01-03,7]"), expanded */

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
