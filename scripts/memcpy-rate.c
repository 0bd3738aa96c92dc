/* scripts/memcpy-rate.c - memcpy's rate for one size in one process: the roof of single-copy transfers.
 *
 * usage: memcpy-rate BYTES [REPEATS]
 * Copies BYTES between two buffers of its own REPEATS times (default 10)
 * after one untimed copy and prints the median rate in GB/s (10^9 bytes
 * per second).  scripts/bench-p2p-node.sh runs one per rank at once, as
 * the ranks of a sendrecv copy at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	size_t bytes;
	int reps;
	char *src, *dst;
	double *secs;

	if (argc < 2 || argc > 3 || (bytes = strtoull(argv[1], NULL, 0)) == 0 ||
	    (reps = argc == 3 ? atoi(argv[2]) : 10) < 1) {
		fprintf(stderr, "usage: memcpy-rate BYTES [REPEATS]\n");
		return 2;
	}
	src = malloc(bytes);
	dst = malloc(bytes);
	secs = calloc((size_t)reps, sizeof(*secs));
	if (!src || !dst || !secs) {
		fprintf(stderr, "memcpy-rate: out of memory for 2 x %zu bytes\n", bytes);
		return 1;
	}
	memset(src, 1, bytes);
	memset(dst, 2, bytes);
	memcpy(dst, src, bytes);
	for (int i = 0; i < reps; i++) {
		struct timespec t0, t1;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		memcpy(dst, src + (i & 1), bytes - 1);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		secs[i] = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	}
	qsort(secs, (size_t)reps, sizeof(*secs), cmp);
	printf("%.2f\n", (double)(bytes - 1) / secs[reps / 2] / 1e9);
	return dst[bytes / 2] == 1 ? 0 : 1;
}
