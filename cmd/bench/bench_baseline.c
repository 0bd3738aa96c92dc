/* cmd/bench/bench_baseline.c - --baseline and --min-busbw: a saved run read back, the verdict */
#include "config.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include <smddp/smddp.h>

#include "bench.h"
#include "sweep.h"
#include "../common/tool.h"

/* ---- --baseline and --min-busbw --------------------------------------------- */

struct base_row {
	char coll[16], type[16], redop[8];
	uint64_t bytes;
	int root;
	double busbw[2];
};

/* Reads a saved --json run; returns the number of rows, or -1 with a
 * message on stderr. */
long load_baseline(const char *path, struct base_row **out)
{
	FILE *f = fopen(path, "r");
	struct base_row *rows = NULL;
	long n = 0, cap = 0, lineno = 0;
	char *line = NULL;
	size_t len = 0;

	if (!f) {
		tool_warn_errno("--baseline: cannot open %s", path);
		return -1;
	}
	while (getline(&line, &len, f) >= 0) {
		char *text = line;

		lineno++;
		if (strspn(line, " \t\r\n") == strlen(line))
			continue;
		/* smddp-run's "[R] " tag: `smddp-run -n 2 ... --json > f` */
		if (text[0] == '[' && isdigit((unsigned char)text[1])) {
			char *end = text + 1 + strspn(text + 1, "0123456789");
			if (end[0] == ']' && end[1] == ' ')
				text = end + 2;
		}
		cJSON *o = cJSON_Parse(text);
		cJSON *coll = cJSON_GetObjectItemCaseSensitive(o, "collective");
		cJSON *impl = cJSON_GetObjectItemCaseSensitive(o, "impl");
		cJSON *size = cJSON_GetObjectItemCaseSensitive(o, "size_bytes");
		cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
		cJSON *redop = cJSON_GetObjectItemCaseSensitive(o, "redop");
		cJSON *root = cJSON_GetObjectItemCaseSensitive(o, "root");
		cJSON *ob = cJSON_GetObjectItemCaseSensitive(o, "oop_busbw_gbps");
		cJSON *ib = cJSON_GetObjectItemCaseSensitive(o, "ip_busbw_gbps");
		if (!cJSON_IsObject(o) || !cJSON_IsString(coll) || !cJSON_IsNumber(size) ||
		    !cJSON_IsString(type) || !cJSON_IsString(redop) || !cJSON_IsNumber(root) ||
		    !cJSON_IsNumber(ob) || !(cJSON_IsNumber(ib) || cJSON_IsNull(ib))) {
			tool_warn("--baseline: %s:%ld: not a line of %s --json (needs collective, "
				  "size_bytes, type, redop, root, oop_busbw_gbps, ip_busbw_gbps)",
				  path, lineno, PROG);
			cJSON_Delete(o);
			free(rows);
			free(line);
			fclose(f);
			return -1;
		}
		if (cJSON_IsString(impl) && strcmp(impl->valuestring, "smddp") != 0) {
			cJSON_Delete(o); /* an --compare mpi row */
			continue;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			struct base_row *nr = realloc(rows, (size_t)cap * sizeof(*rows));
			if (!nr) {
				tool_warn("--baseline: out of memory");
				cJSON_Delete(o);
				free(rows);
				free(line);
				fclose(f);
				return -1;
			}
			rows = nr;
		}
		struct base_row *b = &rows[n++];
		snprintf(b->coll, sizeof(b->coll), "%s", coll->valuestring);
		snprintf(b->type, sizeof(b->type), "%s", type->valuestring);
		snprintf(b->redop, sizeof(b->redop), "%s", redop->valuestring);
		b->bytes = (uint64_t)size->valuedouble;
		b->root = (int)root->valuedouble;
		b->busbw[0] = ob->valuedouble;
		b->busbw[1] = cJSON_IsNumber(ib) ? ib->valuedouble : -1; /* alltoallv: none */
		cJSON_Delete(o);
	}
	free(line);
	fclose(f);
	*out = rows;
	return n;
}

/* Rank 0: the verdict of --baseline and --min-busbw, 0 or TOOL_EXIT_CHECK. */
int judge(const struct sweep *s, const struct base_row *base, long nbase)
{
	static const char *const which[2] = { "out-of-place", "in-place" };
	int verdict = TOOL_EXIT_OK;
	long matched = 0, floored = 0;

	for (size_t i = 0; i < s->n; i++) {
		const struct result *r = &s->res[i];
		const char *opname = r->op < 0 ? "none" : smddp_op_name((enum smddp_op)r->op);
		if (r->skipped)
			continue;
		for (long j = 0; opt.baseline && j < nbase; j++) {
			const struct base_row *b = &base[j];
			if (b->bytes != r->bytes || b->root != r->root || strcmp(b->coll, coll_names[r->coll]) ||
			    strcmp(b->type, smddp_dtype_name(r->dtype)) || strcmp(b->redop, opname))
				continue;
			matched++;
			for (int k = 0; k < 2; k++) {
				double floor = b->busbw[k] * (1 - opt.tolerance / 100);
				if (r->m[k].none || b->busbw[k] < 0)
					continue;
				if (r->m[k].busbw < floor) {
					tool_warn("below baseline: %s %" PRIu64 " B %s %s %s busbw %.3f GB/s "
						  "< %.3f (baseline %.3f - %g%%)",
						  coll_names[r->coll], r->bytes, smddp_dtype_name(r->dtype),
						  opname, which[k], r->m[k].busbw, floor, b->busbw[k],
						  opt.tolerance);
					verdict = TOOL_EXIT_CHECK;
				}
			}
			break;
		}
		if (opt.min_busbw >= 0 && r->bytes >= MIB) {
			floored++;
			for (int k = 0; k < 2; k++) {
				if (r->m[k].none)
					continue;
				if (r->m[k].busbw < opt.min_busbw) {
					tool_warn("below --min-busbw: %s %" PRIu64 " B %s %s %s busbw "
						  "%.3f GB/s < %g",
						  coll_names[r->coll], r->bytes, smddp_dtype_name(r->dtype),
						  opname, which[k], r->m[k].busbw, opt.min_busbw);
					verdict = TOOL_EXIT_CHECK;
				}
			}
		}
	}
	if (opt.baseline && !matched) {
		tool_warn("--baseline: no size of this run is in %s (same collective, size, type, "
			  "redop and root)", opt.baseline);
		verdict = TOOL_EXIT_CHECK;
	}
	if (opt.min_busbw >= 0 && !floored) {
		tool_warn("--min-busbw: no size of 1 MiB or more was measured");
		verdict = TOOL_EXIT_CHECK;
	}
	return verdict;
}
