/* netep.h - the seam below lib/transport/net/net.c: one endpoint per communicator that spans hosts.
 *
 * The algorithms between hosts post sends and receives of byte ranges,
 * tagged, to and from ranks of the communicator, and drive progress.  Two
 * endpoints fill this table: libfabric's (transport/fabric/: EFA, verbs,
 * its tcp provider) and plain TCP sockets of our own (transport/socket/),
 * as NCCL, Gloo and Open MPI each carry one for TCP networks, where
 * libfabric's tcp;ofi_rxm is the floor.  SMDDP_NET_TRANSPORT picks
 * (lib/transport/net/net.c).  Like the slot transports of transport.h, a table is
 * complete: every op is set.
 *
 * Semantics both keep: messages between two ranks are matched in the order
 * they were sent (FI_ORDER_SAS); a receive matches a message whose tag
 * equals its own but for the bits of its ignore mask, from its peer or
 * (peer < 0) anyone; a message that arrives before its receive is kept
 * until one is posted; a send may complete before its receive is posted.
 * Every error becomes a sentence in the communicator's last_error.
 */
#ifndef SD_TRANSPORT_NETEP_H
#define SD_TRANSPORT_NETEP_H

#include <stddef.h>
#include <stdint.h>

struct smddp_comm;
struct sd_ep_ops;

/* An endpoint; each kind embeds this first. */
struct sd_fab {
	const struct sd_ep_ops *ops;
	/* Set at open: the size of message this endpoint moves best, for a
	 * caller that cuts long messages (net.c's point to point) to cut them
	 * into.  libfabric's tcp;ofi_rxm sends up to 64 KiB eagerly, and a
	 * larger message's rendezvous waits behind the data going the other
	 * way; the sockets take their long way (over the data connections,
	 * read in place) only from SMDDP_SOCKET_LONG. */
	size_t piece;
	/* Set at open: the chunk of the rings and chains (net-algo.c) unless
	 * SMDDP_NET_CHUNK says otherwise.  Over rxm 128 KiB keeps a shaped
	 * link full; the sockets pay a system call or more per message and
	 * per poll, so they want fewer, larger ones. */
	size_t chunk;
};

#define SD_FAB_NAME_MAX 200

/* One posted send or receive.  Zero it before posting; done becomes 1 (or
 * err nonzero, an errno) when its completion has been read.  The endpoint's
 * own context lives in the endpoint, not here, so that after forget the
 * caller may drop this request (a stack array, say) while the endpoint
 * still holds the operation. */
struct sd_freq {
	void *fc;           /* the endpoint's context for it, while posted */
	struct sd_fab *fab;
	int keep;           /* set before posting: forget leaves it be */
	int peer;
	int is_send;
	uint64_t ignore;    /* set before posting a receive: tag bits that need not match */
	uint64_t tag;       /* a receive's tag as sent, once done */
	volatile int done;
	int err;
	size_t len;
};

/* What was chosen, to compare with the peers' choices: the provider and
 * the address format must be the same on every rank (the domain, an
 * interface's name for tcp, may differ from host to host). */
struct sd_fab_kind {
	char prov[40];
	char domain[40];
	char format[24];
};

struct sd_ep_ops {
	size_t size;
	const char *name; /* for SMDDP_NET_TRANSPORT and messages */
	/* Open an endpoint bound to the address src_ip (the one this host
	 * reaches rank 0 with; NULL or "" lets it choose).  Its name (at most
	 * SD_FAB_NAME_MAX bytes) goes to every peer through the bootstrap. */
	int (*open)(struct smddp_comm *c, const char *src_ip, struct sd_fab **out);
	size_t (*name_of)(struct sd_fab *f, void *buf, size_t len);
	/* "tcp;ofi_rxm on eth0", for messages */
	const char *(*describe)(struct sd_fab *f);
	void (*kind)(struct sd_fab *f, struct sd_fab_kind *k);
	/* The n peers' names (stride bytes apart, each starting with a
	 * uint32_t length): comm rank r is names[r]. */
	int (*insert)(struct smddp_comm *c, struct sd_fab *f, const void *names, size_t stride, int n);
	/* Post; an endpoint whose queue is full progresses until there is
	 * room.  peer < 0 receives from anyone. */
	int (*send)(struct smddp_comm *c, struct sd_fab *f, int peer, uint64_t tag, const void *buf,
		    size_t len, struct sd_freq *r);
	int (*recv)(struct smddp_comm *c, struct sd_fab *f, int peer, uint64_t tag, void *buf,
		    size_t len, struct sd_freq *r);
	/* One try to send a short notice, without retries or error messages
	 * (abort notices); 0 if posted.  buf must outlive it. */
	int (*notify)(struct sd_fab *f, int peer, uint64_t tag, const void *buf, size_t len,
		      struct sd_freq *r);
	/* How long a post may wait for room (0: the communicator's timeout). */
	void (*patience)(struct sd_fab *f, uint64_t ns);
	/* What a post asks, while it waits for room, whether the peers are
	 * still there (nonzero: fail with that result). */
	void (*on_wait)(struct sd_fab *f, int (*news)(struct smddp_comm *c));
	/* Cancel a posted receive (the abort-notice receive at close). */
	void (*cancel)(struct sd_fab *f, struct sd_freq *r);
	/* After a failed collective: detach every posted operation but those
	 * with keep from its sd_freq, for at most wait_ms.  Returns the
	 * operations the endpoint could not let go of, which may still touch
	 * their buffers: then the endpoint is poisoned (never progresses again,
	 * posts fail) and the buffers must not be freed. */
	int (*forget)(struct sd_fab *f, int wait_ms);
	int (*poisoned)(struct sd_fab *f);
	/* Progress.  wait_ms > 0 may block that long for a completion.  *got:
	 * completions read (a cancel counts).  An smddp_result, in last_error
	 * (a failed transfer: SMDDP_ENETWORK naming the peer). */
	int (*progress)(struct smddp_comm *c, struct sd_fab *f, int wait_ms, int *got);
	/* 1 if it had to be left open (transfers that never end). */
	int (*close)(struct sd_fab *f);
};

#ifdef HAVE_LIBFABRIC
extern const struct sd_ep_ops sd_ep_fabric; /* transport/fabric/fabric.c */
#endif
extern const struct sd_ep_ops sd_ep_socket; /* transport/socket/socket.c */

/* Does this host have RDMA devices (verbs, EFA: /sys/class/infiniband)?
 * (netep.c) */
int sd_net_has_rdma(void);

/* The calls of lib/transport/net/net.c, through the endpoint's table. */
static inline size_t sd_fab_name(struct sd_fab *f, void *buf, size_t len)
{
	return f->ops->name_of(f, buf, len);
}
static inline const char *sd_fab_describe(struct sd_fab *f)
{
	return f->ops->describe(f);
}
static inline void sd_fab_kind(struct sd_fab *f, struct sd_fab_kind *k)
{
	f->ops->kind(f, k);
}
static inline int sd_fab_insert(struct smddp_comm *c, struct sd_fab *f, const void *names,
				size_t stride, int n)
{
	return f->ops->insert(c, f, names, stride, n);
}
static inline int sd_fab_send(struct smddp_comm *c, struct sd_fab *f, int peer, uint64_t tag,
			      const void *buf, size_t len, struct sd_freq *r)
{
	return f->ops->send(c, f, peer, tag, buf, len, r);
}
static inline int sd_fab_recv(struct smddp_comm *c, struct sd_fab *f, int peer, uint64_t tag,
			      void *buf, size_t len, struct sd_freq *r)
{
	return f->ops->recv(c, f, peer, tag, buf, len, r);
}
static inline int sd_fab_notify(struct sd_fab *f, int peer, uint64_t tag, const void *buf,
				size_t len, struct sd_freq *r)
{
	return f->ops->notify(f, peer, tag, buf, len, r);
}
static inline void sd_fab_patience(struct sd_fab *f, uint64_t ns)
{
	f->ops->patience(f, ns);
}
static inline void sd_fab_on_wait(struct sd_fab *f, int (*news)(struct smddp_comm *c))
{
	f->ops->on_wait(f, news);
}
static inline void sd_fab_cancel(struct sd_fab *f, struct sd_freq *r)
{
	if (f)
		f->ops->cancel(f, r);
}
static inline int sd_fab_forget(struct sd_fab *f, int wait_ms)
{
	return f ? f->ops->forget(f, wait_ms) : 0;
}
static inline int sd_fab_poisoned(struct sd_fab *f)
{
	return f && f->ops->poisoned(f);
}
static inline int sd_fab_progress(struct smddp_comm *c, struct sd_fab *f, int wait_ms, int *got)
{
	return f->ops->progress(c, f, wait_ms, got);
}
static inline int sd_fab_close(struct sd_fab *f)
{
	return f ? f->ops->close(f) : 0;
}

/* Tag layout: kind (2 bits) | collective sequence (30) | phase (8) | step (24). */
#define SD_TAG_STEP_BITS 24
#define SD_TAG_PHASE_BITS 8
#define SD_TAG_SEQ_BITS 30
static inline uint64_t sd_fab_tag(unsigned kind, uint64_t seq, unsigned phase, uint64_t step)
{
	return ((uint64_t)kind << 62) |
	       ((seq & ((1ull << SD_TAG_SEQ_BITS) - 1)) << (SD_TAG_STEP_BITS + SD_TAG_PHASE_BITS)) |
	       ((uint64_t)(phase & 0xff) << SD_TAG_STEP_BITS) |
	       (step & ((1ull << SD_TAG_STEP_BITS) - 1));
}
#define SD_TAG_KIND_DATA 0u
#define SD_TAG_KIND_ABORT 1u
#define SD_TAG_KIND_P2P 2u /* sends and receives: sender and key instead (lib/transport/net/net.c) */

#endif
