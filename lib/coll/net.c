/* net.c - collectives of communicators that span hosts.
 *
 * Between hosts every transfer is a tagged libfabric message (lib/transport/
 * fabric/), tagged with the call's number on the wire (c->wire: one per
 * call, and one per chunk of a device call staged across hosts), a phase
 * and a step, so that messages of different steps never match each other's
 * receives.
 *
 * Algorithms, over a "group" (a list of the communicator's ranks):
 *   ring allreduce       reduce-scatter then allgather around the ring, each
 *                        block cut in chunks: a chunk moves on as soon as it
 *                        is reduced, so sending, receiving and reducing
 *                        overlap and the links stay busy in both directions
 *   recursive doubling   log2(p) exchanges of the whole vector, for small ones
 *   ring allgather and reduce-scatter, chain broadcast and reduce (pipelined
 *   by chunks), pairwise alltoall, dissemination barrier.
 * Hierarchical (SMDDP's balanced idea): reduce-scatter inside the node over
 * shared memory, then every local rank runs the allreduce of its own shard
 * with the ranks of the same local rank on the other hosts (its "rail"), then
 * allgather inside the node: every rank and NIC carries 1/L of the traffic.
 *
 * Waits: progress is polled SMDDP_SPIN times, then the completion queue is
 * slept on 1 ms at a time; between sleeps the bootstrap is asked for dead
 * ranks and the abort-notice receive is looked at.  With no completion for
 * SMDDP_TIMEOUT the wait fails with SMDDP_ENETWORK naming the peer and host.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "coll/net.h"
#include "transport/fabric/fabric.h"
#include "transport/transport.h"

enum { ALGO_AUTO, ALGO_HIER, ALGO_RING, ALGO_RD };
static const char *const algo_names[] = {"auto", "hier", "ring", "rd"};

enum { PH_MAIN = 1, PH_TAIL, PH_DESC, PH_BARRIER, PH_SHARD };

#define NSLOTS 16 /* receive window, in chunks */
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
	size_t chunk;            /* bytes per pipelined message */
	size_t rd_max;
	char *slots;             /* NSLOTS receive chunks, then NSLOTS send chunks */
	struct sd_freq abort_req;
	char abort_in[ABORT_MSG];
	char abort_out[ABORT_MSG];
	struct sd_freq *abort_sends;
	int aborted;
	struct sd_coll_desc *descs;
	int desc_pending;
	int p2p;                 /* a batch of sends and receives waits (messages) */
	int logged[SD_NUM_COLLS];
};

struct grp {
	int n, me;
	const int *ranks; /* comm rank of each member */
};

/* ---- waiting ------------------------------------------------------------ */

static const char *host_of(struct smddp_comm *c, int r)
{
	return sd_host_name(c->net->hosts[r]);
}

static int check_news(struct smddp_comm *c)
{
	struct sd_net *n = c->net;
	char err[512];
	int who = -1, rc;

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
		rc = sd_boot_poll(n->job->boot, &who, err, sizeof(err));
		/* News of a rank outside this communicator (a split) is not
		 * this communicator's failure. */
		for (int r = 0; rc && who >= 0 && r <= c->size; r++)
			if (r == c->size)
				rc = SMDDP_OK;
			else if (n->world[r] == who)
				break;
		if (rc)
			return sd_comm_error(c, rc, "%s", err);
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
		int why;

		sd_fab_progress(c, c->net->fab, 1);
		memcpy(c->last_error, keep, sizeof(keep));
		why = check_news(c);
		if (why)
			return why;
	}
	return rc;
}

/* Something to do whenever completions arrive while waiting (post sends
 * that a window held back). */
struct pump {
	int (*fn)(struct smddp_comm *c, struct pump *p);
};

/* Progress until r is done (p, if any, runs after every completion). */
static int net_wait_pump(struct smddp_comm *c, struct sd_freq *r, struct pump *p)
{
	struct sd_net *n = c->net;
	uint64_t last = sd_now_ns(), now = last;
	int polls = 0, got, sleep = 0;

	while (!r->done) {
		got = sd_fab_progress(c, n->fab, sleep);
		if (got < 0)
			return explain(c, -got);
		if (got > 0) {
			polls = 0;
			sleep = 0;
			last = sd_now_ns();
			if (p)
				SD_CHECK(p->fn(c, p));
			continue;
		}
		/* Poll SMDDP_SPIN times or NET_SPIN_NS, whichever ends first,
		 * then sleep on the completion queue: a poll is a system call
		 * here, and spinning cores starve the kernel's own network
		 * work. */
		if (++polls < c->spin && (polls & 15))
			continue;
		now = sd_now_ns();
		if (polls >= c->spin || now - last > NET_SPIN_NS)
			sleep = 1;
		if (!sleep && (polls & 255))
			continue;
		SD_CHECK(check_news(c));
		if (now - last > c->timeout_ns && n->p2p && r->is_send)
			return sd_comm_error(
				c, SMDDP_ETIMEDOUT,
				"waited %llu s (%s) for rank %d (host %s) to receive this rank's "
				"message: it posted no matching receive (same tag and communicator)",
				(unsigned long long)(c->timeout_ns / 1000000000ull), c->timeout_from,
				r->peer, host_of(c, r->peer));
		if (now - last > c->timeout_ns && n->p2p) {
			char who[120] = "any rank";

			if (r->peer >= 0)
				snprintf(who, sizeof(who), "rank %d (host %s)", r->peer,
					 host_of(c, r->peer));
			return sd_comm_error(c, SMDDP_ETIMEDOUT,
					     "waited %llu s (%s) for a message from %s, which did not "
					     "send it (a send without a matching receive on one side, "
					     "or a different tag?)",
					     (unsigned long long)(c->timeout_ns / 1000000000ull),
					     c->timeout_from, who);
		}
		if (now - last > c->timeout_ns)
			return sd_comm_error(
				c, SMDDP_ENETWORK,
				"waited %llu s (%s) for rank %d on host %s over %s, "
				"and nothing arrived: the link or that rank stalled",
				(unsigned long long)(c->timeout_ns / 1000000000ull), c->timeout_from, r->peer,
				r->peer >= 0 ? host_of(c, r->peer) : "?", sd_fab_describe(n->fab));
	}
	if (sd_fab_truncated(r)) {
		char who[32] = "a rank";

		if (r->peer >= 0)
			snprintf(who, sizeof(who), "rank %d", r->peer);
		return sd_comm_error(c, SMDDP_EMISMATCH,
				     "%s sent more than the %zu bytes this rank's receive takes: "
				     "the count or dtype differs",
				     who, r->len);
	}
	if (r->err)
		return explain(c, sd_comm_error(c, SMDDP_ENETWORK,
						"a transfer %s rank %d (host %s) failed",
						r->is_send ? "to" : "from", r->peer,
						host_of(c, r->peer)));
	return SMDDP_OK;
}

static int net_wait(struct smddp_comm *c, struct sd_freq *r)
{
	return net_wait_pump(c, r, NULL);
}

static int wait_all(struct smddp_comm *c, struct sd_freq *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (r[i].fab)
			SD_CHECK(net_wait(c, &r[i]));
	return SMDDP_OK;
}

/* A collective that fails leaves operations posted, whose requests (on its
 * stack) and buffers are about to go: detach and cancel them first. */
static int settle(struct smddp_comm *c, int rc)
{
	if (rc)
		sd_fab_forget(c->net->fab, 250);
	return rc;
}

/* Free a buffer that transfers may have used, unless a failure left some
 * behind (then it stays, like the endpoint that holds them). */
static void release(struct smddp_comm *c, void *p)
{
	if (!sd_fab_poisoned(c->net->fab))
		free(p);
}

static uint64_t tag(struct smddp_comm *c, unsigned phase, uint64_t step)
{
	return sd_fab_tag(SD_TAG_KIND_DATA, c->wire, phase, step);
}

/* A post that fails (a connection already broken) is explained like a
 * failed transfer: the root cause first, if the bootstrap knows it. */
static int posted(struct smddp_comm *c, int rc)
{
	return rc == SMDDP_ENETWORK ? explain(c, rc) : rc;
}

static int send_to(struct smddp_comm *c, int peer, unsigned ph, uint64_t step, const void *buf,
		   size_t len, struct sd_freq *r)
{
	memset(r, 0, sizeof(*r));
	return posted(c, sd_fab_send(c, c->net->fab, peer, tag(c, ph, step), buf, len, r));
}

static int recv_from(struct smddp_comm *c, int peer, unsigned ph, uint64_t step, void *buf,
		     size_t len, struct sd_freq *r)
{
	memset(r, 0, sizeof(*r));
	return posted(c, sd_fab_recv(c, c->net->fab, peer, tag(c, ph, step), buf, len, r));
}

static int check_len(struct smddp_comm *c, struct sd_freq *r, size_t want)
{
	if (r->len != want)
		return sd_comm_error(c, SMDDP_EINTERNAL,
				     "rank %d sent %zu bytes where %zu were expected: do all ranks "
				     "run the same version of libsmddp with the same arguments?",
				     r->peer, r->len, want);
	return SMDDP_OK;
}

/* ---- ring allreduce, reduce-scatter, allgather --------------------------- */

static inline int mod(int a, int p)
{
	return ((a % p) + p) % p;
}

/* Element range of block b of p over count. */
static inline void block(size_t count, int p, int b, size_t *lo, size_t *hi)
{
	*lo = count / (size_t)p * (size_t)b + ((size_t)b < count % (size_t)p ? (size_t)b : count % (size_t)p);
	*hi = *lo + count / (size_t)p + ((size_t)b < count % (size_t)p);
}

static size_t chunk_elems(struct smddp_comm *c, size_t es, size_t blk)
{
	size_t C = c->net->chunk / es;

	if (!C)
		C = 1;
	/* Keep steps within the tag's 24 bits. */
	while (blk / C > 4096)
		C *= 2;
	return C;
}

/* Allreduce of count elements among g (op is never AVG here).
 *
 * Message k = s * nch + j is chunk j of step s (reduce-scatter steps, then
 * allgather steps).  Receives are posted NSLOTS ahead into the slots; sends
 * go out in order of k, at most NSLOTS in flight: chunk j of step s+1 is
 * ready once chunk j of step s has been received and reduced. */
struct ring {
	struct pump pump;
	struct sd_freq *sreq;
	size_t next, done_upto, ready, M, nch, C, count, es;
	int p, me, right;
	unsigned ph;
	const char *in;
	char *out;
};

static inline int ring_block(int p, int me, int s)
{
	return s < p - 1 ? mod(me - s - 1, p) : mod(me - (s - p + 1), p);
}

static void ring_range(const struct ring *g, int b, size_t j, size_t *lo, size_t *len)
{
	size_t blo, bhi;

	block(g->count, g->p, b, &blo, &bhi);
	*lo = blo + j * g->C < bhi ? blo + j * g->C : bhi;
	*len = bhi - *lo < g->C ? bhi - *lo : g->C;
}

static int ring_pump(struct smddp_comm *c, struct pump *pp)
{
	struct ring *g = (struct ring *)pp;

	while (g->done_upto < g->next && g->sreq[g->done_upto].done)
		g->done_upto++;
	while (g->next < g->ready && g->next - g->done_upto < SEND_WINDOW) {
		size_t k = g->next, lo, len;
		int s = (int)(k / g->nch);
		/* Step 0 sends my own block; step s the block received in s-1. */
		int b = s == 0 ? g->me : ring_block(g->p, g->me, s - 1);

		ring_range(g, b, k % g->nch, &lo, &len);
		SD_CHECK(send_to(c, g->right, g->ph, k, (s == 0 ? g->in : g->out) + lo * g->es,
				 len * g->es, &g->sreq[k]));
		g->next++;
	}
	return SMDDP_OK;
}

/* Let the send window move: wait for the oldest send in flight. */
static int ring_advance(struct smddp_comm *c, struct ring *g)
{
	if (g->done_upto < g->next)
		SD_CHECK(net_wait_pump(c, &g->sreq[g->done_upto], &g->pump));
	return ring_pump(c, &g->pump);
}

static int ring_allreduce(struct smddp_comm *c, const struct grp *gr, unsigned ph,
			  const void *sbuf, void *rbuf, size_t count, enum smddp_dtype dt,
			  enum smddp_op op)
{
	int p = gr->n, me = gr->me, left = gr->ranks[mod(me - 1, p)];
	size_t es = smddp_dtype_size(dt), blk = (count + (size_t)p - 1) / (size_t)p;
	size_t C = chunk_elems(c, es, blk), nch = blk ? (blk + C - 1) / C : 1;
	size_t nsteps = 2 * (size_t)(p - 1), M = nsteps * nch, W = NSLOTS;
	char *slots = c->net->slots, *big = NULL;
	struct sd_freq rreq[NSLOTS];
	struct ring g = {{ring_pump}, NULL, 0, 0, nch, M, nch, C, count, es, p, me,
			 gr->ranks[mod(me + 1, p)], ph, sbuf, rbuf};
	int rc = SMDDP_OK;

	if (p == 1) {
		if (sbuf != rbuf)
			memcpy(rbuf, sbuf, count * es);
		return SMDDP_OK;
	}
	g.sreq = calloc(M, sizeof(*g.sreq));
	if (C * es > c->net->chunk)
		slots = big = malloc(W * C * es); /* chunks grew past the slots */
	if (!g.sreq || !slots) {
		free(g.sreq);
		free(big);
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	}
	memset(rreq, 0, sizeof(rreq));
	for (size_t k = 0; k < M && k < W; k++) {
		size_t lo, len;

		ring_range(&g, ring_block(p, me, (int)(k / nch)), k % nch, &lo, &len);
		SD_CHECK_GOTO(recv_from(c, left, ph, k, slots + k * C * es, len * es, &rreq[k]), rc,
			      out_free);
	}
	SD_CHECK_GOTO(ring_pump(c, &g.pump), rc, out_free);
	for (size_t k = 0; k < M; k++) {
		int s = (int)(k / nch);
		size_t j = k % nch, lo, len;
		char *slot = slots + (k % W) * C * es;

		ring_range(&g, ring_block(p, me, s), j, &lo, &len);
		SD_CHECK_GOTO(net_wait_pump(c, &rreq[k % W], &g.pump), rc, out_free);
		SD_CHECK_GOTO(check_len(c, &rreq[k % W], len * es), rc, out_free);
		if (s < p - 1) {
			const void *srcs[2] = {g.in + lo * es, slot};

			sd_reduce(g.out + lo * es, srcs, 2, len, dt, op, 1);
		} else {
			/* This block went out from rbuf in reduce-scatter step
			 * s-p+1: that send must be done before it is overwritten. */
			size_t k0 = (size_t)(s - p + 1) * nch + j;

			while (k0 >= g.next)
				SD_CHECK_GOTO(ring_advance(c, &g), rc, out_free);
			SD_CHECK_GOTO(net_wait_pump(c, &g.sreq[k0], &g.pump), rc, out_free);
			memcpy(g.out + lo * es, slot, len * es);
		}
		if (k + W < M) {
			size_t k2 = k + W, lo2, len2;

			ring_range(&g, ring_block(p, me, (int)(k2 / nch)), k2 % nch, &lo2, &len2);
			SD_CHECK_GOTO(recv_from(c, left, ph, k2, slot, len2 * es, &rreq[k % W]), rc,
				      out_free);
		}
		/* Chunk j of the next step may go. */
		g.ready = k + nch + 1 < M ? k + nch + 1 : M;
		SD_CHECK_GOTO(ring_pump(c, &g.pump), rc, out_free);
	}
	while (g.next < M)
		SD_CHECK_GOTO(ring_advance(c, &g), rc, out_free);
	rc = wait_all(c, g.sreq, M);
out_free:
	rc = settle(c, rc);
	free(g.sreq);
	release(c, big);
	return rc;
}

/* Recursive doubling over g, the whole vector each step (small messages).
 * Non-powers of two fold the extra ranks in first and out at the end.
 * Operands are always combined lower member first, so that every rank
 * computes the same bits. */
static int rd_allreduce(struct smddp_comm *c, const struct grp *g, unsigned ph, const void *sbuf,
			void *rbuf, size_t count, enum smddp_dtype dt, enum smddp_op op)
{
	int p = g->n, me = g->me, p2 = 1, rem, vme, step = 0;
	size_t es = smddp_dtype_size(dt), bytes = count * es;
	char *tmp;
	struct sd_freq rr, sr;
	int rc = SMDDP_OK;

	if (sbuf != rbuf)
		memcpy(rbuf, sbuf, bytes);
	if (p == 1)
		return SMDDP_OK;
	while (p2 * 2 <= p)
		p2 *= 2;
	rem = p - p2;
	tmp = bytes <= c->net->chunk * NSLOTS ? c->net->slots : malloc(bytes);
	if (!tmp)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
#define EXCH(peer_idx, combine)                                                           \
	do {                                                                              \
		int pr_ = g->ranks[peer_idx];                                             \
		SD_CHECK_GOTO(recv_from(c, pr_, ph, (uint64_t)step, tmp, bytes, &rr), rc, out); \
		SD_CHECK_GOTO(send_to(c, pr_, ph, (uint64_t)step, rbuf, bytes, &sr), rc, out);  \
		SD_CHECK_GOTO(net_wait(c, &rr), rc, out);                                 \
		SD_CHECK_GOTO(check_len(c, &rr, bytes), rc, out);                         \
		SD_CHECK_GOTO(net_wait(c, &sr), rc, out);                                 \
		if (combine) {                                                            \
			const void *s_[2];                                                \
			int lower_ = (peer_idx) < me;                                     \
			s_[0] = lower_ ? (const void *)tmp : rbuf;                        \
			s_[1] = lower_ ? (const void *)rbuf : tmp;                        \
			sd_reduce(rbuf, s_, 2, count, dt, op, 1);                         \
		}                                                                         \
		step++;                                                                   \
	} while (0)
	if (me < 2 * rem) {
		if (me % 2 == 0) {
			/* Hand my vector to my odd neighbour, get the result back. */
			SD_CHECK_GOTO(send_to(c, g->ranks[me + 1], ph, 0, rbuf, bytes, &sr), rc, out);
			SD_CHECK_GOTO(net_wait(c, &sr), rc, out);
			SD_CHECK_GOTO(recv_from(c, g->ranks[me + 1], ph, 1000, rbuf, bytes, &rr), rc,
				      out);
			SD_CHECK_GOTO(net_wait(c, &rr), rc, out);
			rc = check_len(c, &rr, bytes);
			goto out;
		}
		SD_CHECK_GOTO(recv_from(c, g->ranks[me - 1], ph, 0, tmp, bytes, &rr), rc, out);
		SD_CHECK_GOTO(net_wait(c, &rr), rc, out);
		SD_CHECK_GOTO(check_len(c, &rr, bytes), rc, out);
		{
			const void *s_[2] = {tmp, rbuf};

			sd_reduce(rbuf, s_, 2, count, dt, op, 1);
		}
		vme = me / 2;
	} else {
		vme = me - rem;
	}
	step = 1;
	for (int mask = 1; mask < p2; mask <<= 1) {
		int vpeer = vme ^ mask;
		int peer = vpeer < rem ? vpeer * 2 + 1 : vpeer + rem;

		EXCH(peer, 1);
	}
	if (me < 2 * rem) {
		SD_CHECK_GOTO(send_to(c, g->ranks[me - 1], ph, 1000, rbuf, bytes, &sr), rc, out);
		SD_CHECK_GOTO(net_wait(c, &sr), rc, out);
	}
#undef EXCH
out:
	rc = settle(c, rc);
	if (tmp != c->net->slots)
		release(c, tmp);
	return rc;
}

/* Allgather of bytes per member: member i's block lives at rbuf + off[i];
 * mine comes from sbuf (which may already be there). */
static int ring_allgather(struct smddp_comm *c, const struct grp *g, unsigned ph, const void *sbuf,
			  char *rbuf, const size_t *off, size_t bytes)
{
	int p = g->n, me = g->me, right = g->ranks[mod(me + 1, p)], left = g->ranks[mod(me - 1, p)];
	size_t C = c->net->chunk, nch = bytes ? (bytes + C - 1) / C : 1, M, W = 64;
	struct sd_freq *sreq, *rreq;
	int rc = SMDDP_OK;

	while (nch > 4096) {
		C *= 2;
		nch = (bytes + C - 1) / C;
	}
	if (sbuf != rbuf + off[me])
		memmove(rbuf + off[me], sbuf, bytes);
	if (p == 1)
		return SMDDP_OK;
	M = (size_t)(p - 1) * nch;
	sreq = calloc(M, sizeof(*sreq));
	rreq = calloc(W, sizeof(*rreq));
	if (!sreq || !rreq) {
		free(sreq);
		free(rreq);
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	}
#define PIECE(k, ptr, len)                                                     \
	do {                                                                   \
		int b_ = mod(me - (int)((k) / nch) - 1, p);                    \
		size_t o_ = ((k) % nch) * C;                                   \
		o_ = o_ < bytes ? o_ : bytes;                                  \
		len = bytes - o_ < C ? bytes - o_ : C;                         \
		ptr = rbuf + off[b_] + o_;                                     \
	} while (0)
	for (size_t k = 0; k < M && k < W; k++) {
		char *ptr;
		size_t len;

		PIECE(k, ptr, len);
		SD_CHECK_GOTO(recv_from(c, left, ph, k, ptr, len, &rreq[k]), rc, out);
	}
	for (size_t j = 0; j < nch; j++) {
		size_t o = j * C < bytes ? j * C : bytes, len = bytes - o < C ? bytes - o : C;

		SD_CHECK_GOTO(send_to(c, right, ph, j, rbuf + off[me] + o, len, &sreq[j]), rc, out);
	}
	for (size_t k = 0; k < M; k++) {
		char *ptr;
		size_t len;

		PIECE(k, ptr, len);
		SD_CHECK_GOTO(net_wait(c, &rreq[k % W]), rc, out);
		SD_CHECK_GOTO(check_len(c, &rreq[k % W], len), rc, out);
		if (k + nch < M)
			SD_CHECK_GOTO(send_to(c, right, ph, k + nch, ptr, len, &sreq[k + nch]), rc, out);
		if (k + W < M) {
			PIECE(k + W, ptr, len);
			SD_CHECK_GOTO(recv_from(c, left, ph, k + W, ptr, len, &rreq[k % W]), rc, out);
		}
	}
	rc = wait_all(c, sreq, M);
#undef PIECE
out:
	rc = settle(c, rc);
	free(sreq);
	free(rreq);
	return rc;
}

/* Reduce-scatter: sbuf holds g->n blocks of count; member i gets block i
 * in rbuf.  rbuf must not overlap sbuf (callers copy first). */
static int ring_reduce_scatter(struct smddp_comm *c, const struct grp *g, unsigned ph,
			       const void *sbuf, void *rbuf, size_t count, enum smddp_dtype dt,
			       enum smddp_op op)
{
	int p = g->n, me = g->me, right = g->ranks[mod(me + 1, p)], left = g->ranks[mod(me - 1, p)];
	size_t es = smddp_dtype_size(dt), C = chunk_elems(c, es, count);
	size_t nch = count ? (count + C - 1) / C : 1, M, W = NSLOTS;
	const char *in = sbuf;
	char *rslots, *sslots, *big = NULL;
	struct sd_freq *sreq, rreq[NSLOTS];
	int *sslot_of, rc = SMDDP_OK;

	if (p == 1) {
		memcpy(rbuf, sbuf, count * es);
		return SMDDP_OK;
	}
	M = (size_t)(p - 1) * nch;
	if (C * es > c->net->chunk) {
		big = malloc(2 * W * C * es);
		if (!big)
			return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
		rslots = big;
	} else {
		rslots = c->net->slots;
	}
	sslots = rslots + W * C * es;
	sreq = calloc(M, sizeof(*sreq));
	sslot_of = calloc(W, sizeof(*sslot_of));
	if (!sreq || !sslot_of) {
		free(sreq);
		free(sslot_of);
		free(big);
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < W; i++)
		sslot_of[i] = -1;
	memset(rreq, 0, sizeof(rreq));
#define LEN(j) (count - ((j) * C < count ? (j) * C : count) < C ? count - ((j) * C < count ? (j) * C : count) : C)
	for (size_t k = 0; k < M && k < W; k++)
		SD_CHECK_GOTO(recv_from(c, left, ph, k, rslots + k * C * es, LEN(k % nch) * es,
					&rreq[k]),
			      rc, out);
	for (size_t j = 0; j < nch; j++) {
		size_t lo = (size_t)mod(me - 1, p) * count + j * C;

		SD_CHECK_GOTO(send_to(c, right, ph, j, in + lo * es, LEN(j) * es, &sreq[j]), rc, out);
	}
	for (size_t k = 0; k < M; k++) {
		int s = (int)(k / nch), b = mod(me - s - 2, p);
		size_t j = k % nch, len = LEN(j), lo = (size_t)b * count + j * C;
		char *slot = rslots + (k % W) * C * es;
		const void *srcs[2] = {in + lo * es, slot};

		SD_CHECK_GOTO(net_wait(c, &rreq[k % W]), rc, out);
		SD_CHECK_GOTO(check_len(c, &rreq[k % W], len * es), rc, out);
		if (s == p - 2) {
			sd_reduce((char *)rbuf + j * C * es, srcs, 2, len, dt, op, 1);
		} else {
			/* A send slot whose last send has completed. */
			size_t w = (k / 1) % W;

			if (sslot_of[w] >= 0)
				SD_CHECK_GOTO(net_wait(c, &sreq[sslot_of[w]]), rc, out);
			sd_reduce(sslots + w * C * es, srcs, 2, len, dt, op, 1);
			sslot_of[w] = (int)(k + nch);
			SD_CHECK_GOTO(send_to(c, right, ph, k + nch, sslots + w * C * es, len * es,
					      &sreq[k + nch]),
				      rc, out);
		}
		if (k + W < M)
			SD_CHECK_GOTO(recv_from(c, left, ph, k + W, slot, LEN((k + W) % nch) * es,
						&rreq[k % W]),
				      rc, out);
	}
	rc = wait_all(c, sreq, M);
#undef LEN
out:
	rc = settle(c, rc);
	free(sreq);
	free(sslot_of);
	release(c, big);
	return rc;
}

/* ---- the rest, flat ---------------------------------------------------- */

static int dissemination(struct smddp_comm *c, const struct grp *g, unsigned ph)
{
	struct sd_freq rr, sr;
	char dummy = 0;
	int step = 0, rc = SMDDP_OK;

	for (int k = 1; !rc && k < g->n; k <<= 1, step++) {
		rc = recv_from(c, g->ranks[mod(g->me - k, g->n)], ph, (uint64_t)step, &dummy, 0, &rr);
		if (!rc)
			rc = send_to(c, g->ranks[mod(g->me + k, g->n)], ph, (uint64_t)step, &dummy, 0,
				     &sr);
		if (!rc)
			rc = net_wait(c, &rr);
		if (!rc)
			rc = net_wait(c, &sr);
	}
	return settle(c, rc);
}

static void divide(void *buf, size_t n, enum smddp_dtype dt, int by)
{
	const void *src[1] = {buf};

	if (n)
		sd_reduce(buf, src, 1, n, dt, SMDDP_AVG, by);
}

static struct grp flat(struct smddp_comm *c)
{
	struct grp g = {c->size, c->rank, c->net->all};

	return g;
}

static struct grp rail(struct smddp_comm *c)
{
	struct grp g = {c->net->nnodes, c->rank / c->net->L, c->net->rail};

	return g;
}

static void note_algo(struct smddp_comm *c, int coll, const char *algo)
{
	if (c->net->logged[coll] != 1 + (int)(algo[0])) {
		c->net->logged[coll] = 1 + (int)(algo[0]);
		SD_INFO(SD_SUB_NET, "%s: %s algorithm (%d ranks on %d hosts, SMDDP_ALGO=%s)",
			sd_coll_name(coll), algo, c->size, c->net->nnodes, algo_names[c->net->algo]);
	}
}

static int use_hier(struct smddp_comm *c)
{
	struct sd_net *n = c->net;

	if (!n->hier)
		return 0;
	if (n->algo == ALGO_HIER)
		return 1;
	return n->algo == ALGO_AUTO && n->L > 1;
}

static int node_err(struct smddp_comm *c, int rc)
{
	if (rc)
		return sd_comm_error(c, rc, "inside host %s: %s", host_of(c, c->rank),
				     c->net->node->last_error);
	return SMDDP_OK;
}

static int net_allreduce_grp(struct smddp_comm *c, const struct grp *g, unsigned ph,
			     const void *sbuf, void *rbuf, size_t count, enum smddp_dtype dt,
			     enum smddp_op op)
{
	size_t bytes = count * smddp_dtype_size(dt);

	if (c->net->algo == ALGO_RD || (c->net->algo != ALGO_RING && bytes <= c->net->rd_max))
		return rd_allreduce(c, g, ph, sbuf, rbuf, count, dt, op);
	return ring_allreduce(c, g, ph, sbuf, rbuf, count, dt, op);
}

int sd_net_allreduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		     enum smddp_dtype dt, enum smddp_op op)
{
	struct sd_net *n = c->net;
	enum smddp_op rop = op == SMDDP_AVG ? SMDDP_SUM : op;
	size_t es = smddp_dtype_size(dt);

	if (use_hier(c)) {
		struct grp g = rail(c);
		int L = n->L, l = n->node->rank;
		size_t q = count / (size_t)L, tail = count - q * (size_t)L;
		char *shard = (char *)rbuf + (size_t)l * q * es;

		note_algo(c, SD_COLL_ALLREDUCE, "hierarchical");
		if (q) {
			SD_CHECK(node_err(c, sd_coll_reduce_scatter(n->node, sbuf, shard, q, dt, rop)));
			SD_CHECK(net_allreduce_grp(c, &g, PH_SHARD, shard, shard, q, dt, rop));
		}
		if (tail) {
			char *t = (char *)rbuf + q * (size_t)L * es;

			SD_CHECK(node_err(c, sd_coll_allreduce(n->node, (const char *)sbuf +
							       q * (size_t)L * es, t, tail, dt, rop)));
			SD_CHECK(net_allreduce_grp(c, &g, PH_TAIL, t, t, tail, dt, rop));
			if (op == SMDDP_AVG)
				divide(t, tail, dt, c->size);
		}
		if (q) {
			if (op == SMDDP_AVG)
				divide(shard, q, dt, c->size);
			SD_CHECK(node_err(c, sd_coll_allgather(n->node, shard, rbuf, q, dt)));
		}
		return SMDDP_OK;
	}
	{
		struct grp g = flat(c);
		int rd = n->algo == ALGO_RD || (n->algo != ALGO_RING && count * es <= n->rd_max);

		note_algo(c, SD_COLL_ALLREDUCE, rd ? "recursive doubling" : "ring");
		SD_CHECK(net_allreduce_grp(c, &g, PH_MAIN, sbuf, rbuf, count, dt, rop));
		if (op == SMDDP_AVG)
			divide(rbuf, count, dt, c->size);
	}
	return SMDDP_OK;
}

int sd_net_allgather(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		     enum smddp_dtype dt)
{
	struct sd_net *n = c->net;
	size_t bytes = count * smddp_dtype_size(dt);
	size_t *off = calloc((size_t)c->size, sizeof(*off));
	int rc;

	if (!off)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	if (use_hier(c)) {
		struct grp g = rail(c);
		int L = n->L, l = n->node->rank;

		note_algo(c, SD_COLL_ALLGATHER, "hierarchical");
		/* My rail's blocks straight to their places, then each host's
		 * blocks within the node, in place. */
		for (int m = 0; m < g.n; m++)
			off[m] = ((size_t)m * (size_t)L + (size_t)l) * bytes;
		rc = ring_allgather(c, &g, PH_MAIN, sbuf, rbuf, off, bytes);
		for (int m = 0; !rc && m < g.n; m++)
			rc = node_err(c, sd_coll_allgather(n->node,
							   (char *)rbuf + off[m],
							   (char *)rbuf + (size_t)m * (size_t)L * bytes,
							   count, dt));
	} else {
		struct grp g = flat(c);

		note_algo(c, SD_COLL_ALLGATHER, "ring");
		for (int r = 0; r < c->size; r++)
			off[r] = (size_t)r * bytes;
		rc = ring_allgather(c, &g, PH_MAIN, sbuf, rbuf, off, bytes);
	}
	free(off);
	return rc;
}

int sd_net_reduce_scatter(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			  enum smddp_dtype dt, enum smddp_op op)
{
	struct sd_net *n = c->net;
	enum smddp_op rop = op == SMDDP_AVG ? SMDDP_SUM : op;
	size_t es = smddp_dtype_size(dt);
	int rc;

	if (use_hier(c)) {
		struct grp g = rail(c);
		size_t region = (size_t)n->L * count * es;
		char *tmp = malloc((size_t)g.n * count * es + 1);

		if (!tmp)
			return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
		note_algo(c, SD_COLL_REDUCE_SCATTER, "hierarchical");
		rc = SMDDP_OK;
		for (int m = 0; !rc && m < g.n; m++)
			rc = node_err(c, sd_coll_reduce_scatter(n->node, (const char *)sbuf + m * region,
								tmp + (size_t)m * count * es, count,
								dt, rop));
		if (!rc)
			rc = ring_reduce_scatter(c, &g, PH_MAIN, tmp, rbuf, count, dt, rop);
		release(c, tmp);
	} else {
		struct grp g = flat(c);
		const char *in = sbuf, *ob = rbuf;
		size_t total = (size_t)c->size * count * es;
		char *copy = NULL;

		note_algo(c, SD_COLL_REDUCE_SCATTER, "ring");
		/* Overlap other than "my block is my output" needs a copy of
		 * the input (the ring reads blocks after writing rbuf). */
		if (ob < in + total && in < ob + count * es && ob != in + (size_t)c->rank * count * es) {
			copy = malloc(total);
			if (!copy)
				return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
			memcpy(copy, in, total);
			in = copy;
		}
		rc = ring_reduce_scatter(c, &g, PH_MAIN, in, rbuf, count, dt, rop);
		release(c, copy);
	}
	if (!rc && op == SMDDP_AVG)
		divide(rbuf, count, dt, c->size);
	return rc;
}

/* Chain from root, pipelined by chunks. */
int sd_net_broadcast(struct smddp_comm *c, void *buf, size_t count, enum smddp_dtype dt, int root)
{
	int p = c->size, pos = mod(c->rank - root, p);
	int next = mod(c->rank + 1, p), prev = mod(c->rank - 1, p);
	size_t bytes = count * smddp_dtype_size(dt), C = c->net->chunk, nch, W = 64;
	struct sd_freq *sreq, *rreq;
	int rc = SMDDP_OK;

	note_algo(c, SD_COLL_BROADCAST, "pipelined chain");
	while ((bytes + C - 1) / C > 4096)
		C *= 2;
	nch = (bytes + C - 1) / C;
	sreq = calloc(nch, sizeof(*sreq));
	rreq = calloc(W, sizeof(*rreq));
	if (!sreq || !rreq) {
		free(sreq);
		free(rreq);
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	}
	for (size_t j = 0; pos && j < nch && j < W; j++)
		SD_CHECK_GOTO(recv_from(c, prev, PH_MAIN, j, (char *)buf + j * C,
					bytes - j * C < C ? bytes - j * C : C, &rreq[j]),
			      rc, out);
	for (size_t j = 0; j < nch; j++) {
		size_t len = bytes - j * C < C ? bytes - j * C : C;

		if (pos) {
			SD_CHECK_GOTO(net_wait(c, &rreq[j % W]), rc, out);
			SD_CHECK_GOTO(check_len(c, &rreq[j % W], len), rc, out);
			if (j + W < nch) {
				size_t j2 = j + W;

				SD_CHECK_GOTO(recv_from(c, prev, PH_MAIN, j2, (char *)buf + j2 * C,
							bytes - j2 * C < C ? bytes - j2 * C : C,
							&rreq[j % W]),
					      rc, out);
			}
		}
		if (pos != p - 1)
			SD_CHECK_GOTO(send_to(c, next, PH_MAIN, j, (char *)buf + j * C, len, &sreq[j]), rc,
				      out);
	}
	rc = wait_all(c, sreq, nch);
out:
	rc = settle(c, rc);
	free(sreq);
	free(rreq);
	return rc;
}

/* Chain towards root: root+1 starts, each adds its own and passes on. */
int sd_net_reduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		  enum smddp_dtype dt, enum smddp_op op, int root)
{
	int p = c->size, pos = mod(c->rank - root - 1, p);
	int next = mod(c->rank + 1, p), prev = mod(c->rank - 1, p);
	enum smddp_op rop = op == SMDDP_AVG ? SMDDP_SUM : op;
	size_t es = smddp_dtype_size(dt), C = chunk_elems(c, es, count), nch, W = NSLOTS;
	char *rslots = c->net->slots, *sslots, *big = NULL;
	const char *in = sbuf;
	struct sd_freq *sreq = NULL, rreq[NSLOTS];
	int rc = SMDDP_OK;

	note_algo(c, SD_COLL_REDUCE, "pipelined chain");
	nch = (count + C - 1) / C;
	if (C * es > c->net->chunk) {
		big = malloc(2 * W * C * es);
		if (!big)
			return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
		rslots = big;
	}
	sslots = rslots + W * C * es;
	sreq = calloc(nch + 1, sizeof(*sreq));
	if (!sreq) {
		free(big);
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	}
	memset(rreq, 0, sizeof(rreq));
	for (size_t j = 0; pos && j < nch && j < W; j++)
		SD_CHECK_GOTO(recv_from(c, prev, PH_MAIN, j, rslots + j * C * es,
					(count - j * C < C ? count - j * C : C) * es, &rreq[j]),
			      rc, out);
	for (size_t j = 0; j < nch; j++) {
		size_t len = count - j * C < C ? count - j * C : C;
		const char *src = in + j * C * es;
		char *dst;

		if (pos) {
			const void *srcs[2];
			char *slot = rslots + (j % W) * C * es;

			SD_CHECK_GOTO(net_wait(c, &rreq[j % W]), rc, out);
			SD_CHECK_GOTO(check_len(c, &rreq[j % W], len * es), rc, out);
			if (pos == p - 1) {
				dst = (char *)rbuf + j * C * es;
			} else {
				dst = sslots + (j % W) * C * es;
				if (j >= W)
					SD_CHECK_GOTO(net_wait(c, &sreq[j - W]), rc, out);
			}
			srcs[0] = slot;
			srcs[1] = src;
			sd_reduce(dst, srcs, 2, len, dt, rop, 1);
			if (op == SMDDP_AVG && pos == p - 1)
				divide(dst, len, dt, p);
			src = dst;
			if (j + W < nch)
				SD_CHECK_GOTO(recv_from(c, prev, PH_MAIN, j + W, slot,
							(count - (j + W) * C < C ? count - (j + W) * C : C) * es,
							&rreq[j % W]),
					      rc, out);
		}
		if (pos != p - 1)
			SD_CHECK_GOTO(send_to(c, next, PH_MAIN, j, src, len * es, &sreq[j]), rc, out);
	}
	rc = wait_all(c, sreq, nch);
out:
	rc = settle(c, rc);
	free(sreq);
	release(c, big);
	return rc;
}

int sd_net_alltoall(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		    enum smddp_dtype dt)
{
	int p = c->size, me = c->rank;
	size_t bytes = count * smddp_dtype_size(dt);
	struct sd_freq *req = calloc(2 * (size_t)p, sizeof(*req));
	const char *in = sbuf;
	char *copy = NULL;
	int rc = SMDDP_OK;

	if (!req)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	note_algo(c, SD_COLL_ALLTOALL, "pairwise");
	if ((const char *)rbuf < in + (size_t)p * bytes && in < (const char *)rbuf + (size_t)p * bytes) {
		copy = malloc((size_t)p * bytes);
		if (!copy) {
			free(req);
			return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
		}
		memcpy(copy, in, (size_t)p * bytes);
		in = copy;
	}
	for (int i = 1; i < p; i++) {
		int from = mod(me - i, p), to = mod(me + i, p);

		SD_CHECK_GOTO(recv_from(c, from, PH_MAIN, 0, (char *)rbuf + (size_t)from * bytes, bytes,
					&req[2 * i]),
			      rc, out);
		SD_CHECK_GOTO(send_to(c, to, PH_MAIN, 0, in + (size_t)to * bytes, bytes, &req[2 * i + 1]),
			      rc, out);
	}
	memmove((char *)rbuf + (size_t)me * bytes, in + (size_t)me * bytes, bytes);
	rc = wait_all(c, req, 2 * (size_t)p);
	for (int i = 1; !rc && i < p; i++)
		rc = check_len(c, &req[2 * i], bytes);
out:
	rc = settle(c, rc);
	free(req);
	release(c, copy);
	return rc;
}

/* ---- point to point ----------------------------------------------------- */

/* A message's tag carries its sender, so that a receive from anyone can
 * learn who sent it (and ignore those bits to match). */
#define P2P_SENDER_SHIFT 35
#define P2P_SENDER_MASK 0x7ffffffull

static uint64_t p2p_tag(int sender, uint64_t key)
{
	return sd_fab_tag(SD_TAG_KIND_P2P, 0, 0, 0) |
	       ((uint64_t)sender & P2P_SENDER_MASK) << P2P_SENDER_SHIFT | (key & SD_P2P_KEY_MASK);
}

static int p2p_done(struct smddp_comm *c, struct sd_p2p_op *op, struct sd_freq *r)
{
	int rc = net_wait(c, r);

	op->done = 1;
	if (rc)
		return rc;
	if (!op->is_send) {
		op->source = (int)((r->tag >> P2P_SENDER_SHIFT) & P2P_SENDER_MASK);
		if (r->len != op->bytes)
			return sd_comm_error(c, SMDDP_EMISMATCH,
					     "rank %d sent %zu bytes, but this rank's receive takes "
					     "%zu: the count or dtype differs",
					     op->source, r->len, op->bytes);
	}
	return SMDDP_OK;
}

/* Post every operation, then wait for each: the provider progresses them
 * all meanwhile.  A size mismatch fails its own operation only. */
static int net_p2p(struct smddp_comm *c, struct sd_p2p_op *ops, int n)
{
	struct sd_freq *req = calloc((size_t)n, sizeof(*req));
	int rc = SMDDP_OK, first = SMDDP_OK;

	if (!req)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	c->net->p2p = 1;
	for (int i = 0; i < n && !rc; i++) {
		struct sd_p2p_op *op = &ops[i];

		if (op->done)
			continue;
		if (op->is_send) {
			rc = posted(c, sd_fab_send(c, c->net->fab, op->peer,
						   p2p_tag(c->rank, op->key), op->buf, op->bytes,
						   &req[i]));
		} else {
			if (op->peer < 0)
				req[i].ignore = P2P_SENDER_MASK << P2P_SENDER_SHIFT;
			rc = posted(c, sd_fab_recv(c, c->net->fab, op->peer,
						   p2p_tag(op->peer < 0 ? 0 : op->peer, op->key),
						   op->buf, op->bytes, &req[i]));
		}
	}
	for (int i = 0; i < n && !rc; i++) {
		if (!req[i].fab)
			continue;
		rc = p2p_done(c, &ops[i], &req[i]);
		if (rc == SMDDP_EMISMATCH) {
			first = first ? first : rc;
			rc = SMDDP_OK;
		}
	}
	c->net->p2p = 0;
	rc = settle(c, rc);
	free(req);
	return rc ? rc : first;
}

/* ---- the transport table of communicators that span hosts --------------- */

static int net_barrier(struct smddp_comm *c)
{
	struct sd_net *n = c->net;

	if (n->desc_pending) {
		/* SMDDP_CHECK_COLL: the barrier carries every rank's descriptor. */
		size_t *off = calloc((size_t)c->size, sizeof(*off));
		struct grp g = flat(c);
		int rc;

		if (!off)
			return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
		for (int r = 0; r < c->size; r++)
			off[r] = (size_t)r * sizeof(struct sd_coll_desc);
		n->desc_pending = 0;
		rc = ring_allgather(c, &g, PH_DESC, &n->descs[c->rank], (char *)n->descs, off,
				    sizeof(struct sd_coll_desc));
		free(off);
		return rc;
	}
	if (use_hier(c)) {
		struct grp g = rail(c);

		SD_CHECK(node_err(c, n->node->tp->barrier(n->node)));
		SD_CHECK(dissemination(c, &g, PH_BARRIER));
		return node_err(c, n->node->tp->barrier(n->node));
	}
	{
		struct grp g = flat(c);

		return dissemination(c, &g, PH_BARRIER);
	}
}

static void net_put_desc(struct smddp_comm *c, const void *desc, size_t len)
{
	memcpy(&c->net->descs[c->rank], desc,
	       len < sizeof(struct sd_coll_desc) ? len : sizeof(struct sd_coll_desc));
	c->net->desc_pending = 1;
}

static void net_get_desc(struct smddp_comm *c, int r, void *desc, size_t len)
{
	memcpy(desc, &c->net->descs[r],
	       len < sizeof(struct sd_coll_desc) ? len : sizeof(struct sd_coll_desc));
}

/* Tell every peer, best effort: the notice is posted to all, then progress
 * runs a little so that it leaves before the endpoint closes. */
static void net_abort(struct smddp_comm *c)
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
			 host_of(c, c->rank));
	else
		snprintf(n->abort_out + sizeof(why), sizeof(n->abort_out) - sizeof(why),
			 "rank %d (host %s) gave up after: %s", c->rank, host_of(c, c->rank),
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
		int left = 0;

		/* A notice to a dead peer fails: the others may still go. */
		if (sd_fab_progress(c, n->fab, 1) < 0 && sd_fab_poisoned(n->fab))
			break;
		for (int r = 0; r < c->size; r++)
			left += r != c->rank && n->abort_sends[r].fab && !n->abort_sends[r].done;
		if (!left)
			break;
	}
	memcpy(c->last_error, keep, sizeof(keep));
}

static void net_detach(struct smddp_comm *c)
{
	(void)c; /* sd_net_free does the work, with the clean flag */
}

const struct sd_transport_ops sd_transport_net = {
	.size = sizeof(struct sd_transport_ops),
	.name = "net",
	.barrier = net_barrier,
	.put_desc = net_put_desc,
	.get_desc = net_get_desc,
	.p2p = net_p2p,
	.abort = net_abort,
	.detach = net_detach,
};

/* ---- set-up ------------------------------------------------------------- */

struct addr_rec {
	int32_t status;
	uint32_t len;
	char name[SD_FAB_NAME_MAX];
	char msg[240];
};

void sd_net_boot_ip(struct sd_boot *b, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fds[4];

	buf[0] = 0;
	if (sd_boot_fds(b, fds, 4) < 1 || getsockname(fds[0], (struct sockaddr *)&ss, &sl))
		return;
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, buf, (socklen_t)len);
	else if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, buf, (socklen_t)len);
}

static int parse_algo(void)
{
	const char *a = sd_param_str("SMDDP_ALGO");

	for (int i = 0; i < 4; i++)
		if (!strcmp(a, algo_names[i]))
			return i;
	return ALGO_AUTO;
}

/* One round of set-up: every rank of via says how it fared (mine->status,
 * with last_error as the message), and each member of c takes the first
 * failure of a fellow member as its own.  Returns the gather's failure, or
 * 0 with *lrc updated. */
static int agree(struct smddp_comm *c, struct smddp_comm *via, sd_gather_fn gather,
		 const int *members, struct addr_rec *mine, struct addr_rec *all, int *lrc,
		 const char *what)
{
	int rc;

	mine->status = c ? *lrc : 0;
	if (mine->status)
		snprintf(mine->msg, sizeof(mine->msg), "%s", c->last_error);
	rc = gather(via, mine, all, sizeof(*mine));
	if (rc || !c || *lrc)
		return rc;
	for (int r = 0; r < c->size && !*lrc; r++) {
		struct addr_rec *a = &all[members ? members[r] : r];

		if (a->status)
			*lrc = sd_comm_error(c, a->status, "rank %d could not %s: %s", r, what,
					     a->msg);
	}
	return SMDDP_OK;
}

int sd_net_setup(struct smddp_comm *c, struct smddp_comm *node, struct smddp_comm *via,
		 sd_gather_fn gather, const int *members, char (*vhost)[SD_HOSTID_MAX],
		 struct sd_job *job, const char *src_ip)
{
	struct addr_rec *all = calloc((size_t)via->size, sizeof(*all)), mine;
	struct sd_net *n = NULL;
	int rc, lrc = SMDDP_OK;

	if (!all)
		return sd_comm_error(via, SMDDP_ENOMEM, "out of memory");
	memset(&mine, 0, sizeof(mine));
	if (c) {
		n = calloc(1, sizeof(*n));
		if (n) {
			n->hosts = calloc((size_t)c->size, sizeof(*n->hosts));
			n->world = calloc((size_t)c->size, sizeof(int));
			n->all = calloc((size_t)c->size, sizeof(int));
			n->descs = calloc((size_t)c->size, sizeof(*n->descs));
			n->chunk = (size_t)sd_param_int("SMDDP_NET_CHUNK");
			n->slots = malloc(2 * NSLOTS * n->chunk);
		}
		if (!n || !n->hosts || !n->world || !n->all || !n->descs || !n->slots) {
			lrc = sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
		} else {
			c->net = n;
			n->node = node;
			n->algo = parse_algo();
			n->rd_max = (size_t)sd_param_int("SMDDP_NET_RD_MAX");
			for (int r = 0; r < c->size; r++) {
				n->all[r] = r;
				/* World ranks: the world's set-up goes through the
				 * world itself; a split's through its parent. */
				n->world[r] = via != c && via->net
						       ? via->net->world[members ? members[r] : r]
						       : (members ? members[r] : r);
				memcpy(n->hosts[r], vhost[members ? members[r] : r], SD_HOSTID_MAX);
			}
			lrc = sd_fab_open(c, src_ip, &n->fab);
			if (!lrc)
				sd_fab_on_wait(n->fab, check_news);
		}
		if (!lrc) {
			mine.len = (uint32_t)sd_fab_name(n->fab, mine.name, sizeof(mine.name));
			if (!mine.len)
				lrc = sd_comm_error(c, SMDDP_ENETWORK,
						    "libfabric: the endpoint has no name (fi_getname)");
		}
	}
	rc = agree(c, via, gather, members, &mine, all, &lrc, "open its fabric endpoint");
	if (rc)
		goto out;
	if (c && !lrc) {
		if (!lrc) {
			/* Compact the members' records for the address vector. */
			struct addr_rec *m = calloc((unsigned)c->size, sizeof(*m));

			if (!m) {
				lrc = sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
			} else {
				for (int r = 0; r < c->size; r++) {
					struct addr_rec *a = &all[members ? members[r] : r];

					m[r].len = a->len;
					memcpy(m[r].name, a->name, sizeof(a->name));
				}
				lrc = sd_fab_insert(c, n->fab, &m->len, sizeof(*m), c->size);
				free(m);
			}
		}
		if (!lrc) {
			/* The layout: hosts in order of first rank. */
			int *node_of = calloc((size_t)c->size, sizeof(int)), nn = 0;

			if (!node_of) {
				lrc = sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
			} else {
				for (int r = 0; r < c->size; r++) {
					int q;

					for (q = 0; q < r && strcmp(n->hosts[q], n->hosts[r]); q++)
						;
					node_of[r] = q < r ? node_of[q] : nn++;
				}
				n->nnodes = nn;
				n->L = c->size / nn;
				n->hier = c->size % nn == 0;
				for (int r = 0; n->hier && r < c->size; r++)
					n->hier = node_of[r] == r / n->L;
				free(node_of);
				if (n->hier) {
					n->rail = calloc((size_t)nn, sizeof(int));
					if (!n->rail)
						lrc = sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
					for (int m = 0; n->rail && m < nn; m++)
						n->rail[m] = m * n->L + c->rank % n->L;
				}
			}
		}
		n->abort_req.keep = 1; /* outlives any failed collective */
		if (!lrc)
			lrc = sd_fab_recv(c, n->fab, -1, sd_fab_tag(SD_TAG_KIND_ABORT, 0, 0, 0),
					  n->abort_in, sizeof(n->abort_in), &n->abort_req);
	}
	/* Everyone agrees that everyone is ready before the first message. */
	memset(&mine, 0, sizeof(mine));
	rc = agree(c, via, gather, members, &mine, all, &lrc, "join");
	if (rc)
		goto out;
	rc = lrc;
	if (c && !rc) {
		n->job = job;
		job->refs++;
		c->tp = &sd_transport_net;
		SD_INFO(SD_SUB_NET, "rank %d of %d spans %d hosts (%s), %d per host, %s; %s",
			c->rank, c->size, n->nnodes, sd_fab_describe(n->fab), n->hier ? n->L : -1,
			n->hier ? "hierarchical collectives" : "uneven hosts: flat collectives",
			algo_names[n->algo]);
	}
out:
	free(all);
	return rc;
}

char (*sd_net_hosts(struct smddp_comm *c))[SD_HOSTID_MAX]
{
	return c->net->hosts;
}

struct sd_job *sd_net_job(struct smddp_comm *c)
{
	return c->net->job;
}

int sd_net_poisoned(struct smddp_comm *c)
{
	return c->net && c->net->fab && sd_fab_poisoned(c->net->fab);
}

struct smddp_comm *sd_net_node(struct smddp_comm *c, int forget)
{
	struct smddp_comm *node = c->net->node;

	if (forget)
		c->net->node = NULL;
	return node;
}

void sd_net_free(struct smddp_comm *c, int clean)
{
	struct sd_net *n = c->net;

	if (!n)
		return;
	int left_open = 0;

	if (n->fab) {
		sd_fab_cancel(n->fab, &n->abort_req);
		left_open = sd_fab_close(n->fab);
	}
	if (n->job && --n->job->refs == 0) {
		sd_boot_close(n->job->boot, sd_boot_how(clean, c->failed));
		free(n->job);
	}
	free(n->abort_sends);
	free(n->hosts);
	free(n->world);
	free(n->all);
	free(n->rail);
	if (!left_open) { /* else the provider may still use them (and n's notices) */
		free(n->descs);
		free(n->slots);
		free(n);
	}
	c->net = NULL;
}
