/* test_reduce.c - sd_reduce() and the fp16/bf16 conversions against independent references.
 *
 * The references here share no code with lib/reduce: integers are computed
 * in uint64_t with explicit wrapping to the dtype's width, float32/float64
 * in double, and fp16/bf16 by accumulating in float left to right (the
 * order sd_reduce documents) and rounding once with a converter written
 * with frexp/ldexp/nearbyint.  Every implementation compiled in that this
 * CPU runs (generic, avx2) is checked.
 */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/sd.h"
#include "reduce/reduce.h"
#include "check.h"

#define MAXSRC 8
#define GUARD 64
#define GUARD_BYTE 0xa5

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static double rnd_unit(void) /* [-1, 1) */
{
	return (double)(rnd() >> 11) * 0x1p-52 - 1.0;
}

static uint32_t fbits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static float ffrom(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* ---- reference conversions ---------------------------------------------- */

/* A binary format with mbits mantissa bits, exponent bias, 2^emin the
 * smallest normal, 2^emax_plus the first power of two past the largest. */
struct fmt {
	int mbits, bias, emin, emax_plus;
	uint16_t inf, qnan_bit;
};
static const struct fmt HALF = {10, 15, -14, 16, 0x7c00, 0x0200};
static const struct fmt BF16 = {7, 127, -126, 128, 0x7f80, 0x0040};

static uint16_t ref_narrow(const struct fmt *fm, float f)
{
	uint16_t sign = signbit(f) ? 0x8000 : 0;
	double a = fabs((double)f), q, r;
	int ex, e;

	if (isnan(f))
		return sign | fm->inf | fm->qnan_bit;
	if (a == 0)
		return sign;
	frexp(a, &ex);
	e = ex - 1 < fm->emin ? fm->emin : ex - 1;
	q = ldexp(1.0, e - fm->mbits);     /* the quantum at a's exponent */
	r = nearbyint(a / q) * q;           /* ties to even: default mode */
	if (r >= ldexp(1.0, fm->emax_plus))
		return sign | fm->inf;
	if (r < ldexp(1.0, fm->emin))
		return sign | (uint16_t)(r / ldexp(1.0, fm->emin - fm->mbits));
	frexp(r, &ex);
	e = ex - 1;
	return sign | (uint16_t)((e + fm->bias) << fm->mbits) |
	       (uint16_t)((r / ldexp(1.0, e) - 1.0) * (1 << fm->mbits));
}

static double ref_widen(const struct fmt *fm, uint16_t h)
{
	int e = (h & 0x7fff) >> fm->mbits, m = h & ((1 << fm->mbits) - 1);
	int emax = (1 << (15 - fm->mbits)) - 1;
	double v;

	if (e == emax)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp(m, fm->emin - fm->mbits);
	else
		v = ldexp(1.0 + ldexp(m, -fm->mbits), e - fm->bias);
	return (h & 0x8000) ? -v : v;
}

static int is_nan16(const struct fmt *fm, uint16_t h)
{
	return (h & fm->inf) == fm->inf && (h & ~(fm->inf | 0x8000));
}

/* ---- conversion tests ----------------------------------------------------- */

static void check_narrow(const struct fmt *fm, const char *name, uint16_t (*narrow)(float),
			 float f)
{
	uint16_t got = narrow(f), want = ref_narrow(fm, f);

	if (isnan(f)) {
		if (!is_nan16(fm, got) || !(got & fm->qnan_bit))
			FAIL("%s(NaN 0x%08x) = 0x%04x, want a quiet NaN", name, fbits(f), got);
	} else if (got != want) {
		FAIL("%s(%a = 0x%08x) = 0x%04x, want 0x%04x", name, f, fbits(f), got, want);
	}
}

static void test_conversions(const struct fmt *fm, const char *tname, float (*widen)(uint16_t),
			     uint16_t (*narrow)(float))
{
	int before = failures;
	long checked = 0;

	/* Every pattern widens exactly and narrows back to itself. */
	for (uint32_t h = 0; h <= 0xffff; h++) {
		float f = widen((uint16_t)h);
		double want = ref_widen(fm, (uint16_t)h);
		uint16_t back = narrow(f);

		if (is_nan16(fm, (uint16_t)h)) {
			if (!isnan(f) || !!signbit(f) != !!(h & 0x8000))
				FAIL("%s->float(0x%04x) = %a, want a NaN of the same sign", tname, h, f);
			if (!is_nan16(fm, back) || !(back & fm->qnan_bit))
				FAIL("%s round trip of NaN 0x%04x gave 0x%04x, want a quiet NaN",
				     tname, h, back);
		} else {
			if ((double)f != want || !!signbit(f) != !!(h & 0x8000))
				FAIL("%s->float(0x%04x) = %a, want %a", tname, h, f, want);
			if (back != h)
				FAIL("%s round trip of 0x%04x gave 0x%04x", tname, h, back);
		}
		checked++;
	}
	/* Around every halfway point between neighbours (and past the largest
	 * finite value, where the upper neighbour is infinity): the tie, and
	 * one float ulp above and below; both signs. */
	for (uint32_t h = 0; h < fm->inf; h++) {
		double lo = ref_widen(fm, (uint16_t)h);
		double hi = h + 1 == fm->inf ? ldexp(1.0, fm->emax_plus) : ref_widen(fm, (uint16_t)(h + 1));
		float mid = (float)((lo + hi) / 2); /* exact: one more bit than the format */

		if ((double)mid != (lo + hi) / 2) {
			FAIL("%s: midpoint above 0x%04x not exact in float", tname, h);
			continue;
		}
		const float pts[] = {mid, nextafterf(mid, INFINITY), nextafterf(mid, 0), (float)lo};
		for (size_t k = 0; k < sizeof(pts) / sizeof(pts[0]); k++) {
			check_narrow(fm, tname, narrow, pts[k]);
			check_narrow(fm, tname, narrow, -pts[k]);
			checked += 2;
		}
	}
	/* Random float patterns, every exponent. */
	for (long i = 0; i < (1L << 21); i++) {
		check_narrow(fm, tname, narrow, ffrom((uint32_t)rnd()));
		checked++;
	}
	const float specials[] = {INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX, FLT_MIN,
				  0x1p-149f, -0x1p-149f, 1e-40f, 0.0f, -0.0f};
	for (size_t k = 0; k < sizeof(specials) / sizeof(specials[0]); k++)
		check_narrow(fm, tname, narrow, specials[k]);
	printf("%s conversions: %ld values checked (all 65536 patterns round trip, ties, "
	       "ulp neighbours, overflow, subnormals, NaN): %s\n",
	       tname, checked, failures == before ? "ok" : "FAILED");
}

/* Hand-picked cases, so that a reader sees what the rules are. */
static void test_half_cases(void)
{
	static const struct {
		float f;
		uint16_t h;
	} cases[] = {
		{1.0f, 0x3c00},	{-2.0f, 0xc000},	  {65504.0f, 0x7bff},
		{65519.99f, 0x7bff}, {65520.0f, 0x7c00}, /* tie, odd below: up, to inf */
		{1e9f, 0x7c00},	{-1e9f, 0xfc00},	  {0x1p-24f, 0x0001},
		{0x1p-25f, 0x0000}, /* tie between 0 and the smallest subnormal: even */
		{0x1.000002p-25f, 0x0001}, {0x3p-25f, 0x0002}, /* tie 1|2: even */
		{0x1p-14f, 0x0400}, {0x1.ff8p-15f, 0x03ff}, /* largest subnormal */
		{0x1.ffcp-15f, 0x0400}, /* tie: even, the smallest normal */
		{0x1.ffbffep-15f, 0x03ff},
		{1.0f + 0x1p-11f, 0x3c00},		     /* tie: even (down) */
		{1.0f + 0x3p-11f, 0x3c02},		     /* tie: even (up) */
		{1e-40f, 0x0000},	{-1e-40f, 0x8000},	  {-0.0f, 0x8000},
	};
	int before = failures;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint16_t got = sd_float_to_half(cases[i].f);

		if (got != cases[i].h)
			FAIL("float_to_half(%a) = 0x%04x, want 0x%04x", cases[i].f, got, cases[i].h);
	}
	if (sd_float_to_bf16(0x1.fep127f) != 0x7f7f || sd_float_to_bf16(0x1.ffp127f) != 0x7f80 ||
	    sd_float_to_bf16(1.0f + 0x1p-8f) != 0x3f80 || sd_float_to_bf16(1.0f + 0x3p-8f) != 0x3f82)
		FAIL("bf16 hand-picked cases (largest, tie to inf, ties to even)");
	printf("fp16/bf16 hand-picked rounding cases: %s\n", failures == before ? "ok" : "FAILED");
}

/* ---- reduction tests ------------------------------------------------------ */

static const enum smddp_dtype dtypes[] = {SMDDP_INT8,	  SMDDP_UINT8,	  SMDDP_INT32,
					  SMDDP_UINT32,	  SMDDP_INT64,	  SMDDP_UINT64,
					  SMDDP_FLOAT16,  SMDDP_BFLOAT16, SMDDP_FLOAT32,
					  SMDDP_FLOAT64};
static const size_t counts[] = {0, 1, 3, 17, 1023, 100003};
#define MAXCOUNT 100003

static int is_int(enum smddp_dtype d)
{
	return d <= SMDDP_UINT64;
}

static int is_signed(enum smddp_dtype d)
{
	return d == SMDDP_INT8 || d == SMDDP_INT32 || d == SMDDP_INT64;
}

static uint64_t get_raw(const void *buf, size_t i, size_t sz)
{
	uint64_t v = 0;

	memcpy(&v, (const char *)buf + i * sz, sz); /* little endian */
	return v;
}

static int64_t sext(uint64_t v, size_t sz)
{
	int sh = 64 - 8 * (int)sz;

	return (int64_t)(v << sh) >> sh;
}

static double get_f(const void *buf, size_t i, enum smddp_dtype d)
{
	switch (d) {
	case SMDDP_FLOAT32:
		return ((const float *)buf)[i];
	case SMDDP_FLOAT64:
		return ((const double *)buf)[i];
	case SMDDP_FLOAT16:
		return ref_widen(&HALF, ((const uint16_t *)buf)[i]);
	default:
		return ref_widen(&BF16, ((const uint16_t *)buf)[i]);
	}
}

static void fill(void *buf, size_t count, enum smddp_dtype d)
{
	size_t sz = smddp_dtype_size(d);

	for (size_t i = 0; i < count; i++) {
		char *p = (char *)buf + i * sz;
		float f = (float)(2.0 * rnd_unit());
		uint16_t h;
		double x;

		switch (d) {
		case SMDDP_FLOAT16:
			h = ref_narrow(&HALF, f);
			memcpy(p, &h, 2);
			break;
		case SMDDP_BFLOAT16:
			h = ref_narrow(&BF16, f);
			memcpy(p, &h, 2);
			break;
		case SMDDP_FLOAT32:
			memcpy(p, &f, 4);
			break;
		case SMDDP_FLOAT64:
			x = 2.0 * rnd_unit();
			memcpy(p, &x, 8);
			break;
		default: {
			/* All bits random, so that sums and products wrap; one
			 * element in eight small, so that min/max see ties. */
			uint64_t v = (i % 8 == 7) ? rnd() % 3 : rnd();

			memcpy(p, &v, sz);
		}
		}
	}
}

/* Expected value of element i: integers exactly (raw bits), floats in
 * double with a tolerance, fp16/bf16 exactly (raw bits). */
struct expect {
	uint64_t raw;
	double val, tol;
};

static struct expect reference(const void *const *srcs, int nsrc, size_t i,
			       enum smddp_dtype d, enum smddp_op op, int div)
{
	size_t sz = smddp_dtype_size(d);
	struct expect e = {0, 0, 0};

	if (is_int(d)) {
		uint64_t mask = sz == 8 ? ~0ull : (1ull << (8 * sz)) - 1;
		uint64_t acc = get_raw(srcs[0], i, sz);

		for (int j = 1; j < nsrc; j++) {
			uint64_t v = get_raw(srcs[j], i, sz);
			int less = is_signed(d) ? sext(v, sz) < sext(acc, sz) : v < acc;

			switch (op) {
			case SMDDP_SUM:
			case SMDDP_AVG:
				acc = (acc + v) & mask;
				break;
			case SMDDP_PROD:
				acc = (acc * v) & mask;
				break;
			case SMDDP_MIN:
				acc = less ? v : acc;
				break;
			case SMDDP_MAX:
				acc = (!less && v != acc) ? v : acc;
				break;
			}
		}
		if (op == SMDDP_AVG)
			acc = is_signed(d) ? (uint64_t)(sext(acc, sz) / div) & mask : acc / (uint64_t)div;
		e.raw = acc;
	} else if (d == SMDDP_FLOAT16 || d == SMDDP_BFLOAT16) {
		float acc = (float)get_f(srcs[0], i, d);

		for (int j = 1; j < nsrc; j++) {
			float v = (float)get_f(srcs[j], i, d);

			switch (op) {
			case SMDDP_SUM:
			case SMDDP_AVG:
				acc = acc + v;
				break;
			case SMDDP_PROD:
				acc = acc * v;
				break;
			case SMDDP_MIN:
				acc = v < acc ? v : acc;
				break;
			case SMDDP_MAX:
				acc = v > acc ? v : acc;
				break;
			}
		}
		if (op == SMDDP_AVG)
			acc = acc / (float)div;
		e.raw = ref_narrow(d == SMDDP_FLOAT16 ? &HALF : &BF16, acc);
	} else {
		/* Relative tolerance: nsrc roundings of the type's epsilon, on
		 * the sum of magnitudes (sums) or on the product. */
		double eps = d == SMDDP_FLOAT32 ? FLT_EPSILON : DBL_EPSILON;
		double acc = get_f(srcs[0], i, d), mag = fabs(acc);

		for (int j = 1; j < nsrc; j++) {
			double v = get_f(srcs[j], i, d);

			mag += fabs(v);
			switch (op) {
			case SMDDP_SUM:
			case SMDDP_AVG:
				acc += v;
				break;
			case SMDDP_PROD:
				acc *= v;
				break;
			case SMDDP_MIN:
				acc = v < acc ? v : acc;
				break;
			case SMDDP_MAX:
				acc = v > acc ? v : acc;
				break;
			}
		}
		if (op == SMDDP_AVG) {
			acc /= div;
			mag /= div;
		}
		e.val = acc;
		e.tol = op == SMDDP_PROD ? 2.0 * nsrc * eps * fabs(acc)
			: op == SMDDP_MIN || op == SMDDP_MAX ? 0.0
							     : 2.0 * nsrc * eps * mag;
	}
	return e;
}

static int match(const void *dst, size_t i, enum smddp_dtype d, const struct expect *e)
{
	size_t sz = smddp_dtype_size(d);

	if (is_int(d))
		return get_raw(dst, i, sz) == e->raw;
	if (d == SMDDP_FLOAT16 || d == SMDDP_BFLOAT16) {
		const struct fmt *fm = d == SMDDP_FLOAT16 ? &HALF : &BF16;
		uint16_t got = (uint16_t)get_raw(dst, i, 2);

		/* NaNs match NaNs; +0 and -0 match (min/max of zeros). */
		if (is_nan16(fm, got) || is_nan16(fm, (uint16_t)e->raw))
			return is_nan16(fm, got) && is_nan16(fm, (uint16_t)e->raw);
		return got == e->raw || ((got | e->raw) & 0x7fff) == 0;
	}
	return fabs(get_f(dst, i, d) - e->val) <= e->tol;
}

struct bufs {
	unsigned char *src[MAXSRC], *orig[MAXSRC], *work;
	struct expect *exp;
};

static const char *const placements[] = {"out of place", "dst == srcs[0]", "dst == srcs[last]",
					 "misaligned, out of place", "all one buffer"};

/* One call: returns 0 when dst is right, the guard intact and the other
 * sources untouched. */
static void run_one(struct bufs *b, enum smddp_dtype d, enum smddp_op op, int nsrc, size_t count,
		    int div, int place)
{
	size_t sz = smddp_dtype_size(d), bytes = count * sz;
	const void *srcs[MAXSRC];
	unsigned char *dst = b->work;
	int inplace = -1;

	for (int j = 0; j < nsrc; j++)
		srcs[j] = b->src[j];
	if (place == 1 || place == 2) {
		inplace = place == 1 ? 0 : nsrc - 1;
		memcpy(dst, b->src[inplace], bytes);
		srcs[inplace] = dst;
	} else if (place == 3) {
		/* Every pointer one element off its allocation's alignment. */
		dst = b->work + sz;
		for (int j = 0; j < nsrc; j++) {
			memmove(b->src[j] + sz, b->src[j], bytes);
			srcs[j] = b->src[j] + sz;
		}
	} else if (place == 4) {
		memcpy(dst, b->src[0], bytes);
		for (int j = 0; j < nsrc; j++)
			srcs[j] = dst;
	}
	memset(dst + bytes, GUARD_BYTE, GUARD);

	sd_reduce(dst, srcs, nsrc, count, d, op, div);

	size_t bad = 0, first = 0;
	for (size_t i = 0; i < count; i++) {
		if (!match(dst, i, d, &b->exp[i]) && bad++ == 0)
			first = i;
	}
	if (bad)
		FAIL("%s %s nsrc=%d count=%zu div=%d %s (%s): %zu wrong, first at %zu "
		     "(got 0x%llx / %g, want 0x%llx / %g)",
		     smddp_dtype_name(d), smddp_op_name(op), nsrc, count, div, placements[place],
		     sd_reduce_isa(), bad, first, (unsigned long long)get_raw(dst, first, sz),
		     is_int(d) ? 0.0 : get_f(dst, first, d), (unsigned long long)b->exp[first].raw,
		     b->exp[first].val);
	for (int g = 0; g < GUARD; g++) {
		if (dst[bytes + g] != GUARD_BYTE) {
			FAIL("%s %s nsrc=%d count=%zu %s: wrote past the end of dst",
			     smddp_dtype_name(d), smddp_op_name(op), nsrc, count, placements[place]);
			break;
		}
	}
	for (int j = 0; j < nsrc; j++) {
		if (j != inplace && place != 4 && memcmp(srcs[j], b->orig[j], bytes) != 0)
			FAIL("%s %s nsrc=%d count=%zu %s: source %d modified", smddp_dtype_name(d),
			     smddp_op_name(op), nsrc, count, placements[place], j);
		if (place == 3) /* the shift clobbered the element after the last */
			memcpy(b->src[j], b->orig[j], count < MAXCOUNT ? bytes + sz : bytes);
	}
}

static void test_reduce(struct bufs *b)
{
	for (size_t di = 0; di < sizeof(dtypes) / sizeof(dtypes[0]); di++) {
		enum smddp_dtype d = dtypes[di];
		size_t sz = smddp_dtype_size(d);
		int before = failures;
		long calls = 0;

		for (int j = 0; j < MAXSRC; j++) {
			fill(b->src[j], MAXCOUNT, d);
			memcpy(b->orig[j], b->src[j], MAXCOUNT * sz);
		}
		for (int op = 0; op < SMDDP_NUM_OPS; op++) {
			for (int nsrc = 1; nsrc <= MAXSRC; nsrc++) {
				/* AVG by nsrc, as the collectives do, and by
				 * another divisor, with a sign. */
				for (int dv = 0; dv < (op == SMDDP_AVG ? 2 : 1); dv++) {
					int div = dv == 0 ? nsrc : 7;
					const void *srcs[MAXSRC];

					for (int j = 0; j < nsrc; j++)
						srcs[j] = b->src[j];
					for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
						size_t count = counts[ci];

						for (size_t i = 0; i < count; i++)
							b->exp[i] = reference(srcs, nsrc, i, d, op, div);
						for (int place = 0; place < 4; place++) {
							run_one(b, d, op, nsrc, count, div, place);
							calls++;
						}
					}
				}
			}
			/* All sources and dst one buffer (x op x op ...). */
			for (int nsrc = 1; nsrc <= 3; nsrc++) {
				const void *srcs[MAXSRC];

				for (int j = 0; j < nsrc; j++)
					srcs[j] = b->src[0];
				for (size_t i = 0; i < 1023; i++)
					b->exp[i] = reference(srcs, nsrc, i, d, op, nsrc);
				run_one(b, d, op, nsrc, 1023, nsrc, 4);
				calls++;
			}
		}
		printf("  %-8s x sum,prod,min,max,avg x nsrc 1..8 x counts 0..100003 x "
		       "placements: %ld calls: %s\n",
		       smddp_dtype_name(d), calls, failures == before ? "ok" : "FAILED");
	}
}

/* Every fp16/bf16 bit pattern (subnormals, infinities, NaNs) through the
 * vector widening and narrowing of each implementation: x / div rounds the
 * odd subnormals to ties, inf - inf makes NaNs.  MIN/MAX are left out: which
 * operand a NaN comparison returns is not specified. */
static void test_special16(struct bufs *b)
{
	static const struct {
		int nsrc;
		enum smddp_op op;
		int div;
	} cases[] = {
		{1, SMDDP_AVG, 1}, {1, SMDDP_AVG, 2},	 {1, SMDDP_AVG, 3}, {1, SMDDP_AVG, 1000},
		{2, SMDDP_SUM, 1}, {2, SMDDP_PROD, 1}, {2, SMDDP_AVG, 2},
	};
	const size_t count = 65536;

	for (int k = 0; k < 2; k++) {
		enum smddp_dtype d = k == 0 ? SMDDP_FLOAT16 : SMDDP_BFLOAT16;
		int before = failures;

		for (size_t i = 0; i < count; i++) {
			uint16_t x = (uint16_t)i, y = (uint16_t)(i * 40503u); /* a permutation */

			memcpy(b->src[0] + 2 * i, &x, 2);
			memcpy(b->src[1] + 2 * i, &y, 2);
		}
		for (int j = 0; j < 2; j++)
			memcpy(b->orig[j], b->src[j], count * 2);
		for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
			const void *srcs[2] = {b->src[0], b->src[1]};

			for (size_t i = 0; i < count; i++)
				b->exp[i] = reference(srcs, cases[c].nsrc, i, d, cases[c].op, cases[c].div);
			for (int place = 0; place < 4; place++)
				run_one(b, d, cases[c].op, cases[c].nsrc, count, cases[c].div, place);
		}
		printf("  %-8s every bit pattern: x/1, x/2, x/3, x/1000, x+y, x*y, (x+y)/2: %s\n",
		       smddp_dtype_name(d), failures == before ? "ok" : "FAILED");
	}
}

int main(void)
{
	static const char *const isas[] = {"generic", "avx2"};
	struct bufs b;
	int tested = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	test_half_cases();
	test_conversions(&HALF, "fp16", sd_half_to_float, sd_float_to_half);
	test_conversions(&BF16, "bf16", sd_bf16_to_float, sd_float_to_bf16);

	for (int j = 0; j < MAXSRC; j++) {
		b.src[j] = malloc(MAXCOUNT * 8 + GUARD + 8);
		b.orig[j] = malloc(MAXCOUNT * 8);
	}
	b.work = malloc(MAXCOUNT * 8 + GUARD + 8);
	b.exp = malloc(MAXCOUNT * sizeof(*b.exp));
	for (size_t k = 0; k < sizeof(isas) / sizeof(isas[0]); k++) {
		if (sd_reduce_set_isa(isas[k]) != 0) {
			printf("sd_reduce %s: not compiled in or not supported by this CPU, "
			       "skipped\n", isas[k]);
			continue;
		}
		printf("sd_reduce %s: every dtype x op against the reference "
		       "(float32/float64 within 2*nsrc*epsilon relative; fp16/bf16 exact: "
		       "float accumulation left to right, one rounding to nearest even):\n",
		       isas[k]);
		test_reduce(&b);
		test_special16(&b);
		tested++;
	}
	sd_reduce_set_isa(NULL);
	for (int j = 0; j < MAXSRC; j++) {
		free(b.src[j]);
		free(b.orig[j]);
	}
	free(b.work);
	free(b.exp);
	if (!tested) {
		printf("no sd_reduce implementation could be selected\n");
		failures++;
	}
	printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
	return failures ? 1 : 0;
}
