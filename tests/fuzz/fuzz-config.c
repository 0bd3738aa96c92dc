/* fuzz-config.c - the JSON config file (SMDDP_CONFIG) into the parameter registry. */
#include "config.h"

#include "util/sd.h"
#include "config/sd_config.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sd_err err;
	int found;

	(void)sd_config_read(fuzz_file(0, data, size), 1, sd_param_registry(), &found, &err);
	return 0;
}
