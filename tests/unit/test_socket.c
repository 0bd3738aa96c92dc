/* test_socket.c - the socket endpoint's long messages (rendezvous), two endpoints in one process.
 *
 * Rank 0 and rank 1 are two endpoints of lib/transport/socket/ on loopback,
 * driven by this one thread (their data connections by threads of their
 * own in the threaded round, by this thread's progress in the other).
 * Each case waits on conditions, never on time, with a 30 s deadline:
 *   late      a long message whose receive is posted after it came: the
 *             send waits, only its announcement is kept (no copy), then
 *             it lands in place
 *   order     short, long, short with one tag: matched in the order sent
 *   stripe    a long message over 3 data connections: every one carries
 *             pieces
 *   size      a long message into a smaller receive: EMSGSIZE, the first
 *             bytes kept, nothing past the receive's end
 *   rforget   the receiver forgets mid-transfer: no byte lands after that,
 *             the sender completes, the endpoints still work
 *   sforget   the sender forgets before its clear-to-send: the receiver
 *             drops the announcement (a later receive does not take it)
 *   smid      the sender forgets mid-transfer and reuses its buffer: the
 *             receiver never sees the new bytes (ECONNABORTED or all the
 *             old ones), the endpoints still work
 *   dead      the receiver's endpoint closes mid-transfer: the sender's
 *             send fails and progress names rank 1
 *   cpus      whether the ranks of a machine have a core each (socket-cpus.c):
 *             counted by machine, against the union of their CPUs
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/comm-types.h"
#include "clock/clock.h"
#include "config/param.h"
#include "transport/netep.h"
#include "transport/socket/socket-int.h"
#include "util/sd.h"

#include "check.h"

#define DEADLINE_NS (30ull * 1000000000ull)
#define BIG (32u << 20)

static struct smddp_comm ca, cb;
static struct sd_fab *A, *B;
static int last_rc_a, last_rc_b;

static void progress(void)
{
	int got;
	int ra = sd_fab_progress(&ca, A, 0, &got);
	int rb = B ? sd_fab_progress(&cb, B, 0, &got) : 0;

	if (ra)
		last_rc_a = ra;
	if (rb)
		last_rc_b = rb;
}

/* Progress both until *flag (or *flag2) is set; 0 on the deadline. */
static int until(volatile int *flag, volatile int *flag2)
{
	uint64_t end = sd_now_ns() + DEADLINE_NS;

	while (!*flag || (flag2 && !*flag2)) {
		if (sd_now_ns() > end)
			return 0;
		progress();
	}
	return 1;
}

/* Progress both n times. */
static void spin(int n)
{
	while (n-- > 0)
		progress();
}

static int pair(int threads, int nsocks, size_t credit)
{
	struct {
		uint32_t len;
		char name[SD_FAB_NAME_MAX];
	} names[2];

	memset(&ca, 0, sizeof(ca));
	memset(&cb, 0, sizeof(cb));
	ca.rank = 0;
	cb.rank = 1;
	ca.size = cb.size = 2;
	ca.timeout_ns = cb.timeout_ns = DEADLINE_NS;
	last_rc_a = last_rc_b = 0;
	if (sd_ep_socket.open(&ca, "127.0.0.1", &A) || sd_ep_socket.open(&cb, "127.0.0.1", &B))
		return -1;
	for (int i = 0; i < 2; i++) {
		struct sock *s = S(i ? B : A);

		s->threads = threads;
		s->nsocks = nsocks;
		s->long_min = 64u << 10;
		s->credit = credit;
		names[i].len = (uint32_t)sd_fab_name(i ? B : A, names[i].name, sizeof(names[i].name));
	}
	if (sd_fab_insert(&ca, A, names, sizeof(names[0]), 2) ||
	    sd_fab_insert(&cb, B, names, sizeof(names[0]), 2))
		return -1;
	return 0;
}

static void unpair(void)
{
	sd_fab_close(A);
	sd_fab_close(B);
	A = B = NULL;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 7 + (i >> 12) + seed);
}

static size_t diff(const unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(i * 7 + (i >> 12) + seed))
			return i + 1;
	return 0;
}

/* One clean exchange of n bytes, A to B: the endpoints still work. */
static int works(size_t n, unsigned seed)
{
	unsigned char *s = malloc(n), *r = calloc(1, n);
	struct sd_freq sr = {0}, rr = {0};
	int ok;

	fill(s, n, seed);
	ok = !sd_fab_recv(&cb, B, 0, 77, r, n, &rr) && !sd_fab_send(&ca, A, 1, 77, s, n, &sr) &&
	     until(&sr.done, &rr.done) && !sr.err && !rr.err && rr.len == n && !diff(r, n, seed);
	free(s);
	free(r);
	return ok;
}

/* Progress both until B holds an early message (an announcement). */
static void until_early(void)
{
	uint64_t end = sd_now_ns() + DEADLINE_NS;

	while (!S(B)->early && sd_now_ns() < end)
		progress();
}

static struct xfer *xfer_of(struct sock *s)
{
	return s->xfers;
}

/* Some bytes of B's one transfer (for *rdone) have come, not all: 1; 0
 * when it was seen whole (the sockets held it all at once). */
static int midway(volatile int *rdone)
{
	uint64_t end = sd_now_ns() + DEADLINE_NS;
	int seen = 0;

	while (sd_now_ns() < end && !*rdone) {
		struct xfer *t;
		size_t left = 0, len = 0;
		int got;

		pthread_mutex_lock(&S(B)->xmu);
		t = xfer_of(S(B));
		if (t) {
			left = t->left;
			len = t->len;
		}
		pthread_mutex_unlock(&S(B)->xmu);
		if (t && left < len)
			return left > 0;
		if (seen && !t)
			return 0;
		seen |= t != NULL;
		/* the sender writes; the receiver reads what has come */
		sd_fab_progress(&ca, A, 0, &got);
		if (!t || !S(B)->threads)
			sd_fab_progress(&cb, B, 0, &got);
	}
	return 0;
}

static void round_of(int threads, size_t credit)
{
	const char *m = threads ? (credit ? "threads+credit" : "threads") : (credit ? "polled+credit" : "polled");
	size_t L = 8u << 20; /* beyond the credit: a rendezvous */
	unsigned char *s = malloc(BIG), *r = malloc(BIG), *small = malloc(1024);
	struct sd_freq sr = {0}, rr = {0}, q[6];

	if (pair(threads, 3, credit)) {
		CHECK(0, "%s: two endpoints on loopback", m);
		return;
	}
	/* late */
	fill(s, L, 1);
	memset(r, 0, L);
	CHECK(!sd_fab_send(&ca, A, 1, 5, s, L, &sr), "%s late: send posted", m);
	until_early();
	spin(200);
	CHECK(!sr.done, "%s late: the long send waits for its receive", m);
	CHECK(S(B)->early && S(B)->early->rts && !S(B)->early->data,
	      "%s late: the receiver kept its announcement, no bytes", m);
	CHECK(!sd_fab_recv(&cb, B, 0, 5, r, L, &rr) && until(&sr.done, &rr.done) && !sr.err &&
		      !rr.err && rr.len == L && rr.tag == 5 && !diff(r, L, 1),
	      "%s late: it landed in place, whole", m);

	/* push: within the credit a long send goes at once, kept early there */
	if (credit) {
		memset(&sr, 0, sizeof(sr));
		memset(&rr, 0, sizeof(rr));
		fill(s, 1u << 20, 2);
		sd_fab_send(&ca, A, 1, 4, s, 1u << 20, &sr);
		CHECK(until(&sr.done, NULL) && !sr.err, "%s push: the send completes alone", m);
		until_early();
		CHECK(S(B)->early && !S(B)->early->rts && S(B)->early->data,
		      "%s push: the receiver holds its bytes", m);
		CHECK(!sd_fab_recv(&cb, B, 0, 4, r, 1u << 20, &rr) && until(&rr.done, NULL) &&
			      !rr.err && rr.len == (1u << 20) && !diff(r, 1u << 20, 2),
		      "%s push: a later receive takes it whole", m);
		{
			uint64_t end = sd_now_ns() + DEADLINE_NS;

			while (S(A)->outs[1].credit != credit && sd_now_ns() < end)
				progress();
		}
		CHECK(S(A)->outs[1].credit == credit, "%s push: the credit came back (%zu)", m,
		      S(A)->outs[1].credit);
	}

	/* order: short, long, short, one tag */
	memset(q, 0, sizeof(q));
	fill(small, 1024, 3);
	fill(s, 1u << 20, 4);
	unsigned char *r3 = malloc(3u << 20);

	sd_fab_send(&ca, A, 1, 9, small, 1000, &q[0]);
	sd_fab_send(&ca, A, 1, 9, s, 1u << 20, &q[1]);
	sd_fab_send(&ca, A, 1, 9, small, 10, &q[2]);
	spin(200);
	for (int i = 0; i < 3; i++)
		sd_fab_recv(&cb, B, 0, 9, r3 + ((size_t)i << 20), 1u << 20, &q[3 + i]);
	CHECK(until(&q[1].done, &q[5].done) && until(&q[3].done, &q[4].done) && q[3].len == 1000 &&
		      q[4].len == (1u << 20) && q[5].len == 10 && !diff(r3 + (1u << 20), 1u << 20, 4),
	      "%s order: short, long, short matched in the order sent (%zu %zu %zu)", m, q[3].len,
	      q[4].len, q[5].len);
	free(r3);

	/* stripe */
	memset(&sr, 0, sizeof(sr));
	memset(&rr, 0, sizeof(rr));
	fill(s, 8u << 20, 5);
	CHECK(!sd_fab_recv(&cb, B, 0, 6, r, 8u << 20, &rr) && !sd_fab_send(&ca, A, 1, 6, s, 8u << 20, &sr) &&
		      until(&sr.done, &rr.done) && !rr.err && !diff(r, 8u << 20, 5),
	      "%s stripe: 8 MiB whole", m);
	{
		int all = 1;

		for (int i = 0; i < 3; i++)
			all &= S(A)->outs[1].d[i] && S(A)->outs[1].d[i]->pieces > 0;
		CHECK(all, "%s stripe: every one of 3 data connections carried pieces", m);
	}

	/* size: 2 MiB into a 1 MiB receive */
	memset(&sr, 0, sizeof(sr));
	memset(&rr, 0, sizeof(rr));
	fill(s, 2u << 20, 6);
	memset(r, 0xEE, 2u << 20);
	CHECK(!sd_fab_recv(&cb, B, 0, 7, r, 1u << 20, &rr) && !sd_fab_send(&ca, A, 1, 7, s, 2u << 20, &sr) &&
		      until(&sr.done, &rr.done) && rr.err == EMSGSIZE && rr.len == (1u << 20) &&
		      !diff(r, 1u << 20, 6) && r[1u << 20] == 0xEE && r[(2u << 20) - 1] == 0xEE,
	      "%s size: EMSGSIZE, the first 1 MiB, nothing past it", m);

	/* rforget */
	memset(&sr, 0, sizeof(sr));
	memset(&rr, 0, sizeof(rr));
	fill(s, BIG, 7);
	sd_fab_recv(&cb, B, 0, 8, r, BIG, &rr);
	sd_fab_send(&ca, A, 1, 8, s, BIG, &sr);
	int mid = midway(&rr.done);

	sd_fab_forget(B, 0);
	memset(r, 0x5A, BIG);
	CHECK(until(&sr.done, NULL) && !sr.err, "%s rforget: the sender completes (forgot %s)", m,
	      mid ? "mid-transfer" : "before any byte or after all");
	spin(200);
	size_t bad = 0;

	for (size_t i = 0; i < BIG; i++)
		bad += r[i] != 0x5A;
	CHECK(bad == 0 && (!mid || !rr.done), "%s rforget: no byte landed after the forget (%zu did)", m, bad);
	CHECK(works(1u << 20, 8) && works(100, 9), "%s rforget: the endpoints still work", m);

	/* sforget */
	memset(&sr, 0, sizeof(sr));
	memset(&rr, 0, sizeof(rr));
	fill(s, L, 10);
	sd_fab_send(&ca, A, 1, 11, s, L, &sr);
	until_early();
	CHECK(S(B)->early && S(B)->early->rts, "%s sforget: announced", m);
	sd_fab_forget(A, 0);
	{
		uint64_t end = sd_now_ns() + DEADLINE_NS;

		while (S(B)->early && sd_now_ns() < end)
			progress();
	}
	CHECK(!S(B)->early, "%s sforget: the receiver dropped the announcement", m);
	sd_fab_recv(&cb, B, 0, 11, r, L, &rr);
	spin(500);
	CHECK(!rr.done, "%s sforget: a later receive does not take it", m);
	sd_fab_cancel(B, &rr);
	CHECK(rr.done && rr.err == ECANCELED, "%s sforget: the receive cancelled", m);
	CHECK(works(1u << 20, 12), "%s sforget: the endpoints still work", m);

	/* smid */
	memset(&sr, 0, sizeof(sr));
	memset(&rr, 0, sizeof(rr));
	fill(s, BIG, 13);
	memset(r, 0, BIG);
	/* and a second message behind it, whose pieces have not begun */
	unsigned char *s2 = malloc(BIG), *r2 = calloc(1, BIG);
	struct sd_freq sr2 = {0}, rr2 = {0};

	fill(s2, BIG, 16);
	sd_fab_recv(&cb, B, 0, 12, r, BIG, &rr);
	sd_fab_recv(&cb, B, 0, 12, r2, BIG, &rr2);
	sd_fab_send(&ca, A, 1, 12, s, BIG, &sr);
	sd_fab_send(&ca, A, 1, 12, s2, BIG, &sr2);
	mid = midway(&rr.done);
	sd_fab_forget(A, 0);
	memset(s, 'Z', BIG);
	memset(s2, 'Z', BIG);
	CHECK(until(&rr.done, NULL) && (rr.err == ECONNABORTED || (!rr.err && !diff(r, BIG, 13))),
	      "%s smid: the receive ends, given up or whole (%s; forgot %s)", m, strerror(rr.err),
	      mid ? "mid-transfer" : "before any byte or after all");
	CHECK(until(&rr2.done, NULL) && (rr2.err == ECONNABORTED || (!rr2.err && !diff(r2, BIG, 16))),
	      "%s smid: the next one too, given up or whole (%s)", m, strerror(rr2.err));
	free(s2);
	free(r2);
	{
		size_t z = 0;

		/* each byte is the message's, or the receive's zero where a void
		 * piece left it */
		for (size_t i = 0; i < BIG; i++)
			z += r[i] && r[i] != (unsigned char)(i * 7 + (i >> 12) + 13);
		CHECK(z == 0, "%s smid: none of the reused buffer's bytes arrived (%zu did)", m, z);
	}
	CHECK(works(1u << 20, 14) && works(5, 15), "%s smid: the endpoints still work", m);
	unpair();

	/* dead */
	if (pair(threads, 2, credit)) {
		CHECK(0, "%s: two endpoints again", m);
	} else {
		/* the receiver reads only when this thread lets it: it closes midway */
		S(B)->threads = 0;
		memset(&sr, 0, sizeof(sr));
		memset(&rr, 0, sizeof(rr));
		sd_fab_recv(&cb, B, 0, 13, r, BIG, &rr);
		sd_fab_send(&ca, A, 1, 13, s, BIG, &sr);
		/* B clears it, then reads no more: A fills the sockets and waits */
		{
			uint64_t end = sd_now_ns() + DEADLINE_NS;
			int got;

			while (!S(B)->xfers && sd_now_ns() < end)
				progress();
			for (int i = 0; i < 2000; i++)
				sd_fab_progress(&ca, A, 0, &got);
		}
		/* (kernels with large socket buffers may hold it all: then
		 * there is nothing left to fail, and the case says so) */
		int held = sr.done;

		sd_fab_forget(B, 0);
		sd_fab_close(B);
		B = NULL;
		CHECK(until(&sr.done, NULL) && (sr.err || held), "%s dead: the send fails (%s%s)", m,
		      strerror(sr.err), held ? "; the sockets held it all before the close" : "");
		CHECK(held || (last_rc_a == SMDDP_ENETWORK && strstr(ca.last_error, "rank 1")),
		      "%s dead: progress named rank 1 (%s)", m, ca.last_error);
		sd_fab_close(A);
		A = NULL;
	}
	free(s);
	free(r);
	free(small);
}

static void set_cpus(struct name *n, uint64_t machine, uint64_t cpus)
{
	memset(n, 0, sizeof(*n));
	n->machine = machine;
	n->cpus[0] = cpus;
}

static void test_cpus(void)
{
	struct name nm[4], me;
	int ranks, cores;

	/* two ranks of one machine, a core each; a third there is one too many */
	set_cpus(&nm[0], 7, 0x1);
	set_cpus(&nm[1], 7, 0x2);
	set_cpus(&nm[2], 7, 0x3);
	CHECK(sd_sock_cpus_spare(nm, 2, 0, &ranks, &cores) && ranks == 2 && cores == 2,
	      "cpus: 2 ranks on cores 0 and 1 (%d ranks, %d cores)", ranks, cores);
	CHECK(!sd_sock_cpus_spare(nm, 3, 1, &ranks, &cores) && ranks == 3 && cores == 2,
	      "cpus: 3 ranks on 2 cores give the core away (%d ranks, %d cores)", ranks, cores);
	/* the same CPUs on two machines: each rank has its own */
	set_cpus(&nm[0], 7, 0x1);
	set_cpus(&nm[1], 8, 0x1);
	set_cpus(&nm[2], 9, 0x1);
	CHECK(sd_sock_cpus_spare(nm, 3, 2, &ranks, &cores) && ranks == 1 && cores == 1,
	      "cpus: one rank a machine (%d ranks, %d cores)", ranks, cores);
	/* an unknown machine is shared with nobody */
	set_cpus(&nm[0], 0, 0x1);
	set_cpus(&nm[1], 0, 0x1);
	CHECK(sd_sock_cpus_spare(nm, 2, 0, &ranks, &cores) && ranks == 1,
	      "cpus: machine unknown (%d ranks, %d cores)", ranks, cores);
	/* CPUs past the first 64 count too; no CPUs at all count as one */
	set_cpus(&nm[0], 5, 0);
	nm[0].cpus[NAME_CPUS - 1] = 1ull << 63;
	set_cpus(&nm[1], 5, 0);
	set_cpus(&nm[2], 5, 0);
	set_cpus(&nm[3], 4, 0xf);
	CHECK(!sd_sock_cpus_spare(nm, 4, 1, &ranks, &cores) && ranks == 3 && cores == 1,
	      "cpus: CPU 1023 alone for 3 ranks (%d ranks, %d cores)", ranks, cores);
	set_cpus(&nm[0], 5, 0);
	CHECK(sd_sock_cpus_spare(nm, 1, 0, &ranks, &cores) && cores == 1,
	      "cpus: no mask, one core (%d ranks, %d cores)", ranks, cores);
	/* this process: a machine and at least one CPU */
	sd_sock_cpus_mine(&me);
	CHECK(sd_sock_cpus_spare(&me, 1, 0, &ranks, &cores) && ranks == 1 && cores >= 1,
	      "cpus: this process (%d cores, machine %s)", cores, me.machine ? "known" : "unknown");
}

int main(void)
{
	struct sd_err err;

	memset(&err, 0, sizeof(err));
	if (sd_params_load(&err)) {
		printf("FAIL parameters: %s\n", err.msg);
		return 1;
	}
	test_cpus();
	round_of(0, 0);
	round_of(1, 0);
	round_of(0, 4u << 20);
	round_of(1, 4u << 20);
	return check_done("test_socket");
}
