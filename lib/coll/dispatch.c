/* dispatch.c - the collectives as the layers above call them: one node, or between hosts.
 *
 * A communicator that spans hosts (c->net) runs the algorithms of
 * net-algo.c, which use coll.c's one-node algorithms on its node
 * communicator; any other runs coll.c's directly.  The choice is made
 * here, above both, so that calls point one way: this file -> net-algo.c
 * -> coll.c, and this file -> coll.c.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/net.h"
#include "coll/node.h"

#define SPANNING(call) do { if (c->net) return (call); } while (0)

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

int sd_coll_compare(struct smddp_comm *c)
{
	struct sd_coll_desc d;
	char mine[160], theirs[160], msg[700];
	size_t off = 0;
	int bad = 0;

	c->tp->put_desc(c, &c->cur, sizeof(c->cur));
	SD_CHECK(c->tp->barrier(c));
	sd_coll_describe(&c->cur, mine, sizeof(mine));
	msg[0] = 0;
	for (int r = 0; r < c->size; r++) {
		c->tp->get_desc(c, r, &d, sizeof(d));
		if (!memcmp(&d, &c->cur, sizeof(d)))
			continue;
		sd_coll_describe(&d, theirs, sizeof(theirs));
		if (bad < 4 && off < sizeof(msg))
			off += (size_t)snprintf(msg + off, sizeof(msg) - off, "%srank %d called %s",
						bad ? "; " : "", r, theirs);
		bad++;
	}
	/* The second barrier keeps a rank from overwriting its descriptor
	 * with the next call's while a slower one still reads it. */
	SD_CHECK(c->tp->barrier(c));
	if (bad)
		/* Not sticky: every rank saw the same descriptors and stopped
		 * before moving data, so the communicator stays usable. */
		return sd_comm_error(c, SMDDP_EMISMATCH,
				     "ranks disagree (SMDDP_CHECK_COLL): this rank called %s, but %s%s",
				     mine, msg, bad > 4 ? "; ..." : "");
	return SMDDP_OK;
}
