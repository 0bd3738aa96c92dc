/* config.c - reads the JSON config file (SMDDP_CONFIG, /etc/smddp.json) into the registry.
 *
 * The file is one JSON object whose keys are the parameters' config keys
 * ("timeout", "shm_chunk", ...).  It is checked strictly, all of it, before
 * any process starts talking to its peers: a typo or a wrong type is
 * SMDDP_ECONFIG with a sentence naming the file, the key and what was
 * expected, never a silently ignored setting.  Values are turned into text
 * and handed to param.c, which owns the ranges and stores them, so a value
 * means the same in the file as in the environment.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "util/sd.h"
#include "config/sd_config.h"

#define MAX_CONFIG_BYTES (1 << 20)

static const char *json_type(const cJSON *v)
{
	if (cJSON_IsNumber(v))
		return "a number";
	if (cJSON_IsString(v))
		return "a string";
	if (cJSON_IsBool(v))
		return v->type & cJSON_True ? "true" : "false";
	if (cJSON_IsNull(v))
		return "null";
	if (cJSON_IsArray(v))
		return "an array";
	if (cJSON_IsObject(v))
		return "an object";
	return "an unknown value";
}

/* The key an env-only parameter would have, to say why it is refused. */
static void derived_key(const char *name, char *out, size_t outlen)
{
	size_t n = 0;

	if (strncmp(name, "SMDDP_", 6) == 0)
		name += 6;
	for (; *name != '\0' && n + 1 < outlen; name++)
		out[n++] = (char)tolower((unsigned char)*name);
	out[n] = '\0';
}

size_t sd_config_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[64];

	if (lb >= sizeof(row) / sizeof(row[0]) || la >= 64)
		return (size_t)-1;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (tolower((unsigned char)a[i - 1]) !=
					      tolower((unsigned char)b[j - 1]));

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

static void unknown_key(const char *path, const char *key, char *err, size_t errlen)
{
	char known[512] = "", hint[128] = "";
	size_t n = 0, best = 3; /* suggest within two edits */

	for (size_t i = 0; i < sd_param_count(); i++) {
		const struct sd_param_info *p = sd_param_at(i);
		size_t d;
		int k;

		if (p->key == NULL)
			continue;
		k = snprintf(known + n, sizeof(known) - n, "%s%s", n ? ", " : "", p->key);
		if (k > 0 && (size_t)k < sizeof(known) - n)
			n += (size_t)k;
		/* SMDDP_TIMEOUT in a file means timeout. */
		d = strcasecmp(key, p->name) == 0 ? 0 : sd_config_edit_distance(key, p->key);
		if (d < best) {
			best = d;
			snprintf(hint, sizeof(hint), "did you mean \"%s\"? ", p->key);
		}
	}
	snprintf(err, errlen, "%s: unknown key \"%s\" (%sknown keys: %s)", path, key, hint, known);
}

static const struct sd_param_info *by_key(const char *key, int *env_only)
{
	char k[64];

	*env_only = 0;
	for (size_t i = 0; i < sd_param_count(); i++) {
		const struct sd_param_info *p = sd_param_at(i);

		if (p->key != NULL) {
			if (strcmp(p->key, key) == 0)
				return p;
			continue;
		}
		derived_key(p->name, k, sizeof(k));
		if (strcmp(k, key) == 0 || strcmp(p->name, key) == 0) {
			*env_only = 1;
			return p;
		}
	}
	return NULL;
}

/* JSON value -> the text the environment would hold; NULL with a reason. */
static const char *value_text(const struct sd_param_info *p, const cJSON *v, char *buf,
			      size_t buflen, char *why, size_t whylen)
{
	switch (p->type) {
	case SD_PARAM_INT:
	case SD_PARAM_SIZE:
		if (cJSON_IsNumber(v)) {
			double d = v->valuedouble;

			if (!(d >= -9.2e18 && d <= 9.2e18) || d != (double)(long long)d) {
				snprintf(why, whylen, "expected an integer, got %g", d);
				return NULL;
			}
			if (p->type == SD_PARAM_SIZE && d < 0) {
				snprintf(why, whylen, "expected a size like 512K or 4M, got %.0f", d);
				return NULL;
			}
			snprintf(buf, buflen, "%lld", (long long)d);
			return buf;
		}
		if (p->type == SD_PARAM_SIZE && cJSON_IsString(v))
			return v->valuestring;
		snprintf(why, whylen, "expected a number%s, got %s",
			 p->type == SD_PARAM_SIZE ? " or a string like \"512K\"" : "", json_type(v));
		return NULL;
	case SD_PARAM_BOOL:
		if (cJSON_IsBool(v))
			return cJSON_IsTrue(v) ? "1" : "0";
		snprintf(why, whylen, "expected true or false, got %s", json_type(v));
		return NULL;
	case SD_PARAM_STR:
	case SD_PARAM_ENUM:
		if (cJSON_IsString(v))
			return v->valuestring;
		snprintf(why, whylen, "expected a string, got %s", json_type(v));
		return NULL;
	}
	snprintf(why, whylen, "unsupported parameter type");
	return NULL;
}

/* Reads all of path into a NUL-terminated buffer; 1 when it does not exist. */
static int slurp(const char *path, int must_exist, char **out, size_t *outlen, char *err,
		 size_t errlen)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int fd, rc = -1;

	fd = SD_RETRY_EINTR(open(path, O_RDONLY | O_CLOEXEC));
	if (fd < 0) {
		if (errno == ENOENT && !must_exist)
			return 1;
		snprintf(err, errlen, "%s: cannot open the config file: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		snprintf(err, errlen, "%s: cannot stat the config file: %s", path, strerror(errno));
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s: cannot read the config file: %s", path,
			 strerror(EISDIR));
		goto out;
	}
	buf = malloc(MAX_CONFIG_BYTES + 1);
	if (buf == NULL) {
		snprintf(err, errlen, "%s: out of memory reading the config file", path);
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, MAX_CONFIG_BYTES + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(err, errlen, "%s: cannot read the config file: %s", path,
				 strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > MAX_CONFIG_BYTES) {
			snprintf(err, errlen, "%s: config file larger than %d bytes", path,
				 MAX_CONFIG_BYTES);
			goto out;
		}
	}
	buf[len] = '\0';
	*out = buf;
	*outlen = len;
	buf = NULL;
	rc = 0;
out:
	free(buf);
	close(fd);
	return rc;
}

static void where(const char *buf, size_t off, int *line, int *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off && buf[i] != '\0'; i++) {
		if (buf[i] == '\n') {
			(*line)++;
			*col = 1;
		} else {
			(*col)++;
		}
	}
}

int sd_config_read(const char *path, int must_exist, char *err, size_t errlen)
{
	char *buf = NULL;
	size_t len = 0;
	const char *end = NULL;
	cJSON *root = NULL, *item;
	int rc;

	rc = slurp(path, must_exist, &buf, &len, err, errlen);
	if (rc != 0)
		return rc;
	rc = -1;
	if (strlen(buf) != len) {
		int line, col;

		where(buf, strlen(buf), &line, &col);
		snprintf(err, errlen, "%s: invalid JSON: NUL byte at line %d column %d", path, line,
			 col);
		goto out;
	}
	if (strspn(buf, " \t\r\n") == len) {
		snprintf(err, errlen, "%s: empty file; expected a JSON object like {\"timeout\": 600}",
			 path);
		goto out;
	}
	root = cJSON_ParseWithOpts(buf, &end, 1);
	if (root == NULL) {
		int line, col;
		size_t off = end != NULL && end >= buf && end <= buf + len ? (size_t)(end - buf) : 0;

		where(buf, off, &line, &col);
		snprintf(err, errlen, "%s: invalid JSON near line %d column %d", path, line, col);
		goto out;
	}
	if (!cJSON_IsObject(root)) {
		snprintf(err, errlen, "%s: expected a JSON object like {\"timeout\": 600}, got %s",
			 path, json_type(root));
		goto out;
	}
	cJSON_ArrayForEach(item, root)
	{
		const struct sd_param_info *p;
		const char *text;
		char num[32], why[256];
		int env_only;

		for (cJSON *prev = root->child; prev != item; prev = prev->next) {
			if (strcmp(prev->string, item->string) == 0) {
				snprintf(err, errlen, "%s: key \"%s\" appears more than once", path,
					 item->string);
				goto out;
			}
		}
		p = by_key(item->string, &env_only);
		if (p == NULL) {
			unknown_key(path, item->string, err, errlen);
			goto out;
		}
		if (env_only) {
			snprintf(err, errlen,
				 "%s: key \"%s\": %s cannot be set in a config file; set it in the "
				 "environment",
				 path, item->string, p->name);
			goto out;
		}
		text = value_text(p, item, num, sizeof(num), why, sizeof(why));
		if (text == NULL) {
			snprintf(err, errlen, "%s: key \"%s\": %s", path, item->string, why);
			goto out;
		}
		if (sd_param_set_config(p, text, why, sizeof(why)) != 0) {
			snprintf(err, errlen, "%s: key \"%s\": %s, got %s%s%s", path, item->string,
				 why, cJSON_IsString(item) ? "\"" : "", text,
				 cJSON_IsString(item) ? "\"" : "");
			goto out;
		}
	}
	rc = 0;
out:
	cJSON_Delete(root);
	free(buf);
	return rc;
}
