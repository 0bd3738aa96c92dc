/* netep.c - what the endpoints between hosts and their chooser share. */
#include "config.h"

#include <dirent.h>

#include "transport/netep.h"

int sd_net_has_rdma(void)
{
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n > 0;
}
