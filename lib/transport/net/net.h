/* net.h - the transport between hosts: one endpoint per communicator that spans hosts.
 *
 * A communicator whose ranks are on more than one host gets c->net: an
 * endpoint between hosts (lib/transport/netep.h: libfabric or TCP
 * sockets), its peers' addresses and groups, and this host's shared-memory
 * communicator (node).  net.c waits and moves tagged messages; net-setup.c
 * makes and frees it.  The collectives over it are coll's
 * (lib/coll/net-algo.c, and the table sd_transport_net of
 * lib/coll/net-table.c, handed to sd_net_setup() by its caller).
 */
#ifndef SD_TRANSPORT_NET_NET_H
#define SD_TRANSPORT_NET_NET_H

#include <stddef.h>
#include <stdint.h>

#include "base/comm-types.h"
#include "bootstrap/bootstrap.h"
#include "transport/netep.h"
#include "transport/transport.h"

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
/* Bytes of one pipelined message between hosts (the same on every rank),
 * 0 when c is on one host. */
size_t sd_net_chunk(const struct smddp_comm *c);
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

#endif
