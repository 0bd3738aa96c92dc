/* rejoin.c - where the ranks of a communicator will meet again for a shrink (design: shrink.c).
 *
 * Made with the communicator (comm.c) and read by the shrink (shrink.c):
 * below both, so that neither calls the other through it.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "core/comm.h"

/* This rank's listener of one communicator, and the key its shrinks' keys
 * are made from. */
struct sd_rejoin {
	int fd;      /* -1: could not listen */
	char *token;
};

int sd_rejoin_setup(struct smddp_comm *c, struct smddp_comm *via, const int *members,
		    const char *token, uint64_t host, sd_comm_gather_fn gather)
{
	struct sd_rejoin_at mine, *all = NULL;
	struct sd_err err;
	int port = 0, rc;

	memset(&mine, 0, sizeof(mine));
	if (c) {
		c->rejoin = calloc(1, sizeof(*c->rejoin));
		c->rejoin_at = calloc((size_t)c->size, sizeof(*c->rejoin_at));
		if (c->rejoin)
			c->rejoin->token = strdup(token ? token : "");
		if (!c->rejoin || !c->rejoin_at || !c->rejoin->token) {
			/* Takes part all the same: the others must not wait. */
			sd_rejoin_free(c);
		} else {
			c->rejoin->fd = -1;
			if (sd_boot_listen(&c->rejoin->fd, &port, &err) == SMDDP_OK) {
				sd_boot_own_addr(via->boot, mine.addr, sizeof(mine.addr));
				if (!mine.addr[0])
					sd_boot_local_addr(mine.addr, sizeof(mine.addr));
				snprintf(mine.port, sizeof(mine.port), "%d", port);
			} else {
				SD_WARN(SD_SUB_INIT, "this rank cannot be the coordinator of a shrink of "
						     "this communicator: %s", err.msg);
			}
			mine.host = host;
		}
	}
	all = calloc((size_t)via->size, sizeof(*all));
	if (!all)
		return sd_comm_error(via, SMDDP_ENOMEM, "out of memory");
	rc = gather(via, &mine, all, sizeof(mine));
	if (!rc && c && c->rejoin_at) {
		for (int i = 0; i < c->size; i++) {
			c->rejoin_at[i] = all[members ? members[i] : i];
			c->rejoin_at[i].addr[sizeof(c->rejoin_at[i].addr) - 1] = 0;
			c->rejoin_at[i].port[sizeof(c->rejoin_at[i].port) - 1] = 0;
		}
	}
	free(all);
	return rc;
}

void sd_rejoin_free(struct smddp_comm *c)
{
	if (c->rejoin) {
		if (c->rejoin->fd >= 0)
			close(c->rejoin->fd);
		free(c->rejoin->token);
		free(c->rejoin);
		c->rejoin = NULL;
	}
	free(c->rejoin_at);
	c->rejoin_at = NULL;
}

const char *sd_rejoin_token(const struct smddp_comm *c)
{
	return c && c->rejoin ? c->rejoin->token : "";
}

int sd_rejoin_fd(const struct smddp_comm *c)
{
	return c && c->rejoin ? c->rejoin->fd : -1;
}
