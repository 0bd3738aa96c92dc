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
	const uint32_t em = (uint32_t)(h & 0x7fff) << 13; /* exponent, mantissa */
	const uint32_t exp = em & 0x0f800000;
	const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	const uint32_t normal = em + ((uint32_t)(127 - 15) << 23);
	/* Inf and NaN: exponent all ones; a NaN gets the quiet bit. */
	const uint32_t special = (em + ((uint32_t)(255 - 31) << 23)) |
				 ((uint32_t)(em > 0x0f800000) << 22);
	/* Subnormal m * 2^-24: (1 + m/1024) * 2^-14 - 2^-14, exact. */
	const float sub = f32_from_bits(em + (113u << 23)) - f32_from_bits(113u << 23);
	const uint32_t r = sel32(exp == 0x0f800000, special, sel32(exp == 0, f32_bits(sub), normal));

	return f32_from_bits(r | sign);
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
