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
/* A caller whose input reaches host memory, and whose output leaves it,
 * in pieces while the collective runs (lib/cuda/staged.c): need() returns
 * once input bytes [lo, hi) are there (SMDDP_OK, else an error already set
 * on the communicator); done() says that output bytes [lo, hi) are final. */
struct sd_net_stream {
	int (*need)(void *arg, size_t lo, size_t hi);
	void (*done)(void *arg, size_t lo, size_t hi);
	void *arg;
};

/* Whether an allreduce of count elements of dt (op) can be streamed, the
 * same answer on every rank; if so, the byte ranges of its p <= max
 * blocks, block b at [cut[b], cut[b + 1]), in the order this rank reads
 * its input (in_order) and finishes its output (out_order). */
int sd_net_stream_plan(struct smddp_comm *c, size_t count, enum smddp_dtype dt, enum smddp_op op,
		       size_t *cut, int *in_order, int *out_order, int max);
/* That allreduce, streamed through sm. */
int sd_net_allreduce_stream(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			    enum smddp_dtype dt, enum smddp_op op, const struct sd_net_stream *sm);
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
