/* net.h - the collectives of communicators that span hosts, and their transport table.
 *
 * A communicator whose ranks are on more than one host gets c->net
 * (lib/transport/net/) and the transport table sd_transport_net.  Its
 * collectives are in lib/coll/net-algo.c:
 * hierarchical ones (the node's shared-memory communicator, then the
 * "rail" of ranks with the same local rank on every host, then the node
 * again) where every host has the same number of ranks, numbered host by
 * host; flat ring or recursive doubling over the fabric otherwise or when
 * SMDDP_ALGO asks.
 */
#ifndef SD_COLL_NET_H
#define SD_COLL_NET_H

#include <stddef.h>
#include <stdint.h>

#include "base/comm-types.h"
#include "transport/net/net.h"

/* net-table.c: the transport table of communicators that span hosts. */
extern const struct sd_transport_ops sd_transport_net;

int sd_net_allreduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		     enum smddp_dtype dt, enum smddp_op op);
int sd_net_allgather(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		     enum smddp_dtype dt);
int sd_net_reduce_scatter(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			  enum smddp_dtype dt, enum smddp_op op);
int sd_net_broadcast(struct smddp_comm *c, void *buf, size_t count, enum smddp_dtype dt,
		     int root);
int sd_net_reduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		  enum smddp_dtype dt, enum smddp_op op, int root);
int sd_net_alltoall(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		    enum smddp_dtype dt);

#endif
