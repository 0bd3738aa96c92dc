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
#include "text/editdist.h"

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

static int unknown_key(const struct sd_config_registry *reg, const char *path, const char *key,
		       struct sd_err *err)
{
	char known[512] = "", hint[128] = "";
	size_t n = 0, best = 3; /* suggest within two edits */

	for (size_t i = 0; i < reg->count(); i++) {
		const struct sd_param_info *p = reg->at(i);
		size_t d;
		int k;

		if (p->key == NULL)
			continue;
		k = snprintf(known + n, sizeof(known) - n, "%s%s", n ? ", " : "", p->key);
		if (k > 0 && (size_t)k < sizeof(known) - n)
			n += (size_t)k;
		/* SMDDP_TIMEOUT in a file means timeout. */
		d = strcasecmp(key, p->name) == 0 ? 0 : sd_text_edit_distance(key, p->key);
		if (d < best) {
			best = d;
			snprintf(hint, sizeof(hint), "did you mean \"%s\"? ", p->key);
		}
	}
	return sd_err_set(err, SMDDP_ECONFIG, "%s: unknown key \"%s\" (%sknown keys: %s)", path,
			  key, hint, known);
}

static const struct sd_param_info *by_key(const struct sd_config_registry *reg, const char *key,
					  int *env_only)
{
	char k[64];

	*env_only = 0;
	for (size_t i = 0; i < reg->count(); i++) {
		const struct sd_param_info *p = reg->at(i);

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

/* JSON value -> the text the environment would hold; NULL with the reason in why. */
static const char *value_text(const struct sd_param_info *p, const cJSON *v, char *buf,
			      size_t buflen, struct sd_err *why)
{
	switch (p->type) {
	case SD_PARAM_INT:
	case SD_PARAM_SIZE:
		if (cJSON_IsNumber(v)) {
			double d = v->valuedouble;

			if (!(d >= -9.2e18 && d <= 9.2e18) || d != (double)(long long)d) {
				sd_err_set(why, SMDDP_ECONFIG, "expected an integer, got %g", d);
				return NULL;
			}
			if (p->type == SD_PARAM_SIZE && d < 0) {
				sd_err_set(why, SMDDP_ECONFIG,
					   "expected a size like 512K or 4M, got %.0f", d);
				return NULL;
			}
			snprintf(buf, buflen, "%lld", (long long)d);
			return buf;
		}
		if (p->type == SD_PARAM_SIZE && cJSON_IsString(v))
			return v->valuestring;
		sd_err_set(why, SMDDP_ECONFIG, "expected a number%s, got %s",
			   p->type == SD_PARAM_SIZE ? " or a string like \"512K\"" : "",
			   json_type(v));
		return NULL;
	case SD_PARAM_BOOL:
		if (cJSON_IsBool(v))
			return cJSON_IsTrue(v) ? "1" : "0";
		sd_err_set(why, SMDDP_ECONFIG, "expected true or false, got %s", json_type(v));
		return NULL;
	case SD_PARAM_STR:
	case SD_PARAM_ENUM:
		if (cJSON_IsString(v))
			return v->valuestring;
		sd_err_set(why, SMDDP_ECONFIG, "expected a string, got %s", json_type(v));
		return NULL;
	}
	sd_err_set(why, SMDDP_ECONFIG, "unsupported parameter type");
	return NULL;
}

/* Reads all of path into a NUL-terminated buffer; *out stays NULL when it
 * does not exist and need not. */
static int slurp(const char *path, int must_exist, char **out, size_t *outlen, struct sd_err *err)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int fd, rc = SMDDP_ECONFIG;

	*out = NULL;
	fd = SD_RETRY_EINTR(open(path, O_RDONLY | O_CLOEXEC));
	if (fd < 0) {
		if (errno == ENOENT && !must_exist)
			return SMDDP_OK;
		return sd_err_set(err, SMDDP_ECONFIG, "%s: cannot open the config file: %s", path,
				  strerror(errno));
	}
	if (fstat(fd, &st) != 0) {
		sd_err_set(err, SMDDP_ECONFIG, "%s: cannot stat the config file: %s", path,
			   strerror(errno));
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		sd_err_set(err, SMDDP_ECONFIG, "%s: cannot read the config file: %s", path,
			   strerror(EISDIR));
		goto out;
	}
	buf = malloc(MAX_CONFIG_BYTES + 1);
	if (buf == NULL) {
		sd_err_set(err, SMDDP_ECONFIG, "%s: out of memory reading the config file", path);
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, MAX_CONFIG_BYTES + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			sd_err_set(err, SMDDP_ECONFIG, "%s: cannot read the config file: %s", path,
				   strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > MAX_CONFIG_BYTES) {
			sd_err_set(err, SMDDP_ECONFIG, "%s: config file larger than %d bytes", path,
				   MAX_CONFIG_BYTES);
			goto out;
		}
	}
	buf[len] = '\0';
	*out = buf;
	*outlen = len;
	buf = NULL;
	rc = SMDDP_OK;
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

int sd_config_read(const char *path, int must_exist, const struct sd_config_registry *reg,
		   int *found, struct sd_err *err)
{
	char *buf = NULL;
	size_t len = 0;
	const char *end = NULL;
	cJSON *root = NULL, *item;
	int rc;

	*found = 0;
	rc = slurp(path, must_exist, &buf, &len, err);
	if (rc != SMDDP_OK || buf == NULL)
		return rc;
	*found = 1;
	rc = SMDDP_ECONFIG;
	if (strlen(buf) != len) {
		int line, col;

		where(buf, strlen(buf), &line, &col);
		sd_err_set(err, SMDDP_ECONFIG, "%s: invalid JSON: NUL byte at line %d column %d",
			   path, line, col);
		goto out;
	}
	if (strspn(buf, " \t\r\n") == len) {
		sd_err_set(err, SMDDP_ECONFIG,
			   "%s: empty file; expected a JSON object like {\"timeout\": 600}", path);
		goto out;
	}
	root = cJSON_ParseWithOpts(buf, &end, 1);
	if (root == NULL) {
		int line, col;
		size_t off = end != NULL && end >= buf && end <= buf + len ? (size_t)(end - buf) : 0;

		where(buf, off, &line, &col);
		sd_err_set(err, SMDDP_ECONFIG, "%s: invalid JSON near line %d column %d", path,
			   line, col);
		goto out;
	}
	if (!cJSON_IsObject(root)) {
		sd_err_set(err, SMDDP_ECONFIG,
			   "%s: expected a JSON object like {\"timeout\": 600}, got %s", path,
			   json_type(root));
		goto out;
	}
	cJSON_ArrayForEach(item, root)
	{
		const struct sd_param_info *p;
		const char *text;
		char num[32];
		struct sd_err why;
		int env_only;

		for (cJSON *prev = root->child; prev != item; prev = prev->next) {
			if (strcmp(prev->string, item->string) == 0) {
				sd_err_set(err, SMDDP_ECONFIG,
					   "%s: key \"%s\" appears more than once", path,
					   item->string);
				goto out;
			}
		}
		p = by_key(reg, item->string, &env_only);
		if (p == NULL) {
			unknown_key(reg, path, item->string, err);
			goto out;
		}
		if (env_only) {
			sd_err_set(err, SMDDP_ECONFIG,
				   "%s: key \"%s\": %s cannot be set in a config file; set it in the "
				   "environment", path, item->string, p->name);
			goto out;
		}
		text = value_text(p, item, num, sizeof(num), &why);
		if (text == NULL) {
			sd_err_set(err, SMDDP_ECONFIG, "%s: key \"%s\": %s", path, item->string,
				   why.msg);
			goto out;
		}
		if (reg->set(p, text, &why) != SMDDP_OK) {
			sd_err_set(err, SMDDP_ECONFIG, "%s: key \"%s\": %s, got %s%s%s", path,
				   item->string, why.msg, cJSON_IsString(item) ? "\"" : "", text,
				   cJSON_IsString(item) ? "\"" : "");
			goto out;
		}
	}
	rc = SMDDP_OK;
out:
	cJSON_Delete(root);
	free(buf);
	return rc;
}
