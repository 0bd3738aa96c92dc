/* half.h - binary16 and bfloat16 <-> float conversions, inline and branch-free.
 *
 * Every path is computed and the right one selected, so that a loop over
 * these functions vectorises with plain SSE2.  Rounding is to nearest, ties
 * to even, exact for subnormals; overflow goes to infinity; a NaN stays a
 * NaN and comes out quiet, keeping the top of its payload (which is what the
 * F16C instructions do, so the scalar and the F16C paths agree bit for bit).
 * The subnormal tricks add or subtract a power of two in float: they assume
 * the default rounding mode, and stay right with FTZ/DAZ set because the
 * intermediate values are normal floats.
 */
#ifndef SD_REDUCE_HALF_H
#define SD_REDUCE_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float f32_from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* c ? a : b without a branch (GCC does not if-convert the nested ?: of
 * these functions, and a branch in a loop stops the vectoriser). */
static inline uint32_t sel32(int c, uint32_t a, uint32_t b)
{
	const uint32_t m = 0u - (uint32_t)c;

	return (a & m) | (b & ~m);
}

static inline float half_to_float_inline(uint16_t h)
{
	const uint32_t w = (uint32_t)h << 16;
	const uint32_t sign = w & 0x80000000;
	const uint32_t two_w = w + w; /* exponent at the top, sign gone */
	/* Normal, Inf, NaN: exponent and mantissa to float position, exponent
	 * offset so that Inf/NaN land on 255, then scaled back by 2^-112, which
	 * is exact, keeps Inf and quiets a NaN. */
	const float normal = f32_from_bits((two_w >> 4) + (0xe0u << 23)) * 0x1p-112f;
	/* Subnormal m * 2^-24: (0.5 + m * 2^-24) - 0.5, exact. */
	const float sub = f32_from_bits((two_w >> 17) | 0x3f000000) - 0.5f;

	return f32_from_bits(sign | sel32(two_w < (1u << 27), f32_bits(sub), f32_bits(normal)));
}

static inline uint16_t float_to_half_inline(float f)
{
	const uint32_t u = f32_bits(f);
	const uint32_t sign = (u >> 16) & 0x8000;
	const uint32_t a = u & 0x7fffffff;
	/* Normal result: rebias and round the 13 dropped bits to nearest even;
	 * a carry into the exponent is the right answer, up to infinity. */
	const uint32_t normal = (a - (112u << 23) + 0xfff + ((a >> 13) & 1)) >> 13;
	/* Subnormal result (|f| < 2^-14): adding 0.5 leaves |f| in units of
	 * 2^-24 in the low bits, rounded to nearest even by the addition. */
	const uint32_t sub = f32_bits(f32_from_bits(a) + 0.5f) - 0x3f000000;
	const uint32_t nan = 0x7e00 | ((a >> 13) & 0x3ff);
	const uint32_t r = sel32(a > 0x7f800000, nan,
				 sel32(a >= 0x47800000, 0x7c00, /* >= 65536: inf */
				       sel32(a < 0x38800000, sub, normal)));

	return (uint16_t)(r | sign);
}

static inline float bf16_to_float_inline(uint16_t b)
{
	return f32_from_bits((uint32_t)b << 16);
}

static inline uint16_t float_to_bf16_inline(float f)
{
	const uint32_t u = f32_bits(f);
	/* All ones for a NaN: it gets the quiet bit and is truncated, not
	 * rounded (rounding could carry into the sign).  Kept in 32 bits up to
	 * the final shift, so that the vector code packs once. */
	const uint32_t nan = 0u - (uint32_t)((u & 0x7fffffff) > 0x7f800000);
	const uint32_t bias = (0x7fff + ((u >> 16) & 1)) & ~nan;

	return (uint16_t)(((u | (nan & 0x00400000)) + bias) >> 16);
}

#endif
