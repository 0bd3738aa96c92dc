/* shrink.c - ranks die, the survivors shrink the communicator and go on (shrink-*.sh, tests/cluster/net-shrink.sh).
 *
 * Usage (under smddp-run --grace 30; SIGTERM is ignored):
 *   shrink kill STAGE...    every rank loops over a mixed sequence of collectives;
 *                           in each STAGE (a world rank, or several joined by '+')
 *                           those ranks SIGKILL themselves from a thread in the
 *                           middle of it; the survivors see the call fail, shrink
 *                           without them and check the new communicator, then
 *                           go on to the next stage on it ("kill 3 1": 4 -> 3 -> 2)
 *   shrink planned VICTIM   a healthy shrink: the others exclude VICTIM, which stays
 *                           alive and calls an allreduce on the old communicator: it
 *                           must fail at once (SMDDP_EABORTED), not at SMDDP_TIMEOUT
 *   shrink split VICTIM     the ranks split the world in reverse order and loop on the
 *                           split communicator; VICTIM dies; the survivors shrink the
 *                           split one (VICTIM's rank there) and check it
 *   shrink bad              bad arguments are refused (SMDDP_EINVAL) on each rank,
 *                           then the last rank dies and rank 2 excludes rank 1 too
 *                           while ranks 0 and 1 do not: every survivor fails (no
 *                           hang: within 15 s, SMDDP_TIMEOUT being 60), rank 2 with
 *                           SMDDP_EMISMATCH; then all shrink alike, and that works
 * SHRINK_FLAGS=abort passes SMDDP_SHRINK_ABORT.  SHRINK_FDS=1: the open file
 * descriptors at the end must be those before smddp_init (one host: nothing of
 * a dead rank, nor of the freed communicators, is left).
 *
 * A new communicator is checked against a reference computed here from the
 * world ranks of the survivors (exact integers; floats that add exactly):
 * allreduce (int32 sum of odd count, float64 max, 1 Mi float32 sum), allgather
 * (which also proves the new order: the survivors in their old order),
 * broadcast from the last rank, reduce_scatter, alltoall, barrier.  Each
 * survivor prints "SHRINK-OK rank=R ..." and exits 0; a failed check prints
 * "SHRINK-BAD rank=R: why" and exits 1.
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <smddp/smddp.h>

#include "clock.h" /* lib/clock/: the one clock */
#include "shrink-stage.h"

#define MAXR 64

static int wsize;
static int flags;

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the DIR's own */
}

/* ---- the check of a new communicator ------------------------------------- */

/* members[i]: world rank of rank i of c. */
static void check_comm(struct smddp_comm *c, const int *members, int n, const char *what)
{
	int r = smddp_comm_rank(c), size = smddp_comm_size(c), rc;
	enum { CNT = 1001, BIG = 1 << 20 };
	int32_t *a = malloc(sizeof(int32_t) * CNT), *g = malloc(sizeof(int32_t) * (size_t)n);
	int64_t *rs = malloc(sizeof(int64_t) * (size_t)n * 3), rsout[3];
	int32_t *ta = malloc(sizeof(int32_t) * (size_t)n), *tb = malloc(sizeof(int32_t) * (size_t)n);
	float *big = malloc(sizeof(float) * BIG);
	double mx;
	int32_t bc;

	if (!a || !g || !rs || !ta || !tb || !big)
		bad("out of memory");
	if (size != n || r < 0 || members[r] != wrank)
		bad("%s: this rank is %d of %d in the new communicator, expected %d of %d", what, r,
		    size, r >= 0 && r < n ? r : -1, n);
#define CK(call)                                                                               \
	do {                                                                                   \
		if ((rc = (call)) != SMDDP_OK)                                                 \
			bad("%s: %s failed: %s: %s", what, #call, smddp_strerror(rc),          \
			    smddp_last_error(c));                                              \
	} while (0)
	for (int i = 0; i < CNT; i++)
		a[i] = (wrank + 1) * (i + 1);
	CK(smddp_allreduce(a, a, CNT, SMDDP_INT32, SMDDP_SUM, c, NULL));
	for (int i = 0; i < CNT; i++) {
		int64_t want = 0;

		for (int k = 0; k < n; k++)
			want += (int64_t)(members[k] + 1) * (i + 1);
		if (a[i] != want)
			bad("%s: allreduce int32 sum [%d] = %d, want %lld", what, i, a[i],
			    (long long)want);
	}
	mx = wrank;
	CK(smddp_allreduce(&mx, &mx, 1, SMDDP_FLOAT64, SMDDP_MAX, c, NULL));
	for (int k = 0; k < n; k++)
		if (members[k] > mx)
			bad("%s: allreduce max %g, but rank %d is there", what, mx, members[k]);
	g[r] = wrank;
	CK(smddp_allgather(g + r, g, 1, SMDDP_INT32, c, NULL));
	for (int k = 0; k < n; k++)
		if (g[k] != members[k])
			bad("%s: allgather [%d] = %d, want world rank %d (survivors in old order)",
			    what, k, g[k], members[k]);
	bc = r == n - 1 ? 7000 + wrank : -1;
	CK(smddp_broadcast(&bc, 1, SMDDP_INT32, n - 1, c, NULL));
	if (bc != 7000 + members[n - 1])
		bad("%s: broadcast from %d gave %d", what, n - 1, bc);
	for (int k = 0; k < n * 3; k++)
		rs[k] = (int64_t)wrank * 1000 + k;
	CK(smddp_reduce_scatter(rs, rsout, 3, SMDDP_INT64, SMDDP_SUM, c, NULL));
	for (int j = 0; j < 3; j++) {
		int64_t want = 0;

		for (int k = 0; k < n; k++)
			want += (int64_t)members[k] * 1000 + r * 3 + j;
		if (rsout[j] != want)
			bad("%s: reduce_scatter [%d] = %lld, want %lld", what, j,
			    (long long)rsout[j], (long long)want);
	}
	for (int k = 0; k < n; k++)
		ta[k] = wrank * 100 + k;
	CK(smddp_alltoall(ta, tb, 1, SMDDP_INT32, c, NULL));
	for (int k = 0; k < n; k++)
		if (tb[k] != members[k] * 100 + r)
			bad("%s: alltoall [%d] = %d, want %d", what, k, tb[k], members[k] * 100 + r);
	for (int i = 0; i < BIG; i++)
		big[i] = (float)(wrank + 1) + (float)(i & 7);
	CK(smddp_allreduce(big, big, BIG, SMDDP_FLOAT32, SMDDP_SUM, c, NULL));
	for (int i = 0; i < BIG; i++) {
		float want = 0;

		for (int k = 0; k < n; k++)
			want += (float)(members[k] + 1) + (float)(i & 7);
		if (big[i] != want)
			bad("%s: large allreduce [%d] = %g, want %g", what, i, big[i], want);
	}
	CK(smddp_barrier(c));
#undef CK
	free(a);
	free(g);
	free(rs);
	free(ta);
	free(tb);
	free(big);
}

/* ---- dying in the middle ------------------------------------------------- */

static double kill_after;

static void *killer(void *arg)
{
	(void)arg;
	usleep((useconds_t)(kill_after * 1e6));
	raise(SIGKILL);
	return NULL;
}

/* The mixed sequence everybody runs until a call fails (a peer died);
 * returns the failed call's result.  Checked as it goes: a wrong result
 * before the death is a failure of the test. */
static int run_until_failure(struct smddp_comm *c, double limit_s)
{
	size_t big = 1 << 20;
	float *buf = malloc(big * sizeof(float));
	int n = smddp_comm_size(c), rc = SMDDP_OK;
	double t0 = sd_now_s();
	int32_t *ag = malloc(sizeof(int32_t) * (size_t)n);

	if (!buf || !ag)
		bad("out of memory");
	for (unsigned it = 0; !rc; it++) {
		if (sd_now_s() - t0 > limit_s)
			bad("no call failed within %g s although a rank was to die", limit_s);
		switch (it % 5) {
		case 0:
			for (size_t i = 0; i < big; i++)
				buf[i] = 1.0f;
			rc = smddp_allreduce(buf, buf, big - it % 7, SMDDP_FLOAT32, SMDDP_SUM, c,
					     NULL);
			if (!rc && buf[0] != (float)n)
				bad("allreduce before the death gave %g, want %d", buf[0], n);
			break;
		case 1:
			ag[smddp_comm_rank(c)] = wrank;
			rc = smddp_allgather(ag + smddp_comm_rank(c), ag, 1, SMDDP_INT32, c, NULL);
			break;
		case 2:
			rc = smddp_broadcast(buf, 4096, SMDDP_FLOAT32, (int)(it / 5) % n, c, NULL);
			break;
		case 3:
			rc = smddp_barrier(c);
			break;
		default:
			rc = smddp_allreduce(buf, buf, 17, SMDDP_FLOAT32, SMDDP_MAX, c, NULL);
		}
	}
	free(buf);
	free(ag);
	return rc;
}

/* One stage: the victims (world ranks) die during the sequence on *cp;
 * the survivors shrink it.  members: world rank of each rank of *cp,
 * updated to the survivors'. */
static void stage(struct smddp_comm **cp, int *members, int *n, const int *victims, int nv,
		  int stage_no)
{
	struct smddp_comm *c = *cp, *nc = NULL;
	int excl[MAXR], ne = 0, m = 0, rc, fail_rc;
	double t0;
	char what[64];
	pthread_t th;

	for (int i = 0; i < nv; i++) {
		if (victims[i] == wrank) {
			/* Somewhere from 50 to 350 ms in: in the middle of a call. */
			kill_after = 0.05 + 0.3 * ((wrank * 7919 + stage_no * 104729) % 1000) / 1000.0;
			pthread_create(&th, NULL, killer, NULL);
		}
		for (int k = 0; k < *n; k++)
			if (members[k] == victims[i])
				excl[ne++] = k;
	}
	if (ne != nv)
		bad("stage %d: a victim is not in the communicator", stage_no);
	fail_rc = run_until_failure(c, 30);
	/* A victim whose call failed first (another victim died sooner) dies
	 * now: it was to die in this stage, and victims do not shrink. */
	for (int i = 0; i < nv; i++)
		if (victims[i] == wrank)
			raise(SIGKILL);
	t0 = sd_now_s();
	rc = smddp_comm_shrink(c, excl, ne, flags, &nc);
	if (rc)
		bad("stage %d: smddp_comm_shrink after %s failed: %s: %s", stage_no,
		    smddp_strerror(fail_rc), smddp_strerror(rc), smddp_last_error(c));
	printf("stage %d: rank %d shrank in %.3f s after %s\n", stage_no, wrank, sd_now_s() - t0,
	       smddp_strerror(fail_rc));
	/* The old one takes no more calls. */
	if (smddp_barrier(c) == SMDDP_OK)
		bad("stage %d: a barrier on the shrunk parent succeeded", stage_no);
	smddp_comm_abort(c);
	for (int k = 0; k < *n; k++) {
		int out = 0;

		for (int i = 0; i < ne; i++)
			out |= excl[i] == k;
		if (!out)
			members[m++] = members[k];
	}
	*n = m;
	snprintf(what, sizeof(what), "after stage %d", stage_no);
	check_comm(nc, members, m, what);
	*cp = nc;
}

static void mode_kill(struct smddp_comm *c, int nstages, char **stages)
{
	int members[MAXR], n = wsize;

	for (int i = 0; i < n; i++)
		members[i] = i;
	for (int s = 0; s < nstages; s++) {
		int v[MAXR], nv = shrink_stage_ranks(stages[s], v, MAXR);

		stage(&c, members, &n, v, nv, s + 1);
	}
	printf("SHRINK-OK rank=%d size=%d\n", wrank, n);
	fflush(stdout);
	if ((smddp_comm_destroy(c)) != SMDDP_OK)
		bad("destroy of the last communicator failed");
}

static void mode_planned(struct smddp_comm *c, int victim)
{
	int members[MAXR], n = 0, rc;
	float x = 1;
	struct smddp_comm *nc = NULL;
	double t0;

	for (int i = 0; i < 3; i++)
		if ((rc = smddp_allreduce(&x, &x, 1, SMDDP_FLOAT32, SMDDP_SUM, c, NULL)))
			bad("allreduce before the shrink: %s", smddp_last_error(c));
	if (wrank == victim) {
		/* Still alive, and the others leave: this call must fail now. */
		usleep(500000);
		t0 = sd_now_s();
		rc = smddp_allreduce(&x, &x, 1, SMDDP_FLOAT32, SMDDP_SUM, c, NULL);
		if (rc == SMDDP_OK)
			bad("the excluded rank's allreduce on the old communicator succeeded");
		if (sd_now_s() - t0 > 10)
			bad("the excluded rank's allreduce took %.1f s to fail", sd_now_s() - t0);
		printf("SHRINK-OK rank=%d excluded: %s in %.2f s: %s\n", wrank, smddp_strerror(rc),
		       sd_now_s() - t0, smddp_last_error(c));
		smddp_comm_abort(c);
		return;
	}
	for (int i = 0; i < wsize; i++)
		if (i != victim)
			members[n++] = i;
	rc = smddp_comm_shrink(c, &victim, 1, flags, &nc);
	if (rc)
		bad("planned shrink failed: %s: %s", smddp_strerror(rc), smddp_last_error(c));
	smddp_comm_abort(c);
	check_comm(nc, members, n, "planned shrink");
	printf("SHRINK-OK rank=%d size=%d\n", wrank, n);
	smddp_comm_destroy(nc);
}

static void mode_split(struct smddp_comm *world, int victim)
{
	struct smddp_comm *s = NULL;
	int members[MAXR], n = wsize, rc;

	/* Reversed: split rank i is world rank wsize-1-i. */
	if ((rc = smddp_comm_split(world, 0, wsize - wrank, &s)))
		bad("split: %s", smddp_last_error(world));
	for (int i = 0; i < n; i++)
		members[i] = wsize - 1 - i;
	check_comm(s, members, n, "the split");
	{
		int v[1] = {victim};

		stage(&s, members, &n, v, 1, 1);
	}
	smddp_comm_abort(world);
	printf("SHRINK-OK rank=%d size=%d\n", wrank, n);
	smddp_comm_destroy(s);
}

static void expect_einval(struct smddp_comm *c, const int *ex, int n, int fl, const char *why,
			  const char *word)
{
	struct smddp_comm *nc = (struct smddp_comm *)&nc;
	int rc = smddp_comm_shrink(c, ex, n, fl, &nc);

	if (rc != SMDDP_EINVAL)
		bad("shrink with %s: %s, want SMDDP_EINVAL", why, smddp_strerror(rc));
	if (nc)
		bad("shrink with %s left *out set", why);
	if (!strstr(smddp_last_error(c), word))
		bad("shrink with %s: the error \"%s\" does not say \"%s\"", why,
		    smddp_last_error(c), word);
}

static void mode_bad(struct smddp_comm *c)
{
	int self = wrank, out = wsize, dup[2] = {0, 0}, all[MAXR], last = wsize - 1, rc;
	int members[MAXR], n = 0;
	struct smddp_comm *nc = NULL;
	double t0;

	for (int i = 0; i < wsize; i++)
		all[i] = i;
	dup[0] = dup[1] = wrank == 0 ? 1 : 0;
	expect_einval(c, &self, 1, 0, "the caller's rank", "the caller");
	expect_einval(c, &out, 1, 0, "a rank out of range", "not a rank");
	expect_einval(c, dup, 2, 0, "a rank twice", "twice");
	expect_einval(c, all, wsize, 0, "every rank", "remain");
	expect_einval(c, NULL, 0, 0, "no rank", "no rank");
	expect_einval(c, &last, 1, 0x10, "bad flags", "flags");
	/* Refused arguments leave the communicator as it was. */
	if ((rc = smddp_barrier(c)))
		bad("barrier after refused shrinks: %s", smddp_last_error(c));
	if (wrank == last)
		raise(SIGKILL);
	/* Ranks 0 and 1 exclude the dead rank; rank 2 also rank 1. */
	{
		int ex2[2] = {1, last};
		float x = 0;

		(void)smddp_allreduce(&x, &x, 1, SMDDP_FLOAT32, SMDDP_SUM, c, NULL);
		t0 = sd_now_s();
		rc = wrank == 2 ? smddp_comm_shrink(c, ex2, 2, flags, &nc)
				: smddp_comm_shrink(c, &last, 1, flags, &nc);
		if (rc == SMDDP_OK)
			bad("a shrink with different lists succeeded");
		if (sd_now_s() - t0 > 15)
			bad("the shrink with different lists took %.1f s to fail", sd_now_s() - t0);
		if (wrank == 2 && rc != SMDDP_EMISMATCH)
			bad("the rank with the other list got %s, want SMDDP_EMISMATCH: %s",
			    smddp_strerror(rc), smddp_last_error(c));
		printf("rank %d: different lists: %s in %.2f s: %s\n", wrank, smddp_strerror(rc),
		       sd_now_s() - t0, smddp_last_error(c));
		fflush(stdout);
	}
	/* Then the same list everywhere: it works on the same parent. */
	sleep(2); /* past the coordinator's refusal of late comers */
	rc = smddp_comm_shrink(c, &last, 1, flags, &nc);
	if (rc)
		bad("the shrink after a failed one: %s: %s", smddp_strerror(rc), smddp_last_error(c));
	smddp_comm_abort(c);
	for (int i = 0; i < last; i++)
		members[n++] = i;
	check_comm(nc, members, n, "shrink after a failed one");
	printf("SHRINK-OK rank=%d size=%d\n", wrank, n);
	smddp_comm_destroy(nc);
}

int main(int argc, char **argv)
{
	struct smddp_comm *c = NULL;
	const char *fds = getenv("SHRINK_FDS");
	int rc, fds0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGTERM, SIG_IGN); /* smddp-run stops the others when a rank dies */
	if (argc < 2) {
		fprintf(stderr, "usage: shrink kill STAGE... | planned VICTIM | split VICTIM | bad\n");
		return 2;
	}
	flags = shrink_flags();
	fds0 = count_fds();
	rc = smddp_init(&c);
	if (rc) {
		fprintf(stderr, "smddp_init: %s\n", smddp_last_error(NULL));
		return 1;
	}
	wrank = smddp_comm_rank(c);
	wsize = smddp_comm_size(c);
	if (wsize > MAXR)
		bad("at most %d ranks", MAXR);
	if (!strcmp(argv[1], "kill") && argc > 2)
		mode_kill(c, argc - 2, argv + 2);
	else if (!strcmp(argv[1], "planned") && argc > 2)
		mode_planned(c, atoi(argv[2]));
	else if (!strcmp(argv[1], "split") && argc > 2)
		mode_split(c, atoi(argv[2]));
	else if (!strcmp(argv[1], "bad") && wsize >= 4)
		mode_bad(c);
	else
		bad("unknown mode or too few ranks");
	if (fds && !strcmp(fds, "1") && count_fds() != fds0)
		bad("%d file descriptors open at the end, %d before smddp_init", count_fds(), fds0);
	return 0;
}
