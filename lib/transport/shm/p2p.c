/* p2p.c - sends and receives between the ranks of one node, over the channels of shm.h.
 *
 * A batch (a group, or the messages of alltoallv, gather or scatter) is run
 * by one loop that steps every unfinished operation, so that a rank that
 * sends to and receives from several peers never waits on one while
 * another could move.  A send is posted as soon as its descriptor slot is
 * free; a receive matches the oldest posted message with its key from its
 * peer (from any peer, in turn, for SMDDP_ANY_SOURCE) and takes it in one
 * of three ways, decided by the receiver from the message's size:
 *   - up to `eager` bytes (4 KiB with up to 16 ranks, shm.h): from the
 *     descriptor itself (up to P2P_TINY bytes) or its eager slot (the
 *     send finished when posted: one hand-off, as Open MPI's eager
 *     messages);
 *   - single copy on (SMDDP_SINGLE_COPY): read from the sender's buffer
 *     (process_vm_readv): two hand-offs between the ranks, where staging
 *     takes four, and one copy; SMDDP_SINGLE_COPY_MIN, which weighs
 *     single copy against the pipelined slots of the collectives, does
 *     not apply;
 *   - else staged: the receiver claims the message, the sender copies it
 *     into its two staging halves in turn (not the collectives' slots,
 *     shm.h), the receiver copies each out.  A sender stages one message
 *     at a time (its halves are one buffer).
 * The sender's operation ends when the receiver marks the message
 * finished.  Nothing here blocks but the wait at the bottom of the loop:
 * spin, then sleep on the rank's doorbell, waking every SMDDP_LIVENESS_MS
 * to ask whether the peers still live, until SMDDP_TIMEOUT.
 *
 * Memory order: every field has one writer.  Data (descriptor, halves) is
 * written before the counter that publishes it (release) and read after
 * the counter (acquire); a counter store is followed by sd_shm_wake
 * (seq_cst), the Dekker pair of the sleeper's seq_cst store to sleeping.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "clock/clock.h"
#include "transport/shm/shm.h"
#include "util/copy.h"

/* op->state */
enum { S_NEW = 0, S_POSTED, R_MATCHED, R_STAGED };

static size_t halves_of(size_t bytes, size_t half)
{
	return (bytes + half - 1) / half;
}

/* ---- sender ---------------------------------------------------------------- */

/* Is the slot of message seq free (the message NDESC before it finished)?
 * The receiver's fin line is read once for the slots of the next NDESC
 * messages, not once per send: every read pulls the line from the
 * receiver, and its next fin store must pull it back. */
static int slots_free(struct p2p_chan *ch, struct p2p_local *l, uint64_t seq)
{
	uint64_t m = seq;

	for (; m < seq + P2P_NDESC; m++)
		if (m >= P2P_NDESC &&
		    (atomic_load_explicit(&ch->fin[m % P2P_NDESC], memory_order_acquire) &
		     ~P2P_FIN_BAD) != m - P2P_NDESC + 1)
			break;
	l->free_to = m;
	return m > seq;
}

static int send_step(struct smddp_comm *c, struct sd_p2p_op *op, int *moved)
{
	struct shm_state *s = ST(c);
	struct p2p_chan *ch = sd_shm_chan(s, c->size, c->rank, op->peer);
	struct p2p_local *l = &s->p2p[op->peer];

	if (op->state == S_NEW) {
		uint64_t seq = l->next;
		struct p2p_desc *d = &ch->d[seq % P2P_NDESC];

		/* The slot's previous message must be finished; and a later
		 * send to the same peer must not overtake one held so. */
		if (l->held == s->pass)
			return SMDDP_OK;
		if (seq >= l->free_to && !slots_free(ch, l, seq)) {
			l->held = s->pass;
			return SMDDP_OK;
		}
		d->key = op->key;
		d->bytes = op->bytes;
		d->addr = (uintptr_t)op->buf;
		if (op->bytes <= P2P_TINY)
			memcpy(d->tiny, op->buf, op->bytes);
		else if (op->bytes <= s->eager)
			sd_copy(sd_shm_eager(s, c->size, c->rank, op->peer, (unsigned)(seq % P2P_NDESC)),
			       op->buf, op->bytes);
		op->seq = seq;
		l->next = seq + 1;
		atomic_store_explicit(&d->seq, seq + 1, memory_order_seq_cst);
		sd_shm_wake(c, op->peer);
		*moved = 1;
		op->state = S_POSTED;
		if (op->bytes <= s->eager) {
			op->done = 1;
			return SMDDP_OK;
		}
	}
	uint64_t fin = atomic_load_explicit(&ch->fin[op->seq % P2P_NDESC], memory_order_acquire);

	/* At or past: a later send of this batch may have seen the word
	 * before this op did, reused the slot, and had its own message
	 * finished over it (a slot's words only grow). */
	if ((fin & ~P2P_FIN_BAD) >= op->seq + 1) {
		if (s->streaming == op)
			s->streaming = NULL;
		op->done = 1;
		*moved = 1;
		if ((fin & P2P_FIN_BAD) && (fin & ~P2P_FIN_BAD) == op->seq + 1)
			return sd_p2p_refused(c, op);
		return SMDDP_OK;
	}
	/* Staged: the receiver claimed this message; copy it through our
	 * halves, at most two ahead of what it copied out. */
	if (!s->streaming &&
	    atomic_load_explicit(&ch->claim, memory_order_acquire) == op->seq + 1) {
		s->streaming = op;
		op->off = 0;
		op->aux = atomic_load_explicit(&ch->filled, memory_order_relaxed);
	}
	if (s->streaming != op)
		return SMDDP_OK;
	size_t n = halves_of(op->bytes, s->stage_half);

	while (op->off < n) {
		uint64_t k = op->aux + op->off;
		size_t o = op->off * s->stage_half;
		size_t len = op->bytes - o < s->stage_half ? op->bytes - o : s->stage_half;

		if (k - atomic_load_explicit(&ch->drained, memory_order_acquire) >= 2)
			break;
		sd_copy(s->stage + ((size_t)c->rank * 2 + (size_t)(k & 1)) * s->stage_half,
		       (const char *)op->buf + o, len);
		atomic_store_explicit(&ch->filled, k + 1, memory_order_seq_cst);
		sd_shm_wake(c, op->peer);
		op->off++;
		*moved = 1;
	}
	return SMDDP_OK;
}

/* ---- receiver -------------------------------------------------------------- */

static void finish(struct smddp_comm *c, struct p2p_chan *ch, int q, uint64_t seq, uint64_t bad)
{
	atomic_store_explicit(&ch->fin[seq % P2P_NDESC], (seq + 1) | bad, memory_order_seq_cst);
	sd_shm_wake(c, q);
}

/* The oldest unmatched message from q with op's key, or -1.  What q has
 * posted is read once per pass: a receive must not find a message that an
 * earlier receive of the same key missed in the same pass. */
static int64_t match(struct smddp_comm *c, struct sd_p2p_op *op, int q)
{
	struct shm_state *s = ST(c);
	struct p2p_chan *ch = sd_shm_chan(s, c->size, q, c->rank);
	struct p2p_local *l = &s->p2p[q];
	uint64_t posted;

	if (l->seen_pass != s->pass) {
		/* The first lines of the next message's eager slot are asked
		 * for with its descriptor, so that their misses overlap: a
		 * message of 33 to 512 bytes then costs about one trip between
		 * the cores rather than two (the data is read only once the
		 * descriptor was seen).  docs/perf/p2p.md, "What the
		 * small sizes cost, and why".  As many lines as this receive
		 * expects: none where the data travels in the descriptor (a
		 * message of another size is refused anyway), and every poll
		 * of a waiting receiver pays for them. */
		size_t want = op->bytes <= P2P_TINY ? 0 : op->bytes < 512 ? op->bytes : 512;

		if (want && l->seen < l->base + P2P_NDESC) {
			const unsigned char *e =
				sd_shm_eager(s, c->size, q, c->rank, (unsigned)(l->seen % P2P_NDESC));

			for (size_t o = 0; o < want && o < s->eager; o += 64)
				__builtin_prefetch(e + o);
		}
		/* At most NDESC past base: a slot is reused once its
		 * message finished, so a message NDESC past an unmatched one
		 * cannot be posted. */
		while (l->seen < l->base + P2P_NDESC &&
		       atomic_load_explicit(&ch->d[l->seen % P2P_NDESC].seq, memory_order_acquire) ==
			       l->seen + 1)
			l->seen++;
		l->seen_pass = s->pass;
	}
	posted = l->seen;

	for (uint64_t seq = l->base; seq < posted; seq++) {
		unsigned bit = (unsigned)(seq - l->base);

		if (bit >= 64 || (l->taken >> bit & 1) ||
		    ch->d[seq % P2P_NDESC].key != op->key)
			continue;
		l->taken |= 1ull << bit;
		while (l->taken & 1) {
			l->taken >>= 1;
			l->base++;
		}
		return (int64_t)seq;
	}
	return -1;
}

static int recv_take(struct smddp_comm *c, struct sd_p2p_op *op, int q, uint64_t seq, int *moved)
{
	struct shm_state *s = ST(c);
	struct p2p_chan *ch = sd_shm_chan(s, c->size, q, c->rank);
	struct p2p_desc *d = &ch->d[seq % P2P_NDESC];
	int staged = op->bytes > s->eager && !c->single_copy;

	op->source = q;
	op->seq = seq;
	/* Staged: one claim per channel at a time; this one waits (and did
	 * not move: a receive that only waits must let the loop sleep and
	 * reach its deadline). */
	if (d->bytes == op->bytes && staged && s->p2p[q].claimed)
		return SMDDP_OK;
	*moved = 1;
	if (d->bytes != op->bytes) {
		size_t sent = d->bytes;

		finish(c, ch, q, seq, P2P_FIN_BAD);
		op->done = 1;
		return sd_p2p_size_differs(c, q, sent, op);
	}
	if (op->bytes <= P2P_TINY) {
		memcpy(op->buf, d->tiny, op->bytes);
	} else if (op->bytes <= s->eager) {
		sd_copy(op->buf, sd_shm_eager(s, c->size, q, c->rank, (unsigned)(seq % P2P_NDESC)),
		       op->bytes);
	} else if (staged) {
		s->p2p[q].claimed = 1;
		op->state = R_STAGED;
		op->off = 0;
		op->aux = atomic_load_explicit(&ch->drained, memory_order_relaxed);
		atomic_store_explicit(&ch->claim, seq + 1, memory_order_seq_cst);
		sd_shm_wake(c, q);
		return SMDDP_OK;
	} else {
		int rc;

		/* A sender whose call failed left its descriptor posted and
		 * may reuse its buffer once it has returned; it publishes
		 * `aborted` before returning, so the read below is of the
		 * message only if the flag is still clear after it. */
		if (atomic_load_explicit(&s->ctl[q].aborted, memory_order_seq_cst))
			return sd_shm_report_left(c, q);
		rc = sd_shm_peer_read(c, q, op->buf, d->addr, op->bytes);
		if (!rc && atomic_load_explicit(&s->ctl[q].aborted, memory_order_seq_cst))
			return sd_shm_report_left(c, q);
		if (rc)
			return rc;
	}
	finish(c, ch, q, seq, 0);
	op->done = 1;
	return SMDDP_OK;
}

static int recv_step(struct smddp_comm *c, struct sd_p2p_op *op, int *moved)
{
	struct shm_state *s = ST(c);

	if (op->state == S_NEW) {
		int64_t seq = -1;
		int q = op->peer;

		if (q >= 0) {
			seq = match(c, op, q);
		} else {
			for (int i = 1; i < c->size && seq < 0; i++) {
				q = (c->rank + i) % c->size;
				seq = match(c, op, q);
			}
		}
		if (seq < 0)
			return SMDDP_OK;
		op->state = R_MATCHED;
		op->source = q;
		op->seq = (uint64_t)seq;
		*moved = 1;
	}
	if (op->state == R_MATCHED)
		return recv_take(c, op, op->source, op->seq, moved);
	/* R_STAGED: copy out each half the sender filled. */
	int q = op->source;
	struct p2p_chan *ch = sd_shm_chan(s, c->size, q, c->rank);
	size_t n = halves_of(op->bytes, s->stage_half);

	while (op->off < n) {
		uint64_t k = op->aux + op->off;
		size_t o = op->off * s->stage_half;
		size_t len = op->bytes - o < s->stage_half ? op->bytes - o : s->stage_half;

		if (atomic_load_explicit(&ch->filled, memory_order_acquire) <= k)
			return SMDDP_OK;
		sd_copy((char *)op->buf + o,
		       s->stage + ((size_t)q * 2 + (size_t)(k & 1)) * s->stage_half, len);
		atomic_store_explicit(&ch->drained, k + 1, memory_order_seq_cst);
		sd_shm_wake(c, q);
		op->off++;
		*moved = 1;
	}
	s->p2p[q].claimed = 0;
	atomic_store_explicit(&ch->claim, 0, memory_order_relaxed);
	finish(c, ch, q, op->seq, 0);
	op->done = 1;
	*moved = 1;
	return SMDDP_OK;
}

/* ---- the wait -------------------------------------------------------------- */

/* While asleep: did a peer we need die or leave, did the bootstrap hear of
 * a failure?  (The deadline is sd_wait's: timed_out() words it.) */
static int health(struct smddp_comm *c, struct sd_p2p_op *ops, int n)
{
	struct shm_state *s = ST(c);
	char wbuf[64], note[400];
	int rc = sd_comm_cancelled(c);

	if (rc)
		return rc;

	for (int i = 0; i < n; i++) {
		int lo = ops[i].peer, hi = ops[i].peer;

		if (ops[i].done)
			continue;
		if (lo < 0 || (ops[i].state == R_MATCHED || ops[i].state == R_STAGED)) {
			lo = ops[i].state == S_NEW ? 0 : ops[i].source;
			hi = ops[i].state == S_NEW ? c->size - 1 : ops[i].source;
		}
		for (int q = lo; q <= hi; q++) {
			if (q == c->rank)
				continue;
			if (atomic_load_explicit(&s->ctl[q].aborted, memory_order_acquire))
				return sd_shm_report_left(c, q);
			if (sd_shm_peer_gone(c, q))
				return sd_comm_error(
					c, SMDDP_EPEER,
					"rank %d (pid %d) is gone%s: its process ended (killed, crashed "
					"or exited) before it %s %s",
					SD_RANK_NAME(c, q), (int)c->pids[q],
					sd_shm_note_words(c, q, note, sizeof(note)),
					ops[i].is_send ? "received" : "sent",
					sd_p2p_what(&ops[i], wbuf, sizeof(wbuf)));
		}
	}
	return sd_shm_boot_news(c);
}

/* Nothing moved since start, for SMDDP_TIMEOUT: name the first operation
 * left and the side that did not do its part. */
static int timed_out(struct smddp_comm *c, struct sd_p2p_op *ops, int n, uint64_t start)
{
	uint64_t now = sd_now_ns();
	char wbuf[64];

	for (int i = 0; i < n; i++) {
		struct sd_p2p_op *op = &ops[i];

		if (op->done)
			continue;
		if (op->is_send)
			return sd_comm_error(c, SMDDP_ETIMEDOUT,
					     "waited %.0f s (%s) for rank %d (pid %d) to receive %s "
					     "(%zu bytes) from this rank: it posted no matching "
					     "receive (same tag and communicator)",
					     (double)(now - start) / 1e9, c->timeout_from,
					     SD_RANK_NAME(c, op->peer), (int)c->pids[op->peer],
					     sd_p2p_what(op, wbuf, sizeof(wbuf)), op->bytes);
		if (op->peer < 0)
			return sd_comm_error(c, SMDDP_ETIMEDOUT,
					     "waited %.0f s (%s) for %s from any rank, and none "
					     "sent it",
					     (double)(now - start) / 1e9, c->timeout_from,
					     sd_p2p_what(op, wbuf, sizeof(wbuf)));
		return sd_comm_error(c, SMDDP_ETIMEDOUT,
				     "waited %.0f s (%s) for %s from rank %d (pid %d), which did "
				     "not send it (a send without a matching receive on one side, or "
				     "a different tag?)",
				     (double)(now - start) / 1e9, c->timeout_from,
				     sd_p2p_what(op, wbuf, sizeof(wbuf)), SD_RANK_NAME(c, op->peer),
				     (int)c->pids[op->peer]);
	}
	return SMDDP_OK;
}

/* One pass over the batch: *left unfinished, *moved if anything moved.
 * A mismatch fails its own operation only (kept in *first).  Sends step
 * first: a receive may copy for a long while (a single-copy read of
 * megabytes), and a peer waiting for this rank's message meanwhile would
 * copy only after it, where it could have copied at the same time (an
 * alltoallv lists the receive from a peer before the send to it). */
static int pass(struct smddp_comm *c, struct sd_p2p_op *ops, int n, int *left, int *moved,
		int *first)
{
	*left = 0;
	ST(c)->pass++;
	for (int sends = 1; sends >= 0; sends--)
		for (int i = 0; i < n; i++) {
			int rc;

			if (ops[i].done || ops[i].is_send != sends)
				continue;
			rc = sends ? send_step(c, &ops[i], moved) : recv_step(c, &ops[i], moved);
			if (rc == SMDDP_EMISMATCH) {
				if (!*first)
					*first = rc;
			} else if (rc) {
				return rc;
			}
			*left += !ops[i].done;
		}
	return SMDDP_OK;
}

/* A batch being waited for: what sd_wait's callbacks look at. */
struct bwait {
	struct smddp_comm *c;
	struct sd_p2p_op *ops;
	int n, first;
};

/* A pass is the poll: it moves what can move. */
static int batch_ready(void *arg, int *rc)
{
	struct bwait *b = arg;
	int left, moved = 0;

	*rc = pass(b->c, b->ops, b->n, &left, &moved, &b->first);
	if (*rc)
		return SD_WAIT_FAILED;
	return !left ? SD_WAIT_DONE : moved ? SD_WAIT_MOVED : SD_WAIT_NOT_YET;
}

/* Dekker with the publishers (shm.c): sleeping is set before the last
 * pass, the doorbell read before both. */
static int batch_sleep(void *arg, uint64_t ns, int *rc)
{
	struct bwait *b = arg;
	struct shm_ctl *me = &ST(b->c)->ctl[b->c->rank];
	uint32_t bell = atomic_load_explicit(&me->bell, memory_order_seq_cst);
	int state;

	atomic_store_explicit(&me->sleeping, 1, memory_order_seq_cst);
	state = batch_ready(arg, rc);
	if (state != SD_WAIT_NOT_YET) {
		atomic_store_explicit(&me->sleeping, 0, memory_order_relaxed);
		return state;
	}
	sd_shm_sleep(b->c, bell, ns);
	return SD_WAIT_NOT_YET;
}

static int batch_health(void *arg)
{
	struct bwait *b = arg;

	return health(b->c, b->ops, b->n);
}

int sd_shm_p2p(struct smddp_comm *c, struct sd_p2p_op *ops, int n)
{
	struct bwait b = {.c = c, .ops = ops, .n = n};
	struct sd_wait w;
	int rc;

	/* The deadline counts from the last progress: a long batch that
	 * moves is not stuck (SD_WAIT_MOVED). */
	sd_shm_wait_init(c, &w);
	w.ready = batch_ready;
	w.sleep = batch_sleep;
	w.health = batch_health;
	w.arg = &b;
	rc = sd_wait(&w);
	if (w.expired)
		rc = timed_out(c, ops, n, w.start);
	ST(c)->streaming = NULL;
	return rc ? rc : b.first;
}
