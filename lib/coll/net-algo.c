/* net-algo.c - the collectives of communicators that span hosts: algorithms over groups of ranks.
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
 * The transfers and waits they use are in net.c.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/net-int.h"
#include "coll/node.h"
#include "reduce/reduce.h"
#include "transport/transport.h"

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

/* Bytes per message for a block of blk bytes: the endpoint's chunk
 * (xfer.h), halved while the block has fewer than four of them. */
static size_t chunk_bytes(struct smddp_comm *c, size_t blk)
{
	size_t C = c->net->chunk;

	while (C / 2 >= c->net->chunk_min && blk / C < 4)
		C /= 2;
	return C;
}

static size_t chunk_elems(struct smddp_comm *c, size_t es, size_t blk)
{
	size_t C = chunk_bytes(c, blk * es) / es;

	if (!C)
		C = 1;
	/* Keep steps within the tag's 24 bits. */
	while (blk / C > 4096)
		C *= 2;
	return C;
}

/* Room for sets windows of NSLOTS chunks of bytes each (receive slots,
 * then send slots): the endpoint's own, or, where chunks grew past them,
 * *big, for the caller to release. */
static int slots_for(struct smddp_comm *c, int sets, size_t bytes, char **slots, char **big)
{
	*slots = c->net->slots;
	*big = NULL;
	if (bytes <= c->net->chunk)
		return SMDDP_OK;
	*slots = *big = malloc((size_t)sets * NSLOTS * bytes);
	return *big ? SMDDP_OK : sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
}

/* The requests of n sends and of a window of w receives, both or neither. */
static int reqs_for(struct smddp_comm *c, size_t n, size_t w, struct sd_freq **sreq,
		    struct sd_freq **rreq)
{
	*sreq = calloc(n, sizeof(**sreq));
	*rreq = calloc(w, sizeof(**rreq));
	if (*sreq && *rreq)
		return SMDDP_OK;
	free(*sreq);
	free(*rreq);
	*sreq = *rreq = NULL;
	return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
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
		SD_CHECK(sd_net_send_to(c, g->right, g->ph, k, (s == 0 ? g->in : g->out) + lo * g->es,
				 len * g->es, &g->sreq[k]));
		g->next++;
	}
	return SMDDP_OK;
}

/* Let the send window move: wait for the oldest send in flight. */
static int ring_advance(struct smddp_comm *c, struct ring *g)
{
	if (g->done_upto < g->next)
		SD_CHECK(sd_net_wait_pump(c, &g->sreq[g->done_upto], &g->pump));
	return ring_pump(c, &g->pump);
}

/* sm (sd_net_stream; else NULL): the input arrives in pieces,
 * asked for before each read, and each output chunk is announced once
 * final: at the last reduce-scatter step, or as the allgather lands it. */
static int ring_allreduce(struct smddp_comm *c, const struct grp *gr, unsigned ph,
			  const void *sbuf, void *rbuf, size_t count, enum smddp_dtype dt,
			  enum smddp_op op, const struct sd_net_stream *sm)
{
	int p = gr->n, me = gr->me, left = gr->ranks[mod(me - 1, p)];
	size_t es = smddp_dtype_size(dt), blk = (count + (size_t)p - 1) / (size_t)p;
	size_t C = chunk_elems(c, es, blk), nch = blk ? (blk + C - 1) / C : 1;
	size_t nsteps = 2 * (size_t)(p - 1), M = nsteps * nch, W = NSLOTS;
	char *slots, *big;
	struct sd_freq rreq[NSLOTS];
	struct ring g = {{ring_pump}, NULL, 0, 0, sm ? 0 : nch, M, nch, C, count, es, p, me,
			 gr->ranks[mod(me + 1, p)], ph, sbuf, rbuf};
	int rc = SMDDP_OK;

	if (p == 1) {
		if (sbuf != rbuf)
			memcpy(rbuf, sbuf, count * es);
		return SMDDP_OK;
	}
	SD_CHECK(slots_for(c, 1, C * es, &slots, &big));
	g.sreq = calloc(M, sizeof(*g.sreq));
	if (!g.sreq) {
		free(big);
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	}
	memset(rreq, 0, sizeof(rreq));
	for (size_t k = 0; k < M && k < W; k++) {
		size_t lo, len;

		ring_range(&g, ring_block(p, me, (int)(k / nch)), k % nch, &lo, &len);
		SD_CHECK_GOTO(sd_net_recv_from(c, left, ph, k, slots + k * C * es, len * es, &rreq[k]), rc,
			      out_free);
	}
	SD_CHECK_GOTO(ring_pump(c, &g.pump), rc, out_free);
	/* Streamed: step 0's chunks (this rank's own block) go as they arrive. */
	for (size_t j = 0; sm && j < nch; j++) {
		size_t lo, len;

		ring_range(&g, me, j, &lo, &len);
		SD_CHECK_GOTO(sm->need(sm->arg, g.in + lo * es, len * es), rc, out_free);
		g.ready = j + 1;
		SD_CHECK_GOTO(ring_pump(c, &g.pump), rc, out_free);
	}
	for (size_t k = 0; k < M; k++) {
		int s = (int)(k / nch);
		size_t j = k % nch, lo, len;
		char *slot = slots + (k % W) * C * es;

		ring_range(&g, ring_block(p, me, s), j, &lo, &len);
		SD_CHECK_GOTO(sd_net_wait_pump(c, &rreq[k % W], &g.pump), rc, out_free);
		SD_CHECK_GOTO(sd_net_check_len(c, &rreq[k % W], len * es), rc, out_free);
		if (s < p - 1) {
			const void *srcs[2] = {g.in + lo * es, slot};

			if (sm)
				SD_CHECK_GOTO(sm->need(sm->arg, g.in + lo * es, len * es), rc, out_free);
			sd_reduce(g.out + lo * es, srcs, 2, len, dt, op, 1);
		} else {
			/* This block went out from rbuf in reduce-scatter step
			 * s-p+1: that send must be done before it is overwritten. */
			size_t k0 = (size_t)(s - p + 1) * nch + j;

			while (k0 >= g.next)
				SD_CHECK_GOTO(ring_advance(c, &g), rc, out_free);
			SD_CHECK_GOTO(sd_net_wait_pump(c, &g.sreq[k0], &g.pump), rc, out_free);
			memcpy(g.out + lo * es, slot, len * es);
		}
		if (sm && s >= p - 2)
			sm->done(sm->arg, g.out + lo * es, len * es);
		if (k + W < M) {
			size_t k2 = k + W, lo2, len2;

			ring_range(&g, ring_block(p, me, (int)(k2 / nch)), k2 % nch, &lo2, &len2);
			SD_CHECK_GOTO(sd_net_recv_from(c, left, ph, k2, slot, len2 * es, &rreq[k % W]), rc,
				      out_free);
		}
		/* Chunk j of the next step may go. */
		g.ready = k + nch + 1 < M ? k + nch + 1 : M;
		SD_CHECK_GOTO(ring_pump(c, &g.pump), rc, out_free);
	}
	while (g.next < M)
		SD_CHECK_GOTO(ring_advance(c, &g), rc, out_free);
	rc = sd_net_wait_all(c, g.sreq, M);
out_free:
	rc = sd_net_settle(c, rc);
	free(g.sreq);
	sd_net_release(c, big);
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
		SD_CHECK_GOTO(sd_net_recv_from(c, pr_, ph, (uint64_t)step, tmp, bytes, &rr), rc, out); \
		SD_CHECK_GOTO(sd_net_send_to(c, pr_, ph, (uint64_t)step, rbuf, bytes, &sr), rc, out);  \
		SD_CHECK_GOTO(sd_net_wait(c, &rr), rc, out);                                 \
		SD_CHECK_GOTO(sd_net_check_len(c, &rr, bytes), rc, out);                         \
		SD_CHECK_GOTO(sd_net_wait(c, &sr), rc, out);                                 \
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
			SD_CHECK_GOTO(sd_net_send_to(c, g->ranks[me + 1], ph, 0, rbuf, bytes, &sr), rc, out);
			SD_CHECK_GOTO(sd_net_wait(c, &sr), rc, out);
			SD_CHECK_GOTO(sd_net_recv_from(c, g->ranks[me + 1], ph, 1000, rbuf, bytes, &rr), rc,
				      out);
			SD_CHECK_GOTO(sd_net_wait(c, &rr), rc, out);
			rc = sd_net_check_len(c, &rr, bytes);
			goto out;
		}
		SD_CHECK_GOTO(sd_net_recv_from(c, g->ranks[me - 1], ph, 0, tmp, bytes, &rr), rc, out);
		SD_CHECK_GOTO(sd_net_wait(c, &rr), rc, out);
		SD_CHECK_GOTO(sd_net_check_len(c, &rr, bytes), rc, out);
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
		SD_CHECK_GOTO(sd_net_send_to(c, g->ranks[me - 1], ph, 1000, rbuf, bytes, &sr), rc, out);
		SD_CHECK_GOTO(sd_net_wait(c, &sr), rc, out);
	}
#undef EXCH
out:
	rc = sd_net_settle(c, rc);
	if (tmp != c->net->slots)
		sd_net_release(c, tmp);
	return rc;
}

/* Allgather of bytes per member: member i's block lives at rbuf + off[i];
 * mine comes from sbuf (which may already be there; it must, streamed:
 * sm, else NULL, is asked for each piece of it before it is sent and told
 * of every block as it lands). */
int sd_net_ring_allgather(struct smddp_comm *c, const struct grp *g, unsigned ph, const void *sbuf,
			  char *rbuf, const size_t *off, size_t bytes, const struct sd_net_stream *sm)
{
	int p = g->n, me = g->me, right = g->ranks[mod(me + 1, p)], left = g->ranks[mod(me - 1, p)];
	size_t C = chunk_bytes(c, bytes), nch = bytes ? (bytes + C - 1) / C : 1, M, W = 64;
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
	SD_CHECK(reqs_for(c, M, W, &sreq, &rreq));
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
		SD_CHECK_GOTO(sd_net_recv_from(c, left, ph, k, ptr, len, &rreq[k]), rc, out);
	}
	for (size_t j = 0; j < nch; j++) {
		size_t o = j * C < bytes ? j * C : bytes, len = bytes - o < C ? bytes - o : C;

		if (sm) {
			SD_CHECK_GOTO(sm->need(sm->arg, rbuf + off[me] + o, len), rc, out);
			sm->done(sm->arg, rbuf + off[me] + o, len);
		}
		SD_CHECK_GOTO(sd_net_send_to(c, right, ph, j, rbuf + off[me] + o, len, &sreq[j]), rc, out);
	}
	for (size_t k = 0; k < M; k++) {
		char *ptr;
		size_t len;

		PIECE(k, ptr, len);
		SD_CHECK_GOTO(sd_net_wait(c, &rreq[k % W]), rc, out);
		SD_CHECK_GOTO(sd_net_check_len(c, &rreq[k % W], len), rc, out);
		if (sm)
			sm->done(sm->arg, ptr, len);
		if (k + nch < M)
			SD_CHECK_GOTO(sd_net_send_to(c, right, ph, k + nch, ptr, len, &sreq[k + nch]), rc, out);
		if (k + W < M) {
			PIECE(k + W, ptr, len);
			SD_CHECK_GOTO(sd_net_recv_from(c, left, ph, k + W, ptr, len, &rreq[k % W]), rc, out);
		}
	}
	rc = sd_net_wait_all(c, sreq, M);
#undef PIECE
out:
	rc = sd_net_settle(c, rc);
	free(sreq);
	free(rreq);
	return rc;
}

/* Reduce-scatter: sbuf holds g->n blocks of count; member i gets block i
 * in rbuf.  rbuf must not overlap sbuf (callers copy first), but for being
 * this member's own block.  sm (else NULL): asked for input before it is
 * read, told of output once final. */
static int ring_reduce_scatter(struct smddp_comm *c, const struct grp *g, unsigned ph,
			       const void *sbuf, void *rbuf, size_t count, enum smddp_dtype dt,
			       enum smddp_op op, const struct sd_net_stream *sm)
{
	int p = g->n, me = g->me, right = g->ranks[mod(me + 1, p)], left = g->ranks[mod(me - 1, p)];
	size_t es = smddp_dtype_size(dt), C = chunk_elems(c, es, count);
	size_t nch = count ? (count + C - 1) / C : 1, M, W = NSLOTS;
	const char *in = sbuf;
	char *rslots, *sslots, *big;
	struct sd_freq *sreq, rreq[NSLOTS];
	int *sslot_of, rc = SMDDP_OK;

	if (p == 1) {
		memcpy(rbuf, sbuf, count * es);
		return SMDDP_OK;
	}
	M = (size_t)(p - 1) * nch;
	SD_CHECK(slots_for(c, 2, C * es, &rslots, &big));
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
		SD_CHECK_GOTO(sd_net_recv_from(c, left, ph, k, rslots + k * C * es, LEN(k % nch) * es,
					&rreq[k]),
			      rc, out);
	for (size_t j = 0; j < nch; j++) {
		size_t lo = (size_t)mod(me - 1, p) * count + j * C;

		if (sm)
			SD_CHECK_GOTO(sm->need(sm->arg, in + lo * es, LEN(j) * es), rc, out);
		SD_CHECK_GOTO(sd_net_send_to(c, right, ph, j, in + lo * es, LEN(j) * es, &sreq[j]), rc, out);
	}
	for (size_t k = 0; k < M; k++) {
		int s = (int)(k / nch), b = mod(me - s - 2, p);
		size_t j = k % nch, len = LEN(j), lo = (size_t)b * count + j * C;
		char *slot = rslots + (k % W) * C * es;
		const void *srcs[2] = {in + lo * es, slot};

		SD_CHECK_GOTO(sd_net_wait(c, &rreq[k % W]), rc, out);
		SD_CHECK_GOTO(sd_net_check_len(c, &rreq[k % W], len * es), rc, out);
		if (sm)
			SD_CHECK_GOTO(sm->need(sm->arg, in + lo * es, len * es), rc, out);
		if (s == p - 2) {
			sd_reduce((char *)rbuf + j * C * es, srcs, 2, len, dt, op, 1);
			if (sm)
				sm->done(sm->arg, (char *)rbuf + j * C * es, len * es);
		} else {
			/* A send slot whose last send has completed. */
			size_t w = (k / 1) % W;

			if (sslot_of[w] >= 0)
				SD_CHECK_GOTO(sd_net_wait(c, &sreq[sslot_of[w]]), rc, out);
			sd_reduce(sslots + w * C * es, srcs, 2, len, dt, op, 1);
			sslot_of[w] = (int)(k + nch);
			SD_CHECK_GOTO(sd_net_send_to(c, right, ph, k + nch, sslots + w * C * es, len * es,
					      &sreq[k + nch]),
				      rc, out);
		}
		if (k + W < M)
			SD_CHECK_GOTO(sd_net_recv_from(c, left, ph, k + W, slot, LEN((k + W) % nch) * es,
						&rreq[k % W]),
				      rc, out);
	}
	rc = sd_net_wait_all(c, sreq, M);
#undef LEN
out:
	rc = sd_net_settle(c, rc);
	free(sreq);
	free(sslot_of);
	sd_net_release(c, big);
	return rc;
}

/* ---- the rest, flat ---------------------------------------------------- */

int sd_net_dissemination(struct smddp_comm *c, const struct grp *g, unsigned ph)
{
	struct sd_freq rr, sr;
	char dummy = 0;
	int step = 0, rc = SMDDP_OK;

	for (int k = 1; !rc && k < g->n; k <<= 1, step++) {
		rc = sd_net_recv_from(c, g->ranks[mod(g->me - k, g->n)], ph, (uint64_t)step, &dummy, 0, &rr);
		if (!rc)
			rc = sd_net_send_to(c, g->ranks[mod(g->me + k, g->n)], ph, (uint64_t)step, &dummy, 0,
				     &sr);
		if (!rc)
			rc = sd_net_wait(c, &rr);
		if (!rc)
			rc = sd_net_wait(c, &sr);
	}
	return sd_net_settle(c, rc);
}

static void divide(void *buf, size_t n, enum smddp_dtype dt, int by)
{
	const void *src[1] = {buf};

	if (n)
		sd_reduce(buf, src, 1, n, dt, SMDDP_AVG, by);
}

static void note_algo(struct smddp_comm *c, int coll, const char *algo)
{
	if (c->net->logged[coll] != 1 + (int)(algo[0])) {
		c->net->logged[coll] = 1 + (int)(algo[0]);
		SD_INFO(SD_SUB_NET, "%s: %s algorithm (%d ranks on %d hosts, SMDDP_ALGO=%s)",
			sd_coll_name(coll), algo, c->size, c->net->nnodes, sd_net_algo_names[c->net->algo]);
	}
}

/* Whether an allreduce of bytes takes recursive doubling rather than the
 * ring: forced by SMDDP_ALGO, else up to SMDDP_NET_RD_MAX. */
static int use_rd(const struct smddp_comm *c, size_t bytes)
{
	return c->net->algo == ALGO_RD || (c->net->algo != ALGO_RING && bytes <= c->net->rd_max);
}

static int net_allreduce_grp(struct smddp_comm *c, const struct grp *g, unsigned ph,
			     const void *sbuf, void *rbuf, size_t count, enum smddp_dtype dt,
			     enum smddp_op op)
{
	if (use_rd(c, count * smddp_dtype_size(dt)))
		return rd_allreduce(c, g, ph, sbuf, rbuf, count, dt, op);
	return ring_allreduce(c, g, ph, sbuf, rbuf, count, dt, op, NULL);
}

int sd_net_allreduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		     enum smddp_dtype dt, enum smddp_op op)
{
	struct sd_net *n = c->net;
	enum smddp_op rop = op == SMDDP_AVG ? SMDDP_SUM : op;
	size_t es = smddp_dtype_size(dt);

	if (sd_net_use_hier(c)) {
		struct grp g = sd_net_rail(c);
		int L = n->L, l = n->node->rank;
		size_t q = count / (size_t)L, tail = count - q * (size_t)L;
		char *shard = (char *)rbuf + (size_t)l * q * es;

		note_algo(c, SD_COLL_ALLREDUCE, "hierarchical");
		if (q) {
			SD_CHECK(sd_net_node_err(c, sd_coll_node_reduce_scatter(n->node, sbuf, shard, q,
										dt, rop)));
			SD_CHECK(net_allreduce_grp(c, &g, PH_SHARD, shard, shard, q, dt, rop));
		}
		if (tail) {
			char *t = (char *)rbuf + q * (size_t)L * es;

			SD_CHECK(sd_net_node_err(c, sd_coll_node_allreduce(n->node, (const char *)sbuf +
									   q * (size_t)L * es, t,
									   tail, dt, rop)));
			SD_CHECK(net_allreduce_grp(c, &g, PH_TAIL, t, t, tail, dt, rop));
			if (op == SMDDP_AVG)
				divide(t, tail, dt, c->size);
		}
		if (q) {
			if (op == SMDDP_AVG)
				divide(shard, q, dt, c->size);
			SD_CHECK(sd_net_node_err(c, sd_coll_node_allgather(n->node, shard, rbuf, q,
									   dt)));
		}
		return SMDDP_OK;
	}
	{
		struct grp g = sd_net_flat(c);

		note_algo(c, SD_COLL_ALLREDUCE, use_rd(c, count * es) ? "recursive doubling" : "ring");
		SD_CHECK(net_allreduce_grp(c, &g, PH_MAIN, sbuf, rbuf, count, dt, rop));
		if (op == SMDDP_AVG)
			divide(rbuf, count, dt, c->size);
	}
	return SMDDP_OK;
}

/* Streamed only where a flat ring runs: its blocks are what a rank reads
 * and finishes in turn (the hierarchical ways read every input byte
 * first, recursive doubling the whole vector each step). */
int sd_net_stream_plan(struct smddp_comm *c, int coll, size_t count, enum smddp_dtype dt,
		       enum smddp_op op, struct sd_net_stream_plan *sp)
{
	struct grp g = sd_net_flat(c);
	size_t es = smddp_dtype_size(dt);
	int p = g.n, me = g.me;

	if (p < 2 || p > SD_NET_STREAM_MAX || sd_net_use_hier(c) || !count)
		return 0;
	switch (coll) {
	case SD_COLL_ALLREDUCE:
		if (op == SMDDP_AVG || use_rd(c, count * es) || count < (size_t)p)
			return 0;
		for (int b = 0; b <= p; b++) {
			size_t lo, hi;

			block(count, p, b < p ? b : p - 1, &lo, &hi);
			sp->cut[b] = (b < p ? lo : hi) * es;
		}
		/* Reads its own block (step 0's sends), then those reduced
		 * at steps 0, 1, ...; finishes the block of the last reduce,
		 * then those the allgather brings. */
		sp->nin = sp->nout = p;
		for (int s = 0; s < p; s++) {
			sp->in[s] = s == 0 ? me : ring_block(p, me, s - 1);
			sp->out[s] = ring_block(p, me, p - 2 + s);
		}
		return 1;
	case SD_COLL_ALLGATHER: /* in place: its own block, then the others' as they land */
		sp->nin = 1;
		sp->in[0] = me;
		sp->nout = p;
		for (int s = 0; s < p; s++)
			sp->out[s] = mod(me - s, p);
		break;
	case SD_COLL_REDUCE_SCATTER:
		if (op == SMDDP_AVG)
			return 0;
		/* sends block me-1, reduces me-2, me-3, ..., then its own */
		sp->nin = p;
		for (int s = 0; s < p; s++)
			sp->in[s] = mod(me - 1 - s, p);
		sp->nout = 1;
		sp->out[0] = me;
		break;
	default:
		return 0;
	}
	for (int b = 0; b <= p; b++)
		sp->cut[b] = (size_t)b * count * es;
	return 1;
}

/* Allgather of bytes per rank over every rank, in rank order; sm as for
 * sd_net_ring_allgather (NULL when not streamed). */
static int flat_allgather(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t bytes,
			  const struct sd_net_stream *sm)
{
	struct grp g = sd_net_flat(c);
	size_t *off = calloc((size_t)c->size, sizeof(*off));
	int rc;

	if (!off)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	for (int r = 0; r < c->size; r++)
		off[r] = (size_t)r * bytes;
	rc = sd_net_ring_allgather(c, &g, PH_MAIN, sbuf, rbuf, off, bytes, sm);
	free(off);
	return rc;
}

int sd_net_stream(struct smddp_comm *c, int coll, const void *sbuf, void *rbuf, size_t count,
		  enum smddp_dtype dt, enum smddp_op op, const struct sd_net_stream *sm)
{
	struct grp g = sd_net_flat(c);

	note_algo(c, coll, "ring");
	if (coll == SD_COLL_ALLREDUCE)
		return ring_allreduce(c, &g, PH_MAIN, sbuf, rbuf, count, dt, op, sm);
	if (coll == SD_COLL_REDUCE_SCATTER)
		return ring_reduce_scatter(c, &g, PH_MAIN, sbuf, rbuf, count, dt, op, sm);
	return flat_allgather(c, sbuf, rbuf, count * smddp_dtype_size(dt), sm);
}

int sd_net_allgather(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		     enum smddp_dtype dt)
{
	struct sd_net *n = c->net;
	size_t bytes = count * smddp_dtype_size(dt), *off;
	int rc;

	if (sd_net_use_hier(c)) {
		struct grp g = sd_net_rail(c);
		int L = n->L, l = n->node->rank;

		if (!(off = calloc((size_t)g.n, sizeof(*off))))
			return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
		note_algo(c, SD_COLL_ALLGATHER, "hierarchical");
		/* My rail's blocks straight to their places, then each host's
		 * blocks within the node, in place. */
		for (int m = 0; m < g.n; m++)
			off[m] = ((size_t)m * (size_t)L + (size_t)l) * bytes;
		rc = sd_net_ring_allgather(c, &g, PH_MAIN, sbuf, rbuf, off, bytes, NULL);
		for (int m = 0; !rc && m < g.n; m++)
			rc = sd_net_node_err(c, sd_coll_node_allgather(n->node,
								(char *)rbuf + off[m],
								(char *)rbuf + (size_t)m * (size_t)L * bytes,
								count, dt));
		free(off);
		return rc;
	}
	note_algo(c, SD_COLL_ALLGATHER, "ring");
	return flat_allgather(c, sbuf, rbuf, bytes, NULL);
}

int sd_net_reduce_scatter(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			  enum smddp_dtype dt, enum smddp_op op)
{
	struct sd_net *n = c->net;
	enum smddp_op rop = op == SMDDP_AVG ? SMDDP_SUM : op;
	size_t es = smddp_dtype_size(dt);
	int rc;

	if (sd_net_use_hier(c)) {
		struct grp g = sd_net_rail(c);
		size_t region = (size_t)n->L * count * es;
		char *tmp = malloc((size_t)g.n * count * es + 1);

		if (!tmp)
			return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
		note_algo(c, SD_COLL_REDUCE_SCATTER, "hierarchical");
		rc = SMDDP_OK;
		for (int m = 0; !rc && m < g.n; m++)
			rc = sd_net_node_err(c, sd_coll_node_reduce_scatter(n->node,
								     (const char *)sbuf + m * region,
								     tmp + (size_t)m * count * es,
								     count, dt, rop));
		if (!rc)
			rc = ring_reduce_scatter(c, &g, PH_MAIN, tmp, rbuf, count, dt, rop, NULL);
		sd_net_release(c, tmp);
	} else {
		struct grp g = sd_net_flat(c);
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
		rc = ring_reduce_scatter(c, &g, PH_MAIN, in, rbuf, count, dt, rop, NULL);
		sd_net_release(c, copy);
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
	size_t bytes = count * smddp_dtype_size(dt), C = chunk_bytes(c, bytes), nch, W = 64;
	struct sd_freq *sreq, *rreq;
	int rc = SMDDP_OK;

	note_algo(c, SD_COLL_BROADCAST, "pipelined chain");
	while ((bytes + C - 1) / C > 4096)
		C *= 2;
	nch = (bytes + C - 1) / C;
	SD_CHECK(reqs_for(c, nch, W, &sreq, &rreq));
	for (size_t j = 0; pos && j < nch && j < W; j++)
		SD_CHECK_GOTO(sd_net_recv_from(c, prev, PH_MAIN, j, (char *)buf + j * C,
					bytes - j * C < C ? bytes - j * C : C, &rreq[j]),
			      rc, out);
	for (size_t j = 0; j < nch; j++) {
		size_t len = bytes - j * C < C ? bytes - j * C : C;

		if (pos) {
			SD_CHECK_GOTO(sd_net_wait(c, &rreq[j % W]), rc, out);
			SD_CHECK_GOTO(sd_net_check_len(c, &rreq[j % W], len), rc, out);
			if (j + W < nch) {
				size_t j2 = j + W;

				SD_CHECK_GOTO(sd_net_recv_from(c, prev, PH_MAIN, j2, (char *)buf + j2 * C,
							bytes - j2 * C < C ? bytes - j2 * C : C,
							&rreq[j % W]),
					      rc, out);
			}
		}
		if (pos != p - 1)
			SD_CHECK_GOTO(sd_net_send_to(c, next, PH_MAIN, j, (char *)buf + j * C, len, &sreq[j]), rc,
				      out);
	}
	rc = sd_net_wait_all(c, sreq, nch);
out:
	rc = sd_net_settle(c, rc);
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
	char *rslots, *sslots, *big;
	const char *in = sbuf;
	struct sd_freq *sreq = NULL, rreq[NSLOTS];
	int rc = SMDDP_OK;

	note_algo(c, SD_COLL_REDUCE, "pipelined chain");
	nch = (count + C - 1) / C;
	SD_CHECK(slots_for(c, 2, C * es, &rslots, &big));
	sslots = rslots + W * C * es;
	sreq = calloc(nch + 1, sizeof(*sreq));
	if (!sreq) {
		free(big);
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	}
	memset(rreq, 0, sizeof(rreq));
	for (size_t j = 0; pos && j < nch && j < W; j++)
		SD_CHECK_GOTO(sd_net_recv_from(c, prev, PH_MAIN, j, rslots + j * C * es,
					(count - j * C < C ? count - j * C : C) * es, &rreq[j]),
			      rc, out);
	for (size_t j = 0; j < nch; j++) {
		size_t len = count - j * C < C ? count - j * C : C;
		const char *src = in + j * C * es;
		char *dst;

		if (pos) {
			const void *srcs[2];
			char *slot = rslots + (j % W) * C * es;

			SD_CHECK_GOTO(sd_net_wait(c, &rreq[j % W]), rc, out);
			SD_CHECK_GOTO(sd_net_check_len(c, &rreq[j % W], len * es), rc, out);
			if (pos == p - 1) {
				dst = (char *)rbuf + j * C * es;
			} else {
				dst = sslots + (j % W) * C * es;
				if (j >= W)
					SD_CHECK_GOTO(sd_net_wait(c, &sreq[j - W]), rc, out);
			}
			srcs[0] = slot;
			srcs[1] = src;
			sd_reduce(dst, srcs, 2, len, dt, rop, 1);
			if (op == SMDDP_AVG && pos == p - 1)
				divide(dst, len, dt, p);
			src = dst;
			if (j + W < nch)
				SD_CHECK_GOTO(sd_net_recv_from(c, prev, PH_MAIN, j + W, slot,
							(count - (j + W) * C < C ? count - (j + W) * C : C) * es,
							&rreq[j % W]),
					      rc, out);
		}
		if (pos != p - 1)
			SD_CHECK_GOTO(sd_net_send_to(c, next, PH_MAIN, j, src, len * es, &sreq[j]), rc, out);
	}
	rc = sd_net_wait_all(c, sreq, nch);
out:
	rc = sd_net_settle(c, rc);
	free(sreq);
	sd_net_release(c, big);
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

		SD_CHECK_GOTO(sd_net_recv_from(c, from, PH_MAIN, 0, (char *)rbuf + (size_t)from * bytes, bytes,
					&req[2 * i]),
			      rc, out);
		SD_CHECK_GOTO(sd_net_send_to(c, to, PH_MAIN, 0, in + (size_t)to * bytes, bytes, &req[2 * i + 1]),
			      rc, out);
	}
	memmove((char *)rbuf + (size_t)me * bytes, in + (size_t)me * bytes, bytes);
	rc = sd_net_wait_all(c, req, 2 * (size_t)p);
	for (int i = 1; !rc && i < p; i++)
		rc = sd_net_check_len(c, &req[2 * i], bytes);
out:
	rc = sd_net_settle(c, rc);
	free(req);
	sd_net_release(c, copy);
	return rc;
}
