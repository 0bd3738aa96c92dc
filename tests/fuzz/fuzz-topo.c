/* fuzz-topo.c - topology JSON (smddp_topo_parse, SMDDP_TOPO_FILE), and what
 * the library reads out of one: a topology accepted must print as JSON
 * that is accepted again, and answer every getter. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <smddp/smddp.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_text(data, size), *json = NULL;
	struct smddp_topo *t = NULL, *again = NULL;

	if (smddp_topo_parse(text, &t) == SMDDP_OK) {
		for (int g = -1; g <= smddp_topo_num_gpus(t); g++) {
			(void)smddp_topo_gpu_bus_id(t, g);
			(void)smddp_topo_gpu_numa(t, g);
			(void)smddp_topo_gpu_nic(t, g);
		}
		for (int n = -1; n <= smddp_topo_num_nics(t); n++) {
			(void)smddp_topo_nic_name(t, n);
			(void)smddp_topo_nic_numa(t, n);
			(void)smddp_topo_nic_is_efa(t, n);
		}
		(void)smddp_topo_num_numa(t);
		if (smddp_topo_json(t, &json) != SMDDP_OK || smddp_topo_parse(json, &again) != SMDDP_OK)
			abort(); /* what the library printed, it must read back */
		smddp_topo_free(again);
		free(json);
		smddp_topo_free(t);
	}
	free(text);
	return 0;
}
