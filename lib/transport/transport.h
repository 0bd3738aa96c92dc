/* transport.h - the seam between algorithms and the ways ranks share data.
 *
 * A transport that gives every rank of a node a shared "slot" per rank (two
 * halves, used alternately step by step) fills one of these tables.  The
 * algorithms in lib/coll/ are written against slots and barriers only and
 * never name a transport.
 *
 * Step protocol, the invariant every algorithm keeps: in step k a rank writes
 * only its own slot's half k%2, then calls barrier, then reads any rank's half
 * k%2.  A rank reaching step k+2 has passed the barrier of step k+1, which
 * every rank entered only after finishing its reads of step k: so a half is
 * never overwritten while a peer still reads it, with one barrier per step.
 *
 * A table is complete: every op is set, and where one does not apply to a
 * transport it is the stub of lib/transport/enosys.h (sd_no_<op>), as
 * libfabric's fi_no_* are, never NULL.  Callers call; they never test an
 * op against NULL.  tests/unit/test_ops.c walks every table.
 */
#ifndef SD_TRANSPORT_H
#define SD_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

struct smddp_comm;

#define SD_TINY_BYTES 56
#define SD_HINT_BYTES 32

/* ---- point to point (the op p2p below; lib/coll/p2p.c makes the batches) ---
 * One send or receive of a batch that the transport runs to completion
 * together (a group, or the messages of alltoallv, gather, scatter).  key
 * matches a send with a receive, in order per (sender, receiver, key):
 * user tags are below SD_P2P_KEY_COLL; the exchanges of one collective call
 * use SD_P2P_KEY_COLL | its wire number. */
#define SD_P2P_KEY_COLL (1ull << 34)
#define SD_P2P_KEY_MASK ((1ull << 35) - 1)
struct sd_p2p_op {
	int is_send;
	int peer;          /* rank of the communicator; receive: -1 for anyone */
	uint64_t key;
	void *buf;
	size_t bytes;
	int source;        /* receive: who sent it, once done */
	int done;
	/* the transport's own progress, zeroed by sd_coll_p2p */
	int state;
	uint64_t seq;
	uint64_t off, aux;
	void *tp;
};

/* "this call's message" or "the message with tag T", for errors (p2p-words.c). */
const char *sd_p2p_what(const struct sd_p2p_op *op, char *buf, size_t len);
/* SMDDP_EMISMATCH for a message of sent bytes from rank from, which op
 * (a receive of another size) cannot take: one sentence for every transport. */
int sd_p2p_size_differs(struct smddp_comm *c, int from, size_t sent, const struct sd_p2p_op *op);
/* SMDDP_EMISMATCH for the send op, which its receiver refused (its receive
 * has another size): the sender's side of the same mismatch. */
int sd_p2p_refused(struct smddp_comm *c, const struct sd_p2p_op *op);

struct sd_transport_ops {
	size_t size; /* sizeof(struct sd_transport_ops), for future growth */
	const char *name;
	/* Map the communicator's segment (the leader created it under name).
	 * Collective over the communicator's local ranks. */
	int (*attach)(struct smddp_comm *c, const char *name, int leader);
	/* Leader: create a segment for nranks and write its name (< 64 bytes). */
	int (*create)(struct smddp_comm *c, char *name, size_t namelen);
	/* After every rank attached: forget the name (nothing survives a crash). */
	void (*unlink)(struct smddp_comm *c);
	/* Wait until every rank of c reached this barrier. */
	int (*barrier)(struct smddp_comm *c);
	/* Bytes in one half slot. */
	size_t (*half_bytes)(struct smddp_comm *c);
	/* Rank r's half h. */
	void *(*slot)(struct smddp_comm *c, int r, int h);
	/* Rank r's SD_TINY_BYTES for half h, beside its barrier arrival (in
	 * the same 128-byte pair of cache lines): a peer that sees the arrival
	 * has the data too.  A transport with slots but no such area returns
	 * NULL from its own tiny, and the caller uses slot instead;
	 * sd_no_tiny is for a transport without slots at all. */
	void *(*tiny)(struct smddp_comm *c, int r, int h);
	/* Rank r's SD_HINT_BYTES of parity h, written by r only, for what one
	 * call tells the next (lib/coll/coll.c: rank 0's choice of way for
	 * the next calls): peers read it after a barrier that followed the
	 * write, and r rewrites parity h two calls later.  Zero at first;
	 * NULL where the transport has none (sd_no_hint). */
	void *(*hint)(struct smddp_comm *c, int r, int h);
	/* Publish this rank's descriptor and, after a barrier, read rank r's. */
	void (*put_desc)(struct smddp_comm *c, const void *desc, size_t len);
	void (*get_desc)(struct smddp_comm *c, int r, void *desc, size_t len);
	/* After every rank attached: agree on single-copy reads (all ranks can
	 * read all others, or nobody uses them).  Collective. */
	int (*finish)(struct smddp_comm *c);
	/* Single copy: publish two addresses of this process for the current
	 * collective (readable by peers after the next barrier), read rank r's,
	 * and copy len bytes at rank r's address src into dst.  peer_read
	 * fails with SMDDP_EUNSUPPORTED where not available (sd_no_peer_read).
	 * len 0 moves nothing: 0 where the op works, SMDDP_EUNSUPPORTED where
	 * it does not, the same on every rank of a communicator, so that the
	 * ranks choose an algorithm alike (sd_tp_can_peer_read below). */
	void (*put_addrs)(struct smddp_comm *c, const void *a, const void *b);
	void (*get_addrs)(struct smddp_comm *c, int r, uintptr_t *a, uintptr_t *b);
	int (*peer_read)(struct smddp_comm *c, int r, void *dst, uintptr_t src, size_t len);
	/* The other way: len bytes of src into rank r's memory at dst; len 0
	 * as for peer_read. */
	int (*peer_write)(struct smddp_comm *c, int r, uintptr_t dst, const void *src, size_t len);
	/* Point to point: run ops[0..n) (host buffers, peers other than this
	 * rank, progress state zeroed) until every one is done, each send
	 * matched with the receive of the same key on its peer, in order
	 * (lib/coll/p2p.c).  Waits with the barrier's deadline and liveness
	 * checks.  A size mismatch fails that operation (SMDDP_EMISMATCH)
	 * but the others still complete. */
	int (*p2p)(struct smddp_comm *c, struct sd_p2p_op *ops, int n);
	/* Without waiting: SMDDP_OK, or the failure a wait would meet now (a
	 * peer's process ended, a peer aborted or gave up, with its words in
	 * c->last_error).  For the watchers of work that waits elsewhere
	 * than in this transport (lib/cuda/fast.c: kernels that wait on
	 * their peers' flags). */
	int (*health)(struct smddp_comm *c);
	/* Tell peers this rank aborts; local, never blocks. */
	void (*abort)(struct smddp_comm *c);
	/* Unmap and free. */
	void (*detach)(struct smddp_comm *c);
};

/* Every op of struct sd_transport_ops, in its order: X(op) each.  The
 * assertion below fails the build when the struct and this list differ
 * in length, so an op added to one and not the other cannot pass
 * unnoticed; the unit test walks every table through this list. */
#define SD_TRANSPORT_OPS(X)                                                         \
	X(attach) X(create) X(unlink) X(barrier) X(half_bytes) X(slot) X(tiny)      \
	X(hint) X(put_desc) X(get_desc) X(finish) X(put_addrs) X(get_addrs) X(peer_read)    \
	X(peer_write) X(p2p) X(health) X(abort) X(detach)
#define SD_TRANSPORT_OP_COUNT_(op) +1
#define SD_TRANSPORT_NOPS (0 SD_TRANSPORT_OPS(SD_TRANSPORT_OP_COUNT_))
_Static_assert(sizeof(struct sd_transport_ops) ==
		       offsetof(struct sd_transport_ops, attach) +
			       SD_TRANSPORT_NOPS * sizeof(void (*)(void)),
	       "struct sd_transport_ops and SD_TRANSPORT_OPS list different ops");

extern const struct sd_transport_ops sd_transport_shm;

#endif
