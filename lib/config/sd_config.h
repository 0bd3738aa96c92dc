/* sd_config.h - private glue between log.c, param.c and config.c.
 *
 * Not lib/config/config.h: a header of that name would shadow the
 * autoconf config.h for lib/config/config.c, whose first line is
 * #include "config.h" (quoted includes search the including file's folder
 * first).
 */
#ifndef SD_CONFIG_H
#define SD_CONFIG_H

#include <stddef.h>

#include "util/sd.h"

/* config.c: read the JSON file at path into the registry through
 * sd_param_set_config().  must_exist == 0: a file that does not exist is
 * fine (1 is returned, no file); any other failure to read it is an error.
 * Returns 0 when the file was applied, 1 when there was none, -1 on error
 * with a sentence (naming the file) in err. */
int sd_config_read(const char *path, int must_exist, char *err, size_t errlen);

/* config.c: Levenshtein distance, ignoring case, for "did you mean"
 * hints; (size_t)-1 for names of 64 characters or more. */
size_t sd_config_edit_distance(const char *a, const char *b);

/* param.c: check text for p and store it with source "config".  On error
 * returns -1 with the reason ("expected a positive integer (seconds)") in
 * why; the caller names the file and key. */
int sd_param_set_config(const struct sd_param_info *p, const char *text, char *why,
			size_t whylen);

/* log.c: shared parsers and late configuration from the config file. */
int sd_log_parse_level(const char *s); /* -1 when invalid */
int sd_log_parse_subsys(const char *s, unsigned *mask, char *bad, size_t badlen);
/* NULL leaves that setting as it is. */
void sd_log_reconfigure(const char *level, const char *subsys, const char *file);

#endif
