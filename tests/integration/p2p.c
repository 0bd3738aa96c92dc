/* p2p.c - sends, receives, groups, alltoallv, gather and scatter, checked against what each rank can compute alone.
 *
 * Run under smddp-run with any number of ranks.  Byte j of a message from
 * rank s to rank r with tag t (or block of a collective call) is a pure
 * function of (s, r, t, j), so the receiver knows what it must get; the
 * exchanges only move bytes, so every check is bit exact.  Every receive
 * buffer has guard bytes on both sides.
 *
 * Modes:
 *   matrix   (default) every dtype x count for: a ring exchanged in a
 *            group (out of place and in place), blocking pairs without a group, tags received in the
 *            reverse order, one tag kept in order, receives from any
 *            source, an all-to-all of sends in one group, sends to self,
 *            alltoallv with uneven (and empty) blocks, gather and scatter
 *            from every root in and out of place; then the errors that
 *            must leave the communicator usable (a size mismatch, bad
 *            arguments)
 *   timeout  rank 0 sends with tag 8, rank 1 waits for tag 9: both fail
 *            with SMDDP_ETIMEDOUT naming the other (SMDDP_TIMEOUT short)
 *   kill     rank 1 dies while rank 0 sends to it: rank 0 fails with
 *            SMDDP_EPEER naming rank 1
 *   pieces   messages of 64 KiB - 1, 64 KiB, 64 KiB + 1 and 3 MiB (where
 *            the fabric cuts messages into pieces), sizes that differ
 *            both ways, across that limit and below it, to a receive from
 *            the sender or from anyone (SMDDP_EMISMATCH naming both sizes,
 *            then the same tag still works), and receives from any source
 *            of several messages per sender, in order
 * Usage: p2p [matrix|timeout|kill|pieces] [--counts a,b,c]
 * Exit: 0 passed, 1 a check failed, 2 usage.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <smddp/smddp.h>

#define GUARD 64
#define MAX_COUNTS 16

static struct smddp_comm *comm;
static int me, np, failed, cases;

static unsigned char val(int s, int r, int t, size_t j)
{
	return (unsigned char)(s * 131 + r * 31 + t * 7 + j * 13 + (j >> 8) * 5 + 1);
}

static void fill(unsigned char *p, size_t n, int s, int r, int t)
{
	for (size_t j = 0; j < n; j++)
		p[j] = val(s, r, t, j);
}

/* A buffer of n bytes with guards on both sides, poisoned. */
static unsigned char *guarded(size_t n)
{
	unsigned char *p = malloc(n + 2 * GUARD);

	if (!p) {
		perror("malloc");
		exit(1);
	}
	memset(p, 0xA5, n + 2 * GUARD);
	return p + GUARD;
}

static void release(unsigned char *p)
{
	free(p - GUARD);
}

static void bad(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bad(const char *what, const char *fmt, ...)
{
	va_list ap;

	if (failed++ < 30) {
		printf("FAIL rank %d: %s: ", me, what);
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		printf("\n");
		fflush(stdout);
	}
}

static int ok(int rc, const char *what)
{
	if (rc == SMDDP_OK)
		return 1;
	bad(what, "%s: %s", smddp_strerror(rc), smddp_last_error(comm));
	return 0;
}

static void guards(const char *what, const unsigned char *p, size_t n);

/* Checks n bytes from s to r with tag t (a block of a bigger buffer). */
static void expect_block(const char *what, const unsigned char *p, size_t n, int s, int r, int t)
{
	cases++;
	for (size_t j = 0; j < n; j++)
		if (p[j] != val(s, r, t, j)) {
			bad(what, "byte %zu of %zu from rank %d is %u, expected %u", j, n, s, p[j],
			    val(s, r, t, j));
			return;
		}
}

/* ... and the guards around it (a whole buffer). */
static void expect(const char *what, const unsigned char *p, size_t n, int s, int r, int t)
{
	expect_block(what, p, n, s, r, t);
	guards(what, p, n);
}

static void guards(const char *what, const unsigned char *p, size_t n)
{
	for (int g = 1; g <= GUARD; g++)
		if (p[-g] != 0xA5 || p[n + (size_t)g - 1] != 0xA5) {
			bad(what, "a guard byte around the %zu-byte buffer was written", n);
			return;
		}
}

/* ---- the matrix ------------------------------------------------------------ */

static void ring(size_t count, enum smddp_dtype dt)
{
	size_t n = count * smddp_dtype_size(dt);
	int to = (me + 1) % np, from = (me - 1 + np) % np, src = -1;
	unsigned char *s = guarded(n), *r = guarded(n);

	fill(s, n, me, to, 3);
	if (ok(smddp_group_start(), "ring: group_start") &&
	    ok(smddp_send(s, count, dt, to, 3, comm, NULL), "ring: send") &&
	    ok(smddp_recv(r, count, dt, from, 3, &src, comm, NULL), "ring: recv") &&
	    ok(smddp_group_end(), "ring: group_end")) {
		expect("ring", r, n, from, me, 3);
		if (src != from)
			bad("ring", "source %d, expected %d", src, from);
	}
	release(s);
	release(r);
}

/* The ring in place: each rank sends its buffer and receives into it, in
 * one group (nccl-tests' in-place sendrecv). */
static void ring_inplace(size_t count, enum smddp_dtype dt)
{
	size_t n = count * smddp_dtype_size(dt);
	int to = (me + 1) % np, from = (me - 1 + np) % np;
	unsigned char *b = guarded(n);

	fill(b, n, me, to, 14);
	if (ok(smddp_group_start(), "ring in place: group_start") &&
	    ok(smddp_send(b, count, dt, to, 14, comm, NULL), "ring in place: send") &&
	    ok(smddp_recv(b, count, dt, from, 14, NULL, comm, NULL), "ring in place: recv") &&
	    ok(smddp_group_end(), "ring in place: group_end"))
		expect("ring in place", b, n, from, me, 14);
	release(b);
}

/* Blocking pairs, no group: even ranks send first, odd ranks receive first. */
static void pairs(size_t count, enum smddp_dtype dt)
{
	size_t n = count * smddp_dtype_size(dt);
	int peer = me ^ 1;
	unsigned char *s = guarded(n), *r = guarded(n);

	if (peer >= np) {
		release(s);
		release(r);
		return;
	}
	fill(s, n, me, peer, 4);
	for (int k = 0; k < 2; k++) {
		if ((k == 0) == (me % 2 == 0)) {
			if (!ok(smddp_send(s, count, dt, peer, 4, comm, NULL), "pairs: send"))
				break;
		} else {
			if (!ok(smddp_recv(r, count, dt, peer, 4, NULL, comm, NULL), "pairs: recv"))
				break;
			expect("pairs", r, n, peer, me, 4);
		}
	}
	release(s);
	release(r);
}

/* Rank 0 sends tags 1, 2, 3 and three messages of tag 9 to rank 1, which
 * receives 3, 2, 1 and then the tag-9 ones: tags are matched apart, one
 * tag in order. */
static void tags(size_t count, enum smddp_dtype dt)
{
	size_t n = count * smddp_dtype_size(dt);
	unsigned char *b[6];
	int t[6] = {1, 2, 3, 9, 9, 9};

	if (np < 2 || me > 1)
		return;
	for (int i = 0; i < 6; i++) {
		b[i] = guarded(n);
		if (me == 0)
			fill(b[i], n, 0, 1, t[i] + (i > 3 ? i : 0));
	}
	ok(smddp_group_start(), "tags: group_start");
	for (int i = 0; i < 6; i++) {
		int k = i < 3 ? 2 - i : i;

		if (me == 0)
			ok(smddp_send(b[i], count, dt, 1, t[i], comm, NULL), "tags: send");
		else
			ok(smddp_recv(b[k], count, dt, 0, t[k], NULL, comm, NULL), "tags: recv");
	}
	if (ok(smddp_group_end(), "tags: group_end") && me == 1)
		for (int i = 0; i < 6; i++) {
			expect("tags", b[i], n, 0, 1, t[i] + (i > 3 ? i : 0));
		}
	for (int i = 0; i < 6; i++)
		release(b[i]);
}

/* More messages from rank 0 to rank 1 in one group than a channel has
 * descriptor slots (8 inside a node): rank 1 receives them in reverse
 * order, so the sender waits for slots while the receiver matches by tag,
 * and every third message is tiny (it travels inside its descriptor). */
#define BURST 20
static void burst(size_t count, enum smddp_dtype dt)
{
	unsigned char *b[BURST];
	size_t c[BURST];

	if (np < 2 || me > 1)
		return;
	for (int i = 0; i < BURST; i++) {
		c[i] = i % 3 ? count : 1;
		b[i] = guarded(c[i] * smddp_dtype_size(dt));
		if (me == 0)
			fill(b[i], c[i] * smddp_dtype_size(dt), 0, 1, 100 + i);
	}
	ok(smddp_group_start(), "burst: group_start");
	for (int i = 0; i < BURST; i++) {
		int k = BURST - 1 - i;

		if (me == 0)
			ok(smddp_send(b[i], c[i], dt, 1, 100 + i, comm, NULL), "burst: send");
		else
			ok(smddp_recv(b[k], c[k], dt, 0, 100 + k, NULL, comm, NULL), "burst: recv");
	}
	if (ok(smddp_group_end(), "burst: group_end") && me == 1)
		for (int i = 0; i < BURST; i++)
			expect("burst", b[i], c[i] * smddp_dtype_size(dt), 0, 1, 100 + i);
	for (int i = 0; i < BURST; i++)
		release(b[i]);
}

/* Every rank but 0 sends to rank 0, which receives from anyone. */
static void any_source(size_t count, enum smddp_dtype dt)
{
	size_t n = count * smddp_dtype_size(dt);

	if (me != 0) {
		unsigned char *s = guarded(n);

		fill(s, n, me, 0, 5);
		ok(smddp_send(s, count, dt, 0, 5, comm, NULL), "any: send");
		release(s);
		return;
	}
	int seen[64] = {0};

	for (int k = 1; k < np; k++) {
		unsigned char *r = guarded(n);
		int src = -1;

		if (ok(smddp_recv(r, count, dt, SMDDP_ANY_SOURCE, 5, &src, comm, NULL), "any: recv")) {
			if (src <= 0 || src >= np || seen[src]++)
				bad("any", "source %d (twice, or not a sender)", src);
			else
				expect("any", r, n, src, 0, 5);
		}
		release(r);
	}
}

/* One group: a message to every rank, itself included, and one from each. */
static void everyone(size_t count, enum smddp_dtype dt)
{
	size_t n = count * smddp_dtype_size(dt);
	unsigned char **s = calloc((size_t)np, sizeof(*s)), **r = calloc((size_t)np, sizeof(*r));

	ok(smddp_group_start(), "everyone: group_start");
	for (int q = 0; q < np; q++) {
		s[q] = guarded(n);
		r[q] = guarded(n);
		fill(s[q], n, me, q, 6);
		ok(smddp_recv(r[q], count, dt, q, 6, NULL, comm, NULL), "everyone: recv");
		ok(smddp_send(s[q], count, dt, q, 6, comm, NULL), "everyone: send");
	}
	if (ok(smddp_group_end(), "everyone: group_end"))
		for (int q = 0; q < np; q++)
			expect("everyone", r[q], n, q, me, 6);
	for (int q = 0; q < np; q++) {
		release(s[q]);
		release(r[q]);
	}
	free(s);
	free(r);
}

/* A group whose receive from this rank itself overwrites the buffer of a
 * send to the next rank: that send must go from its original bytes. */
static void self_overwrite(size_t count, enum smddp_dtype dt)
{
	size_t n = count * smddp_dtype_size(dt);
	int to = (me + 1) % np, from = (me + np - 1) % np;
	unsigned char *a = guarded(n), *x = guarded(n), *r = guarded(n);

	if (np < 2)
		goto out;
	fill(a, n, me, to, 7);
	fill(x, n, me, me, 8);
	ok(smddp_group_start(), "self_overwrite: group_start");
	ok(smddp_send(a, count, dt, to, 7, comm, NULL), "self_overwrite: send");
	ok(smddp_recv(r, count, dt, from, 7, NULL, comm, NULL), "self_overwrite: recv");
	ok(smddp_send(x, count, dt, me, 8, comm, NULL), "self_overwrite: send to self");
	ok(smddp_recv(a, count, dt, me, 8, NULL, comm, NULL), "self_overwrite: recv from self");
	if (ok(smddp_group_end(), "self_overwrite: group_end")) {
		expect("self_overwrite", r, n, from, me, 7);
		expect("self_overwrite (self)", a, n, me, me, 8);
	}
out:
	release(a);
	release(x);
	release(r);
}

/* Elements rank s sends to rank r: uneven, some zero. */
static size_t vcount(size_t count, int s, int r)
{
	return (size_t)((s + 2 * r) % 3) * count / 2 + ((s + r) % 4 == 1 ? 0 : (size_t)(s % 2));
}

static void alltoallv(size_t count, enum smddp_dtype dt)
{
	size_t es = smddp_dtype_size(dt), sc[64], sd[64], rc[64], rd[64], stot = 0, rtot = 0;

	for (int q = 0; q < np; q++) {
		sc[q] = vcount(count, me, q);
		rc[q] = vcount(count, q, me);
	}
	/* Blocks in reverse order with gaps, to test displacements. */
	for (int q = np - 1; q >= 0; q--) {
		sd[q] = stot;
		stot += sc[q] + 1;
		rd[q] = rtot;
		rtot += rc[q] + 1;
	}
	unsigned char *s = guarded(stot * es), *r = guarded(rtot * es);

	for (int q = 0; q < np; q++)
		fill(s + sd[q] * es, sc[q] * es, me, q, 7);
	if (ok(smddp_alltoallv(s, sc, sd, r, rc, rd, dt, comm, NULL), "alltoallv"))
		for (int q = 0; q < np; q++) {
			expect_block("alltoallv", r + rd[q] * es, rc[q] * es, q, me, 7);
			/* The gap after each block is untouched. */
			if (r[(rd[q] + rc[q]) * es] != 0xA5)
				bad("alltoallv", "the gap after block %d was written", q);
		}
	guards("alltoallv", r, rtot * es);
	release(s);
	release(r);
}

static void rooted(size_t count, enum smddp_dtype dt)
{
	size_t n = count * smddp_dtype_size(dt);

	for (int root = 0; root < np; root++) {
		for (int inplace = 0; inplace < 2; inplace++) {
			unsigned char *all = guarded(n * (size_t)np), *one = guarded(n);

			/* gather: every rank's block q of the root's buffer */
			fill(one, n, me, root, 10 + inplace);
			if (inplace && me == root)
				memcpy(all + (size_t)root * n, one, n);
			if (ok(smddp_gather(inplace && me == root ? all + (size_t)root * n : one, all,
					    count, dt, root, comm, NULL),
			       "gather") &&
			    me == root)
				for (int q = 0; q < np; q++)
					expect_block("gather", all + (size_t)q * n, n, q, root,
						     10 + inplace);
			guards("gather", all, n * (size_t)np);
			/* scatter: block q of the root's buffer to rank q */
			if (me == root)
				for (int q = 0; q < np; q++)
					fill(all + (size_t)q * n, n, root, q, 12 + inplace);
			memset(one, 0xA5, n);
			if (ok(smddp_scatter(all, inplace && me == root ? all + (size_t)root * n : one,
					     count, dt, root, comm, NULL),
			       "scatter"))
				expect_block("scatter",
					     inplace && me == root ? all + (size_t)root * n : one, n,
					     root, me, 12 + inplace);
			guards("scatter", one, n);
			guards("scatter", all, n * (size_t)np);
			release(all);
			release(one);
		}
	}
}

/* Errors that leave the communicator usable. */
static void errors(void)
{
	unsigned char b[64];
	int rc;

	memset(b, 0, sizeof(b));
	rc = smddp_send(b, 1, SMDDP_UINT8, np, 0, comm, NULL);
	if (rc != SMDDP_EINVAL || !strstr(smddp_last_error(comm), "peer"))
		bad("errors", "send to rank %d: %s (%s), expected SMDDP_EINVAL", np,
		    smddp_strerror(rc), smddp_last_error(comm));
	rc = smddp_recv(b, 1, SMDDP_UINT8, me, 0, NULL, comm, NULL);
	if (rc != SMDDP_EINVAL || !strstr(smddp_last_error(comm), "same group"))
		bad("errors", "recv from self outside a group: %s (%s)", smddp_strerror(rc),
		    smddp_last_error(comm));
	rc = smddp_send(b, 1, SMDDP_UINT8, 0, -1, comm, NULL);
	if (rc != SMDDP_EINVAL)
		bad("errors", "tag -1: %s", smddp_strerror(rc));
	rc = smddp_group_end();
	if (rc != SMDDP_EINVAL || !strstr(smddp_last_error(NULL), "without smddp_group_start"))
		bad("errors", "group_end alone: %s (%s)", smddp_strerror(rc), smddp_last_error(NULL));
	rc = smddp_alltoallv(b, NULL, NULL, b, NULL, NULL, SMDDP_UINT8, comm, NULL);
	if (rc != SMDDP_EINVAL)
		bad("errors", "alltoallv with NULL counts: %s", smddp_strerror(rc));
	/* Sizes that differ: rank 0 sends 10 (then 1000, then 8000) bytes,
	 * rank 1 takes 12 (1002, 8002): SMDDP_EMISMATCH naming the sender,
	 * then the communicator goes on. */
	if (np >= 2 && me <= 1) {
		static unsigned char big[8002];
		static const size_t sizes[] = {10, 1000, 8000};

		for (int k = 0; k < 3; k++) {
			size_t n = sizes[k];

			if (me == 0) {
				rc = smddp_send(k ? big : b, n, SMDDP_UINT8, 1, 20, comm, NULL);
				/* Inside a node a send past the eager size (4 KiB at
				 * most) learns it was refused; between hosts it may
				 * not. */
				if (n > 4096 && smddp_comm_local_size(comm) == smddp_comm_size(comm)) {
					if (rc != SMDDP_EMISMATCH ||
					    !strstr(smddp_last_error(comm), "rank 1 refused"))
						bad("mismatch", "sender of %zu bytes: %s (%s), "
								"expected SMDDP_EMISMATCH naming rank 1",
						    n, smddp_strerror(rc), smddp_last_error(comm));
					else
						cases++;
				} else if (rc != SMDDP_OK && rc != SMDDP_EMISMATCH) {
					bad("mismatch", "sender: %s (%s)", smddp_strerror(rc),
					    smddp_last_error(comm));
				}
			} else {
				rc = smddp_recv(k ? big : b, n + 2, SMDDP_UINT8, 0, 20, NULL, comm,
						NULL);
				if (rc != SMDDP_EMISMATCH || !strstr(smddp_last_error(comm), "rank 0"))
					bad("mismatch", "receiver: %s (%s), expected SMDDP_EMISMATCH "
							"naming rank 0",
					    smddp_strerror(rc), smddp_last_error(comm));
				else
					cases++;
			}
		}
	}
	/* A self pair whose sizes differ fails alone: the rest of rank 0's
	 * group still reaches rank 1, and the communicator goes on. */
	if (np >= 2 && me <= 1) {
		unsigned char *m = guarded(300);

		if (me == 0) {
			unsigned char x[16];

			fill(m, 300, 0, 1, 22);
			ok(smddp_group_start(), "self mismatch: group_start");
			ok(smddp_send(x, 10, SMDDP_UINT8, 0, 21, comm, NULL), "self mismatch: send");
			ok(smddp_recv(x, 12, SMDDP_UINT8, 0, 21, NULL, comm, NULL),
			   "self mismatch: recv");
			ok(smddp_send(m, 300, SMDDP_UINT8, 1, 22, comm, NULL), "self mismatch: send");
			rc = smddp_group_end();
			if (rc != SMDDP_EMISMATCH || !strstr(smddp_last_error(comm), "itself"))
				bad("self mismatch", "group_end: %s (%s), expected SMDDP_EMISMATCH",
				    smddp_strerror(rc), smddp_last_error(comm));
			else
				cases++;
		} else if (ok(smddp_recv(m, 300, SMDDP_UINT8, 0, 22, NULL, comm, NULL),
			      "self mismatch: the other rank's recv")) {
			expect("self mismatch: the other rank's recv", m, 300, 0, 1, 22);
		}
		release(m);
	}
	ok(smddp_barrier(comm), "barrier after the errors");
}

static int parse_counts(const char *s, size_t *out)
{
	int n = 0;

	while (*s && n < MAX_COUNTS) {
		char *end;

		out[n++] = strtoull(s, &end, 10);
		if (end == s)
			return -1;
		s = *end == ',' ? end + 1 : end;
	}
	return n;
}

/* A group over two communicators whose batches wait for each other when
 * run in the order of the calls: the world (A) and a copy of it whose
 * ranks are numbered backwards (B).  Ranks 2i and 2i + 1 exchange on both
 * (a last odd rank with itself); the even one makes its calls on A first,
 * the odd one on B first (rank 0 receives on A and sends on B while rank
 * 1 does the opposite, as NCCL's groups allow). */
static int ok_on(struct smddp_comm *on, int rc, const char *what)
{
	if (rc == SMDDP_OK)
		return 1;
	bad(what, "%s: %s", smddp_strerror(rc), smddp_last_error(on));
	return 0;
}

static void two_comms(size_t n)
{
	struct smddp_comm *b = NULL;
	int peer = (me ^ 1) < np ? me ^ 1 : me, src[2] = {-1, -1};
	unsigned char *s[2] = {guarded(n), guarded(n)}, *r[2] = {guarded(n), guarded(n)};
	char what[96];

	snprintf(what, sizeof(what), "group over two communicators, %zu bytes", n);
	if (!ok(smddp_comm_split(comm, 0, np - 1 - me, &b), what))
		goto out;
	for (int k = 0; k < 2; k++)
		fill(s[k], n, me, peer, 40 + k);
	if (ok(smddp_group_start(), what)) {
		for (int j = 0; j < 2; j++) {
			int k = (j + me) % 2; /* 0: A, 1: B */
			struct smddp_comm *on = k ? b : comm;
			int other = k ? np - 1 - peer : peer;

			ok_on(on, smddp_recv(r[k], n, SMDDP_UINT8, other, 40 + k, &src[k], on, NULL),
			      what);
			ok_on(on, smddp_send(s[k], n, SMDDP_UINT8, other, 40 + k, on, NULL), what);
		}
		int rc = smddp_group_end();

		if (rc != SMDDP_OK)
			bad(what, "%s: on A: %s; on B: %s", smddp_strerror(rc),
			    smddp_last_error(comm), smddp_last_error(b));
		else
			for (int k = 0; k < 2; k++) {
				expect(what, r[k], n, peer, me, 40 + k);
				if (src[k] != (k ? np - 1 - peer : peer))
					bad(what, "source %d on %s", src[k], k ? "B" : "A");
			}
	}
	ok(smddp_comm_destroy(b), what);
out:
	for (int k = 0; k < 2; k++) {
		release(s[k]);
		release(r[k]);
	}
}

static int matrix(const size_t *counts, int ncounts)
{
	static const enum smddp_dtype dts[] = {SMDDP_INT8,    SMDDP_UINT8,    SMDDP_INT32,
					       SMDDP_UINT32,  SMDDP_INT64,    SMDDP_UINT64,
					       SMDDP_FLOAT16, SMDDP_BFLOAT16, SMDDP_FLOAT32,
					       SMDDP_FLOAT64};

	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
		for (int i = 0; i < ncounts; i++) {
			/* Large counts with one dtype of each size only. */
			if (counts[i] > 5000 && d != 1 && d != 6 && d != 8 && d != 9)
				continue;
			ring(counts[i], dts[d]);
			if (np > 1)
				ring_inplace(counts[i], dts[d]);
			pairs(counts[i], dts[d]);
			tags(counts[i], dts[d]);
			burst(counts[i], dts[d]);
			any_source(counts[i], dts[d]);
			everyone(counts[i], dts[d]);
			self_overwrite(counts[i], dts[d]);
			alltoallv(counts[i], dts[d]);
			rooted(counts[i], dts[d]);
		}
	}
	errors();
	if (np > 1) {
		two_comms(100);
		two_comms(300007); /* single copy, or pieces between hosts */
	}
	ok(smddp_barrier(comm), "final barrier");
	printf("SUMMARY rank %d of %d: %d passed, %d failed\n", me, np, cases - failed, failed);
	return failed ? 1 : 0;
}

/* ---- messages around the fabric's piece size ------------------------------ */

#define KIB64 65536

/* A group exchange of n bytes between ranks 0 and 1 with tag t, checked. */
static void piece_exchange(size_t n, int t)
{
	int other = 1 - me, src = -1;
	unsigned char *s = guarded(n), *r = guarded(n);
	char what[64];

	snprintf(what, sizeof(what), "pieces: exchange of %zu bytes", n);
	fill(s, n, me, other, t);
	if (ok(smddp_group_start(), what) &&
	    ok(smddp_send(s, n, SMDDP_UINT8, other, t, comm, NULL), what) &&
	    ok(smddp_recv(r, n, SMDDP_UINT8, other, t, &src, comm, NULL), what) &&
	    ok(smddp_group_end(), what)) {
		expect(what, r, n, other, me, t);
		if (src != other)
			bad(what, "source %d, expected %d", src, other);
	}
	release(s);
	release(r);
}

/* Rank 0 sends sent bytes, rank 1 receives want with tag t (from rank 0,
 * or from anyone), rank late first waiting a little (the receive posted
 * before or after the message came: two paths in a provider):
 * SMDDP_EMISMATCH on the receiver naming rank 0 and both sizes; the sender
 * must not hang; then messages of the right size with the same tag, one
 * in pieces and one not, arrive whole (nothing of the wrong one is left to
 * take their place). */
static void piece_mismatch(size_t sent, size_t want, int any, int late, int t)
{
	static const size_t next[] = {3 * KIB64 + 5, 1000};
	unsigned char *s = guarded(sent), *r = guarded(want);
	char what[120], says[2][48];
	int rc;

	snprintf(what, sizeof(what), "pieces: %zu bytes sent, %zu received%s, %s late", sent,
		 want, any ? " from any source" : "", late ? "receiver" : "sender");
	snprintf(says[0], sizeof(says[0]), "sent %zu bytes", sent);
	snprintf(says[1], sizeof(says[1]), "takes %zu:", want);
	if (me == late)
		usleep(20000);
	if (me == 0) {
		fill(s, sent, 0, 1, t);
		rc = smddp_send(s, sent, SMDDP_UINT8, 1, t, comm, NULL);
		if (rc != SMDDP_OK && rc != SMDDP_EMISMATCH)
			bad(what, "sender: %s (%s)", smddp_strerror(rc), smddp_last_error(comm));
	} else {
		rc = smddp_recv(r, want, SMDDP_UINT8, any ? SMDDP_ANY_SOURCE : 0, t, NULL, comm,
				NULL);
		if (rc != SMDDP_EMISMATCH || !strstr(smddp_last_error(comm), "rank 0") ||
		    !strstr(smddp_last_error(comm), says[0]) ||
		    !strstr(smddp_last_error(comm), says[1]) ||
		    !strstr(smddp_last_error(comm), "count or dtype differs"))
			bad(what, "receiver: %s (%s), expected SMDDP_EMISMATCH naming rank 0, "
				  "\"%s\" and \"%s\"",
			    smddp_strerror(rc), smddp_last_error(comm), says[0], says[1]);
		else
			cases++;
		guards(what, r, want);
	}
	release(s);
	release(r);
	for (size_t k = 0; k < sizeof(next) / sizeof(next[0]); k++) {
		s = guarded(next[k]);
		if (me == 0) {
			fill(s, next[k], 0, 1, t + 1 + (int)k);
			ok(smddp_send(s, next[k], SMDDP_UINT8, 1, t, comm, NULL), what);
		} else if (ok(smddp_recv(s, next[k], SMDDP_UINT8, 0, t, NULL, comm, NULL), what)) {
			expect(what, s, next[k], 0, 1, t + 1 + (int)k);
		}
		release(s);
	}
}

/* Rank 0 receives from anyone, in one group, two messages of n bytes from
 * each other rank with tag t (and, from rank 1, two more: one to a
 * receive from anyone, then one to a receive from rank 1, with tag t + 1):
 * each sender's messages arrive whole and in the order sent. */
static void piece_any(size_t n, int t)
{
	int k = 2 * (np - 1) + 2, seen[64] = {0}, src[128];
	unsigned char *b[128];

	for (int i = 0; i < k; i++)
		b[i] = guarded(n);
	if (me == 0) {
		if (!ok(smddp_group_start(), "pieces: any source"))
			goto out;
		for (int i = 0; i < k - 2; i++)
			ok(smddp_recv(b[i], n, SMDDP_UINT8, SMDDP_ANY_SOURCE, t, &src[i], comm, NULL),
			   "pieces: any source: recv");
		ok(smddp_recv(b[k - 2], n, SMDDP_UINT8, SMDDP_ANY_SOURCE, t + 1, &src[k - 2], comm,
			      NULL),
		   "pieces: any source: recv");
		ok(smddp_recv(b[k - 1], n, SMDDP_UINT8, 1, t + 1, &src[k - 1], comm, NULL),
		   "pieces: any source: recv");
		if (!ok(smddp_group_end(), "pieces: any source: group_end"))
			goto out;
		for (int i = 0; i < k - 2; i++) {
			if (src[i] < 1 || src[i] >= np) {
				bad("pieces: any source", "source %d", src[i]);
				continue;
			}
			/* message m of sender s is filled as tag t + 2 + m */
			expect("pieces: any source", b[i], n, src[i], 0, t + 2 + seen[src[i]]++);
		}
		if (src[k - 2] != 1 || src[k - 1] != 1)
			bad("pieces: any source", "sources %d, %d of tag %d, expected 1, 1",
			    src[k - 2], src[k - 1], t + 1);
		expect("pieces: any source then rank 1, first", b[k - 2], n, 1, 0, t + 4);
		expect("pieces: any source then rank 1, second", b[k - 1], n, 1, 0, t + 5);
	} else {
		if (!ok(smddp_group_start(), "pieces: any source"))
			goto out;
		for (int m = 0; m < 2; m++) {
			fill(b[m], n, me, 0, t + 2 + m);
			ok(smddp_send(b[m], n, SMDDP_UINT8, 0, t, comm, NULL), "pieces: send");
		}
		for (int m = 0; me == 1 && m < 2; m++) {
			fill(b[2 + m], n, me, 0, t + 4 + m);
			ok(smddp_send(b[2 + m], n, SMDDP_UINT8, 0, t + 1, comm, NULL), "pieces: send");
		}
		ok(smddp_group_end(), "pieces: any source: group_end");
	}
out:
	for (int i = 0; i < k; i++)
		release(b[i]);
}

/* Messages just under, at and over 64 KiB and of several MiB (libfabric's
 * eager limit, where the fabric cuts messages into pieces; the sockets cut
 * them at 4 MiB, their credit), sizes that differ both ways across it, and
 * receives from any source. */
static int pieces_mode(void)
{
	static const size_t sizes[] = {KIB64 - 1, KIB64, KIB64 + 1, 3 * 1048576 + 17,
				       9 * 1048576 + 17};
	/* sent, received, from any source; up to 64 KiB a message is one
	 * send, which between hosts may meet a smaller receive */
	static const size_t wrong[][3] = {
		{KIB64 + 1, KIB64, 0}, {KIB64, KIB64 + 1, 0}, {KIB64 - 1, KIB64 + 1, 0},
		{3 * 1048576 + 17, 3 * 1048576 + 16, 0}, {3 * 1048576 + 16, 3 * 1048576 + 17, 0},
		{9 * 1048576 + 17, 9 * 1048576 + 16, 0}, {9 * 1048576 + 16, 9 * 1048576 + 17, 0},
		{1048576, 5, 0}, {5, 1048576, 0}, {1048576, 100, 0}, {100, 2 * KIB64, 0},
		{100, 64, 0}, {40960, 20480, 0}, {KIB64, KIB64 - 1, 0}, {10, 5, 0},
		{20480, 40960, 0}, {100, 64, 1}, {40960, 20480, 1}, {10, 5, 1},
		{1048576, 100, 1},
	};

	if (np < 2)
		return 2;
	for (size_t i = 0; me <= 1 && i < sizeof(sizes) / sizeof(sizes[0]); i++)
		piece_exchange(sizes[i], 50 + (int)i);
	for (int late = 0; late < 2; late++)
		for (size_t i = 0; me <= 1 && i < sizeof(wrong) / sizeof(wrong[0]); i++)
			piece_mismatch(wrong[i][0], wrong[i][1], (int)wrong[i][2], late,
				       60 + 2 * (int)i);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		piece_any(sizes[i], 100 + 10 * (int)i);
	ok(smddp_barrier(comm), "final barrier");
	printf("SUMMARY rank %d of %d: %d passed, %d failed\n", me, np, cases - failed, failed);
	return failed ? 1 : 0;
}

/* ---- faults ---------------------------------------------------------------- */

/* ---- a collective, then sends at once ------------------------------------ */

/* Ranks 0 and 1 exchange 1 MiB right after each allgather of 128 KiB a
 * rank, while the others (slowed down) still read the gather's slots:
 * staged sends once went through the senders' slots and changed what the
 * others gathered. */
static int collsend_mode(void)
{
	size_t g = 128 << 10, n = 1 << 20;
	unsigned char *in = guarded(g), *out = guarded(g * (size_t)np), *s = guarded(n),
		      *r = guarded(n);

	if (me >= 2 && nice(10) < 0)
		perror("nice");
	for (int it = 0; it < 100 && failed < 3; it++) {
		fill(in, g, me, 0, it % 50);
		if (!ok(smddp_allgather(in, out, g, SMDDP_UINT8, comm, NULL), "collsend: allgather"))
			break;
		if (me <= 1 && np >= 2) {
			fill(s, n, me, 1 - me, 3);
			ok(smddp_group_start(), "collsend: group_start");
			ok(smddp_send(s, n, SMDDP_UINT8, 1 - me, 5, comm, NULL), "collsend: send");
			ok(smddp_recv(r, n, SMDDP_UINT8, 1 - me, 5, NULL, comm, NULL), "collsend: recv");
			if (ok(smddp_group_end(), "collsend: group_end"))
				expect("collsend: exchange", r, n, 1 - me, me, 3);
		}
		for (int q = 0; q < np; q++)
			expect_block("collsend: allgather", out + (size_t)q * g, g, q, 0, it % 50);
	}
	ok(smddp_barrier(comm), "collsend: final barrier");
	release(in);
	release(out);
	release(s);
	release(r);
	printf("SUMMARY rank %d of %d: %d passed, %d failed\n", me, np, cases - failed, failed);
	return failed ? 1 : 0;
}

/* Wait up to 60 s for a file (the other rank's step): 1 if it came. */
static int wait_file(const char *dir, const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	for (int i = 0; i < 6000; i++) {
		if (access(path, F_OK) == 0)
			return 1;
		usleep(10000);
	}
	return 0;
}

static void make_file(const char *dir, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((f = fopen(path, "w")))
		fclose(f);
}

static int timeout_mode(void)
{
	static unsigned char b[100000];
	const char *dir = getenv("P2P_SYNC_DIR");
	int rc = SMDDP_OK, other = 1 - me;

	if (np != 2)
		return 2;
	if (me == 0)
		rc = smddp_send(b, sizeof(b), SMDDP_UINT8, 1, 8, comm, NULL);
	else
		rc = smddp_recv(b, sizeof(b), SMDDP_UINT8, 0, 9, NULL, comm, NULL);
	char want[32];

	snprintf(want, sizeof(want), "rank %d", other);
	if (rc == SMDDP_ETIMEDOUT && strstr(smddp_last_error(comm), want))
		printf("FAULT-OK rank=%d %s\n", me, smddp_last_error(comm));
	else
		printf("FAULT-BAD rank=%d %s: %s\n", me, smddp_strerror(rc), smddp_last_error(comm));
	fflush(stdout);
	/* Stay until the other rank has timed out too: on a loaded machine
	 * one rank can post its call late, and the other's exit would end
	 * that call with the (right) error that its peer is gone. */
	if (dir) {
		snprintf(want, sizeof(want), "timeout-%d", me);
		make_file(dir, want);
		snprintf(want, sizeof(want), "timeout-%d", other);
		wait_file(dir, want);
	}
	return 1;
}

static int kill_mode(void)
{
	static unsigned char b[1 << 20];
	int rc;

	if (np < 2)
		return 2;
	if (me == 1) {
		usleep(300000);
		raise(SIGKILL);
	}
	if (me != 0)
		return 0;
	rc = smddp_send(b, sizeof(b), SMDDP_UINT8, 1, 1, comm, NULL);
	/* Between hosts a loaded machine may see the broken connection before
	 * the death notice (issue 15): either way rank 1 must be named. */
	if ((rc == SMDDP_EPEER || rc == SMDDP_ENETWORK) && strstr(smddp_last_error(comm), "rank 1"))
		printf("FAULT-OK rank=0 %s\n", smddp_last_error(comm));
	else
		printf("FAULT-BAD rank=0 %s: %s\n", smddp_strerror(rc), smddp_last_error(comm));
	fflush(stdout);
	return 1;
}

/* Rank 0's send of 1 MiB times out (SMDDP_TIMEOUT short) and it reuses the
 * buffer, still alive; only then does rank 1 receive: it must fail naming
 * rank 0, not take the new bytes as the message.  The steps are ordered
 * by files in $P2P_SYNC_DIR, not by sleeping. */
static int late_mode(void)
{
	static unsigned char b[1 << 20];
	const char *dir = getenv("P2P_SYNC_DIR");
	int rc;

	if (np != 2 || !dir)
		return 2;
	if (me == 0) {
		memset(b, 'A', sizeof(b));
		rc = smddp_send(b, sizeof(b), SMDDP_UINT8, 1, 4, comm, NULL);
		memset(b, 'Z', sizeof(b));
		if (rc == SMDDP_ETIMEDOUT && strstr(smddp_last_error(comm), "rank 1"))
			printf("FAULT-OK rank=0 %s\n", smddp_last_error(comm));
		else
			printf("FAULT-BAD rank=0 %s: %s\n", smddp_strerror(rc),
			       smddp_last_error(comm));
		fflush(stdout);
		make_file(dir, "late-sent");
		wait_file(dir, "late-received");
		return 1;
	}
	if (!wait_file(dir, "late-sent")) {
		printf("FAULT-BAD rank=1 rank 0 never gave up its send\n");
		return 1;
	}
	memset(b, 0, sizeof(b));
	rc = smddp_recv(b, sizeof(b), SMDDP_UINT8, 0, 4, NULL, comm, NULL);
	if (rc != SMDDP_OK && strstr(smddp_last_error(comm), "rank 0"))
		printf("FAULT-OK rank=1 %s\n", smddp_last_error(comm));
	else
		printf("FAULT-BAD rank=1 %s (received '%c'): %s\n", smddp_strerror(rc), b[0],
		       smddp_last_error(comm));
	fflush(stdout);
	make_file(dir, "late-received");
	return 1;
}

int main(int argc, char **argv)
{
	size_t counts[MAX_COUNTS] = {0, 1, 7, 255, 1001, 65537, 300007};
	int ncounts = 7, rc;
	const char *mode = "matrix";

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--counts") && i + 1 < argc) {
			ncounts = parse_counts(argv[++i], counts);
			if (ncounts <= 0) {
				fprintf(stderr, "p2p: bad --counts\n");
				return 2;
			}
		} else if (argv[i][0] != '-') {
			mode = argv[i];
		} else {
			fprintf(stderr, "usage: p2p [matrix|timeout|kill|pieces|collsend|late] [--counts a,b,c]\n");
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = smddp_init(&comm);
	if (rc) {
		fprintf(stderr, "p2p: smddp_init: %s: %s\n", smddp_strerror(rc),
			smddp_last_error(NULL));
		return 1;
	}
	me = smddp_comm_rank(comm);
	np = smddp_comm_size(comm);
	if (np > 64) {
		fprintf(stderr, "p2p: at most 64 ranks\n");
		return 2;
	}
	/* smddp-run stops the others when a rank fails (SIGTERM, then SIGKILL
	 * after --grace): the fault modes report first. */
	if (strcmp(mode, "matrix") && strcmp(mode, "pieces") && strcmp(mode, "collsend"))
		signal(SIGTERM, SIG_IGN);
	if (!strcmp(mode, "matrix"))
		rc = matrix(counts, ncounts);
	else if (!strcmp(mode, "timeout"))
		rc = timeout_mode();
	else if (!strcmp(mode, "kill"))
		rc = kill_mode();
	else if (!strcmp(mode, "pieces"))
		rc = pieces_mode();
	else if (!strcmp(mode, "collsend"))
		rc = collsend_mode();
	else if (!strcmp(mode, "late"))
		rc = late_mode();
	else
		rc = 2;
	if (!strcmp(mode, "matrix") || !strcmp(mode, "pieces") || !strcmp(mode, "collsend"))
		smddp_comm_destroy(comm);
	else
		smddp_comm_abort(comm);
	return rc;
}
