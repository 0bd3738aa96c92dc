/* compare.c - checks a topology against an expected layout (--expect).
 *
 * An expected file has the shape of a topology (schema 1) but says only what
 * it cares about: a key that is absent is not checked.  On top of equality:
 * a number may be {"min": a, "max": b}; "gpus", "numa" or "nics" may be a
 * bare count; "gpu_links" or "gpu_nic" may be one relation ("NV12") that
 * every pair must have; the entries of "nics" are matched in any order (each
 * expected entry by a different NIC), and with "nics_match": "subset" the
 * node may have more NICs than listed.  Every difference is one line.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/sd.h"
#include "topo/topo.h"

struct rep {
	char *buf;
	size_t len, cap;
	int n;
	int nomem;
};

static void add(struct rep *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct rep *r, const char *fmt, ...)
{
	va_list ap;
	int m;

	r->n++;
	for (;;) {
		size_t room = r->cap - r->len;

		va_start(ap, fmt);
		m = r->buf ? vsnprintf(r->buf + r->len, room, fmt, ap) : -1;
		va_end(ap);
		if (m >= 0 && (size_t)m + 1 < room) {
			r->len += (size_t)m;
			r->buf[r->len++] = '\n';
			r->buf[r->len] = '\0';
			return;
		}
		{
			size_t cap = r->cap ? r->cap * 2 : 1024;
			char *nb;

			while (m >= 0 && cap < r->len + (size_t)m + 2)
				cap *= 2;
			nb = realloc(r->buf, cap);
			if (nb == NULL) {
				r->nomem = 1;
				return;
			}
			r->buf = nb;
			r->cap = cap;
		}
	}
}

static char *txt(const cJSON *v)
{
	char *s = v ? cJSON_PrintUnformatted(v) : NULL;

	return s ? s : strdup("nothing");
}

static void differ(struct rep *r, const char *path, const char *expected, const cJSON *found)
{
	char *f = txt(found);

	add(r, "%s: expected %s, found %s", path, expected, f);
	free(f);
}

static int is_range(const cJSON *e)
{
	const cJSON *k;
	int n = 0;

	if (!cJSON_IsObject(e))
		return 0;
	cJSON_ArrayForEach(k, e)
	{
		if ((strcmp(k->string, "min") != 0 && strcmp(k->string, "max") != 0) ||
		    !cJSON_IsNumber(k))
			return 0;
		n++;
	}
	return n > 0;
}

static void cmp(struct rep *r, const char *path, const cJSON *exp, const cJSON *have, int top);

/* One relation for every pair: one line per relation found instead, with
 * how many pairs have it and the first of them, not a line per pair. */
static void cmp_matrix_all(struct rep *r, const char *path, const char *rel, const cJSON *have,
			   int square)
{
	const char *seen[16];
	int nseen = 0;

	for (;;) {
		const char *cur = NULL;
		const cJSON *row;
		int i = 0, count = 0, fi = 0, fj = 0;

		cJSON_ArrayForEach(row, have)
		{
			const cJSON *c;
			int j = 0;

			cJSON_ArrayForEach(c, row)
			{
				const char *v = cJSON_IsString(c) ? c->valuestring : "?";
				int k;

				if (!(square && i == j) && strcmp(v, rel) != 0) {
					for (k = 0; k < nseen && strcmp(seen[k], v) != 0; k++)
						;
					if (k == nseen && (cur == NULL || strcmp(cur, v) == 0)) {
						if (cur == NULL) {
							cur = v;
							fi = i;
							fj = j;
						}
						count++;
					}
				}
				j++;
			}
			i++;
		}
		if (cur == NULL)
			return;
		add(r, "%s: expected \"%s\" for every pair, found \"%s\" for %d (first %s[%d][%d])",
		    path, rel, cur, count, path, fi, fj);
		if (nseen == 16)
			return;
		seen[nseen++] = cur;
	}
}

/* Expected NIC entries in any order, each by a NIC of its own. */
static void cmp_nics(struct rep *r, const cJSON *exp, const cJSON *have, int subset)
{
	int nh = cJSON_GetArraySize(have), ne = cJSON_GetArraySize(exp), j = 0;
	char *used = calloc((size_t)nh + 1, 1);
	const cJSON *e;

	if (used == NULL) {
		r->nomem = 1;
		return;
	}
	if (subset ? ne > nh : ne != nh)
		add(r, "nics: expected %s%d, found %d", subset ? "at least " : "", ne, nh);
	cJSON_ArrayForEach(e, exp)
	{
		int k, found = -1;

		for (k = 0; k < nh && found < 0; k++) {
			struct rep dry = {0};

			if (used[k])
				continue;
			cmp(&dry, "", e, cJSON_GetArrayItem(have, k), 0);
			if (dry.n == 0 && !dry.nomem)
				found = k;
			free(dry.buf);
		}
		if (found >= 0) {
			used[found] = 1;
		} else {
			char *s = txt(e);

			add(r, "nics[%d]: no NIC of this node matches %s", j, s);
			free(s);
		}
		j++;
	}
	free(used);
}

static void cmp(struct rep *r, const char *path, const cJSON *exp, const cJSON *have, int top)
{
	char p[256];

	if (is_range(exp)) {
		const cJSON *lo = cJSON_GetObjectItem(exp, "min"), *hi = cJSON_GetObjectItem(exp, "max");
		char want[96];

		if (lo && hi)
			snprintf(want, sizeof(want), "%.15g to %.15g", lo->valuedouble, hi->valuedouble);
		else if (lo)
			snprintf(want, sizeof(want), "at least %.15g", lo->valuedouble);
		else
			snprintf(want, sizeof(want), "at most %.15g", hi->valuedouble);
		if (!cJSON_IsNumber(have) || (lo && have->valuedouble < lo->valuedouble) ||
		    (hi && have->valuedouble > hi->valuedouble))
			differ(r, path, want, have);
		return;
	}
	if (cJSON_IsObject(exp)) {
		const cJSON *k, *mode = top ? cJSON_GetObjectItem(exp, "nics_match") : NULL;
		int subset = cJSON_IsString(mode) && strcmp(mode->valuestring, "subset") == 0;

		if (!cJSON_IsObject(have)) {
			differ(r, path, "an object", have);
			return;
		}
		cJSON_ArrayForEach(k, exp)
		{
			const cJSON *h = cJSON_GetObjectItemCaseSensitive(have, k->string);

			/* What names this host or this run is not a property of the
			 * layout: another host's full dump is a fair expectation. */
			if (top && (strcmp(k->string, "schema") == 0 ||
				    strcmp(k->string, "description") == 0 ||
				    strcmp(k->string, "nics_match") == 0 ||
				    strcmp(k->string, "host") == 0 ||
				    strcmp(k->string, "discovered_by") == 0))
				continue;
			snprintf(p, sizeof(p), "%s%s%s", path, *path ? "." : "", k->string);
			if (h == NULL) {
				add(r, "%s: no such field in a topology (misspelt?)", p);
				continue;
			}
			if (top && strcmp(k->string, "nics") == 0 && cJSON_IsArray(k) &&
			    cJSON_IsArray(h)) {
				cmp_nics(r, k, h, subset);
				continue;
			}
			if (top && cJSON_IsString(k) && cJSON_IsArray(h) &&
			    (strcmp(k->string, "gpu_links") == 0 || strcmp(k->string, "gpu_nic") == 0)) {
				cmp_matrix_all(r, p, k->valuestring, h,
					       strcmp(k->string, "gpu_links") == 0);
				continue;
			}
			cmp(r, p, k, h, 0);
		}
		return;
	}
	if (cJSON_IsNumber(exp) && cJSON_IsArray(have)) { /* a count */
		if (cJSON_GetArraySize(have) != exp->valuedouble)
			add(r, "%s: expected %.15g, found %d", path, exp->valuedouble,
			    cJSON_GetArraySize(have));
		return;
	}
	if (cJSON_IsArray(exp)) {
		int ne = cJSON_GetArraySize(exp), nh, i = 0;
		const cJSON *e;

		if (!cJSON_IsArray(have)) {
			differ(r, path, "an array", have);
			return;
		}
		nh = cJSON_GetArraySize(have);
		if (ne != nh)
			add(r, "%s: expected %d, found %d", path, ne, nh);
		cJSON_ArrayForEach(e, exp)
		{
			if (i >= nh)
				break;
			snprintf(p, sizeof(p), "%s[%d]", path, i);
			cmp(r, p, e, cJSON_GetArrayItem(have, i), 0);
			i++;
		}
		return;
	}
	if (cJSON_Compare(exp, have, 1))
		return;
	/* 8 and 8.0 are one number */
	if (cJSON_IsNumber(exp) && cJSON_IsNumber(have) && exp->valuedouble == have->valuedouble)
		return;
	{
		char *e = txt(exp);

		differ(r, path, e, have);
		free(e);
	}
}

int sd_topo_compare_tree(const cJSON *have, const cJSON *expect, char **report, int *ndiff,
			 struct sd_err *err)
{
	const cJSON *schema, *mode;
	struct rep r = {0};

	if (!cJSON_IsObject(expect))
		return sd_err_set(err, SMDDP_ECONFIG,
				  "expected a JSON object (an expected topology of schema %d)",
				  SD_TOPO_SCHEMA);
	schema = cJSON_GetObjectItemCaseSensitive(expect, "schema");
	if (!cJSON_IsNumber(schema) || schema->valuedouble != SD_TOPO_SCHEMA)
		return sd_err_set(err, SMDDP_ECONFIG,
				  "no \"schema\": %d: not an expected topology this libsmddp reads",
				  SD_TOPO_SCHEMA);
	mode = cJSON_GetObjectItemCaseSensitive(expect, "nics_match");
	if (mode != NULL && (!cJSON_IsString(mode) || (strcmp(mode->valuestring, "exact") != 0 &&
						       strcmp(mode->valuestring, "subset") != 0)))
		return sd_err_set(err, SMDDP_ECONFIG,
				  "\"nics_match\": expected \"exact\" or \"subset\"");
	cmp(&r, "", expect, have, 1);
	if (r.nomem) {
		free(r.buf);
		return sd_err_set(err, SMDDP_ENOMEM, "out of memory");
	}
	*report = r.buf ? r.buf : strdup("");
	*ndiff = r.n;
	if (*report == NULL)
		return sd_err_set(err, SMDDP_ENOMEM, "out of memory");
	return SMDDP_OK;
}
