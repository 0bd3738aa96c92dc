/* conf-ref.c - conformance: the deterministic inputs, fp16 and bf16 written independently of the
 * library, element access, and the reference each rank computes on its own.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <smddp/smddp.h>

#include "conformance.h"

/* ---- deterministic inputs ------------------------------------------------ */

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The random word behind element i of rank r's input (one mix per element:
 * the reference regenerates every rank's inputs, so this is the hot path). */
static uint64_t hval(int r, size_t i, int dtype, int op, int coll, int salt)
{
	uint64_t s = ((uint64_t)(unsigned)r << 40) ^ ((uint64_t)dtype << 32) ^ ((uint64_t)op << 24) ^
		     ((uint64_t)coll << 16) ^ (uint64_t)(unsigned)salt;
	return mix64(s * 0xd1b54a32d192ed03ull ^ (uint64_t)i * 0x9e3779b97f4a7c15ull);
}

/* ---- fp16 and bf16, written independently of the library ---------------- */

/* Decode a binary floating format with mbits stored mantissa bits, ebits exponent bits. */
static double fp_decode(uint32_t bits, int ebits, int mbits)
{
	int bias = (1 << (ebits - 1)) - 1;
	uint32_t sign = bits >> (ebits + mbits) & 1;
	uint32_t e = bits >> mbits & ((1u << ebits) - 1);
	uint32_t m = bits & ((1u << mbits) - 1);
	double v;

	if (e == (1u << ebits) - 1)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp((double)m, 1 - bias - mbits);
	else
		v = ldexp((double)(m | 1u << mbits), (int)e - bias - mbits);
	return sign ? -v : v;
}

/* Round x to the format, to nearest even, and encode it. */
static uint32_t fp_encode(double x, int ebits, int mbits)
{
	int bias = (1 << (ebits - 1)) - 1;
	uint32_t sign = signbit(x) ? 1u << (ebits + mbits) : 0;
	uint32_t emax = (1u << ebits) - 1;
	double a = fabs(x), q, r;
	int e;

	if (isnan(x))
		return sign | emax << mbits | 1u << (mbits - 1);
	if (isinf(x))
		return sign | emax << mbits;
	if (a == 0)
		return sign;
	frexp(a, &e);
	e -= 1; /* a in [2^e, 2^(e+1)) */
	if (e < 1 - bias)
		e = 1 - bias;
	q = ldexp(1.0, e - mbits); /* the quantum at this exponent */
	r = nearbyint(a / q) * q;  /* exact scaling; nearbyint rounds to nearest even */
	if (r == 0)
		return sign;
	frexp(r, &e);
	e -= 1;
	if (e > bias)
		return sign | emax << mbits; /* overflow: infinity */
	if (e < 1 - bias)                    /* subnormal */
		return sign | (uint32_t)(r / ldexp(1.0, 1 - bias - mbits));
	return sign | (uint32_t)(e + bias) << mbits |
	       ((uint32_t)(r / ldexp(1.0, e - mbits)) & ((1u << mbits) - 1));
}

/* Decoding is hot (every rank's every input): tables, filled by fp_decode. */
static double *half_table, *bf16_table;

void tables_init(void)
{
	uint32_t b;

	half_table = malloc(65536 * sizeof(double));
	bf16_table = malloc(65536 * sizeof(double));
	if (!half_table || !bf16_table)
		abort();
	for (b = 0; b < 65536; b++) {
		half_table[b] = fp_decode(b, 5, 10);
		bf16_table[b] = fp_decode(b, 8, 7);
	}
}

static double half_to_d(uint16_t h) { return half_table[h]; }
static uint16_t d_to_half(double x) { return (uint16_t)fp_encode(x, 5, 10); }
static double bf16_to_d(uint16_t b) { return bf16_table[b]; }
static uint16_t d_to_bf16(double x) { return (uint16_t)fp_encode(x, 8, 7); }

/* Position of a 16-bit float on the number line, in ulps (+0 and -0 both 0). */
static long ord16(uint16_t b)
{
	long mag = b & 0x7fff;
	return (b & 0x8000) ? -mag : mag;
}

/* The conversions against known values, so that a wrong reference cannot
 * pass for a right library. */
void self_test(void)
{
	static const struct {
		double x;
		uint16_t half, bf16;
	} k[] = {
		{1.0, 0x3c00, 0x3f80},
		{-2.0, 0xc000, 0xc000},
		{65504.0, 0x7bff, 0x4780},
		{1.0 / 16777216, 0x0001, 0x3380},       /* smallest fp16 subnormal */
		{1.0 + 1.0 / 2048, 0x3c00, 0x3f80},     /* tie: to even (down) */
		{1.0 + 3.0 / 2048, 0x3c02, 0x3f80},     /* tie: to even (up) */
		{1.0 + 1.0 / 256, 0x3c04, 0x3f80},      /* bf16 tie: to even (down) */
		{1.0 + 3.0 / 256, 0x3c0c, 0x3f82},      /* bf16 tie: to even (up) */
		{0.1, 0x2e66, 0x3dcd},
		{65520.0, 0x7c00, 0x4780},              /* rounds to fp16 infinity */
	};
	size_t j;

	for (j = 0; j < sizeof(k) / sizeof(k[0]); j++) {
		if (d_to_half(k[j].x) != k[j].half || d_to_bf16(k[j].x) != k[j].bf16) {
			printf("FAIL: test self-check: %.17g -> half 0x%04x (want 0x%04x), bf16 0x%04x (want 0x%04x)\n",
			       k[j].x, d_to_half(k[j].x), k[j].half, d_to_bf16(k[j].x), k[j].bf16);
			exit(1);
		}
		if (k[j].half != 0x7c00 && k[j].x != 1.0 + 1.0 / 2048 && k[j].x != 1.0 + 3.0 / 2048 &&
		    k[j].x != 1.0 + 1.0 / 256 && k[j].x != 1.0 + 3.0 / 256 && k[j].x != 0.1 &&
		    half_to_d(k[j].half) != k[j].x) {
			printf("FAIL: test self-check: half 0x%04x decodes to %.17g\n", k[j].half,
			       half_to_d(k[j].half));
			exit(1);
		}
	}
}

/* ---- element access -------------------------------------------------------- */

int is_float(int dt) { return dt >= SMDDP_FLOAT16; }
static int is_signed_int(int dt) { return dt == SMDDP_INT8 || dt == SMDDP_INT32 || dt == SMDDP_INT64; }
static int int_bits(int dt) { return (int)dtype_sizes[dt] * 8; }

uint64_t load_bits(const void *buf, size_t i, int dt)
{
	const unsigned char *p = (const unsigned char *)buf + i * dtype_sizes[dt];
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;

	switch (dtype_sizes[dt]) {
	case 1: memcpy(&u8, p, 1); return u8;
	case 2: memcpy(&u16, p, 2); return u16;
	case 4: memcpy(&u32, p, 4); return u32;
	default: memcpy(&u64, p, 8); return u64;
	}
}

void store_bits(void *buf, size_t i, int dt, uint64_t v)
{
	unsigned char *p = (unsigned char *)buf + i * dtype_sizes[dt];
	uint8_t u8 = (uint8_t)v;
	uint16_t u16 = (uint16_t)v;
	uint32_t u32 = (uint32_t)v;

	switch (dtype_sizes[dt]) {
	case 1: memcpy(p, &u8, 1); break;
	case 2: memcpy(p, &u16, 2); break;
	case 4: memcpy(p, &u32, 4); break;
	default: memcpy(p, &v, 8); break;
	}
}

static double bits_to_d(uint64_t b, int dt)
{
	float f;
	double d;
	uint32_t u32 = (uint32_t)b;

	switch (dt) {
	case SMDDP_FLOAT16: return half_to_d((uint16_t)b);
	case SMDDP_BFLOAT16: return bf16_to_d((uint16_t)b);
	case SMDDP_FLOAT32: memcpy(&f, &u32, 4); return f;
	default: memcpy(&d, &b, 8); return d;
	}
}

static uint64_t d_to_bits(double x, int dt)
{
	float f;
	uint32_t u32;
	uint64_t u64;

	switch (dt) {
	case SMDDP_FLOAT16: return d_to_half(x);
	case SMDDP_BFLOAT16: return d_to_bf16(x);
	case SMDDP_FLOAT32: f = (float)x; memcpy(&u32, &f, 4); return u32;
	default: memcpy(&u64, &x, 8); return u64;
	}
}

/* Sign-extend or zero-extend the low bits of an integer dtype. */
static int64_t as_signed(uint64_t v, int dt)
{
	int b = int_bits(dt);
	if (b == 64)
		return (int64_t)v;
	v &= (1ull << b) - 1;
	if (v >> (b - 1))
		return (int64_t)(v | ~((1ull << b) - 1));
	return (int64_t)v;
}

static uint64_t mask_bits(uint64_t v, int dt)
{
	int b = int_bits(dt);
	return b == 64 ? v : v & ((1ull << b) - 1);
}

/* -8..8 in fp16 and bf16 */
static uint64_t small_half[17], small_bf16[17];

void small_init(void)
{
	int k;

	for (k = 0; k < 17; k++) {
		small_half[k] = d_to_half(k - 8);
		small_bf16[k] = d_to_bf16(k - 8);
	}
}

/* The input value (its bit pattern) of element i on rank r for a reduction. */
uint64_t red_input(int r, size_t i, int dt, int op, int coll, int salt)
{
	uint64_t h = hval(r, i, dt, op, coll, salt);
	uint64_t lo = h & 0xffffffffu, hi = h >> 32;
	double x;

	if (!is_float(dt)) {
		if (i % 4 == 0) /* small values, positive and negative */
			return mask_bits((uint64_t)((int64_t)(lo % 7) - 3), dt);
		return mask_bits(h, dt);
	}
	switch (op) {
	case SMDDP_PROD:
		if (dt == SMDDP_FLOAT16 || dt == SMDDP_BFLOAT16) {
			/* 1 + k ulp(1), |k| <= 16 (fp16) or 8 (bf16); 1 - |k| ulp(1) is
			 * 2|k| ulps below 1, whose exponent is one less */
			int k = dt == SMDDP_FLOAT16 ? (int)(lo % 33) - 16 : (int)(lo % 17) - 8;
			uint64_t one = dt == SMDDP_FLOAT16 ? 0x3c00 : 0x3f80;
			uint64_t b = k >= 0 ? one + (uint64_t)k : one - 2 * (uint64_t)(-k);
			return hi % 8 == 0 ? b | 0x8000 : b;
		}
		x = 0.5 + (double)lo / 4294967296.0 * 1.5;
		if (hi % 8 == 0)
			x = -x;
		return d_to_bits(x, dt);
	case SMDDP_MIN:
	case SMDDP_MAX:
		switch (dt) {
		case SMDDP_FLOAT16: /* any normal half */
			return ((hi & 1) << 15) | ((1 + lo % 30) << 10) | (h >> 40 & 0x3ff);
		case SMDDP_BFLOAT16:
			return ((hi & 1) << 15) | ((1 + lo % 254) << 7) | (h >> 40 & 0x7f);
		case SMDDP_FLOAT32:
			return ((hi & 1) << 31) | ((1 + lo % 254) << 23) | (h >> 40 & 0x7fffff);
		default:
			return ((hi & 1) << 63) | ((1 + lo % 2046) << 52) | (mix64(h) & 0xfffffffffffffull);
		}
	default: /* SUM, AVG */
		if (i % 2 == 0) {
			x = (double)((int)(lo % 17) - 8);
			if (dt == SMDDP_FLOAT16)
				return small_half[lo % 17];
			if (dt == SMDDP_BFLOAT16)
				return small_bf16[lo % 17];
		} else if (dt == SMDDP_FLOAT16 || dt == SMDDP_BFLOAT16) {
			/* magnitude in [2^-6, 4): the float sum of 8 such is exact */
			int mb = dt == SMDDP_FLOAT16 ? 10 : 7, bias = dt == SMDDP_FLOAT16 ? 15 : 127;
			uint64_t e = (uint64_t)((int)(lo % 8) - 6 + bias);
			return (h >> 63) << 15 | e << mb | (hi & ((1u << mb) - 1));
		} else {
			x = ((double)(h >> 11) / 9007199254740992.0 - 0.5) * 2000.0;
		}
		return d_to_bits(x, dt);
	}
}

/* The input of a data-movement collective: any bits at all. */
uint64_t move_input(int r, size_t i, int dt, int coll, int salt)
{
	return mask_bits(hval(r, i, dt, 7, coll, salt), dt);
}

/* ---- reference ------------------------------------------------------------ */

/* CONFORMANCE_PER_HOST is set: the ranks are on several hosts (main sets it). */
int multi_host;

/* Expected value of element i of op over ranks ranks[0..n-1] (world ranks
 * that provide inputs, with avg_n the divisor). */
struct expect red_expect(const int *ranks, int n, size_t i, int dt, int op, int coll,
			 int salt)
{
	struct expect e = {0, 0, 0};
	int r;

	if (!is_float(dt)) {
		uint64_t acc = 0;
		for (r = 0; r < n; r++) {
			uint64_t v = red_input(ranks[r], i, dt, op, coll, salt);
			if (r == 0) {
				acc = v;
				continue;
			}
			switch (op) {
			case SMDDP_SUM:
			case SMDDP_AVG: acc += v; break;
			case SMDDP_PROD: acc *= v; break;
			case SMDDP_MIN:
				if (is_signed_int(dt) ? as_signed(v, dt) < as_signed(acc, dt)
						      : mask_bits(v, dt) < mask_bits(acc, dt))
					acc = v;
				break;
			case SMDDP_MAX:
				if (is_signed_int(dt) ? as_signed(v, dt) > as_signed(acc, dt)
						      : mask_bits(v, dt) > mask_bits(acc, dt))
					acc = v;
				break;
			}
		}
		acc = mask_bits(acc, dt);
		if (op == SMDDP_AVG) {
			if (is_signed_int(dt))
				acc = mask_bits((uint64_t)(as_signed(acc, dt) / n), dt);
			else
				acc = acc / (uint64_t)n;
		}
		e.bits = acc;
		return e;
	}
	{
		double acc = 0, sumabs = 0;
		uint64_t best = 0;
		for (r = 0; r < n; r++) {
			uint64_t b = red_input(ranks[r], i, dt, op, coll, salt);
			double v = bits_to_d(b, dt);
			if (r == 0) {
				acc = v;
				best = b;
				sumabs = fabs(v);
				continue;
			}
			sumabs += fabs(v);
			switch (op) {
			case SMDDP_SUM:
			case SMDDP_AVG: acc += v; break;
			case SMDDP_PROD: acc *= v; break;
			case SMDDP_MIN:
				if (v < acc) {
					acc = v;
					best = b;
				}
				break;
			case SMDDP_MAX:
				if (v > acc) {
					acc = v;
					best = b;
				}
				break;
			}
		}
		if (op == SMDDP_AVG) {
			acc /= n;
			sumabs /= n;
		}
		e.ref = acc;
		if (op == SMDDP_MIN || op == SMDDP_MAX) {
			e.bits = best;
		} else if (dt == SMDDP_FLOAT16 || dt == SMDDP_BFLOAT16) {
			e.bits = d_to_bits(acc, dt); /* correctly rounded */
			/* Between hosts partial results cross the network in
			 * the dtype itself (as with NCCL), so they are rounded
			 * once per hop: up to n roundings, each at most an ulp
			 * of the largest partial result. */
			if (multi_host) {
				double mag = op == SMDDP_PROD ? fmax(1.0, fabs(acc)) : sumabs;
				int bits = dt == SMDDP_FLOAT16 ? 10 : 7;

				e.tol = n * ldexp(1.0, ilogb(mag > 0 ? mag : 1) - bits);
			}
		} else {
			double rel = dt == SMDDP_FLOAT64 ? 1e-12 : 1e-5;
			e.bits = d_to_bits(acc, dt);
			e.tol = rel * (op == SMDDP_PROD ? fabs(acc) : sumabs);
		}
		return e;
	}
}

/* Does got match e?  Writes a description of the expectation into why. */
int red_match(uint64_t got, const struct expect *e, int dt, int op)
{
	if (!is_float(dt) || op == SMDDP_MIN || op == SMDDP_MAX)
		return got == e->bits;
	if (dt == SMDDP_FLOAT16 || dt == SMDDP_BFLOAT16) {
		long d = ord16((uint16_t)got) - ord16((uint16_t)e->bits);
		return (d >= -1 && d <= 1) || fabs(bits_to_d(got, dt) - e->ref) <= e->tol;
	}
	{
		double g = bits_to_d(got, dt);
		return fabs(g - e->ref) <= e->tol;
	}
}

void fmt_val(char *s, size_t n, uint64_t bits, int dt)
{
	if (is_float(dt))
		snprintf(s, n, "%.17g (0x%llx)", bits_to_d(bits, dt), (unsigned long long)bits);
	else if (is_signed_int(dt))
		snprintf(s, n, "%lld", (long long)as_signed(bits, dt));
	else
		snprintf(s, n, "%llu", (unsigned long long)mask_bits(bits, dt));
}
