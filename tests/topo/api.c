/* tests/topo/api.c - prints what the public topology API says of a topology:
 *   api discover SYSROOT | api load FILE | api get     (get: SMDDP_TOPO_FILE or this machine)
 * one line of counts, then per GPU its NUMA node and the NIC it should use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <smddp/smddp.h>

int main(int argc, char **argv)
{
	struct smddp_topo *t = NULL;
	int rc;

	if (argc >= 3 && strcmp(argv[1], "discover") == 0)
		rc = smddp_topo_discover(argv[2], &t);
	else if (argc >= 3 && strcmp(argv[1], "load") == 0)
		rc = smddp_topo_load(argv[2], &t);
	else if (argc >= 2 && strcmp(argv[1], "get") == 0)
		rc = smddp_topo_get(&t);
	else
		return 2;
	if (rc != SMDDP_OK) {
		printf("error %d: %s\n", rc, smddp_topo_error());
		return 1;
	}
	printf("gpus %d nics %d numa %d\n", smddp_topo_num_gpus(t), smddp_topo_num_nics(t),
	       smddp_topo_num_numa(t));
	for (int g = 0; g < smddp_topo_num_gpus(t); g++) {
		int n = smddp_topo_gpu_nic(t, g);

		printf("gpu%d %s numa %d nic %s numa %d efa %d\n", g, smddp_topo_gpu_bus_id(t, g),
		       smddp_topo_gpu_numa(t, g), n >= 0 ? smddp_topo_nic_name(t, n) : "-",
		       smddp_topo_nic_numa(t, n), smddp_topo_nic_is_efa(t, n));
	}
	/* out of range is -1 or NULL, never a crash */
	if (smddp_topo_gpu_nic(t, -1) != -1 || smddp_topo_gpu_bus_id(t, 99) != NULL ||
	    smddp_topo_nic_name(t, -1) != NULL || smddp_topo_num_gpus(NULL) != 0) {
		printf("out of range not refused\n");
		return 1;
	}
	smddp_topo_free(t);
	return 0;
}
