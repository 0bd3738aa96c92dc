/* socket-cpus.c - do the ranks of this machine have a core each?  Then an empty poll keeps its core.
 *
 * An empty poll either keeps the core (polls on, as Open MPI's tcp btl
 * does) or gives it away (socket.c).  Giving it away is right only where
 * a peer of this communicator needs the core to send what we wait for:
 * more of its ranks on this machine than the cores they may run on
 * (ranks between "hosts" that are namespaces or SMDDP_HOSTID of one
 * machine, or a node oversubscribed).  Elsewhere every yield or sleep
 * hands the core to a stranger (a busy process beside the job), and the
 * peer's answer then waits for the stranger's time slice or for a wake-up.
 * So each rank's name carries its machine (boot_id, which network and UTS
 * namespaces share) and the CPUs it may run on; the ranks that share a
 * machine are counted against the union of their CPUs.
 */
#include "config.h"

#include <sched.h>
#include <string.h>

#include "hash/fnv.h"
#include "transport/socket/socket-int.h"
#include "util/sd.h"

void sd_sock_cpus_mine(struct name *me)
{
	char boot[SD_BOOT_ID_LEN];
	cpu_set_t set;

	/* 0: unknown, shared with nobody */
	me->machine = sd_boot_id(boot, sizeof(boot)) ? sd_fnv1a_str(SD_FNV1A_BASIS, boot) : 0;
	memset(me->cpus, 0, sizeof(me->cpus));
	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		for (int i = 0; i < CPU_SETSIZE && i < 64 * NAME_CPUS; i++)
			if (CPU_ISSET(i, &set))
				me->cpus[i / 64] |= 1ull << (i % 64);
	}
}

int sd_sock_cpus_spare(const struct name *names, int n, int rank, int *ranks, int *cores)
{
	const struct name *me = &names[rank];
	uint64_t all[NAME_CPUS];

	*ranks = 0;
	*cores = 0;
	memcpy(all, me->cpus, sizeof(all));
	for (int r = 0; r < n; r++) {
		if (r != rank && (!me->machine || names[r].machine != me->machine))
			continue;
		++*ranks;
		for (int i = 0; i < NAME_CPUS; i++)
			all[i] |= names[r].cpus[i];
	}
	for (int i = 0; i < NAME_CPUS; i++)
		*cores += __builtin_popcountll(all[i]);
	/* no mask at all (an affinity we could not read): one core, to be safe */
	if (!*cores)
		*cores = 1;
	return *ranks <= *cores;
}
