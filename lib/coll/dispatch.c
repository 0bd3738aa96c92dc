/* dispatch.c - the collectives as the layers above call them: one node, or between hosts.
 *
 * A communicator that spans hosts (c->net) runs the algorithms of
 * net-algo.c, which use coll.c's one-node algorithms on its node
 * communicator; any other runs coll.c's directly.  The choice is made
 * here, above both, so that calls point one way: this file -> net-algo.c
 * -> coll.c, and this file -> coll.c (coll.c used to make the choice
 * itself and so called net-algo.c, which called it back).
 */
#include "config.h"

#include "coll/coll.h"
#include "coll/net.h"
#include "coll/node.h"

#ifdef HAVE_LIBFABRIC
#define SPANNING(call) do { if (c->net) return (call); } while (0)
#else
#define SPANNING(call) do { } while (0)
#endif

int sd_coll_allreduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		      enum smddp_dtype dt, enum smddp_op op)
{
	SPANNING(sd_net_allreduce(c, sbuf, rbuf, count, dt, op));
	return sd_coll_node_allreduce(c, sbuf, rbuf, count, dt, op);
}

int sd_coll_reduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		   enum smddp_dtype dt, enum smddp_op op, int root)
{
	SPANNING(sd_net_reduce(c, sbuf, rbuf, count, dt, op, root));
	return sd_coll_node_reduce(c, sbuf, rbuf, count, dt, op, root);
}

int sd_coll_allgather(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		      enum smddp_dtype dt)
{
	SPANNING(sd_net_allgather(c, sbuf, rbuf, count, dt));
	return sd_coll_node_allgather(c, sbuf, rbuf, count, dt);
}

int sd_coll_reduce_scatter(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			   enum smddp_dtype dt, enum smddp_op op)
{
	SPANNING(sd_net_reduce_scatter(c, sbuf, rbuf, count, dt, op));
	return sd_coll_node_reduce_scatter(c, sbuf, rbuf, count, dt, op);
}

int sd_coll_alltoall(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		     enum smddp_dtype dt)
{
	SPANNING(sd_net_alltoall(c, sbuf, rbuf, count, dt));
	return sd_coll_node_alltoall(c, sbuf, rbuf, count, dt);
}

int sd_coll_broadcast(struct smddp_comm *c, void *buf, size_t count, enum smddp_dtype dt,
		      int root)
{
	SPANNING(sd_net_broadcast(c, buf, count, dt, root));
	return sd_coll_node_broadcast(c, buf, count, dt, root);
}
