/* net-int.h - what the files of coll's collectives between hosts share,
 * private to them.  Calls point one way, down this list:
 *   net-table.c  the transport table (its barrier is an algorithm)
 *   net-algo.c   the collectives' algorithms over a group
 *   lib/transport/net/  waits, transfers, point to point, groups, set-up
 * (dispatch.c, above them all, picks net-algo.c or the one-node coll.c.) */
#ifndef SD_COLL_NET_INT_H
#define SD_COLL_NET_INT_H

#include <stddef.h>
#include <stdint.h>

#include "coll/coll.h"
#include "coll/net.h"
#include "transport/net/xfer.h"

/* ---- net-algo.c: algorithms over a group ---- */
int sd_net_ring_allgather(struct smddp_comm *c, const struct grp *g, unsigned ph, const void *sbuf,
			  char *rbuf, const size_t *off, size_t blk, const struct sd_net_stream *sm);
int sd_net_dissemination(struct smddp_comm *c, const struct grp *g, unsigned ph);

#endif
