/* tests/topo/shared.c - sd_topo_shared(): one topology per process, from any thread.
 * Prints the GPU count, or "error RC: sentence" (remembered for later calls). */
#include "config.h"

#include <pthread.h>
#include <stdio.h>

#include "util/sd.h"
#include "topo/topo.h"

static const struct smddp_topo *seen[8];
static int rcs[8];

static void *one(void *arg)
{
	long i = (long)arg;

	rcs[i] = sd_topo_shared(&seen[i]);
	return NULL;
}

int main(void)
{
	pthread_t th[8];

	for (long i = 0; i < 8; i++)
		pthread_create(&th[i], NULL, one, (void *)i);
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	for (int i = 1; i < 8; i++) {
		if (seen[i] != seen[0] || rcs[i] != rcs[0]) {
			printf("threads disagree\n");
			return 1;
		}
	}
	if (rcs[0] != SMDDP_OK) {
		const struct smddp_topo *again;

		/* the failure sticks, with its sentence, in another call */
		if (sd_topo_shared(&again) != rcs[0] || again != NULL) {
			printf("failure not remembered\n");
			return 1;
		}
		printf("error %d: %s\n", rcs[0], smddp_topo_error());
		return 0;
	}
	printf("gpus %d\n", smddp_topo_num_gpus(seen[0]));
	return 0;
}
