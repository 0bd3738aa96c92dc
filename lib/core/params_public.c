/* params_public.c - the parameter registry, listed for users (smddp-topo --env). */
#include "config.h"

#include <stdio.h>

#include "base/errors.h"
#include "config/param.h"
#include "util/sd.h"

SD_EXPORT size_t smddp_param_count(void)
{
	return sd_param_count();
}

SD_EXPORT int smddp_param_info(size_t i, const char **name, const char **def, const char **value,
			       const char **source, const char **help)
{
	const struct sd_param_info *p = sd_param_at(i);
	struct sd_err err;
	int rc;

	if (p == NULL)
		return SMDDP_EINVAL;
	/* Values come from the environment and the config file: a bad one is
	 * the same error smddp_init() would give, with the same sentence. */
	rc = sd_params_load(&err);
	if (rc != SMDDP_OK)
		return sd_err_set(sd_init_err(), rc, "%s", err.msg);
	if (name != NULL)
		*name = p->name;
	if (def != NULL)
		*def = p->def;
	if (value != NULL)
		*value = sd_param_str(p->name);
	if (source != NULL)
		*source = sd_param_source(p->name);
	if (help != NULL)
		*help = p->help;
	return SMDDP_OK;
}
