/* coll.c - collective algorithms over a slot transport (one node).
 *
 * Every algorithm is a sequence of steps that keep the protocol of
 * transport.h: write your own half, barrier, read anyone's half.  Vectors
 * longer than a half are cut into pieces, so the working set stays small
 * and the shared segment stays a fixed size whatever the message.
 *
 * AllReduce and Reduce of a piece: every rank copies its input into its half;
 * barrier; rank r reduces partition r of every rank's half (P sources in one
 * pass, so fp16 and bf16 round once) into its own half; barrier; everyone
 * copies the reduced partitions out.  Each byte is reduced by exactly one
 * rank, so every rank gets bitwise the same result.  Small vectors skip the
 * second barrier: every rank reduces the whole vector itself.
 *
 * From SMDDP_SINGLE_COPY_MIN an allreduce, reduce, allgather, reduce_scatter,
 * alltoall or broadcast can also read (and write) the peers' buffers directly
 * (process_vm_readv/writev, single copy).  Which way is faster depends on
 * more than the size: the kernel's copy costs a fixed price per page
 * (about 12 GB/s in cache on the CI machine, where memcpy runs at 45-55),
 * while the staged path writes shared lines that the peers have just read,
 * which costs little where the cores share a cache and up to four times
 * the whole call where they do not (a VM's vCPUs move between such
 * placements within minutes).  So with SMDDP_SHM_ALGO=auto rank 0 times
 * both per collective and size, takes the faster, trying the other now and
 * then, and tells the others one call ahead (way_begin; docs/PERFORMANCE.md,
 * one node).  Two ranks of a staged allreduce each reduce the whole piece
 * themselves: one barrier a piece, no copy out.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clock/clock.h"
#include "coll/coll.h"
#include "coll/node.h"
#include "config/param.h"
#include "reduce/reduce.h"
#include "transport/transport.h"
#include "util/copy.h"

#define SMALL_TOTAL (128 * 1024) /* count * size * nranks at or below: latency path */
#define MAX_SRCS 1024

static inline int next_half(struct smddp_comm *c)
{
	return (int)(c->step++ & 1);
}

static void part_range(size_t n, size_t part, int r, size_t *lo, size_t *hi)
{
	size_t l = part * (size_t)r;

	*lo = l < n ? l : n;
	*hi = l + part < n ? l + part : n;
}

#define SC_BLOCK (64 * 1024) /* bytes read from each peer per reduction pass */

/* Whether the transport reads (writes) peers' memory: a read (write) of 0
 * bytes answers, alike on every rank (transport.h). */
static int can_peer_read(struct smddp_comm *c)
{
	return c->tp->peer_read(c, c->rank, NULL, 0, 0) == SMDDP_OK;
}

static int can_peer_write(struct smddp_comm *c)
{
	return c->tp->peer_write(c, c->rank, 0, NULL, 0) == SMDDP_OK;
}

static int use_single_copy(struct smddp_comm *c, size_t bytes)
{
	return c->single_copy && c->size > 1 && bytes >= c->single_copy_min && can_peer_read(c);
}

/* ---- what a communicator keeps between calls (c->scratch) -----------------
 * One allocation, freed with the communicator: rank 0's timings of the
 * two ways of a large allreduce, then (page aligned) the blocks that single
 * copy reads peers into. */
enum { ALG_SINGLE, ALG_STAGED };
enum {
	WAY_ALLREDUCE,
	WAY_ALLGATHER,
	WAY_REDUCE_SCATTER,
	WAY_BROADCAST,
	WAY_REDUCE,
	WAY_ALLTOALL,
	WAY_COLLS
};
enum { SHM_ALGO_AUTO, SHM_ALGO_SINGLE, SHM_ALGO_STAGED };

#define TUNE_SIZES 20    /* classes by log2 of the bytes per rank, from 4 KiB */
#define TUNE_EVERY 64    /* calls of a class between two tries of the slower way */
#define TUNE_TRY 3       /* calls of a try: the first is not counted */

struct tune {
	uint64_t ns[2];      /* moving average of a call's time, per way */
	uint32_t n[2];       /* calls counted, per way */
	uint32_t seq;        /* calls of the class started */
	int last;            /* the way of the class's previous call (-1: none) */
	int run;             /* calls of way `last` counted since it was taken */
};

struct node_state {
	int algo;            /* SHM_ALGO_* */
	struct tune tune[WAY_COLLS][TUNE_SIZES]; /* rank 0's: [collective][size class] */
	uint64_t calls;      /* calls that could go either way, alike on every rank */
};

#define NODE_HEAD ((sizeof(struct node_state) + 4095) / 4096 * 4096)

static int node_state(struct smddp_comm *c, struct node_state **out)
{
	if (!c->scratch) {
		struct node_state *ns;
		const char *a = sd_param_str("SMDDP_SHM_ALGO");
		void *p = NULL;

		if (posix_memalign(&p, 4096, NODE_HEAD + (size_t)c->size * SC_BLOCK) != 0)
			return sd_comm_error(c, SMDDP_ENOMEM, "out of memory for %d x %d bytes",
					     c->size, SC_BLOCK);
		ns = p;
		memset(ns, 0, sizeof(*ns));
		ns->algo = !strcmp(a, "single")	  ? SHM_ALGO_SINGLE
			   : !strcmp(a, "staged") ? SHM_ALGO_STAGED
						  : SHM_ALGO_AUTO;
		for (int k = 0; k < WAY_COLLS; k++)
			for (int i = 0; i < TUNE_SIZES; i++)
				ns->tune[k][i].last = -1;
		c->scratch = ns;
	}
	*out = c->scratch;
	return SMDDP_OK;
}

static int scratch(struct smddp_comm *c, char **out)
{
	struct node_state *ns;

	SD_CHECK(node_state(c, &ns));
	*out = (char *)ns + NODE_HEAD;
	return SMDDP_OK;
}

static int size_class(size_t bytes)
{
	int k = 0;

	while (k < TUNE_SIZES - 1 && bytes >= ((size_t)8192 << k))
		k++;
	return k;
}

/* Rank 0's choice for the next call of a class (its call number t->seq):
 * TUNE_TRY of each way first (the first after a change of way is not
 * counted: it pays for caches that the other way left as it needed them),
 * then the faster, but TUNE_TRY of the other every TUNE_EVERY calls, so that a
 * change of the machine (placement, load) is seen.  The choice is made a
 * call ahead, before the call just started is counted: a way still without
 * a count meanwhile stays single copy. */
static int tune_pick(const struct tune *t)
{
	int best;

	if (t->seq < TUNE_TRY)
		return ALG_SINGLE;
	if (t->seq < 2 * TUNE_TRY)
		return ALG_STAGED;
	if (!t->n[ALG_SINGLE] || !t->n[ALG_STAGED])
		return ALG_SINGLE;
	best = t->ns[ALG_SINGLE] <= t->ns[ALG_STAGED] ? ALG_SINGLE : ALG_STAGED;
	return t->seq % TUNE_EVERY < TUNE_TRY ? !best : best;
}

/* The first call after a change of way is not counted: it pays for
 * caches that the other way left as it needed them.  The next ones start
 * the way's estimate afresh, as the least of the try's calls (the second
 * may still pay for some), then a moving average: what a try measured
 * long ago (another placement, pages not yet mapped) says nothing now. */
static void tune_record(struct tune *t, int alg, uint64_t ns)
{
	if (alg != t->last) {
		t->last = alg;
		t->run = 0;
		return;
	}
	if (t->run == 0 || (t->run < TUNE_TRY - 1 && ns < t->ns[alg]))
		t->ns[alg] = ns;
	else if (t->run >= TUNE_TRY - 1)
		t->ns[alg] = t->ns[alg] - t->ns[alg] / 4 + ns / 4;
	t->run++;
	t->n[alg]++;
}

/* Whether a call of bytes may go the single-copy way (then way_begin
 * says which way it goes): alike on every rank. */
static int sc_way(struct smddp_comm *c, size_t bytes)
{
	return bytes > 0 && use_single_copy(c, bytes);
}

/* The way of a call that may go either way (sc_way: single copy is
 * possible, and the call has a barrier, as it moves bytes).  Rank 0 decides
 * one call ahead, for every class (collective and size): at the start of
 * each such call it writes the ways of the next into its hint area of the
 * other parity, which the others read at the start of that next call, past
 * this call's barriers; the same parity is rewritten two calls on, past the
 * barriers of the call between.  So choosing costs no barrier.  The first
 * such call of a communicator goes the single-copy way.  w->t is set on
 * rank 0 when the call is timed. */
struct way {
	struct tune *t;
	uint64_t t0;
	int alg;
};

static int way_begin(struct smddp_comm *c, int coll, size_t bytes, struct way *w)
{
	const struct sd_transport_ops *tp = c->tp;
	struct node_state *ns;
	int bit = coll * TUNE_SIZES + size_class(bytes), p;
	const unsigned char *now;

	_Static_assert(WAY_COLLS * TUNE_SIZES <= 8 * SD_HINT_BYTES, "the ways fit the hint");
	SD_CHECK(node_state(c, &ns));
	p = (int)(ns->calls++ & 1);
	w->t = NULL;
	w->alg = ALG_SINGLE;
	now = tp->hint(c, 0, p);
	if (!now)
		return SMDDP_OK;
	w->alg = now[bit / 8] >> (bit % 8) & 1;
	if (c->rank == 0) {
		unsigned char *next = tp->hint(c, 0, !p);

		ns->tune[coll][size_class(bytes)].seq++;
		memset(next, 0, SD_HINT_BYTES);
		for (int i = 0; i < WAY_COLLS * TUNE_SIZES; i++) {
			int alg = ns->algo == SHM_ALGO_STAGED	? ALG_STAGED
				  : ns->algo == SHM_ALGO_SINGLE ? ALG_SINGLE
								: tune_pick(&ns->tune[0][0] + i);

			next[i / 8] |= (unsigned char)(alg << (i % 8));
		}
		if (ns->algo == SHM_ALGO_AUTO) {
			w->t = &ns->tune[coll][size_class(bytes)];
			w->t0 = sd_now_ns();
		}
	}
	return SMDDP_OK;
}

static int way_end(const struct way *w, int rc)
{
	if (w->t && rc == SMDDP_OK)
		tune_record(w->t, w->alg, sd_now_ns() - w->t0);
	return rc;
}

/* One block of a single-copy reduction: srcs[q] points at elements
 * [off, off+n) of rank q's published send buffer (index 0 of its pair),
 * ours in place, a peer's read into its slot of the scratch. */
static int fetch_block(struct smddp_comm *c, const void *mine, size_t off, size_t n, size_t es,
		       char *tmp, const void **srcs)
{
	for (int q = 0; q < c->size; q++) {
		uintptr_t a, unused;

		if (q == c->rank) {
			srcs[q] = (const char *)mine + off * es;
			continue;
		}
		c->tp->get_addrs(c, q, &a, &unused);
		SD_CHECK(c->tp->peer_read(c, q, tmp + (size_t)q * SC_BLOCK, a + off * es, n * es));
		srcs[q] = tmp + (size_t)q * SC_BLOCK;
	}
	return SMDDP_OK;
}

/* Reduce elements [base+lo, base+hi) of every rank's send buffer into dst. */
static int sc_reduce_range(struct smddp_comm *c, const void *mine, void *dst, size_t base,
			   size_t lo, size_t hi, enum smddp_dtype dt, enum smddp_op op)
{
	const void *srcs[MAX_SRCS];
	size_t es = smddp_dtype_size(dt), blk = SC_BLOCK / es;
	char *tmp = NULL;

	SD_CHECK(scratch(c, &tmp));
	for (size_t b = lo; b < hi; b += blk) {
		size_t n = hi - b < blk ? hi - b : blk;

		SD_CHECK(fetch_block(c, mine, base + b, n, es, tmp, srcs));
		sd_reduce((char *)dst + (b - lo) * es, srcs, c->size, n, dt, op, c->size);
	}
	return SMDDP_OK;
}

/* Allreduce: rank r reduces partition r, a cache-sized block at a time,
 * reading its peers' send buffers, into its own receive buffer, and writes
 * each reduced block from there straight into every peer's.  Each region of
 * a peer's buffers is touched by one rank only (partition r by rank r), and
 * a block is read before the same block is written, so this holds in place
 * too (sd_reduce's output may be one of its inputs).  The final barrier:
 * every rank's partition has arrived everywhere.  In place, the lines
 * written, here and in the peer, are those just read, still in cache; out
 * of place on two ranks, below PUSH_MAX bytes, those a previous call wrote,
 * still in this core's cache.  Above, and on more ranks (measured on two
 * only), the pull below. */
static int sc_allreduce_push(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			enum smddp_dtype dt, enum smddp_op op)
{
	const struct sd_transport_ops *tp = c->tp;
	const void *srcs[MAX_SRCS];
	size_t es = smddp_dtype_size(dt), part = sd_coll_part_elems(count, c->size, es), lo, hi;
	size_t blk = SC_BLOCK / es;
	int P = c->size, me = c->rank;
	char *tmp = NULL;

	SD_CHECK(scratch(c, &tmp));
	part_range(count, part, me, &lo, &hi);
	for (size_t b = lo; b < hi; b += blk) {
		size_t n = hi - b < blk ? hi - b : blk;
		char *out = (char *)rbuf + b * es;

		SD_CHECK(fetch_block(c, sbuf, b, n, es, tmp, srcs));
		sd_reduce(out, srcs, P, n, dt, op, P);
		for (int i = 1; i < P; i++) {
			int q = (me + i) % P;
			uintptr_t unused, a;

			tp->get_addrs(c, q, &unused, &a);
			SD_CHECK(tp->peer_write(c, q, a + b * es, out, n * es));
		}
	}
	return tp->barrier(c);
}

/* Allreduce, pull: rank r reduces partition r reading its peers' send
 * buffers, then reads every other partition from its owner's receive
 * buffer. */
static int sc_allreduce_pull(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			enum smddp_dtype dt, enum smddp_op op)
{
	const struct sd_transport_ops *tp = c->tp;
	size_t es = smddp_dtype_size(dt), part = sd_coll_part_elems(count, c->size, es), lo, hi;

	part_range(count, part, c->rank, &lo, &hi);
	if (hi > lo)
		SD_CHECK(sc_reduce_range(c, sbuf, (char *)rbuf + lo * es, 0, lo, hi, dt, op));
	SD_CHECK(tp->barrier(c));
	for (int q = 0; q < c->size; q++) {
		uintptr_t unused, a;

		part_range(count, part, q, &lo, &hi);
		if (q == c->rank || hi == lo)
			continue;
		tp->get_addrs(c, q, &unused, &a);
		SD_CHECK(tp->peer_read(c, q, (char *)rbuf + lo * es, a + lo * es, (hi - lo) * es));
	}
	return tp->barrier(c);
}

static int staged_reduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			 enum smddp_dtype dt, enum smddp_op op, int root);

#define PUSH_MAX ((size_t)16 << 20) /* bytes: two ranks push out of place below this */

/* Every rank sees every rank's addresses, and rank 0's choice of way, after
 * the first barrier, so all go the same way. */
static int sc_allreduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			enum smddp_dtype dt, enum smddp_op op)
{
	const struct sd_transport_ops *tp = c->tp;
	size_t bytes = count * smddp_dtype_size(dt);
	struct way w;
	int inplace = 1, rc;

	SD_CHECK(way_begin(c, WAY_ALLREDUCE, bytes, &w));
	if (w.alg == ALG_STAGED)
		return way_end(&w, staged_reduce(c, sbuf, rbuf, count, dt, op, -1));
	tp->put_addrs(c, sbuf, rbuf);
	rc = tp->barrier(c);
	if (rc)
		return rc;
	for (int q = 0; q < c->size; q++) {
		uintptr_t a, b;

		tp->get_addrs(c, q, &a, &b);
		inplace &= a == b;
	}
	if ((inplace || (c->size == 2 && bytes < PUSH_MAX)) && can_peer_write(c))
		rc = sc_allreduce_push(c, sbuf, rbuf, count, dt, op);
	else
		rc = sc_allreduce_pull(c, sbuf, rbuf, count, dt, op);
	return way_end(&w, rc);
}

/* Reduce to root, single copy: rank r reduces partition r as the push
 * allreduce does, and the non-roots write their reduced blocks into the
 * root's receive buffer only (through their own block of the scratch: their
 * receive buffer is not theirs to write).  Half the writes of the
 * allreduce, and the same parallel reduction, where the staged pipeline
 * reduces every byte on the root alone.  In place on the root, a non-root
 * reads a block of the root's partition r before it writes the same block.
 * On a transport that reads peers but cannot write them (none yet) a
 * reduce stages (reduce_common). */
static int sc_reduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		     enum smddp_dtype dt, enum smddp_op op, int root)
{
	const struct sd_transport_ops *tp = c->tp;
	const void *srcs[MAX_SRCS];
	size_t es = smddp_dtype_size(dt), part = sd_coll_part_elems(count, c->size, es), lo, hi;
	size_t blk = SC_BLOCK / es;
	int P = c->size, me = c->rank;
	uintptr_t unused, dst = 0;
	char *tmp = NULL;
	struct way w;
	int rc;

	SD_CHECK(way_begin(c, WAY_REDUCE, count * es, &w));
	if (w.alg == ALG_STAGED)
		return way_end(&w, staged_reduce(c, sbuf, rbuf, count, dt, op, root));
	SD_CHECK(scratch(c, &tmp));
	tp->put_addrs(c, sbuf, rbuf);
	rc = tp->barrier(c);
	if (rc)
		return rc;
	tp->get_addrs(c, root, &unused, &dst);
	part_range(count, part, me, &lo, &hi);
	for (size_t b = lo; b < hi; b += blk) {
		size_t n = hi - b < blk ? hi - b : blk;
		char *out = me == root ? (char *)rbuf + b * es : tmp + (size_t)me * SC_BLOCK;

		SD_CHECK(fetch_block(c, sbuf, b, n, es, tmp, srcs));
		sd_reduce(out, srcs, P, n, dt, op, P);
		if (me != root)
			SD_CHECK(tp->peer_write(c, root, dst + b * es, out, n * es));
	}
	return way_end(&w, tp->barrier(c));
}

/* ---- rooted calls of a few bytes: messages, no barrier ---------------------
 * A broadcast or reduce of up to EAGER_MAX bytes goes as point-to-point
 * messages (the transport's p2p op), which a sender leaves without waiting
 * for its receiver: the root of a broadcast (the non-roots of a reduce)
 * returns at once, and only the receivers wait, for the data itself, where
 * a barrier makes every rank wait for every other.  EAGER_MAX is the shm
 * transport's eager size for a few ranks (a larger message would wait for
 * its receiver, still correct).  Up to EAGER_RANKS ranks, where it was
 * measured (docs/PERFORMANCE.md); beyond, the root's one message per peer
 * against one barrier is untried.
 * The key is the call's, as alltoallv's: messages of one pair and key
 * match in order, and every rank makes the same calls in the same order. */
#define EAGER_MAX 4096
#define EAGER_RANKS 8
_Static_assert(EAGER_MAX <= SC_BLOCK, "a message fits its block of the scratch");

static int eager_way(struct smddp_comm *c, size_t bytes)
{
	return c->size > 1 && c->size <= EAGER_RANKS && bytes > 0 && bytes <= EAGER_MAX;
}

static uint64_t eager_key(const struct smddp_comm *c)
{
	return SD_P2P_KEY_COLL | (c->wire & 0xffffffffull);
}

static int eager_broadcast(struct smddp_comm *c, void *buf, size_t m, int root)
{
	struct sd_p2p_op ops[EAGER_RANKS];
	uint64_t key = eager_key(c);
	int n = 0;

	if (c->rank != root)
		sd_coll_op_set(&ops[n++], 0, root, key, buf, m);
	else
		for (int i = 1; i < c->size; i++)
			sd_coll_op_set(&ops[n++], 1, (root + i) % c->size, key, buf, m);
	return sd_coll_p2p(c, ops, n);
}

/* The root reduces every rank's input in rank order, as the staged way
 * does: the same bits. */
static int eager_reduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			enum smddp_dtype dt, enum smddp_op op, int root)
{
	struct sd_p2p_op ops[EAGER_RANKS];
	const void *srcs[EAGER_RANKS];
	size_t m = count * smddp_dtype_size(dt);
	uint64_t key = eager_key(c);
	char *tmp = NULL;
	int n = 0;

	if (c->rank != root) {
		sd_coll_op_set(&ops[0], 1, root, key, sbuf, m);
		return sd_coll_p2p(c, ops, 1);
	}
	SD_CHECK(scratch(c, &tmp));
	for (int q = 0; q < c->size; q++) {
		srcs[q] = q == root ? sbuf : tmp + (size_t)q * SC_BLOCK;
		if (q != root)
			sd_coll_op_set(&ops[n++], 0, q, key, srcs[q], m);
	}
	SD_CHECK(sd_coll_p2p(c, ops, n));
	sd_reduce(rbuf, srcs, c->size, count, dt, op, c->size);
	return SMDDP_OK;
}

/* Shared body of allreduce (root < 0) and reduce (root >= 0). */
static int reduce_common(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			 enum smddp_dtype dt, enum smddp_op op, int root)
{
	size_t es = smddp_dtype_size(dt);

	if (c->size > MAX_SRCS)
		return sd_comm_error(c, SMDDP_EUNSUPPORTED, "more than %d ranks on one node",
				     MAX_SRCS);
	if (root >= 0 && eager_way(c, count * es))
		return eager_reduce(c, sbuf, rbuf, count, dt, op, root);
	if (root < 0 && sc_way(c, count * es))
		return sc_allreduce(c, sbuf, rbuf, count, dt, op);
	if (root >= 0 && sc_way(c, count * es) && can_peer_write(c))
		return sc_reduce(c, sbuf, rbuf, count, dt, op, root);
	return staged_reduce(c, sbuf, rbuf, count, dt, op, root);
}

/* Through the slots of shared memory: the latency path, or the pipeline of
 * the top of this file. */
static int staged_reduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			 enum smddp_dtype dt, enum smddp_op op, int root)
{
	const struct sd_transport_ops *tp = c->tp;
	const void *srcs[MAX_SRCS];
	size_t es = smddp_dtype_size(dt);
	size_t half = tp->half_bytes(c);
	size_t step_elems = half / es;
	int P = c->size, me = c->rank;
	int rc;

	if (count * es * (size_t)P <= SMALL_TOTAL && count <= step_elems) {
		int h = next_half(c);
		void *(*slot)(struct smddp_comm *, int, int) = tp->slot;

		/* The tiny area if the transport has one (NULL: it has not). */
		if (count * es <= SD_TINY_BYTES && tp->tiny(c, me, h))
			slot = tp->tiny;

		sd_copy(slot(c, me, h), sbuf, count * es);
		SD_CHECK(tp->barrier(c));
		if (root < 0 || root == me) {
			for (int r = 0; r < P; r++)
				srcs[r] = slot(c, r, h);
			sd_reduce(rbuf, srcs, P, count, dt, op, P);
		}
		return SMDDP_OK;
	}
	for (size_t off = 0; off < count; off += step_elems) {
		size_t n = count - off < step_elems ? count - off : step_elems;
		size_t part = sd_coll_part_elems(n, P, es), lo, hi;
		int h = next_half(c);
		const char *in = (const char *)sbuf + off * es;
		char *mine = tp->slot(c, me, h);

		sd_copy(mine, in, n * es);
		SD_CHECK(tp->barrier(c));
		if (P == 2) {
			/* Two ranks: each reduces the whole piece itself, its
			 * own part from its input, the peer's from the slot: no
			 * second barrier and no copy out.  Both reduce the same
			 * two sources in rank order, so get the same bits.  The
			 * peer rewrites its slot two steps on, past a barrier
			 * that this rank reaches only once done with it. */
			if (root < 0 || root == me) {
				srcs[me] = in;
				srcs[1 - me] = tp->slot(c, 1 - me, h);
				sd_reduce((char *)rbuf + off * es, srcs, P, n, dt, op, P);
			}
			continue;
		}
		part_range(n, part, me, &lo, &hi);
		if (hi > lo) {
			for (int r = 0; r < P; r++)
				srcs[r] = (const char *)tp->slot(c, r, h) + lo * es;
			sd_reduce(mine + lo * es, srcs, P, hi - lo, dt, op, P);
		}
		rc = tp->barrier(c);
		if (rc)
			return rc;
		if (root >= 0 && root != me)
			continue;
		for (int r = 0; r < P; r++) {
			part_range(n, part, r, &lo, &hi);
			if (hi > lo)
				sd_copy((char *)rbuf + (off + lo) * es,
				       (const char *)tp->slot(c, r, h) + lo * es, (hi - lo) * es);
		}
	}
	return SMDDP_OK;
}

int sd_coll_node_allreduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			   enum smddp_dtype dt, enum smddp_op op)
{
	return reduce_common(c, sbuf, rbuf, count, dt, op, -1);
}

int sd_coll_node_reduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			enum smddp_dtype dt, enum smddp_op op, int root)
{
	return reduce_common(c, sbuf, rbuf, count, dt, op, root);
}

static int staged_allgather(struct smddp_comm *c, const void *sbuf, char *out, size_t m,
			    int inplace)
{
	const struct sd_transport_ops *tp = c->tp;
	size_t half = tp->half_bytes(c);
	int P = c->size, me = c->rank;

	for (size_t o = 0; o < m; o += half) {
		size_t len = m - o < half ? m - o : half;
		int h = next_half(c);

		sd_copy(tp->slot(c, me, h), (const char *)sbuf + o, len);
		SD_CHECK(tp->barrier(c));
		for (int r = 0; r < P; r++) {
			if (r == me) {
				if (!inplace)
					sd_move(out + (size_t)r * m + o, (const char *)sbuf + o, len);
			} else {
				sd_copy(out + (size_t)r * m + o, tp->slot(c, r, h), len);
			}
		}
	}
	return SMDDP_OK;
}

/* An allgather may go the single-copy way from half of
 * SMDDP_SINGLE_COPY_MIN in all (128 KiB by default): the staged way copies
 * every byte twice, the second time reading lines that a peer has just
 * written, and on two ranks it lost to single copy at 128 KiB, where the
 * reductions still win staged (docs/PERFORMANCE.md, one node).  Rank 0's
 * timings still take the faster way per size. */
static int ag_sc_way(struct smddp_comm *c, size_t total)
{
	return total > 0 && use_single_copy(c, total < SIZE_MAX / 2 ? total * 2 : total);
}

int sd_coll_node_allgather(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			   enum smddp_dtype dt)
{
	const struct sd_transport_ops *tp = c->tp;
	size_t m = count * smddp_dtype_size(dt);
	int P = c->size, me = c->rank;
	char *out = rbuf;
	int inplace = (const char *)sbuf == out + (size_t)me * m;
	struct way w;

	if (!ag_sc_way(c, m * (size_t)P))
		return staged_allgather(c, sbuf, out, m, inplace);
	SD_CHECK(way_begin(c, WAY_ALLGATHER, m * (size_t)P, &w));
	if (w.alg == ALG_STAGED)
		return way_end(&w, staged_allgather(c, sbuf, out, m, inplace));
	tp->put_addrs(c, sbuf, rbuf);
	SD_CHECK(tp->barrier(c));
	for (int i = 1; i < P; i++) {
		/* Start with the next rank so that ranks do not all read from
		 * rank 0 at once. */
		int q = (me + i) % P;
		uintptr_t a, unused;

		tp->get_addrs(c, q, &a, &unused);
		SD_CHECK(tp->peer_read(c, q, out + (size_t)q * m, a, m));
	}
	if (!inplace)
		sd_move(out + (size_t)me * m, sbuf, m);
	return way_end(&w, tp->barrier(c));
}

/* An alltoall of fewer bytes a rank goes the single-copy way without
 * timing the staged one: with the ranks on their own cores the staged way
 * lost there (out of place, 0.5-0.9x at 512 KiB), and the few calls that
 * the tuner times at first did not always tell (docs/PERFORMANCE.md, one
 * node). */
#define A2A_WAYS_MIN ((size_t)4 << 20)

/* From this many bytes of output, an out-of-place alltoall writes its
 * output with stores that bypass the cache (sd_copy_stream): with an input
 * as large, two ranks' buffers no longer fit the 32 MiB L3 of the CI
 * machine, and a plain copy reads every line of the output before writing
 * it.  Not in place, where the next call reads what this one wrote, nor for
 * smaller calls: it lost there (docs/PERFORMANCE.md, one node). */
#define A2A_STREAM_MIN ((size_t)8 << 20)

/* n bytes from src to offset off of an alltoall's output (total bytes). */
static void a2a_out(const void *sbuf, void *rbuf, size_t total, size_t off, const void *src,
		    size_t n)
{
	char *d = (char *)rbuf + off;
	const char *s = src;

	if (rbuf != sbuf && total >= A2A_STREAM_MIN && (d + n <= s || s + n <= d))
		sd_copy_stream(d, src, n);
	else
		sd_move(d, src, n);
}

/* Reduce-scatter and all-to-all share their shape: in each step every rank
 * puts `len` elements for each peer q in its half at q*len, and after the
 * barrier takes what each peer put for it. */
static int staged_exchange(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			   enum smddp_dtype dt, enum smddp_op op, int reduce);

/* All-to-all, single copy, when some rank works in place (so a block that
 * a peer still has to read may be the one its data lands in): ranks i and j
 * swap rank i's block j with rank j's block i, each rank one half of the
 * pair (the lower rank the first half), a block of the scratch at a time:
 * read the peer's piece, write ours in its place, then put what was read
 * in place of ours (the own block has moved before: exchange).  Each piece
 * of memory is touched by one rank only and read before it is written, so
 * any mix of in place and out of place holds, with no barrier but the
 * caller's two. */
static int sc_alltoall_swap(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			    size_t es)
{
	const struct sd_transport_ops *tp = c->tp;
	size_t blk = (size_t)c->size * SC_BLOCK / es, bytes = count * es;
	size_t half = sd_coll_part_elems(count, 2, es);
	int P = c->size, me = c->rank;
	char *tmp = NULL, *out = rbuf;
	const char *in = sbuf;

	SD_CHECK(scratch(c, &tmp));
	for (int i = 1; i < P; i++) {
		int q = (me + i) % P;
		size_t lo = me < q ? 0 : (half < count ? half : count);
		size_t hi = me < q ? (half < count ? half : count) : count;
		uintptr_t qs, qr;

		tp->get_addrs(c, q, &qs, &qr);
		for (size_t b = lo; b < hi; b += blk) {
			size_t n = (hi - b < blk ? hi - b : blk) * es;
			size_t mine = (size_t)q * bytes + b * es, theirs = (size_t)me * bytes + b * es;

			SD_CHECK(tp->peer_read(c, q, tmp, qs + theirs, n));
			SD_CHECK(tp->peer_write(c, q, qr + theirs, in + mine, n));
			sd_copy(out + mine, tmp, n);
		}
	}
	return tp->barrier(c);
}

static int exchange(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		    enum smddp_dtype dt, enum smddp_op op, int reduce)
{
	const struct sd_transport_ops *tp = c->tp;
	size_t es = smddp_dtype_size(dt);
	int P = c->size, me = c->rank;

	if (P <= MAX_SRCS && sc_way(c, count * es * (size_t)P)) {
		int conflict = 0;
		struct way w;

		w.t = NULL;
		w.alg = ALG_SINGLE;
		if (reduce || count * es * (size_t)P >= A2A_WAYS_MIN)
			SD_CHECK(way_begin(c, reduce ? WAY_REDUCE_SCATTER : WAY_ALLTOALL,
					   count * es * (size_t)P, &w));
		if (w.alg == ALG_STAGED)
			return way_end(&w, staged_exchange(c, sbuf, rbuf, count, dt, op, reduce));
		/* The own block first, while a peer may still be on its way
		 * to the barrier: no one else reads or writes it. */
		if (!reduce && (char *)rbuf != (const char *)sbuf)
			a2a_out(sbuf, rbuf, count * es * (size_t)P, (size_t)me * count * es,
				(const char *)sbuf + (size_t)me * count * es, count * es);
		tp->put_addrs(c, sbuf, rbuf);
		SD_CHECK(tp->barrier(c));
		/* A rank working in place with recvbuf == sendbuf would write
		 * where a peer still reads (block 0 for reduce_scatter, every
		 * block for alltoall).  Every rank sees every address, so all
		 * take the same decision: stage the whole call instead. */
		for (int q = 0; q < P; q++) {
			uintptr_t a, b;

			tp->get_addrs(c, q, &a, &b);
			if (a == b && (!reduce || q != 0))
				conflict = 1;
		}
		if (conflict && !reduce && can_peer_write(c))
			return way_end(&w, sc_alltoall_swap(c, sbuf, rbuf, count, es));
		if (conflict)
			return staged_exchange(c, sbuf, rbuf, count, dt, op, reduce);
		if (reduce) {
			SD_CHECK(sc_reduce_range(c, sbuf, rbuf, (size_t)me * count, 0, count, dt, op));
		} else {
			for (int i = 0; i < P; i++) {
				int q = (me + i) % P;
				uintptr_t a, unused;

				if (q == me)
					continue;
				tp->get_addrs(c, q, &a, &unused);
				SD_CHECK(tp->peer_read(c, q, (char *)rbuf + (size_t)q * count * es,
						       a + (size_t)me * count * es, count * es));
			}
		}
		return way_end(&w, tp->barrier(c));
	}
	return staged_exchange(c, sbuf, rbuf, count, dt, op, reduce);
}

static int staged_exchange(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			   enum smddp_dtype dt, enum smddp_op op, int reduce)
{
	const struct sd_transport_ops *tp = c->tp;
	const void *srcs[MAX_SRCS];
	size_t es = smddp_dtype_size(dt);
	size_t half = tp->half_bytes(c);
	int P = c->size, me = c->rank;
	size_t step_elems = half / (es * (size_t)P);

	if (step_elems == 0 || P > MAX_SRCS)
		return sd_comm_error(c, SMDDP_EUNSUPPORTED,
				     "SMDDP_SHM_CHUNK of %zu bytes is too small for %d ranks of %zu-byte "
				     "elements: raise it",
				     half, P, es);
	for (size_t o = 0; o < count; o += step_elems) {
		size_t len = count - o < step_elems ? count - o : step_elems;
		int h = next_half(c);
		char *mine = tp->slot(c, me, h);

		/* This rank's own block does not go through its slot: it is
		 * read (reduce) or moved (alltoall, before the barrier, where a
		 * rank that arrives first would only wait) straight from sbuf. */
		for (int q = 0; q < P; q++)
			if (q != me)
				sd_copy(mine + (size_t)q * len * es,
				       (const char *)sbuf + ((size_t)q * count + o) * es, len * es);
		if (!reduce && (char *)rbuf != (const char *)sbuf)
			a2a_out(sbuf, rbuf, count * es * (size_t)P, ((size_t)me * count + o) * es,
				(const char *)sbuf + ((size_t)me * count + o) * es, len * es);
		SD_CHECK(tp->barrier(c));
		if (reduce) {
			for (int q = 0; q < P; q++)
				srcs[q] = (const char *)tp->slot(c, q, h) + (size_t)me * len * es;
			srcs[me] = (const char *)sbuf + ((size_t)me * count + o) * es;
			sd_reduce((char *)rbuf + o * es, srcs, P, len, dt, op, P);
		} else {
			for (int q = 0; q < P; q++)
				if (q != me)
					a2a_out(sbuf, rbuf, count * es * (size_t)P,
						((size_t)q * count + o) * es,
						(const char *)tp->slot(c, q, h) + (size_t)me * len * es,
						len * es);
		}
	}
	return SMDDP_OK;
}

int sd_coll_node_reduce_scatter(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
				enum smddp_dtype dt, enum smddp_op op)
{
	return exchange(c, sbuf, rbuf, count, dt, op, 1);
}

int sd_coll_node_alltoall(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			  enum smddp_dtype dt)
{
	return exchange(c, sbuf, rbuf, count, dt, SMDDP_SUM, 0);
}

static int staged_broadcast(struct smddp_comm *c, void *buf, size_t m, int root)
{
	const struct sd_transport_ops *tp = c->tp;
	size_t half = tp->half_bytes(c);

	for (size_t o = 0; o < m; o += half) {
		size_t len = m - o < half ? m - o : half;
		int h = next_half(c);

		if (c->rank == root)
			sd_copy(tp->slot(c, root, h), (char *)buf + o, len);
		SD_CHECK(tp->barrier(c));
		if (c->rank != root)
			sd_copy((char *)buf + o, tp->slot(c, root, h), len);
	}
	return SMDDP_OK;
}

int sd_coll_node_broadcast(struct smddp_comm *c, void *buf, size_t count, enum smddp_dtype dt,
			   int root)
{
	const struct sd_transport_ops *tp = c->tp;
	size_t m = count * smddp_dtype_size(dt);
	struct way w;
	uintptr_t a, unused;

	if (eager_way(c, m))
		return eager_broadcast(c, buf, m, root);
	if (!sc_way(c, m))
		return staged_broadcast(c, buf, m, root);
	SD_CHECK(way_begin(c, WAY_BROADCAST, m, &w));
	if (w.alg == ALG_STAGED)
		return way_end(&w, staged_broadcast(c, buf, m, root));
	tp->put_addrs(c, buf, buf);
	SD_CHECK(tp->barrier(c));
	if (c->rank != root) {
		tp->get_addrs(c, root, &a, &unused);
		SD_CHECK(tp->peer_read(c, root, buf, a, m));
	}
	return way_end(&w, tp->barrier(c));
}
