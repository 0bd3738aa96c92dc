/* xfer.h - what the algorithms between hosts run on: c->net, its groups, waits and tagged transfers.
 *
 * For lib/coll/net-algo.c and net-table.c (the collectives and the table of
 * communicators that span hosts) and for net.c, which defines them; the
 * layers above the algorithms need only net.h.
 */
#ifndef SD_TRANSPORT_NET_XFER_H
#define SD_TRANSPORT_NET_XFER_H

#include <stddef.h>
#include <stdint.h>

#include "base/comm-types.h"
#include "transport/net/net.h"
#include "transport/netep.h"
#include "transport/transport.h"

enum { ALGO_AUTO, ALGO_HIER, ALGO_RING, ALGO_RD };
extern const char *const sd_net_algo_names[]; /* by ALGO_* */

enum { PH_MAIN = 1, PH_TAIL, PH_DESC, PH_BARRIER, PH_SHARD };

#define NSLOTS 16 /* receive window, in chunks */
/* Where the endpoint chose a chunk above this, a call whose blocks are
 * small takes smaller chunks, down to this: four or more chunks a block
 * keep receiving, reducing and sending overlapped. */
#define NET_CHUNK_MIN ((size_t)128 << 10)
#ifndef SEND_WINDOW
#define SEND_WINDOW 256 /* sends in flight, in chunks: a send completes once
			 * delivered, so the window must cover the bandwidth x
			 * round trip of a deep queue */
#endif
#define NET_SPIN_NS 200000ull /* polling before sleeping on the completion queue */
#define ABORT_MSG 256

struct sd_net {
	struct sd_fab *fab;
	struct sd_job *job;
	struct smddp_comm *node; /* this host's ranks (shared memory) */
	char (*hosts)[SD_HOSTID_MAX];
	int *world;              /* world rank of each rank, for messages */
	int nnodes;
	int hier;                /* same ranks per host, numbered host by host */
	int L;                   /* ranks per host when hier */
	int *rail;               /* ranks with my local rank, host by host */
	int *all;                /* 0..size-1 */
	int algo;
	size_t chunk;            /* bytes per pipelined message, at most */
	size_t chunk_min;        /* ... and at least, when the endpoint chose it */
	size_t rd_max;
	char *slots;             /* NSLOTS receive chunks, then NSLOTS send chunks */
	struct sd_freq abort_req;
	char abort_in[ABORT_MSG];
	char abort_out[ABORT_MSG];
	struct sd_freq *abort_sends;
	int aborted;
	int abort_asked;         /* sd_net_ask_abort: the code, read by check_news */
	char asked_why[ABORT_MSG];
	struct sd_coll_desc *descs;
	int desc_pending;
	int p2p;                 /* a batch of sends and receives waits (messages) */
	char *bounces;           /* p2p: P2P_WHOLE_MAX per small receive, kept */
	size_t nbounces;
	int logged[SD_NUM_COLLS];
};

struct grp {
	int n, me;
	const int *ranks; /* comm rank of each member */
};

/* Something to do whenever completions arrive while waiting (post sends
 * that a window held back). */
struct pump {
	int (*fn)(struct smddp_comm *c, struct pump *p);
};

/* ---- net.c: waits and transfers ---- */
const char *sd_net_host_of(struct smddp_comm *c, int r);
/* Progress until r is done (p, if any, runs after every completion). */
int sd_net_wait_pump(struct smddp_comm *c, struct sd_freq *r, struct pump *p);
int sd_net_wait(struct smddp_comm *c, struct sd_freq *r);
int sd_net_wait_all(struct smddp_comm *c, struct sd_freq *r, size_t n);
/* A collective that failed (rc) cancels its transfers still posted. */
int sd_net_settle(struct smddp_comm *c, int rc);
/* Frees p unless a failure left transfers that may still touch it. */
void sd_net_release(struct smddp_comm *c, void *p);
int sd_net_send_to(struct smddp_comm *c, int peer, unsigned ph, uint64_t step, const void *buf,
		   size_t len, struct sd_freq *r);
int sd_net_recv_from(struct smddp_comm *c, int peer, unsigned ph, uint64_t step, void *buf,
		     size_t len, struct sd_freq *r);
int sd_net_check_len(struct smddp_comm *c, struct sd_freq *r, size_t want);

/* ---- net.c: groups, and the node communicator's errors ---- */
struct grp sd_net_flat(struct smddp_comm *c);
/* The ranks with this rank's local rank, one per host. */
struct grp sd_net_rail(struct smddp_comm *c);
/* Whether c's collectives go through the node communicator and the rail. */
int sd_net_use_hier(struct smddp_comm *c);
/* An error of the node communicator, as c's. */
int sd_net_node_err(struct smddp_comm *c, int rc);
/* The flight recorder's waited_on of a failure inside the host: the node
 * communicator's becomes c's (net.c). */
void sd_net_node_waited(struct smddp_comm *c);

/* ---- net.c: the ops of the transport table (net-table.c) ---- */
int sd_net_p2p(struct smddp_comm *c, struct sd_p2p_op *ops, int n);
void sd_net_put_desc(struct smddp_comm *c, const void *desc, size_t len);
void sd_net_get_desc(struct smddp_comm *c, int r, void *desc, size_t len);
/* Tell every peer, best effort. */
void sd_net_abort(struct smddp_comm *c);
void sd_net_detach(struct smddp_comm *c);

#endif
