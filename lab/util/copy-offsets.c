/* lab/util/copy-offsets.c - memcpy against sd_copy (lib/util/copy.h) by the
 * destination's offset from the source modulo 64, in cache.
 *
 * build: cc -O2 -Ilib -o copy-offsets lab/util/copy-offsets.c
 * usage: copy-offsets [BYTES]   (default 65536)
 * Prints, per offset 0..60 in steps of 4, the fastest of 30 blocks of 20
 * copies of each, in us a copy.  It shows where glibc's rep movsb is slow
 * (lib/util/copy.h) on the machine it runs on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/copy.h"

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 65536;
	char *src = aligned_alloc(4096, n + 4096), *dst = aligned_alloc(4096, n + 4096);

	if (!n || !src || !dst) {
		fprintf(stderr, "usage: copy-offsets [BYTES]: BYTES a positive number\n");
		return 2;
	}
	memset(src, 1, n + 4096);
	memset(dst, 2, n + 4096);
	printf("# %zu bytes, us a copy (best of 30 x 20)\n# d-s mod 64   memcpy   sd_copy\n", n);
	for (int o = 0; o < 64; o += 4) {
		double best[2] = {1e30, 1e30};

		for (int rep = 0; rep < 30; rep++)
			for (int w = 0; w < 2; w++) {
				double t = now_us();

				for (int i = 0; i < 20; i++) {
					if (w)
						sd_copy(dst + o, src, n);
					else
						memcpy(dst + o, src, n);
				}
				t = (now_us() - t) / 20;
				best[w] = t < best[w] ? t : best[w];
			}
		printf("%10d %10.2f %9.2f\n", o, best[0], best[1]);
	}
	free(src);
	free(dst);
	return 0;
}
