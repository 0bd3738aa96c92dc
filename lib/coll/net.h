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
 * once the len input bytes at p are there (SMDDP_OK, else an error already
 * set on the communicator); done() says the len output bytes at p are
 * final. */
struct sd_net_stream {
	int (*need)(void *arg, const void *p, size_t len);
	void (*done)(void *arg, const void *p, size_t len);
	void *arg;
};

#define SD_NET_STREAM_MAX 16 /* ranks, at most, of a streamed collective */

/* How a streamed collective reads and finishes its buffer: block b at
 * bytes [cut[b], cut[b + 1]) of the buffer (the allreduce's; the
 * allgather's output, its own block in place; the reduce-scatter's input,
 * its output being its own block), read in the order in[0..nin) and
 * finished in the order out[0..nout). */
struct sd_net_stream_plan {
	int nin, nout;
	int in[SD_NET_STREAM_MAX], out[SD_NET_STREAM_MAX];
	size_t cut[SD_NET_STREAM_MAX + 1];
};

/* Whether collective coll (SD_COLL_ALLREDUCE, _ALLGATHER or
 * _REDUCE_SCATTER) of count elements of dt (op) can be streamed, the same
 * answer on every rank; if so its plan. */
int sd_net_stream_plan(struct smddp_comm *c, int coll, size_t count, enum smddp_dtype dt,
		       enum smddp_op op, struct sd_net_stream_plan *sp);
/* That collective, streamed through sm, in the layout of the plan. */
int sd_net_stream(struct smddp_comm *c, int coll, const void *sbuf, void *rbuf, size_t count,
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
