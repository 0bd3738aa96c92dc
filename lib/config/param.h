/* config/param.h - the parameter registry: every tunable, its value and where it came from.
 *
 * Every tunable is declared once in the table of param.c with its type,
 * default and help.  Precedence: environment > config file (SMDDP_CONFIG, else
 * /etc/smddp.json) > default.  sd_params_load() runs once per process; a bad
 * file or a bad value is SMDDP_ECONFIG with a sentence in err (every call).
 * The registry reads the file through config.c (sd_config.h); the log
 * (lib/util/) learns its settings from here, never the other way.
 */
#ifndef SD_CONFIG_PARAM_H
#define SD_CONFIG_PARAM_H

#include <stddef.h>
#include <stdint.h>

#include "util/sd.h"

enum sd_param_type { SD_PARAM_INT, SD_PARAM_BOOL, SD_PARAM_SIZE, SD_PARAM_STR, SD_PARAM_ENUM };
struct sd_param_info {
	const char *name;    /* environment name, e.g. "SMDDP_TIMEOUT" */
	const char *key;     /* config-file key, e.g. "timeout" */
	enum sd_param_type type;
	const char *def;     /* default, as text */
	const char *choices; /* for SD_PARAM_ENUM: "WARN|INFO|TRACE" */
	const char *help;
};
int sd_params_load(struct sd_err *err);
int64_t sd_param_int(const char *name);  /* INT, BOOL (0/1), SIZE (bytes) */
const char *sd_param_str(const char *name); /* STR, ENUM; "" when unset */
const char *sd_param_source(const char *name); /* "default", "env", "config" */
size_t sd_param_count(void);
const struct sd_param_info *sd_param_at(size_t i);

/* Parsers shared with the tools' tests. */
int sd_parse_int(const char *s, int64_t *out);     /* decimal, strict */
int sd_parse_bool(const char *s, int *out);        /* 1/0 true/false yes/no on/off */
int sd_parse_size(const char *s, uint64_t *out);   /* 64, 64K, 1M, 2G (powers of 2) */

#endif
