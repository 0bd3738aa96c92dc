/* net.h - communicators that span hosts: libfabric between hosts, shared memory inside each.
 *
 * A communicator whose ranks are on more than one host gets c->net and the
 * transport table sd_transport_net.  Its collectives are in lib/coll/net-algo.c:
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

#include "bootstrap/bootstrap.h"
#include "base/comm-types.h"

/* The world's bootstrap channel, shared by every communicator of the job
 * that spans hosts, for news of dead ranks; closed with the last of them. */
struct sd_job {
	int refs;
	struct sd_boot *boot;
	char ip[64]; /* this host's address towards rank 0: endpoints bind to it */
};

typedef int (*sd_gather_fn)(struct smddp_comm *via, const void *mine, void *all, size_t len);

/* Collective over via.  c (NULL on a rank of via outside it, or when the
 * communicator it joins does not span hosts) gets its endpoint, its peers'
 * addresses, c->net and, once every rank is ready, the transport table tp
 * (sd_transport_net: the caller names it, since the table is above net.c,
 * its barrier being an algorithm of net-algo.c); node is c's communicator
 * on this host (already set up).  members[i] is via's rank of c's rank i
 * (NULL: the same); vhost[v] the host of via's rank v.  src_ip: the
 * address to bind. */
int sd_net_setup(struct smddp_comm *c, struct smddp_comm *node, struct smddp_comm *via,
		 sd_gather_fn gather, const int *members, char (*vhost)[SD_HOSTID_MAX],
		 struct sd_job *job, const char *src_ip, const struct sd_transport_ops *tp);
/* This host's address on the connection to rank 0 ("" if none). */
void sd_net_boot_ip(struct sd_boot *b, char *buf, size_t len);
/* Free c->net (and the node communicator); clean after a good final barrier. */
void sd_net_free(struct smddp_comm *c, int clean);
/* Host of c's rank r, for messages and for splits. */
char (*sd_net_hosts(struct smddp_comm *c))[SD_HOSTID_MAX];
struct sd_job *sd_net_job(struct smddp_comm *c);
/* 1 when c's endpoint was left with transfers in flight (a failed call):
 * buffers they may touch must stay allocated. */
int sd_net_poisoned(struct smddp_comm *c);
/* Another thread's abort while a call may be running on c (the GPU proxy of
 * lib/cuda/proxy.c): the endpoint is one thread's at a time, so this only
 * asks (with c->failed and c->last_error as the reason, else "aborted");
 * the running call fails at its next look at the fabric, and its thread
 * aborts (sends the notices). */
void sd_net_ask_abort(struct smddp_comm *c);
/* c's communicator on this host; forget != 0 detaches it from c. */
struct smddp_comm *sd_net_node(struct smddp_comm *c, int forget);

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
