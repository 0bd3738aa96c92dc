/* soak.c - memory and descriptors stay flat over many calls and communicator lifetimes.
 *
 * Usage (under smddp-run): soak CALLS LIFETIMES
 *   CALLS small allreduces (one float) on the world, then LIFETIMES
 *   communicators split from it, each used for one allreduce and destroyed.
 *   Ten samples of each phase: "SOAK rank=R phase=calls n=N rss_kb=K fds=F".
 *   After the first tenth (warm-up: caches, lazily mapped pages), RSS may
 *   grow by at most 1 MiB and the open descriptors not at all.
 * Prints "SOAK-OK rank=R" and exits 0, or "SOAK-BAD rank=R: why" and exits 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <smddp/smddp.h>

#include "../unit/check.h" /* count_fds() */

static int rank;

static long rss_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static void bad(const char *why, int rc, struct smddp_comm *c)
{
	printf("SOAK-BAD rank=%d: %s: %s: %s\n", rank, why, smddp_strerror(rc),
	       smddp_last_error(c));
	exit(1);
}

/* Samples at each tenth; checks growth against the sample after warm-up. */
struct track {
	const char *phase;
	long rss0;
	int fds0;
};

static void sample(struct track *t, long n, long total)
{
	long kb = rss_kb();
	int fds = count_fds();

	printf("SOAK rank=%d phase=%s n=%ld rss_kb=%ld fds=%d\n", rank, t->phase, n, kb, fds);
	if (n == total / 10) {
		t->rss0 = kb;
		t->fds0 = fds;
	} else if (n > total / 10) {
		if (kb - t->rss0 > 1024) {
			printf("SOAK-BAD rank=%d: %s: RSS grew from %ld to %ld kB after %ld\n", rank,
			       t->phase, t->rss0, kb, n);
			exit(1);
		}
		if (fds != t->fds0) {
			printf("SOAK-BAD rank=%d: %s: open descriptors went from %d to %d after %ld\n",
			       rank, t->phase, t->fds0, fds, n);
			exit(1);
		}
	}
}

int main(int argc, char **argv)
{
	struct smddp_comm *world = NULL;
	long calls = argc > 1 ? atol(argv[1]) : 0, lives = argc > 2 ? atol(argv[2]) : 0;
	float x = 1, y = 0;
	int rc;

	if (argc != 3 || calls < 10 || lives < 10) {
		fprintf(stderr, "usage: soak CALLS LIFETIMES (each at least 10)\n");
		return 2;
	}
	rc = smddp_init(&world);
	if (rc)
		bad("smddp_init", rc, NULL);
	rank = smddp_comm_rank(world);
	setvbuf(stdout, NULL, _IOLBF, 0);

	struct track t = {"calls", 0, 0};
	for (long i = 1; i <= calls; i++) {
		rc = smddp_allreduce(&x, &y, 1, SMDDP_FLOAT32, SMDDP_SUM, world, NULL);
		if (rc)
			bad("allreduce", rc, world);
		if (i % (calls / 10) == 0)
			sample(&t, i, calls);
	}
	if (y != (float)smddp_comm_size(world))
		bad("wrong sum", SMDDP_OK, world);

	struct track u = {"lifetimes", 0, 0};
	for (long i = 1; i <= lives; i++) {
		struct smddp_comm *c = NULL;

		rc = smddp_comm_split(world, 0, rank, &c);
		if (rc)
			bad("split", rc, world);
		rc = smddp_allreduce(&x, &y, 1, SMDDP_FLOAT32, SMDDP_SUM, c, NULL);
		if (rc)
			bad("allreduce on a split", rc, c);
		rc = smddp_comm_destroy(c);
		if (rc)
			bad("destroy of a split", rc, NULL);
		if (i % (lives / 10) == 0)
			sample(&u, i, lives);
	}
	rc = smddp_comm_destroy(world);
	if (rc)
		bad("destroy", rc, NULL);
	printf("SOAK-OK rank=%d\n", rank);
	return 0;
}
