/* bootid.c - this machine's boot id: one per running kernel, shared by its network and UTS namespaces.
 *
 * Ranks compare it to know that they share a machine (cores, memory)
 * whatever their host names or SMDDP_HOSTID say: namespaces and fake
 * host ids make several "hosts" of one machine.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "util/sd.h"

size_t sd_boot_id(char *buf, size_t len)
{
	FILE *f;

	if (!len)
		return 0;
	buf[0] = '\0';
	f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!f)
		return 0;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return strlen(buf);
}
