/* fuzz-config.c - the JSON config file (SMDDP_CONFIG) into the parameter registry. */
#include "config.h"

#include "util/sd.h"
#include "config/sd_config.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[1024];

	(void)sd_config_read(fuzz_file(0, data, size), 1, err, sizeof(err));
	return 0;
}
