/* topo.c - the public topology API: discover, load, dump, compare, accessors.
 *
 * A file is checked field by field against schema 1 and rebuilt in the
 * canonical shape, so that a hand-edited file with a typo is refused with
 * the field's path ("gpus[1].numa_node: expected ...") instead of being
 * half understood, and so that dump -> load -> dump is the identity.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/checks.h"
#include "config/param.h"
#include "util/sd.h"
#include "topo/topo.h"

/* This thread's sink for the smddp_topo_* calls; the files below
 * (discover.c, compare.c) are handed it, they do not name it. */
static __thread struct sd_err topo_err;

SD_EXPORT const char *smddp_topo_error(void)
{
	return topo_err.msg;
}

/* ---- schema 1 ------------------------------------------------------------ */

enum ftype { F_INT, F_STR, F_BOOL, F_OBJ, F_ARR, F_MATRIX };
#define F_REQ 1u

struct field {
	const char *key;
	enum ftype type;
	unsigned flags;
	const struct field *sub; /* F_OBJ, F_ARR: fields of the object(s) */
};

static const struct field by_f[] = {
	{"cpu", F_STR, 0, NULL}, {"gpus", F_STR, 0, NULL}, {"fabric", F_STR, 0, NULL}, {NULL}};
static const struct field cpu_f[] = {{"sockets", F_INT, 0, NULL},
				     {"cores", F_INT, 0, NULL},
				     {"threads", F_INT, 0, NULL},
				     {"model", F_STR, 0, NULL},
				     {NULL}};
static const struct field numa_f[] = {
	{"node", F_INT, F_REQ, NULL}, {"cpus", F_STR, 0, NULL}, {"memory_mb", F_INT, 0, NULL}, {NULL}};
static const struct field gpu_f[] = {{"name", F_STR, 0, NULL},	   {"pci_bus_id", F_STR, 0, NULL},
				     {"memory_mb", F_INT, 0, NULL}, {"numa_node", F_INT, 0, NULL},
				     {"cpus", F_STR, 0, NULL},	   {"nvlinks", F_INT, 0, NULL},
				     {NULL}};
static const struct field prov_f[] = {
	{"provider", F_STR, F_REQ, NULL}, {"domain", F_STR, F_REQ, NULL}, {NULL}};
static const struct field nic_f[] = {{"name", F_STR, F_REQ, NULL},
				     {"pci_bus_id", F_STR, 0, NULL},
				     {"numa_node", F_INT, 0, NULL},
				     {"speed_mbps", F_INT, 0, NULL},
				     {"efa", F_BOOL, 0, NULL},
				     {"ib_device", F_STR, 0, NULL},
				     {"providers", F_ARR, 0, prov_f},
				     {NULL}};
static const struct field top_f[] = {{"schema", F_INT, F_REQ, NULL},
				     {"host", F_STR, 0, NULL},
				     {"discovered_by", F_OBJ, 0, by_f},
				     {"cpu", F_OBJ, 0, cpu_f},
				     {"numa", F_ARR, 0, numa_f},
				     {"gpus", F_ARR, 0, gpu_f},
				     {"nics", F_ARR, 0, nic_f},
				     {"gpu_links", F_MATRIX, 0, NULL},
				     {"gpu_nic", F_MATRIX, 0, NULL},
				     {NULL}};

static const char *const relations[] = {"X", "PIX", "PXB", "PHB", "NODE", "SYS"};

int sd_topo_relation_rank(const char *rel)
{
	if (rel == NULL)
		return 7;
	if (strncmp(rel, "NV", 2) == 0)
		return 0;
	for (int i = 0; i < 6; i++)
		if (strcmp(rel, relations[i]) == 0)
			return i;
	return 7;
}

static int valid_relation(const char *s)
{
	char *end;
	long n;

	if (strncmp(s, "NV", 2) == 0) {
		n = strtol(s + 2, &end, 10);
		return end != s + 2 && *end == '\0' && n > 0 && n < 1000;
	}
	return sd_topo_relation_rank(s) < 7;
}

static char *json_text(const cJSON *v)
{
	char *s = v ? cJSON_PrintUnformatted(v) : NULL;

	return s ? s : strdup("(nothing)");
}

static int bad(const char *path, const char *what, const cJSON *v)
{
	char *t = json_text(v);

	sd_err_set(&topo_err, SMDDP_ECONFIG, "%s: expected %s, found %.60s%s", path, what, t,
		   strlen(t) > 60 ? "..." : "");
	free(t);
	return SMDDP_ECONFIG;
}

static int normalize_obj(const struct field *spec, const cJSON *in, const char *path, cJSON **out);

static int normalize_field(const struct field *f, const cJSON *v, const char *path, cJSON **out)
{
	*out = NULL;
	switch (f->type) {
	case F_INT:
		if (v == NULL || cJSON_IsNull(v)) {
			if (f->flags & F_REQ)
				return bad(path, "a whole number", v);
			*out = cJSON_CreateNull();
		} else if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9.0e15 ||
			   v->valuedouble != (double)(long long)v->valuedouble) {
			return bad(path, (f->flags & F_REQ) ? "a whole number" : "a whole number or null",
				   v);
		} else {
			*out = cJSON_CreateNumber(v->valuedouble);
		}
		break;
	case F_STR:
		if (v == NULL || cJSON_IsNull(v)) {
			if (f->flags & F_REQ)
				return bad(path, "a string", v);
			*out = cJSON_CreateNull();
		} else if (!cJSON_IsString(v) || ((f->flags & F_REQ) && *v->valuestring == '\0')) {
			return bad(path, (f->flags & F_REQ) ? "a non-empty string" : "a string or null",
				   v);
		} else {
			*out = cJSON_CreateString(v->valuestring);
		}
		break;
	case F_BOOL:
		if (v != NULL && !cJSON_IsBool(v))
			return bad(path, "true or false", v);
		*out = cJSON_CreateBool(v != NULL && cJSON_IsTrue(v));
		break;
	case F_OBJ:
		if (v != NULL && !cJSON_IsObject(v))
			return bad(path, "an object", v);
		return normalize_obj(f->sub, v, path, out);
	case F_ARR: {
		const cJSON *e;
		int i = 0;

		if (v != NULL && !cJSON_IsArray(v))
			return bad(path, "an array", v);
		*out = cJSON_CreateArray();
		if (*out == NULL)
			break;
		cJSON_ArrayForEach(e, v)
		{
			char p[256];
			cJSON *o;
			int rc;

			snprintf(p, sizeof(p), "%s[%d]", path, i++);
			if (!cJSON_IsObject(e)) {
				cJSON_Delete(*out);
				*out = NULL;
				return bad(p, "an object", e);
			}
			rc = normalize_obj(f->sub, e, p, &o);
			if (rc != SMDDP_OK) {
				cJSON_Delete(*out);
				*out = NULL;
				return rc;
			}
			cJSON_AddItemToArray(*out, o);
		}
		break;
	}
	case F_MATRIX:
		return SMDDP_EINTERNAL; /* checked by normalize_matrix() */
	}
	if (*out == NULL)
		return sd_err_set(&topo_err, SMDDP_ENOMEM, "out of memory");
	return SMDDP_OK;
}

static int normalize_obj(const struct field *spec, const cJSON *in, const char *path, cJSON **out)
{
	cJSON *o = cJSON_CreateObject();
	const cJSON *e;
	int rc = SMDDP_OK;

	*out = NULL;
	if (o == NULL)
		return sd_err_set(&topo_err, SMDDP_ENOMEM, "out of memory");
	/* Unknown keys are refused: a misspelt "numa_nod" would otherwise
	 * leave the field null without a word. */
	cJSON_ArrayForEach(e, in)
	{
		const struct field *f = spec;

		while (f->key != NULL && strcmp(f->key, e->string) != 0)
			f++;
		if (f->key == NULL) {
			rc = sd_err_set(&topo_err, SMDDP_ECONFIG, "%s%s\"%s\": unknown key", path,
					*path ? ": " : "", e->string);
			goto out;
		}
	}
	for (const struct field *f = spec; f->key != NULL; f++) {
		char p[256];
		cJSON *v;

		if (f->type == F_MATRIX)
			continue;
		snprintf(p, sizeof(p), "%s%s%s", path, *path ? "." : "", f->key);
		rc = normalize_field(f, in ? cJSON_GetObjectItemCaseSensitive(in, f->key) : NULL, p, &v);
		if (rc != SMDDP_OK)
			goto out;
		cJSON_AddItemToObject(o, f->key, v);
	}
out:
	if (rc != SMDDP_OK) {
		cJSON_Delete(o);
		return rc;
	}
	*out = o;
	return SMDDP_OK;
}

/* rows x cols of relations; absent: X on the diagonal (square), SYS (no
 * known locality) elsewhere. */
static int normalize_matrix(const char *key, const cJSON *in, int rows, int cols, int square,
			    cJSON **out)
{
	cJSON *m = cJSON_CreateArray();

	*out = NULL;
	if (m == NULL)
		return SMDDP_ENOMEM;
	if (in != NULL && (!cJSON_IsArray(in) || cJSON_GetArraySize(in) != rows)) {
		char what[64];

		cJSON_Delete(m);
		snprintf(what, sizeof(what), "an array of %d rows (one per GPU)", rows);
		return bad(key, what, in);
	}
	for (int i = 0; i < rows; i++) {
		const cJSON *row = in ? cJSON_GetArrayItem(in, i) : NULL;
		cJSON *r = cJSON_CreateArray();
		char p[64];

		cJSON_AddItemToArray(m, r);
		snprintf(p, sizeof(p), "%s[%d]", key, i);
		if (in != NULL && (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != cols)) {
			char what[64];

			cJSON_Delete(m);
			snprintf(what, sizeof(what), "an array of %d relations", cols);
			return bad(p, what, row);
		}
		for (int j = 0; j < cols; j++) {
			const cJSON *v = row ? cJSON_GetArrayItem(row, j) : NULL;
			const char *s = square && i == j ? "X" : "SYS";

			if (in != NULL) {
				char pj[80];

				snprintf(pj, sizeof(pj), "%s[%d]", p, j);
				if (!cJSON_IsString(v) || !valid_relation(v->valuestring) ||
				    (strcmp(v->valuestring, "X") == 0) != (square && i == j)) {
					cJSON_Delete(m);
					return bad(pj,
						   square && i == j
							   ? "\"X\" (a GPU to itself)"
							   : "NV<links>, PIX, PXB, PHB, NODE or SYS",
						   v);
				}
				s = v->valuestring;
			}
			cJSON_AddItemToArray(r, cJSON_CreateString(s));
		}
	}
	*out = m;
	return SMDDP_OK;
}

int sd_topo_normalize(const cJSON *in, cJSON **out)
{
	const cJSON *schema;
	cJSON *t = NULL, *m;
	int rc, ngpus, nnics;

	if (!cJSON_IsObject(in))
		return sd_err_set(&topo_err, SMDDP_ECONFIG,
				  "expected a JSON object (a topology of schema %d)",
				  SD_TOPO_SCHEMA);
	schema = cJSON_GetObjectItemCaseSensitive(in, "schema");
	if (schema == NULL)
		return sd_err_set(&topo_err, SMDDP_ECONFIG,
				  "no \"schema\": %d: not a topology file", SD_TOPO_SCHEMA);
	if (!cJSON_IsNumber(schema) || schema->valuedouble != SD_TOPO_SCHEMA) {
		char *s = json_text(schema);

		sd_err_set(&topo_err, SMDDP_ECONFIG,
			   "\"schema\": %s is not supported (this libsmddp reads schema %d)", s,
			   SD_TOPO_SCHEMA);
		free(s);
		return SMDDP_ECONFIG;
	}
	rc = normalize_obj(top_f, in, "", &t);
	if (rc != SMDDP_OK)
		return rc;
	ngpus = cJSON_GetArraySize(cJSON_GetObjectItem(t, "gpus"));
	nnics = cJSON_GetArraySize(cJSON_GetObjectItem(t, "nics"));
	rc = normalize_matrix("gpu_links", cJSON_GetObjectItemCaseSensitive(in, "gpu_links"), ngpus,
			      ngpus, 1, &m);
	if (rc != SMDDP_OK)
		goto fail;
	cJSON_AddItemToObject(t, "gpu_links", m);
	rc = normalize_matrix("gpu_nic", cJSON_GetObjectItemCaseSensitive(in, "gpu_nic"), ngpus,
			      nnics, 0, &m);
	if (rc != SMDDP_OK)
		goto fail;
	cJSON_AddItemToObject(t, "gpu_nic", m);
	*out = t;
	return SMDDP_OK;
fail:
	cJSON_Delete(t);
	return rc;
}

/* ---- files ------------------------------------------------------------- */

/* Reads and parses a JSON file; the error names the file and the line. */
static int parse_file(const char *path, cJSON **out)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	const char *where;
	cJSON *j;

	if (f == NULL) {
		return sd_err_set(&topo_err, errno == ENOMEM ? SMDDP_ENOMEM : SMDDP_ECONFIG, "%s: %s",
				  path, strerror(errno));
	}
	for (;;) {
		size_t n;

		if (cap - len < 4096) {
			char *nb;

			if (cap > (64u << 20)) {
				sd_err_set(&topo_err, SMDDP_ECONFIG,
					   "%s: larger than 64 MiB: not a topology file", path);
				free(buf);
				fclose(f);
				return SMDDP_ECONFIG;
			}
			nb = realloc(buf, cap = cap ? cap * 2 : 16384);
			if (nb == NULL) {
				free(buf);
				fclose(f);
				return sd_err_set(&topo_err, SMDDP_ENOMEM, "out of memory");
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		SD_SYS_ERR(&topo_err, SMDDP_ECONFIG, "%s", path);
		free(buf);
		fclose(f);
		return SMDDP_ECONFIG;
	}
	fclose(f);
	buf[len] = '\0';
	j = cJSON_ParseWithOpts(buf, &where, 1);
	if (j == NULL) {
		int line = 1;

		where = where ? where : cJSON_GetErrorPtr();
		for (const char *p = buf; where != NULL && p < where && *p; p++)
			line += *p == '\n';
		if (len == 0)
			sd_err_set(&topo_err, SMDDP_ECONFIG, "%s: empty file: not a topology file", path);
		else
			sd_err_set(&topo_err, SMDDP_ECONFIG, "%s: line %d: not valid JSON", path, line);
		free(buf);
		return SMDDP_ECONFIG;
	}
	free(buf);
	*out = j;
	return SMDDP_OK;
}

static int wrap(cJSON *root, struct smddp_topo **out)
{
	struct smddp_topo *t = calloc(1, sizeof(*t));

	if (t == NULL) {
		cJSON_Delete(root);
		return sd_err_set(&topo_err, SMDDP_ENOMEM, "out of memory");
	}
	t->root = root;
	*out = t;
	return SMDDP_OK;
}

SD_EXPORT int smddp_topo_discover(const char *sysroot, struct smddp_topo **out)
{
	cJSON *root;
	int rc;

	if (out == NULL)
		return sd_err_set(&topo_err, SMDDP_EINVAL, "smddp_topo_discover: out is NULL");
	*out = NULL;
	sd_log_init();
	sd_err_clear(&topo_err);
	rc = sd_topo_discover(sysroot, &root, &topo_err);
	if (rc != SMDDP_OK)
		return rc;
	return wrap(root, out);
}

SD_EXPORT int smddp_topo_parse(const char *json, struct smddp_topo **out)
{
	cJSON *in, *root;
	int rc;

	if (out == NULL || json == NULL)
		return sd_err_set(&topo_err, SMDDP_EINVAL, "smddp_topo_parse: NULL argument");
	*out = NULL;
	sd_err_clear(&topo_err);
	in = cJSON_Parse(json);
	if (in == NULL)
		return sd_err_set(&topo_err, SMDDP_ECONFIG, "not valid JSON");
	rc = sd_topo_normalize(in, &root);
	cJSON_Delete(in);
	if (rc != SMDDP_OK)
		return rc;
	return wrap(root, out);
}

SD_EXPORT int smddp_topo_load(const char *path, struct smddp_topo **out)
{
	cJSON *in, *root;
	int rc;

	if (out == NULL || path == NULL)
		return sd_err_set(&topo_err, SMDDP_EINVAL, "smddp_topo_load: NULL argument");
	*out = NULL;
	sd_err_clear(&topo_err);
	rc = parse_file(path, &in);
	if (rc != SMDDP_OK)
		return rc;
	rc = sd_topo_normalize(in, &root);
	cJSON_Delete(in);
	if (rc != SMDDP_OK)
		return sd_err_set(&topo_err, rc, "%s: %s", path, topo_err.msg);
	return wrap(root, out);
}

SD_EXPORT int smddp_topo_get(struct smddp_topo **out)
{
	const char *file;
	int rc;

	if (out == NULL)
		return sd_err_set(&topo_err, SMDDP_EINVAL, "smddp_topo_get: out is NULL");
	*out = NULL;
	sd_log_init();
	rc = sd_params_load(&topo_err);
	if (rc != SMDDP_OK)
		return rc;
	file = sd_param_str("SMDDP_TOPO_FILE");
	if (*file != '\0') {
		rc = smddp_topo_load(file, out);
		if (rc != SMDDP_OK)
			return sd_err_set(&topo_err, rc, "SMDDP_TOPO_FILE: %s", topo_err.msg);
		SD_INFO(SD_SUB_INIT, "topology from SMDDP_TOPO_FILE=%s (%s)", file,
			sd_param_source("SMDDP_TOPO_FILE"));
		return SMDDP_OK;
	}
	rc = smddp_topo_discover(NULL, out);
	if (rc == SMDDP_OK)
		SD_INFO(SD_SUB_INIT, "topology discovered: %d GPUs, %d NICs, %d NUMA nodes",
			smddp_topo_num_gpus(*out), smddp_topo_num_nics(*out),
			smddp_topo_num_numa(*out));
	return rc;
}

/* One topology per process for the library's own use (communicators):
 * discovery costs NVML and fi_getinfo, and the node does not change. */
static pthread_once_t shared_once = PTHREAD_ONCE_INIT;
static struct smddp_topo *shared_topo;
static int shared_rc;
static struct sd_err shared_err;

static void shared_init(void)
{
	shared_rc = smddp_topo_get(&shared_topo);
	if (shared_rc != SMDDP_OK)
		shared_err = topo_err;
}

int sd_topo_shared(const struct smddp_topo **out)
{
	pthread_once(&shared_once, shared_init);
	if (shared_rc != SMDDP_OK) {
		*out = NULL;
		return sd_err_set(&topo_err, shared_rc, "%s", shared_err.msg);
	}
	*out = shared_topo;
	return SMDDP_OK;
}

SD_EXPORT void smddp_topo_free(struct smddp_topo *t)
{
	if (t == NULL)
		return;
	cJSON_Delete(t->root);
	free(t);
}

static int is_scalar(const cJSON *v)
{
	return !cJSON_IsArray(v) && !cJSON_IsObject(v);
}

/* Two-space indents, one field per line, arrays of scalars (matrix rows)
 * on one line: a file that people read, diff and edit by hand. */
static int emit(FILE *f, const cJSON *v, int depth)
{
	const cJSON *e;
	int flat = 1, first = 1;

	if (is_scalar(v)) {
		char *s = cJSON_PrintUnformatted(v);

		if (s == NULL)
			return -1;
		fputs(s, f);
		cJSON_free(s);
		return 0;
	}
	if (v->child == NULL) {
		fputs(cJSON_IsArray(v) ? "[]" : "{}", f);
		return 0;
	}
	if (cJSON_IsArray(v)) {
		cJSON_ArrayForEach(e, v) flat &= is_scalar(e);
	} else {
		flat = 0;
	}
	fputc(cJSON_IsArray(v) ? '[' : '{', f);
	cJSON_ArrayForEach(e, v)
	{
		fputs(first ? "" : ",", f);
		first = 0;
		if (flat)
			fputs(e == v->child ? "" : " ", f);
		else
			fprintf(f, "\n%*s", 2 * (depth + 1), "");
		if (cJSON_IsObject(v)) {
			char *k = cJSON_PrintUnformatted(&(cJSON){.type = cJSON_String,
								  .valuestring = e->string});

			if (k == NULL)
				return -1;
			fprintf(f, "%s: ", k);
			cJSON_free(k);
		}
		if (emit(f, e, depth + 1) != 0)
			return -1;
	}
	if (!flat)
		fprintf(f, "\n%*s", 2 * depth, "");
	fputc(cJSON_IsArray(v) ? ']' : '}', f);
	return 0;
}

SD_EXPORT int smddp_topo_json(const struct smddp_topo *t, char **json)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int bad;

	if (t == NULL || json == NULL)
		return sd_err_set(&topo_err, SMDDP_EINVAL, "smddp_topo_json: NULL argument");
	f = open_memstream(&buf, &len);
	if (f == NULL)
		return sd_err_set(&topo_err, SMDDP_ENOMEM, "out of memory");
	bad = emit(f, t->root, 0) != 0;
	fputc('\n', f);
	bad |= ferror(f) != 0;
	bad |= fclose(f) != 0;
	if (bad) {
		free(buf);
		return sd_err_set(&topo_err, SMDDP_ENOMEM, "out of memory");
	}
	*json = buf;
	return SMDDP_OK;
}

SD_EXPORT int smddp_topo_compare(const struct smddp_topo *have, const char *expect_path,
				 char **report, int *ndiff)
{
	cJSON *exp;
	int rc;

	if (have == NULL || expect_path == NULL || report == NULL || ndiff == NULL)
		return sd_err_set(&topo_err, SMDDP_EINVAL, "smddp_topo_compare: NULL argument");
	*report = NULL;
	*ndiff = 0;
	sd_err_clear(&topo_err);
	rc = parse_file(expect_path, &exp);
	if (rc != SMDDP_OK)
		return rc;
	rc = sd_topo_compare_tree(have->root, exp, report, ndiff, &topo_err);
	cJSON_Delete(exp);
	if (rc != SMDDP_OK)
		sd_err_set(&topo_err, rc, "%s: %s", expect_path, topo_err.msg);
	return rc;
}

/* ---- accessors ---------------------------------------------------------- */

static const cJSON *item(const struct smddp_topo *t, const char *arr, int i)
{
	if (t == NULL || i < 0)
		return NULL;
	return cJSON_GetArrayItem(cJSON_GetObjectItem(t->root, arr), i);
}

static int count(const struct smddp_topo *t, const char *arr)
{
	return t ? cJSON_GetArraySize(cJSON_GetObjectItem(t->root, arr)) : 0;
}

static int int_of(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(o, key);

	return cJSON_IsNumber(v) ? v->valueint : -1;
}

static const char *str_of(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(o, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

SD_EXPORT int smddp_topo_num_gpus(const struct smddp_topo *t)
{
	return count(t, "gpus");
}

SD_EXPORT int smddp_topo_num_nics(const struct smddp_topo *t)
{
	return count(t, "nics");
}

SD_EXPORT int smddp_topo_num_numa(const struct smddp_topo *t)
{
	return count(t, "numa");
}

SD_EXPORT const char *smddp_topo_gpu_bus_id(const struct smddp_topo *t, int gpu)
{
	return str_of(item(t, "gpus", gpu), "pci_bus_id");
}

SD_EXPORT int smddp_topo_gpu_numa(const struct smddp_topo *t, int gpu)
{
	return int_of(item(t, "gpus", gpu), "numa_node");
}

SD_EXPORT const char *smddp_topo_nic_name(const struct smddp_topo *t, int nic)
{
	return str_of(item(t, "nics", nic), "name");
}

SD_EXPORT int smddp_topo_nic_numa(const struct smddp_topo *t, int nic)
{
	return int_of(item(t, "nics", nic), "numa_node");
}

SD_EXPORT int smddp_topo_nic_is_efa(const struct smddp_topo *t, int nic)
{
	return cJSON_IsTrue(cJSON_GetObjectItem(item(t, "nics", nic), "efa"));
}

static int is_rdma(const struct smddp_topo *t, int nic)
{
	return cJSON_IsString(cJSON_GetObjectItem(item(t, "nics", nic), "ib_device"));
}

/* The NICs gpu should use: the closest, among the RDMA ones (EFA,
 * InfiniBand, RoCE) where the node has some, since the plain Ethernet NIC
 * beside them (ENA, the management port) is not the data path.  Returns the
 * set, a bit per NIC of the first 64. */
static void best_nics(const struct smddp_topo *t, int gpu, unsigned long long *set)
{
	const cJSON *row = cJSON_GetArrayItem(cJSON_GetObjectItem(t->root, "gpu_nic"), gpu);
	int n = smddp_topo_num_nics(t), rdma = 0, best = 8;

	for (int k = 0; k < n; k++)
		rdma |= is_rdma(t, k);
	*set = 0;
	for (int k = 0; k < n && k < 64; k++) {
		const cJSON *r = cJSON_GetArrayItem(row, k);
		int rank = sd_topo_relation_rank(cJSON_IsString(r) ? r->valuestring : NULL);

		if (rdma && !is_rdma(t, k))
			continue;
		if (rank < best) {
			best = rank;
			*set = 0;
		}
		if (rank == best)
			*set |= 1ull << k;
	}
}

SD_EXPORT int smddp_topo_gpu_nic(const struct smddp_topo *t, int gpu)
{
	unsigned long long set, other;
	int nth = 0, nset;

	if (t == NULL || gpu < 0 || gpu >= smddp_topo_num_gpus(t))
		return -1;
	best_nics(t, gpu, &set);
	if (set == 0)
		return -1;
	/* GPUs that share the same closest NICs take turns over them. */
	for (int g = 0; g < gpu; g++) {
		best_nics(t, g, &other);
		nth += other == set;
	}
	nset = __builtin_popcountll(set);
	nth %= nset;
	for (int k = 0; k < 64; k++)
		if ((set >> k) & 1 && nth-- == 0)
			return k;
	return -1;
}
