/* node.h - the one-node algorithms of coll.c, private to lib/coll/.
 *
 * Called by dispatch.c for a communicator on one host, and by net-algo.c
 * on the node communicator of one that spans hosts (the steps inside a
 * host of the hierarchical algorithms).  Neither is called back from
 * here: the hierarchy is composed above this file, not in it.
 */
#ifndef SD_COLL_NODE_H
#define SD_COLL_NODE_H

#include <stddef.h>

#include "base/comm-types.h"

int sd_coll_node_allreduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			   enum smddp_dtype dt, enum smddp_op op);
int sd_coll_node_allgather(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			   enum smddp_dtype dt);
int sd_coll_node_reduce_scatter(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
				enum smddp_dtype dt, enum smddp_op op);
int sd_coll_node_broadcast(struct smddp_comm *c, void *buf, size_t count, enum smddp_dtype dt,
			   int root);
int sd_coll_node_reduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			enum smddp_dtype dt, enum smddp_op op, int root);
int sd_coll_node_alltoall(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			  enum smddp_dtype dt);

#endif
