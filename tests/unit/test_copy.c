/* test_copy.c - sd_copy, sd_copy_stream and sd_move (lib/util/copy.h) copy every byte,
 * at every alignment. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/copy.h"
#include "check.h"

#define ROOM (3u << 20)

int main(void)
{
	static const size_t sizes[] = {0,    1,    63,    127,   128,  129,  191,
				       2047, 2048, 2049, 4096, 4097, 65536, 65537,
				       (1u << 19) - 1, 1u << 19, (1u << 20) - 1, 1u << 20,
				       (1u << 20) + 5};
	static const size_t offs[] = {0, 1, 8, 16, 31, 32, 48, 63};
	unsigned char *src = malloc(ROOM), *dst = malloc(ROOM), *want = malloc(ROOM);
	int bad = 0;

	CHECK(src && dst && want, "memory");
	for (size_t i = 0; i < ROOM; i++)
		src[i] = (unsigned char)(i * 131 + (i >> 9));
	for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++)
		for (size_t a = 0; a < sizeof(offs) / sizeof(offs[0]); a++)
			for (size_t b = 0; b < sizeof(offs) / sizeof(offs[0]); b++) {
				size_t n = sizes[z], so = offs[a], dof = offs[b];

				memset(dst, 0xa5, n + 128);
				memset(want, 0xa5, n + 128);
				memcpy(want + dof, src + so, n);
				sd_copy(dst + dof, src + so, n);
				if (memcmp(dst, want, n + 128)) {
					FAIL("sd_copy of %zu bytes, source +%zu, destination +%zu", n, so,
					     dof);
					bad++;
				}
				memset(dst, 0xa5, n + 128);
				sd_copy_stream(dst + dof, src + so, n);
				if (memcmp(dst, want, n + 128)) {
					FAIL("sd_copy_stream of %zu bytes, source +%zu, destination +%zu",
					     n, so, dof);
					bad++;
				}
			}
	CHECK(!bad, "sd_copy and sd_copy_stream: every size and pair of alignments, and not a "
		    "byte beyond");
	/* sd_move: overlapping both ways, and apart */
	bad = 0;
	for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
		static const long shifts[] = {-4097, -16, -1, 1, 16, 4097, (1 << 20) + 3};

		for (size_t k = 0; k < sizeof(shifts) / sizeof(shifts[0]); k++) {
			size_t n = sizes[z] < ROOM / 4 ? sizes[z] : ROOM / 4;
			unsigned char *base = dst + (1u << 20) / 2;

			memcpy(dst, src, ROOM);
			memcpy(want, src, ROOM);
			memmove(want + (base - dst) + shifts[k], want + (base - dst), n);
			sd_move(base + shifts[k], base, n);
			if (memcmp(dst, want, ROOM)) {
				FAIL("sd_move of %zu bytes by %ld", n, shifts[k]);
				bad++;
			}
		}
	}
	CHECK(!bad, "sd_move: overlapping either way, and apart");
	free(src);
	free(dst);
	free(want);
	return check_done("test_copy");
}
