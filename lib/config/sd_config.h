/* sd_config.h - private glue between the registry (param.c) and the file reader (config.c).
 *
 * Not lib/config/config.h: a header of that name would shadow the
 * autoconf config.h for lib/config/config.c, whose first line is
 * #include "config.h" (quoted includes search the including file's folder
 * first).
 */
#ifndef SD_CONFIG_H
#define SD_CONFIG_H

#include <stddef.h>

#include "config/param.h"
#include "util/sd.h"

/* What the config file needs of the registry, handed down by param.c, so
 * that config.c never names the registry (the two called each other).
 * set() checks text for p and stores it with source "config"; on failure
 * it returns SMDDP_ECONFIG with the reason ("expected a positive integer
 * (seconds)") in why, and the caller names the file and the key. */
struct sd_config_registry {
	size_t (*count)(void);
	const struct sd_param_info *(*at)(size_t i);
	int (*set)(const struct sd_param_info *p, const char *text, struct sd_err *why);
};

/* config.c: reads the JSON file at path into reg.  must_exist == 0: a file
 * that does not exist is fine (*found = 0); any other failure to read it,
 * or a bad key or value, is SMDDP_ECONFIG with a sentence naming the file
 * in err.  SMDDP_OK with *found = 1 when the file was applied. */
int sd_config_read(const char *path, int must_exist, const struct sd_config_registry *reg,
		   int *found, struct sd_err *err);

/* param.c: the registry, as sd_config_read() takes it. */
const struct sd_config_registry *sd_param_registry(void);

#endif
