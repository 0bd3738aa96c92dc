/* net.c - the transport between hosts: waits, transfers, point to point, the table's ops.
 *
 * Between hosts every transfer is a tagged libfabric message (lib/transport/
 * fabric/), tagged with the call's number on the wire (c->wire: one per
 * call, and one per chunk of a device call staged across hosts), a phase
 * and a step, so that messages of different steps never match each other's
 * receives.  The algorithms that use these transfers are in lib/coll/net-algo.c;
 * the set-up and the teardown in net-setup.c.
 *
 * Waits (the loop of lib/util/wait.c): progress is polled SMDDP_SPIN times,
 * then the completion queue is slept on 1 ms at a time; between sleeps the
 * bootstrap is asked for dead ranks and the abort-notice receive is looked at.  With no completion for
 * SMDDP_TIMEOUT the wait fails with SMDDP_ENETWORK naming the peer and host.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "clock/clock.h"
#include "config/param.h"
#include "transport/net/net-int.h"
#include "transport/transport.h"
#include "util/copy.h"
#include "util/wait.h"

/* ---- waiting ------------------------------------------------------------ */

const char *sd_net_host_of(struct smddp_comm *c, int r)
{
	return sd_host_name(c->net->hosts[r]);
}

int sd_net_check_news(struct smddp_comm *c)
{
	struct sd_net *n = c->net;
	struct sd_err err;
	int who = -1, rc = sd_comm_cancelled(c);

	if (rc)
		return rc;
	int asked = __atomic_load_n(&n->abort_asked, __ATOMIC_ACQUIRE);

	if (asked)
		return sd_comm_error(c, asked, "%s", n->asked_why);
	if (n->abort_req.done && !n->abort_req.err) {
		/* A rank that left after a failure of its own passes that
		 * failure on (its code first, then its words); one that called
		 * smddp_comm_abort is the cause itself. */
		int32_t why;

		memcpy(&why, n->abort_in, sizeof(why));
		n->abort_in[ABORT_MSG - 1] = 0;
		if (why <= 0 || why >= 100)
			why = SMDDP_EABORTED;
		return sd_comm_error(c, why, "%s", n->abort_in + sizeof(why));
	}
	if (n->job && n->job->boot) {
		rc = sd_boot_poll(n->job->boot, &who, &err);
		/* News of a rank outside this communicator (a split) is not
		 * this communicator's failure. */
		for (int r = 0; rc && who >= 0 && r <= c->size; r++)
			if (r == c->size)
				rc = SMDDP_OK;
			else if (n->world[r] == who)
				break;
		if (rc)
			return sd_comm_error(c, rc, "%s", err.msg);
	}
	return SMDDP_OK;
}

/* How long a failed transfer waits for its root cause: rank 0 relays a
 * death only when the scheduler runs it, which on a loaded machine takes
 * many liveness periods. */
#define EXPLAIN_MIN_NS 1500000000ull

/* A transfer failed (rc): a dead peer resets its connections before the
 * bootstrap hears of its death, so ask the bootstrap and the peers' abort
 * notices for the root cause (4 x SMDDP_LIVENESS_MS, at least
 * EXPLAIN_MIN_NS) before blaming the network. */
static int explain(struct smddp_comm *c, int rc)
{
	uint64_t wait = 4 * c->liveness_ns > EXPLAIN_MIN_NS ? 4 * c->liveness_ns : EXPLAIN_MIN_NS;
	uint64_t until = sd_now_ns() + wait;
	char keep[sizeof(c->last_error)];

	memcpy(keep, c->last_error, sizeof(keep));
	while (sd_now_ns() < until) {
		int why, got;

		sd_fab_progress(c, c->net->fab, 1, &got);
		memcpy(c->last_error, keep, sizeof(keep));
		why = sd_net_check_news(c);
		if (why)
			return why;
	}
	return rc;
}

/* The flight recorder's "waited_on" (lib/core/trace.c): the rank a wait
 * that may block is for, named as messages name it, so that a verdict
 * across hosts can say who was behind.  Once per wait that is not over
 * already (two stores), never per completion; a receive from any rank
 * (p2p) names nobody. */
static void note_peer(struct smddp_comm *c, int peer)
{
	c->nwaited_on = peer >= 0;
	if (peer >= 0)
		c->waited_on[0] = SD_RANK_NAME(c, peer);
}

static void note_wait(struct smddp_comm *c, const struct sd_freq *r)
{
	if (!r->done)
		note_peer(c, r->peer);
}

void sd_net_node_waited(struct smddp_comm *c)
{
	struct smddp_comm *node = c->net->node;

	/* already named as c names its ranks (SD_RANK_NAME) */
	if (node && node->nwaited_on > 0) {
		memcpy(c->waited_on, node->waited_on, sizeof(c->waited_on));
		c->nwaited_on = node->nwaited_on;
	}
}

/* A transfer being waited for: what sd_wait's callbacks look at. */
struct nwait {
	struct smddp_comm *c;
	struct sd_freq *r;
	struct pump *p;
};

static int run_pump(struct smddp_comm *c, struct pump *p)
{
	SD_CHECK(p->fn(c, p));
	return SMDDP_OK;
}

/* Read completions (blocking up to wait_ms for one); p runs after every
 * batch of them. */
static int net_progress(struct nwait *w, int wait_ms, int *rc)
{
	struct smddp_comm *c = w->c;
	int got;

	if (w->r->done)
		return SD_WAIT_DONE;
	*rc = sd_fab_progress(c, c->net->fab, wait_ms, &got);
	if (*rc) {
		*rc = explain(c, *rc);
		return SD_WAIT_FAILED;
	}
	if (!got)
		return SD_WAIT_NOT_YET;
	if (w->p) {
		*rc = run_pump(c, w->p);
		if (*rc)
			return SD_WAIT_FAILED;
	}
	return w->r->done ? SD_WAIT_DONE : SD_WAIT_MOVED;
}

static int net_ready(void *arg, int *rc)
{
	return net_progress(arg, 0, rc);
}

/* Sleep on the completion queue: a completion wakes it. */
static int net_sleep(void *arg, uint64_t ns, int *rc)
{
	uint64_t ms = ns / 1000000ull;

	return net_progress(arg, ms < 1 ? 1 : ms > 1000 ? 1000 : (int)ms, rc);
}

static int net_health(void *arg)
{
	return sd_net_check_news(((struct nwait *)arg)->c);
}

/* Progress until r is done (p, if any, runs after every completion). */
int sd_net_wait_pump(struct smddp_comm *c, struct sd_freq *r, struct pump *p)
{
	struct sd_net *n = c->net;
	struct nwait nw = {.c = c, .r = r, .p = p};
	/* Poll SMDDP_SPIN times or NET_SPIN_NS, whichever ends first, never
	 * yielding, then sleep on the completion queue 1 ms at a time, asking
	 * for news before each sleep: a poll is a system call here, and
	 * spinning cores starve the kernel's own network work.  The deadline
	 * counts from the last completion. */
	struct sd_wait w = {
		.spin = c->spin,
		.yield_mask = ~0u,
		.spin_ns = NET_SPIN_NS,
		.nap_ns = 1000000ull,
		.nap_max_ns = 1000000ull,
		.liveness_ns = 0,
		.timeout_ns = c->timeout_ns,
		.ready = net_ready,
		.sleep = net_sleep,
		.health = net_health,
		.arg = &nw,
	};
	int rc;

	note_wait(c, r);
	rc = sd_wait(&w);

	if (w.expired && n->p2p && r->is_send)
		return sd_comm_error(
			c, SMDDP_ETIMEDOUT,
			"waited %llu s (%s) for rank %d (host %s) to receive this rank's "
			"message: it posted no matching receive (same tag and communicator)",
			(unsigned long long)(c->timeout_ns / 1000000000ull), c->timeout_from,
			r->peer, sd_net_host_of(c, r->peer));
	if (w.expired && n->p2p) {
		char who[120] = "any rank";

		if (r->peer >= 0)
			snprintf(who, sizeof(who), "rank %d (host %s)", r->peer,
				 sd_net_host_of(c, r->peer));
		return sd_comm_error(c, SMDDP_ETIMEDOUT,
				     "waited %llu s (%s) for a message from %s, which did not "
				     "send it (a send without a matching receive on one side, "
				     "or a different tag?)",
				     (unsigned long long)(c->timeout_ns / 1000000000ull),
				     c->timeout_from, who);
	}
	if (w.expired)
		return sd_comm_error(
			c, SMDDP_ENETWORK,
			"waited %llu s (%s) for rank %d on host %s over %s, "
			"and nothing arrived: the link or that rank stalled, or it is in "
			"another call (one it made of count 0, or refused on its own arguments, "
			"counts too; SMDDP_CHECK_COLL=1 compares the calls)",
			(unsigned long long)(c->timeout_ns / 1000000000ull), c->timeout_from, r->peer,
			r->peer >= 0 ? sd_net_host_of(c, r->peer) : "?", sd_fab_describe(n->fab));
	if (rc)
		return rc;
	if (r->err && r->peer < 0)
		return explain(c, sd_comm_error(c, SMDDP_ENETWORK,
						"a receive from any rank failed"));
	if (r->err)
		return explain(c, sd_comm_error(c, SMDDP_ENETWORK,
						"a transfer %s rank %d (host %s) failed",
						r->is_send ? "to" : "from", r->peer,
						sd_net_host_of(c, r->peer)));
	return SMDDP_OK;
}

int sd_net_wait(struct smddp_comm *c, struct sd_freq *r)
{
	return sd_net_wait_pump(c, r, NULL);
}

int sd_net_wait_all(struct smddp_comm *c, struct sd_freq *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (r[i].fab)
			SD_CHECK(sd_net_wait(c, &r[i]));
	return SMDDP_OK;
}

/* A collective that fails leaves operations posted, whose requests (on its
 * stack) and buffers are about to go: detach and cancel them first. */
int sd_net_settle(struct smddp_comm *c, int rc)
{
	if (rc)
		sd_fab_forget(c->net->fab, 250);
	return rc;
}

/* Free a buffer that transfers may have used, unless a failure left some
 * behind (then it stays, like the endpoint that holds them). */
void sd_net_release(struct smddp_comm *c, void *p)
{
	if (!sd_fab_poisoned(c->net->fab))
		free(p);
}

static uint64_t tag(struct smddp_comm *c, unsigned phase, uint64_t step)
{
	return sd_fab_tag(SD_TAG_KIND_DATA, c->wire, phase, step);
}

/* A post that fails (a connection already broken) is explained like a
 * failed transfer: the root cause first, if the bootstrap knows it.  The
 * peer it was for is what the call was waiting on (note_wait). */
static int posted(struct smddp_comm *c, int peer, int rc)
{
	if (rc)
		note_peer(c, peer);
	return rc == SMDDP_ENETWORK ? explain(c, rc) : rc;
}

int sd_net_send_to(struct smddp_comm *c, int peer, unsigned ph, uint64_t step, const void *buf,
		   size_t len, struct sd_freq *r)
{
	memset(r, 0, sizeof(*r));
	return posted(c, peer, sd_fab_send(c, c->net->fab, peer, tag(c, ph, step), buf, len, r));
}

int sd_net_recv_from(struct smddp_comm *c, int peer, unsigned ph, uint64_t step, void *buf,
		     size_t len, struct sd_freq *r)
{
	memset(r, 0, sizeof(*r));
	return posted(c, peer, sd_fab_recv(c, c->net->fab, peer, tag(c, ph, step), buf, len, r));
}

int sd_net_check_len(struct smddp_comm *c, struct sd_freq *r, size_t want)
{
	if (r->len != want)
		return sd_comm_error(c, SMDDP_EINTERNAL,
				     "rank %d sent %zu bytes where %zu were expected: do all ranks "
				     "run the same version of libsmddp with the same arguments?",
				     r->peer, r->len, want);
	return SMDDP_OK;
}

/* ---- groups, and the node communicator's errors ------------------------- */

struct grp sd_net_flat(struct smddp_comm *c)
{
	struct grp g = {c->size, c->rank, c->net->all};

	return g;
}

struct grp sd_net_rail(struct smddp_comm *c)
{
	struct grp g = {c->net->nnodes, c->rank / c->net->L, c->net->rail};

	return g;
}

int sd_net_use_hier(struct smddp_comm *c)
{
	struct sd_net *n = c->net;

	if (!n->hier)
		return 0;
	if (n->algo == ALGO_HIER)
		return 1;
	return n->algo == ALGO_AUTO && n->L > 1;
}

int sd_net_node_err(struct smddp_comm *c, int rc)
{
	if (!rc)
		return SMDDP_OK;
	sd_net_node_waited(c);
	return sd_comm_error(c, rc, "inside host %s: %s", sd_net_host_of(c, c->rank),
			     c->net->node->last_error);
}

/* ---- point to point ----------------------------------------------------- */

/* A message's tag carries its sender, so that a receive from anyone can
 * learn who sent it (and ignore those bits to match), and two bits that
 * say which part of a message in pieces it is.  25 bits of sender are 33
 * million ranks. */
#define P2P_SENDER_SHIFT 35
#define P2P_SENDER_MASK 0x1ffffffull
#define P2P_HEAD (1ull << 60) /* 8 bytes: a message in pieces, its size and piece size */
#define P2P_PIECE (1ull << 61) /* one piece of it, in order after its head */
#define P2P_TAKEN (P2P_HEAD | P2P_PIECE) /* receiver to sender: all taken */

/* Messages up to this go whole, in one send; larger ones as a head and
 * pieces of the endpoint's size (struct sd_fab's piece), all posted at
 * once.  libfabric's tcp;ofi_rxm sends up to 64 KiB eagerly; anything
 * larger takes a rendezvous that, with both directions busy, waits behind
 * the data going the other way, so that an exchange ran at half the
 * link's rate (docs/perf/p2p.md, "between hosts").  The sockets' long
 * way has no such wait, and is taken only by pieces of SMDDP_SOCKET_LONG
 * and up. */
#define P2P_WHOLE_MAX (64u * 1024)
/* The head: the message's size, and in its top byte the log2 of the
 * sender's piece size, so that the receiver cuts its receives as the
 * sender cut its sends whatever its own endpoint's settings. */
#define P2P_SIZE_MASK ((1ull << 56) - 1)
#define P2P_SHIFT_AT 56
#define P2P_SHIFT_MIN 12u /* 4 KiB */
#define P2P_SHIFT_MAX 30u /* 1 GiB */

static uint64_t p2p_tag(int sender, uint64_t key)
{
	return sd_fab_tag(SD_TAG_KIND_P2P, 0, 0, 0) |
	       ((uint64_t)sender & P2P_SENDER_MASK) << P2P_SENDER_SHIFT | (key & SD_P2P_KEY_MASK);
}

/* One operation of a batch on the wire.  A message of up to P2P_WHOLE_MAX
 * is one send (first) as before.  A larger one is a head (first) that
 * carries its size and piece size, then its pieces.  The receiver posts the pieces only
 * once the head has come: then it knows the sender (for a receive from
 * anyone) and how many pieces follow, whatever its own size, so that it
 * takes exactly the sender's pieces (into scratch when the sizes differ)
 * and the next message of that sender and tag keeps its own.  The pieces
 * of one sender and key are matched in order, and heads are read in the
 * order of the operations, so each message's pieces go to its receive.
 * Pieces are eager, sent without waiting for a receive: the receiver
 * answers "taken" once it has them all, and the sender waits for that, so
 * that a send still ends only when its receive has taken it (as a
 * rendezvous did, and as smddp_send promises). */
struct p2p_wire {
	struct sd_freq first;
	struct sd_freq taken; /* in pieces: the receiver's answer to the sender */
	struct sd_freq *pc;
	size_t npc;
	uint64_t sent;    /* receive: the sender's size, once known */
	unsigned shift;   /* in pieces: log2 of their size */
	int posted;       /* receive: pieces posted (or none needed) */
	char *bounce;     /* receive under P2P_WHOLE_MAX: where the first lands */
	char *scratch;    /* receive: the pieces of a message of the wrong size */
};

struct p2p_batch {
	struct pump pump; /* first: the wait loop hands it back */
	struct sd_p2p_op *ops;
	struct p2p_wire *w;
	int n;
};

static size_t npieces(uint64_t bytes, unsigned shift)
{
	return (size_t)((bytes + (1ull << shift) - 1) >> shift);
}

/* The endpoint's piece size as a power of two, rounded up (a sockets'
 * piece stays long), within what a head can say. */
static unsigned piece_shift(const struct sd_fab *f)
{
	unsigned k = P2P_SHIFT_MIN;

	while (k < P2P_SHIFT_MAX && (1ull << k) < f->piece)
		k++;
	return k;
}

static int post_send(struct smddp_comm *c, struct sd_p2p_op *op, struct p2p_wire *w)
{
	uint64_t t = p2p_tag(c->rank, op->key);
	size_t piece;

	if (op->bytes <= P2P_WHOLE_MAX)
		return posted(c, op->peer, sd_fab_send(c, c->net->fab, op->peer, t, op->buf, op->bytes,
					     &w->first));
	w->shift = piece_shift(c->net->fab);
	piece = (size_t)1 << w->shift;
	w->npc = npieces(op->bytes, w->shift);
	w->pc = calloc(w->npc, sizeof(*w->pc));
	if (!w->pc)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	/* the head; it outlives the post if not injected */
	op->aux = (uint64_t)op->bytes | (uint64_t)w->shift << P2P_SHIFT_AT;
	w->taken.ignore = 0;
	SD_CHECK(posted(c, op->peer, sd_fab_recv(c, c->net->fab, op->peer,
				       p2p_tag(op->peer, op->key) | P2P_TAKEN, &op->off,
				       sizeof(op->off), &w->taken)));
	/* It stands for the send: waited on, and worded on a timeout, as one. */
	w->taken.is_send = 1;
	SD_CHECK(posted(c, op->peer, sd_fab_send(c, c->net->fab, op->peer, t | P2P_HEAD, &op->aux,
				       sizeof(op->aux), &w->first)));
	for (size_t k = 0; k < w->npc; k++) {
		size_t off = k * piece, len = op->bytes - off;

		SD_CHECK(posted(c, op->peer, sd_fab_send(c, c->net->fab, op->peer, t | P2P_PIECE,
					       (char *)op->buf + off, len < piece ? len : piece,
					       &w->pc[k])));
	}
	return SMDDP_OK;
}

static int post_recv(struct smddp_comm *c, struct sd_p2p_op *op, struct p2p_wire *w)
{
	void *buf = w->bounce ? w->bounce : op->buf;
	size_t len = w->bounce ? P2P_WHOLE_MAX : op->bytes;

	w->first.ignore = P2P_HEAD;
	if (op->peer < 0)
		w->first.ignore |= P2P_SENDER_MASK << P2P_SENDER_SHIFT;
	return posted(c, op->peer, sd_fab_recv(c, c->net->fab, op->peer,
				     p2p_tag(op->peer < 0 ? 0 : op->peer, op->key), buf, len,
				     &w->first));
}

/* A receive whose head has come: post its pieces from that sender. */
static int post_pieces(struct smddp_comm *c, struct p2p_batch *b, int i)
{
	struct sd_p2p_op *op = &b->ops[i];
	struct p2p_wire *w = &b->w[i];
	int from = (int)((w->first.tag >> P2P_SENDER_SHIFT) & P2P_SENDER_MASK);
	uint64_t head;
	size_t piece;
	int fit;

	w->posted = 1;
	memcpy(&head, w->bounce ? w->bounce : op->buf, sizeof(head));
	w->sent = head & P2P_SIZE_MASK;
	w->shift = (unsigned)(head >> P2P_SHIFT_AT);
	if (w->shift < P2P_SHIFT_MIN || w->shift > P2P_SHIFT_MAX)
		return sd_comm_error(c, SMDDP_EINTERNAL,
				     "rank %d (host %s) sent a message in pieces of 2^%u bytes, "
				     "outside 2^%u to 2^%u: it runs another version of libsmddp "
				     "(every rank must load the same)",
				     from, sd_net_host_of(c, from), w->shift, P2P_SHIFT_MIN,
				     P2P_SHIFT_MAX);
	piece = (size_t)1 << w->shift;
	fit = w->sent == op->bytes;
	w->npc = npieces(w->sent, w->shift);
	if (!w->npc)
		return SMDDP_OK;
	if (!fit && !(w->scratch = malloc(piece < w->sent ? piece : w->sent)))
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	w->pc = calloc(w->npc, sizeof(*w->pc));
	if (!w->pc)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	for (size_t k = 0; k < w->npc; k++) {
		size_t off = k * piece, len = w->sent - off;

		/* A message of the wrong size is only drained, so that
		 * its sender finishes: the receive fails anyway. */
		SD_CHECK(posted(c, from, sd_fab_recv(c, c->net->fab, from,
					       p2p_tag(from, op->key) | P2P_PIECE,
					       fit ? (char *)op->buf + off : w->scratch,
					       len < piece ? len : piece, &w->pc[k])));
	}
	return SMDDP_OK;
}

/* Whether an earlier receive of the batch with the same key may take a
 * message of from that is older than op i's: its pieces go first, or it
 * would take op i's.  (Completions come in the order messages matched,
 * so this only guards against a provider that reports them otherwise.) */
static int older_pending(struct p2p_batch *b, int i, int from)
{
	for (int j = 0; j < i; j++) {
		struct p2p_wire *w = &b->w[j];
		int s;

		if (b->ops[j].is_send || !w->first.fab || w->posted || b->ops[j].key != b->ops[i].key)
			continue;
		s = w->first.done ? (int)((w->first.tag >> P2P_SENDER_SHIFT) & P2P_SENDER_MASK)
				  : b->ops[j].peer;
		if (s < 0 || s == from)
			return 1;
	}
	return 0;
}

/* After every completion: post the pieces of the receives whose head has
 * come, in the order of the operations. */
static int p2p_pump(struct smddp_comm *c, struct pump *p)
{
	struct p2p_batch *b = (struct p2p_batch *)p;

	for (int i = 0; i < b->n; i++) {
		struct p2p_wire *w = &b->w[i];

		if (b->ops[i].is_send || w->posted || !w->first.fab || !w->first.done ||
		    w->first.err)
			continue;
		if (!(w->first.tag & P2P_HEAD)) {
			w->posted = 1;
			continue;
		}
		if (older_pending(b, i,
				  (int)((w->first.tag >> P2P_SENDER_SHIFT) & P2P_SENDER_MASK)))
			continue;
		SD_CHECK(post_pieces(c, b, i));
	}
	return SMDDP_OK;
}

static int p2p_done(struct smddp_comm *c, struct p2p_batch *b, int i)
{
	struct sd_p2p_op *op = &b->ops[i];
	struct p2p_wire *w = &b->w[i];
	int rc = sd_net_wait_pump(c, &w->first, &b->pump);
	uint64_t got;

	op->done = 1;
	if (rc)
		return rc;
	/* Every earlier operation is done by now: nothing holds these back. */
	if (!op->is_send && (w->first.tag & P2P_HEAD) && !w->posted)
		SD_CHECK(post_pieces(c, b, i));
	for (size_t k = 0; k < w->npc; k++)
		SD_CHECK(sd_net_wait_pump(c, &w->pc[k], &b->pump));
	if (op->is_send)
		return SMDDP_OK; /* "taken" comes after this rank's receives */
	op->source = (int)((w->first.tag >> P2P_SENDER_SHIFT) & P2P_SENDER_MASK);
	if (w->first.tag & P2P_HEAD) {
		/* Taken, or drained for a mismatch: off the sender's hands. */
		op->off = 0;
		SD_CHECK(posted(c, op->source, sd_fab_send(c, c->net->fab, op->source,
					       p2p_tag(c->rank, op->key) | P2P_TAKEN, &op->off,
					       sizeof(op->off), &w->taken)));
		SD_CHECK(sd_net_wait_pump(c, &w->taken, &b->pump));
	}
	got = w->first.tag & P2P_HEAD ? w->sent : w->first.len;
	if (got != op->bytes)
		return sd_p2p_size_differs(c, op->source, (size_t)got, op);
	if (w->bounce && got)
		sd_copy(op->buf, w->bounce, got);
	return SMDDP_OK;
}

/* A receive's first part may be a head (8 bytes) or a whole message of up
 * to P2P_WHOLE_MAX: a smaller receive takes it into a bounce of that size,
 * and p2p_done checks the size before copying it out.  Posted directly,
 * a longer message would be truncated, which tcp;ofi_rxm of libfabric
 * 1.17 reports without the sender's size and, when the receive was posted
 * first (its data goes straight into the buffer), by dropping the
 * connection: the pair's next message would fail. */
static int wants_bounce(const struct sd_p2p_op *op)
{
	return !op->is_send && !op->done && op->bytes < P2P_WHOLE_MAX;
}

static int give_bounces(struct smddp_comm *c, struct p2p_batch *b)
{
	struct sd_net *n = c->net;
	size_t k = 0;

	for (int i = 0; i < b->n; i++)
		k += wants_bounce(&b->ops[i]);
	if (!k)
		return SMDDP_OK;
	/* Kept on the communicator and only grown: a fresh block per batch
	 * cost an mmap, page faults and an munmap per call once it passed
	 * malloc's mmap threshold (two receives). */
	if (k > n->nbounces) {
		char *p = malloc(k * P2P_WHOLE_MAX);

		if (!p)
			return sd_comm_error(c, SMDDP_ENOMEM,
					     "out of memory for %zu receive buffers of %u bytes", k,
					     P2P_WHOLE_MAX);
		sd_net_release(c, n->bounces);
		n->bounces = p;
		n->nbounces = k;
	}
	k = 0;
	for (int i = 0; i < b->n; i++)
		if (wants_bounce(&b->ops[i]))
			b->w[i].bounce = n->bounces + k++ * P2P_WHOLE_MAX;
	return SMDDP_OK;
}

/* Post every operation, then wait for each: the provider progresses them
 * all meanwhile.  A size mismatch fails its own operation only. */
int sd_net_p2p(struct smddp_comm *c, struct sd_p2p_op *ops, int n)
{
	struct p2p_batch b = {{p2p_pump}, ops, calloc((size_t)n, sizeof(*b.w)), n};
	int rc = SMDDP_OK, first = SMDDP_OK;

	if (!b.w)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	rc = give_bounces(c, &b);
	if (rc) {
		free(b.w);
		return rc;
	}
	c->net->p2p = 1;
	/* Receives first: a piece that finds its receive posted is not
	 * copied through the provider's unexpected-message buffers. */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < n && !rc; i++) {
			if (ops[i].done || ops[i].is_send != pass)
				continue;
			rc = pass ? post_send(c, &ops[i], &b.w[i])
				  : post_recv(c, &ops[i], &b.w[i]);
			/* Heads that came while posting: their pieces now. */
			if (!rc)
				rc = p2p_pump(c, &b.pump);
		}
	for (int i = 0; i < n && !rc; i++) {
		if (!b.w[i].first.fab)
			continue;
		rc = p2p_done(c, &b, i);
		if (rc == SMDDP_EMISMATCH) {
			first = first ? first : rc;
			rc = SMDDP_OK;
		}
	}
	/* Last, as a peer may answer only once it has done its own first. */
	for (int i = 0; i < n && !rc; i++)
		if (b.w[i].taken.fab && ops[i].is_send)
			rc = sd_net_wait_pump(c, &b.w[i].taken, &b.pump);
	c->net->p2p = 0;
	rc = sd_net_settle(c, rc);
	for (int i = 0; i < n; i++) {
		free(b.w[i].pc);
		sd_net_release(c, b.w[i].scratch);
	}
	free(b.w);
	return rc ? rc : first;
}

/* ---- the ops of the transport table (net-table.c) ---------------------- */

void sd_net_put_desc(struct smddp_comm *c, const void *desc, size_t len)
{
	memcpy(&c->net->descs[c->rank], desc,
	       len < sizeof(struct sd_coll_desc) ? len : sizeof(struct sd_coll_desc));
	c->net->desc_pending = 1;
}

void sd_net_get_desc(struct smddp_comm *c, int r, void *desc, size_t len)
{
	memcpy(desc, &c->net->descs[r],
	       len < sizeof(struct sd_coll_desc) ? len : sizeof(struct sd_coll_desc));
}

/* Tell every peer, best effort: the notice is posted to all, then progress
 * runs a little so that it leaves before the endpoint closes. */
void sd_net_ask_abort(struct smddp_comm *c)
{
	struct sd_net *n = c->net;

	if (!n || __atomic_load_n(&n->abort_asked, __ATOMIC_ACQUIRE))
		return;
	snprintf(n->asked_why, sizeof(n->asked_why), "%s",
		 c->failed && c->last_error[0] ? c->last_error
					       : "this rank aborted the communicator");
	__atomic_store_n(&n->abort_asked, c->failed ? c->failed : SMDDP_EABORTED, __ATOMIC_RELEASE);
	/* Not the node's shared memory: the running call may be using the
	 * node communicator's fields.  A call waiting inside the host sees
	 * the request at its next look at the fabric. */
}

void sd_net_abort(struct smddp_comm *c)
{
	struct sd_net *n = c->net;
	uint64_t until;
	int posted = 0;

	if (!n || n->aborted)
		return;
	n->aborted = 1;
	if (n->node && n->node->tp_state) {
		/* The host's ranks learn the root cause, not just "aborted". */
		if (c->failed && !n->node->failed) {
			n->node->failed = c->failed;
			memcpy(n->node->last_error, c->last_error, sizeof(c->last_error));
		}
		n->node->tp->abort(n->node);
	}
	/* The notices below carry the failure's code; the bootstrap's abort
	 * (text only) is for smddp_comm_abort, which sends it itself. */
	int32_t why = c->failed && c->failed != SMDDP_EABORTED ? c->failed : SMDDP_EABORTED;

	memcpy(n->abort_out, &why, sizeof(why));
	if (why == SMDDP_EABORTED && !c->failed)
		snprintf(n->abort_out + sizeof(why), sizeof(n->abort_out) - sizeof(why),
			 "rank %d (host %s) aborted the communicator (smddp_comm_abort)", c->rank,
			 sd_net_host_of(c, c->rank));
	else
		snprintf(n->abort_out + sizeof(why), sizeof(n->abort_out) - sizeof(why),
			 "rank %d (host %s) gave up after: %s", c->rank, sd_net_host_of(c, c->rank),
			 c->last_error);
	n->abort_sends = calloc((size_t)c->size, sizeof(*n->abort_sends));
	if (!n->abort_sends || !n->fab)
		return;
	for (int r = 0; r < c->size; r++)
		if (r != c->rank &&
		    sd_fab_notify(n->fab, r, sd_fab_tag(SD_TAG_KIND_ABORT, 0, 0, 0), n->abort_out,
				  sizeof(why) + strlen(n->abort_out + sizeof(why)) + 1,
				  &n->abort_sends[r]) == 0)
			posted++;
	/* Failures met while the notices leave must not replace the reason. */
	char keep[sizeof(c->last_error)];

	memcpy(keep, c->last_error, sizeof(keep));
	until = sd_now_ns() + 100000000ull;
	while (posted && sd_now_ns() < until) {
		int left = 0, got;

		/* A notice to a dead peer fails: the others may still go. */
		if (sd_fab_progress(c, n->fab, 1, &got) && sd_fab_poisoned(n->fab))
			break;
		for (int r = 0; r < c->size; r++)
			left += r != c->rank && n->abort_sends[r].fab && !n->abort_sends[r].done;
		if (!left)
			break;
	}
	memcpy(c->last_error, keep, sizeof(keep));
}

void sd_net_note(struct smddp_comm *c, const char *why)
{
	struct sd_net *n = c->net;

	if (n && n->node && n->node->tp_state)
		n->node->tp->note(n->node, why);
}

void sd_net_detach(struct smddp_comm *c)
{
	(void)c; /* sd_net_free does the work, with the clean flag */
}
