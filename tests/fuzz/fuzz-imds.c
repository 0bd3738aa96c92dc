/* fuzz-imds.c - smddp-check-az --emit: this host's record from the
 * instance metadata service's answers and from /proc/mounts.  An input is
 * the IMDS emulator's data (tests/check-az/fixtures: {"meta-data": {PATH:
 * ANSWER}}), then after a line "%%" a mounts table.  Here imds_get() answers
 * from that data, as tests/check-az/imds-emu.py does over HTTP: a string is
 * the body of a 200, a folder lists its entries, null is a request that
 * failed, anything else a 404. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-az/check-az.h"
#include "fuzz.h"

struct imds {
	const cJSON *md;
	char error[CHECKAZ_ERRLEN];
};

const char *imds_error(const struct imds *m)
{
	return m->error;
}

const char *imds_version(const struct imds *m)
{
	return "v2";
}

int imds_get(struct imds *m, const char *path, char **body)
{
	size_t plen;
	const cJSON *v;

	*body = NULL;
	if (strncmp(path, "meta-data/", 10) != 0)
		return 1;
	path += 10;
	plen = strlen(path);
	if (plen && path[plen - 1] == '/') { /* a folder: its entries, one a line */
		size_t cap = 1, len = 0;
		char *out = calloc(1, 1);
		int found = 0;

		cJSON_ArrayForEach(v, m->md) {
			const char *k = v->string, *rest, *slash;
			size_t n;

			if (!k || strncmp(k, path, plen) != 0)
				continue;
			rest = k + plen;
			slash = strchr(rest, '/');
			n = slash ? (size_t)(slash - rest) + 1 : strlen(rest);
			if (!n)
				continue;
			found = 1;
			out = realloc(out, cap += n + 1);
			if (!out)
				abort();
			memcpy(out + len, rest, n);
			len += n;
			out[len++] = '\n';
			out[len] = '\0';
		}
		if (!found) {
			free(out);
			return 1;
		}
		*body = out;
		return 0;
	}
	v = cJSON_GetObjectItemCaseSensitive(m->md, path);
	if (cJSON_IsNull(v)) {
		snprintf(m->error, sizeof(m->error), "GET /latest/meta-data/%s: no answer", path);
		return -1;
	}
	if (!cJSON_IsString(v))
		return 1;
	*body = strdup(v->valuestring);
	if (!*body)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *part[2];
	size_t len[2], n = fuzz_split(data, size, part, len, 2);
	char *text = fuzz_text(part[0], len[0]), err[CHECKAZ_ERRLEN] = "";
	cJSON *root = cJSON_Parse(text);
	struct imds m = {0};

	m.md = cJSON_GetObjectItemCaseSensitive(root, "meta-data");
	if (cJSON_IsObject(m.md)) {
		const char *mounts = fuzz_file(0, n > 1 ? part[1] : (const uint8_t *)"", n > 1 ? len[1] : 0);
		cJSON *rec = emit_record(&m, mounts, false, err, sizeof(err));

		if (rec) {
			char *s = cJSON_PrintUnformatted(rec);
			cJSON *records = cJSON_CreateArray();

			/* what --emit prints, --compare must read */
			if (!s || records_parse(records, s, "emit", err, sizeof(err)) != 0)
				abort();
			cJSON_Delete(records);
			free(s);
			cJSON_Delete(rec);
		}
	}
	cJSON_Delete(root);
	free(text);
	return 0;
}
