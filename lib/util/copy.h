/* copy.h - memcpy for the staged paths, around a slow case of glibc's.
 *
 * glibc's memcpy (2.36, x86-64) copies mid-sized blocks, from a few KiB
 * to about the L2 size, with `rep movsb`.  On AMD EPYC that runs 15-20
 * times slower when the destination lies 1-31 bytes past the source's
 * alignment modulo 64 (32-63 is not slow): 64 KiB in 22 us instead of
 * 1.3, 256 KiB in 88 instead of 6 (docs/PERFORMANCE.md).  Buffers from
 * malloc of 128 KiB or more start 16 bytes into a page, so a user's
 * buffer against the page-aligned shared slots is such a case.  Copies of up to
 * SD_COPY_PIECE bytes take glibc's vector loop instead, at full speed
 * whatever the alignment: so a block whose two ends are so placed, in
 * the range where rep movsb is used, is copied in such pieces.
 * Outside that range, or aligned alike, it is one memcpy, which is twice
 * as fast as the pieces there.  glibc stops using rep movsb at the L2
 * size of a core on AMD (its rep_movsb_stop_threshold, from the same
 * sysconf), so that is where the pieces stop: at 512 KiB, the shm
 * transport's default half, on such a machine.
 */
#ifndef SD_UTIL_COPY_H
#define SD_UTIL_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define SD_COPY_PIECE 2048
#define SD_COPY_PIECES_MAX_DEFAULT ((size_t)1 << 20) /* where sysconf does not tell */

/* Blocks of this many bytes or more: no rep movsb, one memcpy. */
static inline size_t sd_copy_pieces_max(void)
{
	static _Atomic size_t max;
	size_t m = atomic_load_explicit(&max, memory_order_relaxed);

	if (!m) {
		long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);

		m = l2 > SD_COPY_PIECE ? (size_t)l2 : SD_COPY_PIECES_MAX_DEFAULT;
		atomic_store_explicit(&max, m, memory_order_relaxed);
	}
	return m;
}

/* memcpy(dst, src, n); the regions must not overlap. */
static inline void sd_copy(void *dst, const void *src, size_t n)
{
	char *d = dst;
	const char *s = src;

	/* Slow only with the destination 1-31 bytes past: 32-63 is
	 * memcpy's vector loop, faster than the pieces (lab/util/copy-offsets.c). */
	if (n > SD_COPY_PIECE && ((uintptr_t)d - (uintptr_t)s - 1) % 64 < 31 &&
	    n < sd_copy_pieces_max()) {
		for (; n > SD_COPY_PIECE; n -= SD_COPY_PIECE, d += SD_COPY_PIECE, s += SD_COPY_PIECE)
			memcpy(d, s, SD_COPY_PIECE);
	}
	memcpy(d, s, n);
}

/* memmove(dst, src, n): sd_copy where the regions do not overlap. */
static inline void sd_move(void *dst, const void *src, size_t n)
{
	const char *d = dst, *s = src;

	if (d + n <= s || s + n <= d)
		sd_copy(dst, src, n);
	else
		memmove(dst, src, n);
}

/* memcpy(dst, src, n) with stores that bypass the cache, for a large block
 * that nobody reads soon: a plain copy reads each line of the destination
 * before it writes it, so out of cache it moves three bytes for every two
 * of these.  x86-64 (SSE2) only; elsewhere sd_copy.  The regions must not
 * overlap. */
static inline void sd_copy_stream(void *dst, const void *src, size_t n)
{
#if defined(__SSE2__)
	char *d = dst;
	const char *s = src;
	size_t head = (64 - ((uintptr_t)d & 63)) & 63;

	if (head > n)
		head = n;
	memcpy(d, s, head);
	d += head, s += head, n -= head;
	for (; n >= 128; n -= 128, d += 128, s += 128) {
		/* The source 1 KiB ahead: faster than leaving it to the
		 * hardware prefetcher (docs/PERFORMANCE.md, one node). */
		__builtin_prefetch(s + 1024);
		__builtin_prefetch(s + 1024 + 64);
		for (int k = 0; k < 128; k += 64) {
			__m128i a = _mm_loadu_si128((const __m128i *)(s + k));
			__m128i b = _mm_loadu_si128((const __m128i *)(s + k + 16));
			__m128i e = _mm_loadu_si128((const __m128i *)(s + k + 32));
			__m128i f = _mm_loadu_si128((const __m128i *)(s + k + 48));

			_mm_stream_si128((__m128i *)(d + k), a);
			_mm_stream_si128((__m128i *)(d + k + 16), b);
			_mm_stream_si128((__m128i *)(d + k + 32), e);
			_mm_stream_si128((__m128i *)(d + k + 48), f);
		}
	}
	/* The streamed stores are weakly ordered: done before whatever
	 * tells a peer that the block is there. */
	_mm_sfence();
	memcpy(d, s, n);
#else
	sd_copy(dst, src, n);
#endif
}

#endif
