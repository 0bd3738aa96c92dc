/* scripts/slow-calls.c - every call's time, not only the median: how many allreduce calls were slow.
 *
 * usage (one process per rank): slow-calls MINBYTES MAXBYTES FACTOR ITERS WARMUP [TAG [SLOW_US]]
 * For each size (float32 sum, out of place) times every one of ITERS calls
 * on every rank, takes the slowest rank's time of each call, and rank 0
 * prints one line per size: "TAG size BYTES med US slow N max US", where
 * N counts the calls over SLOW_US (default 1000).  A benchmark's median
 * hides the few calls that wait for a time slice; this counts them.
 * Build: cc -O2 -o slow-calls scripts/slow-calls.c -Ilib/include -Lbuild/lib/.libs -lsmddp
 * (scripts/bench-slow-calls.sh does it and runs it).
 */
#include <smddp/smddp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	struct smddp_comm *c;
	size_t lo, hi;
	int f, n, warm, rank, size, rc;
	double slow_us;
	const char *tag;
	float *s, *r;
	double *t, *all, *mx;

	if (argc < 6) {
		fprintf(stderr, "usage: %s MINBYTES MAXBYTES FACTOR ITERS WARMUP [TAG [SLOW_US]]\n",
			argv[0]);
		return 2;
	}
	lo = strtoull(argv[1], NULL, 0);
	hi = strtoull(argv[2], NULL, 0);
	f = atoi(argv[3]);
	n = atoi(argv[4]);
	warm = atoi(argv[5]);
	tag = argc > 6 ? argv[6] : "";
	slow_us = argc > 7 ? atof(argv[7]) : 1000;
	if (lo < 4 || hi < lo || f < 2 || n < 1 || warm < 0) {
		fprintf(stderr, "%s: bad arguments\n", argv[0]);
		return 2;
	}
	rc = smddp_init(&c);
	if (rc) {
		fprintf(stderr, "smddp_init: %s\n", smddp_strerror(rc));
		return 1;
	}
	rank = smddp_comm_rank(c);
	size = smddp_comm_size(c);
	s = malloc(hi);
	r = malloc(hi);
	t = malloc(sizeof(*t) * (size_t)n);
	all = malloc(sizeof(*all) * (size_t)n * (size_t)size);
	mx = malloc(sizeof(*mx) * (size_t)n);
	if (!s || !r || !t || !all || !mx)
		return 1;
	memset(s, 0, hi);
	memset(r, 0, hi);
	for (size_t sz = lo; sz <= hi; sz *= (size_t)f) {
		size_t count = sz / sizeof(float);
		double max = 0;
		int slow = 0;

		for (int i = 0; i < warm + n && !rc; i++) {
			double t0 = now_us();

			rc = smddp_allreduce(s, r, count, SMDDP_FLOAT32, SMDDP_SUM, c, NULL);
			if (i >= warm)
				t[i - warm] = now_us() - t0;
		}
		if (!rc)
			rc = smddp_allgather(t, all, (size_t)n, SMDDP_FLOAT64, c, NULL);
		if (rc) {
			fprintf(stderr, "rank %d: %s\n", rank, smddp_last_error(c));
			break;
		}
		if (rank)
			continue;
		for (int i = 0; i < n; i++) {
			mx[i] = 0;
			for (int q = 0; q < size; q++)
				if (all[(size_t)q * (size_t)n + (size_t)i] > mx[i])
					mx[i] = all[(size_t)q * (size_t)n + (size_t)i];
			slow += mx[i] > slow_us;
			if (mx[i] > max)
				max = mx[i];
		}
		qsort(mx, (size_t)n, sizeof(*mx), cmp);
		printf("%s size %zu med %.1f slow %d max %.1f\n", tag, sz, mx[n / 2], slow, max);
		fflush(stdout);
	}
	smddp_comm_destroy(c);
	return rc ? 1 : 0;
}
