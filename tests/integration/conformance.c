/* conformance.c - every collective x dtype x op x count x placement, checked against an independent reference.
 *
 * Run under smddp-run with any number of ranks.  Each rank's input element i
 * is a pure function of (rank, i, dtype, op, collective), so every rank can
 * compute what every other rank sent and derive the expected result on its
 * own: float64 for floating types, exact wrapped arithmetic for integers.  No
 * library code (nor lib/util/sd.h) is used to compute a reference: fp16 and
 * bf16 conversions are written here.
 *
 * Tolerances (documented in the failure lines as well):
 *   integers          exact, two's complement wrapping; AVG = wrapped sum / n,
 *                     truncated toward zero (C division)
 *   float16, bfloat16 within 1 ulp of the float64 reference rounded to
 *                     nearest even; MIN and MAX exact
 *   float32           |got - ref| <= 1e-5 * sum(|x_r|)  (PROD: 1e-5 * |ref|)
 *   float64           |got - ref| <= 1e-12 * sum(|x_r|) (PROD: 1e-12 * |ref|)
 *   MIN, MAX and every data-movement collective: bit exact.
 * Inputs: integers cover the whole range (sums and products overflow and must
 * wrap) with every fourth element small; floats for SUM and AVG mix small
 * integers (exact results) with full-mantissa values in a range where the sum
 * of eight is exact in float; PROD uses values near 1; MIN/MAX use normal
 * values of the type (no NaN, no zero, whose sign would be ambiguous).
 *
 * Every output buffer has guard bytes on both sides, and the not-yet-written
 * part of it is poisoned; out-of-place send buffers must come back unchanged.
 * Buffers are aligned to 32 bytes, or off it by 8, 16 or 24, in turn.
 *
 * --threads runs the matrix on the world and, at the same time from a second
 * thread, on a copy of it made by smddp_comm_split (distinct communicators
 * may be used from distinct threads).
 *
 * --lifecycle instead checks that split/destroy cycles leak no descriptor or
 * mapping, and that smddp_init works again after the world was destroyed.
 *
 * --signals runs it all under a SIGALRM every 200 us (handler without
 * SA_RESTART): interrupted waits must resume, not fail.
 *
 * --reuse N runs N rounds of every collective on 512 KiB per rank, wiping the
 * send buffer the moment each call returns (instead of the matrix).
 *
 * Usage: conformance [--large N] [--counts a,b,c] [--skip-split] [--threads] [--lifecycle]
 *                    [--signals] [--reuse N] [--verbose]
 * Exit status: 0 all passed, 1 a check failed, 2 usage error.
 */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <smddp/smddp.h>

#define GUARD 64
#define MAX_SHOWN 5      /* wrong elements printed per failing case */
#define MAX_FAILED 30    /* failing cases printed in all */
#define MAX_COUNTS 16

enum coll {
	C_ALLREDUCE,
	C_ALLGATHER,
	C_REDUCE_SCATTER,
	C_BROADCAST,
	C_REDUCE,
	C_ALLTOALL,
	C_BARRIER,
	C_SPLIT
};
static const char *const coll_names[] = {"allreduce", "allgather", "reduce_scatter", "broadcast",
					 "reduce",    "alltoall",  "barrier",        "split"};
static const char *const dtype_names[] = {"int8",    "uint8",    "int32",   "uint32",  "int64",
					  "uint64",  "float16",  "bfloat16", "float32", "float64"};
static const size_t dtype_sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};
static const char *const rc_names[] = {
	"SMDDP_OK",	    "SMDDP_EINVAL",   "SMDDP_ENOMEM",	  "SMDDP_ESYSTEM", "SMDDP_ETIMEDOUT",
	"SMDDP_EPEER",	    "SMDDP_EMISMATCH", "SMDDP_EUNSUPPORTED", "SMDDP_ECUDA",  "SMDDP_ENETWORK",
	"SMDDP_EABORTED",   "SMDDP_ECONFIG",  "SMDDP_EINTERNAL"};

static int world_rank = -1;
/* per thread: --threads runs two matrices at once on two communicators */
static __thread long n_pass, n_fail, n_skip;
static __thread double lib_s; /* seconds spent inside the collectives under test */
static double now_s(void);
#define LIBCALL(call)                                                               \
	({                                                                          \
		double t_ = now_s();                                                \
		int r_ = (call);                                                    \
		lib_s += now_s() - t_;                                              \
		r_;                                                                 \
	})
static int verbose;

static const char *rc_name(int rc)
{
	return rc >= 0 && rc <= SMDDP_EINTERNAL ? rc_names[rc] : "unknown result";
}

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

static void tables_init(void)
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
static void self_test(void)
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

static int is_float(int dt) { return dt >= SMDDP_FLOAT16; }
static int is_signed_int(int dt) { return dt == SMDDP_INT8 || dt == SMDDP_INT32 || dt == SMDDP_INT64; }
static int int_bits(int dt) { return (int)dtype_sizes[dt] * 8; }

static uint64_t load_bits(const void *buf, size_t i, int dt)
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

static void store_bits(void *buf, size_t i, int dt, uint64_t v)
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

static void small_init(void)
{
	int k;

	for (k = 0; k < 17; k++) {
		small_half[k] = d_to_half(k - 8);
		small_bf16[k] = d_to_bf16(k - 8);
	}
}

/* The input value (its bit pattern) of element i on rank r for a reduction. */
static uint64_t red_input(int r, size_t i, int dt, int op, int coll, int salt)
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
static uint64_t move_input(int r, size_t i, int dt, int coll, int salt)
{
	return mask_bits(hval(r, i, dt, 7, coll, salt), dt);
}

/* ---- reference ------------------------------------------------------------ */

struct expect {
	uint64_t bits; /* exact expected bits (integers, MIN, MAX) or correctly rounded */
	double ref;    /* float64 reference */
	double tol;    /* absolute tolerance for float32 and float64 */
};

/* CONFORMANCE_PER_HOST is set: the ranks are on several hosts. */
static int multi_host;

/* Expected value of element i of op over ranks ranks[0..n-1] (world ranks
 * that provide inputs, with avg_n the divisor). */
static struct expect red_expect(const int *ranks, int n, size_t i, int dt, int op, int coll,
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
static int red_match(uint64_t got, const struct expect *e, int dt, int op)
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

static void fmt_val(char *s, size_t n, uint64_t bits, int dt)
{
	if (is_float(dt))
		snprintf(s, n, "%.17g (0x%llx)", bits_to_d(bits, dt), (unsigned long long)bits);
	else if (is_signed_int(dt))
		snprintf(s, n, "%lld", (long long)as_signed(bits, dt));
	else
		snprintf(s, n, "%llu", (unsigned long long)mask_bits(bits, dt));
}

/* ---- buffers with guards -------------------------------------------------- */

struct gbuf {
	unsigned char *base; /* front guard bytes, then len bytes, then GUARD bytes */
	size_t len, front;
};

static unsigned char guard_byte(size_t k) { return (unsigned char)(0xa5 ^ (k * 29)); }
static unsigned char poison_byte(size_t k) { return (unsigned char)(0x5a ^ (k * 13)); }

/* Buffers start 0, 8, 16 or 24 bytes past a 32-byte boundary in turn (any
 * element stays aligned to its size): vector code must cope with each, and
 * send and receive buffers are rarely aligned alike. */
static __thread unsigned n_allocs;

static void gbuf_alloc(struct gbuf *b, size_t len)
{
	size_t k;
	unsigned char *p;

	b->len = len;
	b->base = aligned_alloc(64, (len + 2 * GUARD + 24 + 63) / 64 * 64);
	if (!b->base) {
		fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", world_rank, len);
		exit(1);
	}
	b->front = GUARD + 8 * (n_allocs++ % 4);
	for (k = 0; k < b->front; k++)
		b->base[k] = guard_byte(k);
	p = b->base + b->front;
	for (k = 0; k < GUARD; k++)
		p[len + k] = guard_byte(k + GUARD);
	for (k = 0; k < len; k++)
		p[k] = poison_byte(k);
}

static void *gbuf_ptr(struct gbuf *b) { return b->base + b->front; }

static void gbuf_free(struct gbuf *b)
{
	free(b->base);
	b->base = NULL;
}

/* ---- case bookkeeping ----------------------------------------------------- */

struct kase {
	const char *comm_name;
	int coll, dt, op, root, inplace;
	size_t count;
	int nbad;
};

static void case_begin(struct kase *k, const char *comm_name, int coll, int dt, int op, int root,
		       int inplace, size_t count)
{
	k->comm_name = comm_name;
	k->coll = coll;
	k->dt = dt;
	k->op = op;
	k->root = root;
	k->inplace = inplace;
	k->count = count;
	k->nbad = 0;
}

static const char *place_name(int inplace)
{
	static const char *const n[] = {"out-of-place", "in-place", "in-place(recv=send+rank*count)"};
	return n[inplace];
}

static void case_desc(const struct kase *k, char *s, size_t n)
{
	char root[32] = "";

	if (k->coll == C_BROADCAST || k->coll == C_REDUCE)
		snprintf(root, sizeof(root), " root %d", k->root);
	snprintf(s, n, "%s %s dtype %s%s%s count %zu%s %s", k->comm_name, coll_names[k->coll],
		 k->dt >= 0 ? dtype_names[k->dt] : "-", k->op >= 0 ? " op " : "",
		 k->op >= 0 ? op_names[k->op] : "", k->count, root, place_name(k->inplace));
}

static void bad(struct kase *k, const char *fmt, ...)
{
	char desc[256], msg[512];
	va_list ap;

	if (k->nbad == 0)
		n_fail++;
	k->nbad++;
	if (k->nbad > MAX_SHOWN || n_fail > MAX_FAILED)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	case_desc(k, desc, sizeof(desc));
	printf("FAIL rank %d: %s: %s\n", world_rank, desc, msg);
	fflush(stdout);
}

static void case_end(struct kase *k)
{
	if (k->nbad == 0) {
		n_pass++;
		if (verbose) {
			char desc[256];
			case_desc(k, desc, sizeof(desc));
			printf("ok rank %d: %s\n", world_rank, desc);
		}
	} else if (k->nbad > MAX_SHOWN && n_fail <= MAX_FAILED) {
		printf("FAIL rank %d: ... %d wrong elements in all in this case\n", world_rank, k->nbad);
	}
}

/* A call failed: the communicator is unusable from here on, so stop. */
static void die_rc(struct kase *k, int rc, struct smddp_comm *comm)
{
	char desc[256];

	case_desc(k, desc, sizeof(desc));
	printf("FAIL rank %d: %s: returned %s (%d): %s\n", world_rank, desc, rc_name(rc), rc,
	       smddp_last_error(comm));
	printf("SUMMARY rank %d: stopped after %ld passed, %ld failed\n", world_rank, n_pass,
	       n_fail + 1);
	fflush(stdout);
	exit(1);
}

static void check_guards(struct kase *k, struct gbuf *b, const char *which)
{
	unsigned char *p = b->base + b->front;
	size_t j;

	for (j = 0; j < b->front; j++) {
		if (b->base[j] != guard_byte(j)) {
			bad(k, "%s guard byte %zd before the buffer overwritten (0x%02x)", which,
			    (ssize_t)j - (ssize_t)b->front, b->base[j]);
			return;
		}
	}
	for (j = 0; j < GUARD; j++) {
		if (p[b->len + j] != guard_byte(j + GUARD)) {
			bad(k, "%s guard byte %zu after the end of the buffer overwritten (0x%02x)",
			    which, j, p[b->len + j]);
			return;
		}
	}
}

/* Bytes [from, to) of b still hold the poison. */
static void check_poison(struct kase *k, struct gbuf *b, size_t from, size_t to, const char *which)
{
	size_t j;

	for (j = from; j < to; j++) {
		if (b->base[b->front + j] != poison_byte(j)) {
			bad(k, "%s byte %zu was written but must not be", which, j);
			return;
		}
	}
}

/* ---- the communicator under test ---------------------------------------- */

struct group {
	struct smddp_comm *comm;
	const char *name;
	int rank, size;
	int ranks[1024]; /* world rank of each rank of comm: inputs are keyed by world rank */
};

/* ---- reductions ------------------------------------------------------------ */

static void fill_red(void *buf, size_t from, size_t n, int wr, int dt, int op, int coll, int salt)
{
	size_t i;

	for (i = 0; i < n; i++)
		store_bits(buf, i, dt, red_input(wr, from + i, dt, op, coll, salt));
}

/* Elements [0, n) of buf against the reduction reference for input indices first..first+n. */
static void check_red(struct kase *k, struct group *g, const void *buf, size_t first, size_t n,
		      int salt)
{
	size_t i;
	char gs[64], es[64];

	for (i = 0; i < n; i++) {
		uint64_t got = load_bits(buf, i, k->dt);
		struct expect e = red_expect(g->ranks, g->size, first + i, k->dt, k->op, k->coll, salt);
		if (!red_match(got, &e, k->dt, k->op)) {
			fmt_val(gs, sizeof(gs), got, k->dt);
			fmt_val(es, sizeof(es), e.bits, k->dt);
			if (is_float(k->dt) && k->op != SMDDP_MIN && k->op != SMDDP_MAX)
				bad(k, "index %zu: got %s, expected %s (float64 reference %.17g, %s)",
				    first + i, gs, es, e.ref,
				    k->dt <= SMDDP_BFLOAT16 && !multi_host ? "1 ulp allowed"
									  : "tolerance applied");
			else
				bad(k, "index %zu: got %s, expected %s (exact)", first + i, gs, es);
			if (k->nbad > MAX_SHOWN)
				return;
		}
	}
}

/* Send buffer unchanged after an out-of-place reduction. */
static void check_red_input(struct kase *k, struct group *g, const void *buf, size_t n, int salt)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (load_bits(buf, i, k->dt) !=
		    red_input(g->ranks[g->rank], i, k->dt, k->op, k->coll, salt)) {
			bad(k, "send buffer changed at index %zu", i);
			return;
		}
	}
}

static void t_allreduce(struct group *g, int dt, int op, size_t count, int inplace)
{
	size_t sz = dtype_sizes[dt], bytes = count * sz;
	struct gbuf sb, rb;
	struct kase k;
	int rc, wr = g->ranks[g->rank];

	case_begin(&k, g->name, C_ALLREDUCE, dt, op, -1, inplace, count);
	gbuf_alloc(&rb, bytes);
	if (inplace) {
		fill_red(gbuf_ptr(&rb), 0, count, wr, dt, op, C_ALLREDUCE, inplace);
		rc = LIBCALL(smddp_allreduce(gbuf_ptr(&rb), gbuf_ptr(&rb), count, dt, op, g->comm, NULL));
	} else {
		gbuf_alloc(&sb, bytes);
		fill_red(gbuf_ptr(&sb), 0, count, wr, dt, op, C_ALLREDUCE, inplace);
		rc = LIBCALL(smddp_allreduce(gbuf_ptr(&sb), gbuf_ptr(&rb), count, dt, op, g->comm, NULL));
	}
	if (rc != SMDDP_OK)
		die_rc(&k, rc, g->comm);
	check_red(&k, g, gbuf_ptr(&rb), 0, count, inplace);
	check_guards(&k, &rb, "recvbuf");
	if (!inplace) {
		check_red_input(&k, g, gbuf_ptr(&sb), count, inplace);
		check_guards(&k, &sb, "sendbuf");
		gbuf_free(&sb);
	}
	gbuf_free(&rb);
	case_end(&k);
}

/* inplace: 0 out of place, 1 sendbuf == recvbuf, 2 recvbuf == sendbuf + rank*count. */
static void t_reduce_scatter(struct group *g, int dt, int op, size_t count, int inplace)
{
	size_t sz = dtype_sizes[dt], n = (size_t)g->size;
	struct gbuf sb, rb;
	struct kase k;
	int rc, wr = g->ranks[g->rank];
	void *recv;

	case_begin(&k, g->name, C_REDUCE_SCATTER, dt, op, -1, inplace, count);
	gbuf_alloc(&sb, n * count * sz);
	fill_red(gbuf_ptr(&sb), 0, n * count, wr, dt, op, C_REDUCE_SCATTER, inplace);
	if (inplace) {
		recv = (char *)gbuf_ptr(&sb) + (inplace == 2 ? (size_t)g->rank * count * sz : 0);
		rc = LIBCALL(smddp_reduce_scatter(gbuf_ptr(&sb), recv, count, dt, op, g->comm, NULL));
		if (rc != SMDDP_OK)
			die_rc(&k, rc, g->comm);
		check_red(&k, g, recv, (size_t)g->rank * count, count, inplace);
		check_guards(&k, &sb, "sendbuf=recvbuf");
	} else {
		gbuf_alloc(&rb, count * sz);
		rc = LIBCALL(smddp_reduce_scatter(gbuf_ptr(&sb), gbuf_ptr(&rb), count, dt, op, g->comm,
					  NULL));
		if (rc != SMDDP_OK)
			die_rc(&k, rc, g->comm);
		check_red(&k, g, gbuf_ptr(&rb), (size_t)g->rank * count, count, inplace);
		check_guards(&k, &rb, "recvbuf");
		check_red_input(&k, g, gbuf_ptr(&sb), n * count, inplace);
		check_guards(&k, &sb, "sendbuf");
		gbuf_free(&rb);
	}
	gbuf_free(&sb);
	case_end(&k);
}

static void t_reduce(struct group *g, int dt, int op, size_t count, int root, int inplace)
{
	size_t sz = dtype_sizes[dt], bytes = count * sz;
	struct gbuf sb, rb;
	struct kase k;
	int rc, wr = g->ranks[g->rank];
	int salt = 2 * root + inplace + 1; /* fresh inputs every call: stale data cannot pass */

	case_begin(&k, g->name, C_REDUCE, dt, op, root, inplace, count);
	gbuf_alloc(&rb, bytes);
	if (inplace) {
		fill_red(gbuf_ptr(&rb), 0, count, wr, dt, op, C_REDUCE, salt);
		rc = LIBCALL(smddp_reduce(gbuf_ptr(&rb), gbuf_ptr(&rb), count, dt, op, root, g->comm, NULL));
	} else {
		gbuf_alloc(&sb, bytes);
		fill_red(gbuf_ptr(&sb), 0, count, wr, dt, op, C_REDUCE, salt);
		rc = LIBCALL(smddp_reduce(gbuf_ptr(&sb), gbuf_ptr(&rb), count, dt, op, root, g->comm, NULL));
	}
	if (rc != SMDDP_OK)
		die_rc(&k, rc, g->comm);
	if (g->rank == root) {
		check_red(&k, g, gbuf_ptr(&rb), 0, count, salt);
	} else if (inplace) {
		/* the buffer is this rank's input and is not an output here */
		check_red_input(&k, g, gbuf_ptr(&rb), count, salt);
	} else {
		check_poison(&k, &rb, 0, bytes, "non-root recvbuf");
	}
	check_guards(&k, &rb, "recvbuf");
	if (!inplace) {
		check_red_input(&k, g, gbuf_ptr(&sb), count, salt);
		check_guards(&k, &sb, "sendbuf");
		gbuf_free(&sb);
	}
	gbuf_free(&rb);
	case_end(&k);
}

/* ---- data movement ------------------------------------------------------- */

static void fill_move(void *buf, size_t from, size_t n, int wr, int dt, int coll, int salt)
{
	size_t i;

	for (i = 0; i < n; i++)
		store_bits(buf, i, dt, move_input(wr, from + i, dt, coll, salt));
}

/* Elements [0, n) of buf equal rank wr's input at first.. */
static void check_move(struct kase *k, const void *buf, size_t n, int wr, size_t first,
		       int salt, const char *what)
{
	size_t i;
	char gs[64], es[64];

	for (i = 0; i < n; i++) {
		uint64_t got = load_bits(buf, i, k->dt);
		uint64_t exp = move_input(wr, first + i, k->dt, k->coll, salt);
		if (got != exp) {
			fmt_val(gs, sizeof(gs), got, k->dt);
			fmt_val(es, sizeof(es), exp, k->dt);
			bad(k, "%s index %zu: got %s, expected %s (world rank %d's element %zu, bit exact)",
			    what, i, gs, es, wr, first + i);
			if (k->nbad > MAX_SHOWN)
				return;
		}
	}
}

static void t_allgather(struct group *g, int dt, size_t count, int inplace)
{
	size_t sz = dtype_sizes[dt], n = (size_t)g->size;
	struct gbuf sb, rb;
	struct kase k;
	int rc, r, wr = g->ranks[g->rank];
	char what[48];

	case_begin(&k, g->name, C_ALLGATHER, dt, -1, -1, inplace, count);
	gbuf_alloc(&rb, n * count * sz);
	if (inplace) {
		char *mine = (char *)gbuf_ptr(&rb) + (size_t)g->rank * count * sz;
		fill_move(mine, 0, count, wr, dt, C_ALLGATHER, inplace);
		rc = LIBCALL(smddp_allgather(mine, gbuf_ptr(&rb), count, dt, g->comm, NULL));
	} else {
		gbuf_alloc(&sb, count * sz);
		fill_move(gbuf_ptr(&sb), 0, count, wr, dt, C_ALLGATHER, inplace);
		rc = LIBCALL(smddp_allgather(gbuf_ptr(&sb), gbuf_ptr(&rb), count, dt, g->comm, NULL));
	}
	if (rc != SMDDP_OK)
		die_rc(&k, rc, g->comm);
	for (r = 0; r < g->size; r++) {
		snprintf(what, sizeof(what), "block %d", r);
		check_move(&k, (char *)gbuf_ptr(&rb) + (size_t)r * count * sz, count, g->ranks[r], 0,
			   inplace, what);
	}
	check_guards(&k, &rb, "recvbuf");
	if (!inplace) {
		check_move(&k, gbuf_ptr(&sb), count, wr, 0, inplace, "sendbuf (must be unchanged)");
		check_guards(&k, &sb, "sendbuf");
		gbuf_free(&sb);
	}
	gbuf_free(&rb);
	case_end(&k);
}

static void t_broadcast(struct group *g, int dt, size_t count, int root)
{
	size_t sz = dtype_sizes[dt];
	struct gbuf b;
	struct kase k;
	int rc;

	case_begin(&k, g->name, C_BROADCAST, dt, -1, root, 1, count);
	gbuf_alloc(&b, count * sz);
	if (g->rank == root)
		fill_move(gbuf_ptr(&b), 0, count, g->ranks[root], dt, C_BROADCAST, root);
	rc = LIBCALL(smddp_broadcast(gbuf_ptr(&b), count, dt, root, g->comm, NULL));
	if (rc != SMDDP_OK)
		die_rc(&k, rc, g->comm);
	check_move(&k, gbuf_ptr(&b), count, g->ranks[root], 0, root, "buf");
	check_guards(&k, &b, "buf");
	gbuf_free(&b);
	case_end(&k);
}

/* Rank r sends its elements [d*count, (d+1)*count) to rank d. */
static void t_alltoall(struct group *g, int dt, size_t count, int inplace)
{
	size_t sz = dtype_sizes[dt], n = (size_t)g->size;
	struct gbuf sb, rb;
	struct kase k;
	int rc, r, wr = g->ranks[g->rank];
	char what[48];

	case_begin(&k, g->name, C_ALLTOALL, dt, -1, -1, inplace, count);
	gbuf_alloc(&rb, n * count * sz);
	if (inplace) {
		fill_move(gbuf_ptr(&rb), 0, n * count, wr, dt, C_ALLTOALL, inplace);
		rc = LIBCALL(smddp_alltoall(gbuf_ptr(&rb), gbuf_ptr(&rb), count, dt, g->comm, NULL));
		if (rc == SMDDP_EINVAL || rc == SMDDP_EUNSUPPORTED) {
			/* The header does not promise in-place alltoall; refusing it is fine
			 * (the same on every rank), corrupting it is not. */
			if (g->rank == 0 && count == 1 && dt == 0)
				printf("note: in-place alltoall refused with %s: %s\n", rc_name(rc),
				       smddp_last_error(g->comm));
			n_skip++;
			gbuf_free(&rb);
			return;
		}
	} else {
		gbuf_alloc(&sb, n * count * sz);
		fill_move(gbuf_ptr(&sb), 0, n * count, wr, dt, C_ALLTOALL, inplace);
		rc = LIBCALL(smddp_alltoall(gbuf_ptr(&sb), gbuf_ptr(&rb), count, dt, g->comm, NULL));
	}
	if (rc != SMDDP_OK)
		die_rc(&k, rc, g->comm);
	for (r = 0; r < g->size; r++) {
		snprintf(what, sizeof(what), "block from rank %d", r);
		check_move(&k, (char *)gbuf_ptr(&rb) + (size_t)r * count * sz, count, g->ranks[r],
			   (size_t)g->rank * count, inplace, what);
	}
	check_guards(&k, &rb, "recvbuf");
	if (!inplace) {
		check_move(&k, gbuf_ptr(&sb), n * count, wr, 0, inplace, "sendbuf (must be unchanged)");
		check_guards(&k, &sb, "sendbuf");
		gbuf_free(&sb);
	}
	gbuf_free(&rb);
	case_end(&k);
}

/* ---- barrier ---------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* one clock for every process of the host */
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Nobody may leave a barrier before the last rank entered it. */
static void t_barrier(struct group *g, int late_rank)
{
	struct kase k;
	double t[2], *all;
	int rc, r;
	double last_in = 0;

	case_begin(&k, g->name, C_BARRIER, -1, -1, late_rank, 0, 0);
	if (g->rank == late_rank)
		usleep(150 * 1000);
	t[0] = now_s();
	rc = smddp_barrier(g->comm);
	t[1] = now_s();
	if (rc != SMDDP_OK)
		die_rc(&k, rc, g->comm);
	all = calloc((size_t)g->size * 2, sizeof(double));
	rc = LIBCALL(smddp_allgather(t, all, 2, SMDDP_FLOAT64, g->comm, NULL));
	if (rc != SMDDP_OK)
		die_rc(&k, rc, g->comm);
	for (r = 0; r < g->size; r++)
		if (all[2 * r] > last_in)
			last_in = all[2 * r];
	for (r = 0; r < g->size; r++)
		if (all[2 * r + 1] < last_in)
			bad(&k, "rank %d left the barrier %.6f s before rank %d entered it", r,
			    last_in - all[2 * r + 1], late_rank);
	free(all);
	case_end(&k);
}

/* ---- the matrix --------------------------------------------------------------- */

struct plan {
	size_t counts[MAX_COUNTS];
	int ncounts;
	int all_roots; /* every root, else 0 and size-1 */
	int dtypes_mask, ops_mask;
};

static void run_matrix(struct group *g, const struct plan *p)
{
	int c, dt, op, root, ip;

	for (c = 0; c < p->ncounts; c++) {
		size_t count = p->counts[c];
		double t0 = now_s();
		long pass0 = n_pass;

		for (dt = 0; dt < SMDDP_NUM_DTYPES; dt++) {
			if (!(p->dtypes_mask >> dt & 1))
				continue;
			for (op = 0; op < SMDDP_NUM_OPS; op++) {
				if (!(p->ops_mask >> op & 1))
					continue;
				for (ip = 0; ip < 2; ip++)
					t_allreduce(g, dt, op, count, ip);
				for (ip = 0; ip < 3; ip++)
					t_reduce_scatter(g, dt, op, count, ip);
				for (root = 0; root < g->size; root++) {
					if (!p->all_roots && root != 0 && root != g->size - 1)
						continue;
					for (ip = 0; ip < 2; ip++)
						t_reduce(g, dt, op, count, root, ip);
				}
			}
			for (ip = 0; ip < 2; ip++)
				t_allgather(g, dt, count, ip);
			for (root = 0; root < g->size; root++)
				if (p->all_roots || root == 0 || root == g->size - 1)
					t_broadcast(g, dt, count, root);
			for (ip = 0; ip < 2; ip++)
				t_alltoall(g, dt, count, ip);
		}
		if (g->rank == 0)
			printf("%s: count %zu: %ld cases in %.2f s\n", g->name, count, n_pass - pass0,
			       now_s() - t0);
		fflush(stdout);
	}
	t_barrier(g, g->size - 1);
	t_barrier(g, 0);
}

/* ---- API surface: names, versions, argument errors ---------------------------- */

static void check_true(const char *what, int ok, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!ok) {
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		n_fail++;
		printf("FAIL rank %d: %s: %s\n", world_rank, what, msg);
	} else {
		n_pass++;
	}
}

static void expect_rc(const char *what, int got, int want, struct smddp_comm *comm)
{
	check_true(what, got == want, "returned %s (%d), expected %s; last error: %s",
		   rc_name(got), got, rc_name(want), smddp_last_error(comm));
	if (got == want && want != SMDDP_OK && comm) {
		const char *e = smddp_last_error(comm);
		check_true(what, e && *e, "smddp_last_error() is empty after %s", rc_name(want));
	}
}

static void t_api_local(void)
{
	char buf[32];
	int rc, j;
	const char *v = smddp_version();

	check_true("smddp_version", v && *v, "empty or NULL");
	snprintf(buf, sizeof(buf), "%d.%d.%d", SMDDP_VERSION_MAJOR, SMDDP_VERSION_MINOR,
		 SMDDP_VERSION_PATCH);
	check_true("smddp_version", v && strcmp(v, buf) == 0, "\"%s\" but the header says %s",
		   v ? v : "(null)", buf);
	for (rc = 0; rc <= SMDDP_EINTERNAL; rc++) {
		const char *s = smddp_strerror(rc);
		check_true("smddp_strerror", s && *s, "empty or NULL for %s", rc_name(rc));
		for (j = 0; j < rc && s; j++)
			check_true("smddp_strerror", strcmp(s, smddp_strerror(j)) != 0,
				   "%s and %s share the text \"%s\"", rc_name(rc), rc_name(j), s);
	}
	check_true("smddp_strerror", smddp_strerror(99) != NULL, "NULL for 99");
	check_true("smddp_strerror", smddp_strerror(-1) != NULL, "NULL for -1");
	for (j = 0; j < SMDDP_NUM_DTYPES; j++) {
		check_true("smddp_dtype_size", smddp_dtype_size(j) == dtype_sizes[j],
			   "%zu for %s", smddp_dtype_size(j), dtype_names[j]);
		check_true("smddp_dtype_name",
			   smddp_dtype_name(j) && !strcmp(smddp_dtype_name(j), dtype_names[j]),
			   "wrong name for %s", dtype_names[j]);
	}
	check_true("smddp_dtype_size", smddp_dtype_size(99) == 0, "nonzero for 99");
	check_true("smddp_dtype_name", smddp_dtype_name(99) == NULL, "non-NULL for 99");
	for (j = 0; j < SMDDP_NUM_OPS; j++)
		check_true("smddp_op_name", smddp_op_name(j) && !strcmp(smddp_op_name(j), op_names[j]),
			   "wrong name for %s", op_names[j]);
	check_true("smddp_op_name", smddp_op_name(99) == NULL, "non-NULL for 99");
}

/* Every call below fails the same way on every rank, so nothing may hang. */
static void t_arg_errors(struct group *g)
{
	struct smddp_comm *c = g->comm;
	int n = g->size, x[64] = {0}, y[64 * 8] = {0}, rc;
	void *stream = (void *)&x; /* any non-NULL pointer: not a CUDA stream */

	expect_rc("allreduce NULL comm", smddp_allreduce(x, y, 4, SMDDP_INT32, SMDDP_SUM, NULL, NULL),
		  SMDDP_EINVAL, NULL);
	expect_rc("allgather NULL comm", smddp_allgather(x, y, 4, SMDDP_INT32, NULL, NULL),
		  SMDDP_EINVAL, NULL);
	expect_rc("reduce_scatter NULL comm",
		  smddp_reduce_scatter(x, y, 4, SMDDP_INT32, SMDDP_SUM, NULL, NULL), SMDDP_EINVAL, NULL);
	expect_rc("broadcast NULL comm", smddp_broadcast(x, 4, SMDDP_INT32, 0, NULL, NULL),
		  SMDDP_EINVAL, NULL);
	expect_rc("reduce NULL comm", smddp_reduce(x, y, 4, SMDDP_INT32, SMDDP_SUM, 0, NULL, NULL),
		  SMDDP_EINVAL, NULL);
	expect_rc("alltoall NULL comm", smddp_alltoall(x, y, 4, SMDDP_INT32, NULL, NULL),
		  SMDDP_EINVAL, NULL);
	expect_rc("barrier NULL comm", smddp_barrier(NULL), SMDDP_EINVAL, NULL);
	expect_rc("split NULL comm", smddp_comm_split(NULL, 0, 0, &c), SMDDP_EINVAL, NULL);
	expect_rc("destroy NULL comm", smddp_comm_destroy(NULL), SMDDP_EINVAL, NULL);
	c = g->comm;

	expect_rc("allreduce dtype 99", smddp_allreduce(x, y, 4, 99, SMDDP_SUM, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("allreduce op 99", smddp_allreduce(x, y, 4, SMDDP_INT32, 99, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("allreduce dtype -1", smddp_allreduce(x, y, 4, -1, SMDDP_SUM, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("allgather dtype 99", smddp_allgather(x, y, 4, 99, c, NULL), SMDDP_EINVAL, c);
	expect_rc("reduce_scatter dtype 99",
		  smddp_reduce_scatter(y, x, 4, 99, SMDDP_SUM, c, NULL), SMDDP_EINVAL, c);
	expect_rc("reduce_scatter op 99",
		  smddp_reduce_scatter(y, x, 4, SMDDP_INT32, 99, c, NULL), SMDDP_EINVAL, c);
	expect_rc("broadcast dtype 99", smddp_broadcast(x, 4, 99, 0, c, NULL), SMDDP_EINVAL, c);
	expect_rc("reduce dtype 99", smddp_reduce(x, y, 4, 99, SMDDP_SUM, 0, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("reduce op 99", smddp_reduce(x, y, 4, SMDDP_INT32, 99, 0, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("alltoall dtype 99", smddp_alltoall(y, y + 32, 4, 99, c, NULL), SMDDP_EINVAL, c);

	expect_rc("broadcast root = size", smddp_broadcast(x, 4, SMDDP_INT32, n, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("broadcast root -1", smddp_broadcast(x, 4, SMDDP_INT32, -1, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("reduce root = size", smddp_reduce(x, y, 4, SMDDP_INT32, SMDDP_SUM, n, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("reduce root -1", smddp_reduce(x, y, 4, SMDDP_INT32, SMDDP_SUM, -1, c, NULL),
		  SMDDP_EINVAL, c);

	expect_rc("allreduce NULL sendbuf",
		  smddp_allreduce(NULL, y, 4, SMDDP_INT32, SMDDP_SUM, c, NULL), SMDDP_EINVAL, c);
	expect_rc("allreduce NULL recvbuf",
		  smddp_allreduce(x, NULL, 4, SMDDP_INT32, SMDDP_SUM, c, NULL), SMDDP_EINVAL, c);
	expect_rc("allgather NULL sendbuf", smddp_allgather(NULL, y, 4, SMDDP_INT32, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("allgather NULL recvbuf", smddp_allgather(x, NULL, 4, SMDDP_INT32, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("reduce_scatter NULL sendbuf",
		  smddp_reduce_scatter(NULL, x, 4, SMDDP_INT32, SMDDP_SUM, c, NULL), SMDDP_EINVAL, c);
	expect_rc("reduce_scatter NULL recvbuf",
		  smddp_reduce_scatter(y, NULL, 4, SMDDP_INT32, SMDDP_SUM, c, NULL), SMDDP_EINVAL, c);
	expect_rc("broadcast NULL buf", smddp_broadcast(NULL, 4, SMDDP_INT32, 0, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("reduce NULL sendbuf",
		  smddp_reduce(NULL, y, 4, SMDDP_INT32, SMDDP_SUM, 0, c, NULL), SMDDP_EINVAL, c);
	expect_rc("alltoall NULL sendbuf", smddp_alltoall(NULL, y, 4, SMDDP_INT32, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("alltoall NULL recvbuf", smddp_alltoall(y, NULL, 4, SMDDP_INT32, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("split NULL out", smddp_comm_split(c, 0, 0, NULL), SMDDP_EINVAL, c);

	expect_rc("allreduce stream", smddp_allreduce(x, y, 4, SMDDP_INT32, SMDDP_SUM, c, stream),
		  SMDDP_EUNSUPPORTED, c);
	expect_rc("allgather stream", smddp_allgather(x, y, 4, SMDDP_INT32, c, stream),
		  SMDDP_EUNSUPPORTED, c);
	expect_rc("reduce_scatter stream",
		  smddp_reduce_scatter(y, x, 4, SMDDP_INT32, SMDDP_SUM, c, stream),
		  SMDDP_EUNSUPPORTED, c);
	expect_rc("broadcast stream", smddp_broadcast(x, 4, SMDDP_INT32, 0, c, stream),
		  SMDDP_EUNSUPPORTED, c);
	expect_rc("reduce stream", smddp_reduce(x, y, 4, SMDDP_INT32, SMDDP_SUM, 0, c, stream),
		  SMDDP_EUNSUPPORTED, c);
	expect_rc("alltoall stream", smddp_alltoall(y, y + 32, 4, SMDDP_INT32, c, stream),
		  SMDDP_EUNSUPPORTED, c);

	/* What is allowed: NULL buffers with count 0 (an empty tensor's data
	 * pointer), a NULL recvbuf on the ranks that are not reduce's root, and
	 * a NULL communicator for the rank and size queries (-1). */
	expect_rc("allreduce NULL count 0", smddp_allreduce(NULL, NULL, 0, SMDDP_FLOAT32, SMDDP_SUM, c,
							  NULL), SMDDP_OK, c);
	expect_rc("allgather NULL count 0", smddp_allgather(NULL, NULL, 0, SMDDP_FLOAT32, c, NULL),
		  SMDDP_OK, c);
	expect_rc("reduce_scatter NULL count 0",
		  smddp_reduce_scatter(NULL, NULL, 0, SMDDP_FLOAT32, SMDDP_SUM, c, NULL), SMDDP_OK, c);
	expect_rc("broadcast NULL count 0", smddp_broadcast(NULL, 0, SMDDP_FLOAT32, 0, c, NULL),
		  SMDDP_OK, c);
	expect_rc("reduce NULL count 0", smddp_reduce(NULL, NULL, 0, SMDDP_FLOAT32, SMDDP_SUM, 0, c,
						      NULL), SMDDP_OK, c);
	expect_rc("alltoall NULL count 0", smddp_alltoall(NULL, NULL, 0, SMDDP_FLOAT32, c, NULL),
		  SMDDP_OK, c);
	x[0] = g->rank + 1;
	y[0] = -1;
	rc = smddp_reduce(x, g->rank == n - 1 ? y : NULL, 1, SMDDP_INT32, SMDDP_SUM, n - 1, c, NULL);
	expect_rc("reduce with a NULL recvbuf off the root", rc, SMDDP_OK, c);
	if (g->rank == n - 1)
		check_true("reduce with a NULL recvbuf off the root", rc != SMDDP_OK ||
			   y[0] == n * (n + 1) / 2, "got %d, expected %d", y[0], n * (n + 1) / 2);
	check_true("smddp_comm_rank(NULL)", smddp_comm_rank(NULL) == -1, "%d", smddp_comm_rank(NULL));
	check_true("smddp_comm_size(NULL)", smddp_comm_size(NULL) == -1, "%d", smddp_comm_size(NULL));
	check_true("smddp_comm_local_rank(NULL)", smddp_comm_local_rank(NULL) == -1, "%d",
		   smddp_comm_local_rank(NULL));
	check_true("smddp_comm_local_size(NULL)", smddp_comm_local_size(NULL) == -1, "%d",
		   smddp_comm_local_size(NULL));

	/* None of the above may have broken the communicator. */
	x[0] = g->rank + 1;
	rc = smddp_allreduce(x, y, 1, SMDDP_INT32, SMDDP_SUM, c, NULL);
	expect_rc("allreduce after argument errors", rc, SMDDP_OK, c);
	check_true("allreduce after argument errors", rc != SMDDP_OK || y[0] == n * (n + 1) / 2,
		   "got %d, expected %d", y[0], n * (n + 1) / 2);
	if (rc != SMDDP_OK) {
		printf("SUMMARY rank %d: stopped: communicator unusable after argument errors\n",
		       world_rank);
		exit(1);
	}
}

/* ---- sub-communicators ------------------------------------------------------ */

static void check_group_identity(struct group *g)
{
	char what[96];

	snprintf(what, sizeof(what), "%s rank/size", g->name);
	check_true(what, smddp_comm_rank(g->comm) == g->rank, "rank %d, expected %d",
		   smddp_comm_rank(g->comm), g->rank);
	check_true(what, smddp_comm_size(g->comm) == g->size, "size %d, expected %d",
		   smddp_comm_size(g->comm), g->size);
	/* One host, unless CONFORMANCE_PER_HOST says that world rank w runs
	 * on host w / CONFORMANCE_PER_HOST (tests of several hosts). */
	const char *ph = getenv("CONFORMANCE_PER_HOST");
	int per = ph && atoi(ph) > 0 ? atoi(ph) : 1 << 30, lrank = 0, lsize = 0;
	int host = g->ranks[g->rank] / per;

	for (int i = 0; i < g->size; i++) {
		if (g->ranks[i] / per != host)
			continue;
		lrank += i < g->rank;
		lsize++;
	}
	check_true(what, smddp_comm_local_rank(g->comm) == lrank, "local rank %d, expected %d",
		   smddp_comm_local_rank(g->comm), lrank);
	check_true(what, smddp_comm_local_size(g->comm) == lsize, "local size %d, expected %d",
		   smddp_comm_local_size(g->comm), lsize);
}

/* The order of a group: allgather of world ranks must list g->ranks. */
static void check_group_order(struct group *g)
{
	int32_t mine = world_rank, *all = calloc((size_t)g->size, 4);
	int rc, r;
	char what[96];

	snprintf(what, sizeof(what), "%s order (allgather of world ranks)", g->name);
	rc = LIBCALL(smddp_allgather(&mine, all, 1, SMDDP_INT32, g->comm, NULL));
	check_true(what, rc == SMDDP_OK, "returned %s: %s", rc_name(rc), smddp_last_error(g->comm));
	if (rc != SMDDP_OK)
		exit(1);
	for (r = 0; r < g->size; r++)
		check_true(what, all[r] == g->ranks[r], "position %d holds world rank %d, expected %d",
			   r, all[r], g->ranks[r]);
	free(all);
}

static void sub_matrix(struct group *g, const struct plan *full)
{
	struct plan p = *full;

	p.ncounts = 2;
	p.counts[0] = 7;
	p.counts[1] = 1001;
	p.all_roots = 1;
	p.ops_mask = 1 << SMDDP_SUM | 1 << SMDDP_MAX | 1 << SMDDP_AVG;
	check_group_identity(g);
	check_group_order(g);
	run_matrix(g, &p);
}

static void t_split(struct group *w, const struct plan *full)
{
	struct group *s = calloc(1, sizeof(*s));
	struct smddp_comm *out = (struct smddp_comm *)&out;
	int rc, r, n;
	struct kase k;

	/* even/odd, key reversing the order */
	case_begin(&k, "world", C_SPLIT, -1, -1, -1, 0, 0);
	rc = smddp_comm_split(w->comm, world_rank % 2, -world_rank, &s->comm);
	if (rc != SMDDP_OK)
		die_rc(&k, rc, w->comm);
	s->name = world_rank % 2 ? "split-odd-reversed" : "split-even-reversed";
	for (r = w->size - 1, n = 0; r >= 0; r--)
		if (r % 2 == world_rank % 2) {
			if (r == world_rank)
				s->rank = n;
			s->ranks[n++] = r;
		}
	s->size = n;
	sub_matrix(s, full);
	/* the world still works beside its child */
	t_allreduce(w, SMDDP_FLOAT32, SMDDP_SUM, 1001, 0);
	t_allreduce(s, SMDDP_INT64, SMDDP_SUM, 7, 1);
	rc = smddp_comm_destroy(s->comm);
	check_true("destroy split-even/odd", rc == SMDDP_OK, "returned %s: %s", rc_name(rc),
		   smddp_last_error(NULL));

	/* rank 0 out (color -1): NULL for it, everyone else in rank order */
	rc = smddp_comm_split(w->comm, world_rank == 0 ? -1 : 3, 0, &out);
	if (rc != SMDDP_OK)
		die_rc(&k, rc, w->comm);
	if (world_rank == 0) {
		check_true("split color -1", out == NULL, "*out is %p, expected NULL", (void *)out);
	} else {
		memset(s, 0, sizeof(*s));
		s->comm = out;
		s->name = "split-without-rank-0";
		s->size = w->size - 1;
		s->rank = world_rank - 1;
		for (r = 1; r < w->size; r++)
			s->ranks[r - 1] = r;
		check_true("split color -1 (others)", out != NULL, "*out is NULL");
		if (out) {
			check_group_identity(s);
			check_group_order(s);
			t_allreduce(s, SMDDP_INT8, SMDDP_SUM, 1001, 0);
			t_allreduce(s, SMDDP_BFLOAT16, SMDDP_AVG, 7, 1);
			t_broadcast(s, SMDDP_UINT64, 7, s->size - 1);
			rc = smddp_comm_destroy(out);
			check_true("destroy split-without-rank-0", rc == SMDDP_OK, "returned %s: %s",
				   rc_name(rc), smddp_last_error(NULL));
		}
	}

	/* one color, same key: a copy of the world */
	rc = smddp_comm_split(w->comm, 0, 0, &out);
	if (rc != SMDDP_OK)
		die_rc(&k, rc, w->comm);
	memset(s, 0, sizeof(*s));
	s->comm = out;
	s->name = "split-copy";
	s->size = w->size;
	s->rank = world_rank;
	for (r = 0; r < w->size; r++)
		s->ranks[r] = r;
	check_group_identity(s);
	check_group_order(s);
	t_reduce(s, SMDDP_FLOAT16, SMDDP_SUM, 1001, s->size - 1, 0);
	rc = smddp_comm_destroy(out);
	check_true("destroy split-copy", rc == SMDDP_OK, "returned %s: %s", rc_name(rc),
		   smddp_last_error(NULL));
	free(s);
}

/* ---- two communicators from two threads -------------------------------------- */

struct thread_run {
	struct group *g;
	const struct plan *p;
	long pass, fail, skip;
	double lib;
};

static void *thread_main(void *arg)
{
	struct thread_run *t = arg;

	run_matrix(t->g, t->p);
	t->pass = n_pass;
	t->fail = n_fail;
	t->skip = n_skip;
	t->lib = lib_s;
	return NULL;
}

static void t_threads(struct group *w, const struct plan *p)
{
	struct group *c = calloc(1, sizeof(*c));
	struct thread_run t = {c, p, 0, 0, 0, 0};
	struct kase k;
	pthread_t th;
	int rc, r;

	case_begin(&k, "world", C_SPLIT, -1, -1, -1, 0, 0);
	rc = smddp_comm_split(w->comm, 0, 0, &c->comm);
	if (rc != SMDDP_OK)
		die_rc(&k, rc, w->comm);
	c->name = "copy-in-thread";
	c->size = w->size;
	c->rank = w->rank;
	for (r = 0; r < w->size; r++)
		c->ranks[r] = r;
	if (pthread_create(&th, NULL, thread_main, &t) != 0) {
		printf("FAIL rank %d: pthread_create failed\n", world_rank);
		exit(1);
	}
	run_matrix(w, p);
	pthread_join(th, NULL);
	n_pass += t.pass;
	n_fail += t.fail;
	n_skip += t.skip;
	lib_s += t.lib;
	rc = smddp_comm_destroy(c->comm);
	check_true("destroy copy-in-thread", rc == SMDDP_OK, "returned %s: %s", rc_name(rc),
		   smddp_last_error(NULL));
	free(c);
}

/* ---- lifecycle: no leak across communicators, init again after destroy ------- */

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own descriptor */
}

static int count_shm_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[1024];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "/dev/shm/"))
			n++;
	fclose(f);
	return n;
}

static struct group *world_group(struct smddp_comm *c, const char *name)
{
	struct group *g = calloc(1, sizeof(*g));
	int r;

	g->comm = c;
	g->name = name;
	g->rank = smddp_comm_rank(c);
	g->size = smddp_comm_size(c);
	for (r = 0; r < g->size; r++)
		g->ranks[r] = r;
	return g;
}

/* 30 split/use/destroy cycles leave the descriptors and mappings as they
 * were; after destroying the world, smddp_init works again in the same
 * process, and the second world works. */
static int t_lifecycle(void)
{
	struct smddp_comm *c;
	struct group *w, *s;
	int fds0 = count_fds(), fds1, maps1, rc, i, size;
	char what[64];

	rc = smddp_init(&c);
	if (rc != SMDDP_OK) {
		printf("FAIL: smddp_init returned %s: %s\n", rc_name(rc), smddp_last_error(NULL));
		return 1;
	}
	w = world_group(c, "world");
	world_rank = w->rank;
	size = w->size;
	t_allreduce(w, SMDDP_FLOAT32, SMDDP_SUM, 1001, 0);
	fds1 = count_fds();
	maps1 = count_shm_maps();
	for (i = 0; i < 30; i++) {
		struct smddp_comm *sc = NULL;
		struct kase k;

		case_begin(&k, "world", C_SPLIT, -1, -1, -1, 0, 0);
		rc = smddp_comm_split(c, i % 3 == 2 ? 0 : world_rank % 2, world_rank, &sc);
		if (rc != SMDDP_OK)
			die_rc(&k, rc, c);
		s = calloc(1, sizeof(*s));
		s->comm = sc;
		s->name = "cycle";
		s->rank = smddp_comm_rank(sc);
		s->size = smddp_comm_size(sc);
		if (i % 3 == 2) {
			for (rc = 0; rc < s->size; rc++)
				s->ranks[rc] = rc;
		} else {
			int r, n = 0;
			for (r = 0; r < w->size; r++)
				if (r % 2 == world_rank % 2)
					s->ranks[n++] = r;
		}
		t_allreduce(s, SMDDP_INT32, SMDDP_SUM, 65537, i % 2);
		t_allgather(s, SMDDP_UINT8, 1001, 0);
		rc = smddp_comm_destroy(sc);
		snprintf(what, sizeof(what), "destroy cycle %d", i);
		check_true(what, rc == SMDDP_OK, "returned %s", rc_name(rc));
		free(s);
	}
	t_allreduce(w, SMDDP_FLOAT32, SMDDP_SUM, 1001, 1);
	check_true("descriptors after 30 split/destroy cycles", count_fds() == fds1,
		   "%d open, %d before", count_fds(), fds1);
	check_true("/dev/shm mappings after 30 split/destroy cycles", count_shm_maps() == maps1,
		   "%d mapped, %d before", count_shm_maps(), maps1);
	rc = smddp_comm_destroy(c);
	check_true("destroy world", rc == SMDDP_OK, "returned %s", rc_name(rc));
	check_true("descriptors after destroying the world", count_fds() == fds0,
		   "%d open, %d before smddp_init", count_fds(), fds0);
	check_true("/dev/shm mappings after destroying the world", count_shm_maps() == 0,
		   "%d still mapped", count_shm_maps());
	free(w);

	rc = smddp_init(&c);
	check_true("smddp_init after destroying the world", rc == SMDDP_OK, "returned %s: %s",
		   rc_name(rc), smddp_last_error(NULL));
	if (rc == SMDDP_OK) {
		w = world_group(c, "second-world");
		check_group_identity(w);
		t_allreduce(w, SMDDP_BFLOAT16, SMDDP_SUM, 1001, 0);
		t_broadcast(w, SMDDP_INT64, 4099, w->size - 1);
		rc = smddp_comm_destroy(c);
		check_true("destroy the second world", rc == SMDDP_OK, "returned %s", rc_name(rc));
		free(w);
	}
	printf("SUMMARY rank %d of %d: %ld passed, %ld failed, %ld skipped (lifecycle)\n",
	       world_rank, size, n_pass, n_fail, n_skip);
	return n_fail ? 1 : 0;
}

/* ---- buffer reuse: a call's buffers are the caller's again once it returns ------ */

/* Each call's send buffer (and in place, its whole buffer) is overwritten
 * with NaNs the moment the call returns, as a training loop reuses its
 * gradient buckets: no peer may still be reading it.  Sizes take the
 * single-copy path (peers read each other's buffers directly). */
static void t_reuse(struct group *g, int iters)
{
	size_t n = (size_t)g->size, count = 131072 + 3, j;
	float *s = malloc(n * count * sizeof(float)), *r = malloc(n * count * sizeof(float));
	struct kase k;
	int it, c, rc = 0;

	for (it = 0; it < iters; it++) {
		for (c = 0; c < 6; c++) {
			float mine = (float)(g->rank + 1 + it % 7), want = 0;
			int root = it % g->size;

			case_begin(&k, g->name, c == 0 ? C_ALLREDUCE : c == 1 ? C_ALLGATHER :
					 c == 2 ? C_REDUCE_SCATTER : c == 3 ? C_BROADCAST :
					 c == 4 ? C_REDUCE : C_ALLTOALL,
				   SMDDP_FLOAT32, -1, root, 0, count);
			for (j = 0; j < n * count; j++) {
				s[j] = mine + (float)(j / count); /* block b holds mine + b */
				r[j] = -1;
			}
			switch (c) {
			case 0: rc = LIBCALL(smddp_allreduce(s, r, count, SMDDP_FLOAT32, SMDDP_SUM, g->comm, NULL)); break;
			case 1: rc = LIBCALL(smddp_allgather(s, r, count, SMDDP_FLOAT32, g->comm, NULL)); break;
			case 2: rc = LIBCALL(smddp_reduce_scatter(s, r, count, SMDDP_FLOAT32, SMDDP_SUM, g->comm, NULL)); break;
			case 3: rc = LIBCALL(smddp_broadcast(g->rank == root ? s : r, count, SMDDP_FLOAT32, root, g->comm, NULL)); break;
			case 4: rc = LIBCALL(smddp_reduce(s, r, count, SMDDP_FLOAT32, SMDDP_SUM, root, g->comm, NULL)); break;
			default: rc = LIBCALL(smddp_alltoall(s, r, count, SMDDP_FLOAT32, g->comm, NULL)); break;
			}
			memset(s, 0xff, n * count * sizeof(float)); /* NaN, at once */
			if (c == 3 && g->rank == root)
				memset(r, 0, n * count * sizeof(float));
			if (rc != SMDDP_OK)
				die_rc(&k, rc, g->comm);
			for (j = 0; j < count * (c == 1 || c == 5 ? n : 1); j++) {
				size_t b = j / count;
				float sum_ranks = (float)(g->size * (g->size + 1) / 2 + g->size * (it % 7));
				if (c == 3 && g->rank == root)
					break;
				if (c == 4 && g->rank != root)
					break;
				switch (c) {
				case 0: case 4: want = sum_ranks; break;
				case 1: want = (float)(b + 1 + it % 7); break;
				case 2: want = sum_ranks + (float)(g->size * g->rank); break;
				case 3: want = (float)(root + 1 + it % 7); break;
				default: want = (float)(b + 1 + it % 7) + (float)g->rank; break;
				}
				if (r[j] != want) {
					bad(&k, "iteration %d index %zu: got %g, expected %g (was the send buffer "
					    "still read after the call returned?)", it, j, r[j], want);
					break;
				}
			}
			case_end(&k);
		}
	}
	free(s);
	free(r);
}

/* ---- signals: waits interrupted all the time must still complete -------------- */

static volatile sig_atomic_t n_signals;

static void on_alarm(int sig)
{
	(void)sig;
	n_signals++;
}

/* SIGALRM every 200 us, without SA_RESTART, as a profiler or an interpreter's
 * signal handling would: every blocking system call sees EINTR. */
static void start_signals(void)
{
	struct sigaction sa;
	struct itimerval it = {{0, 200}, {0, 200}};

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
}

static void stop_signals(void)
{
	struct itimerval it = {{0, 0}, {0, 0}};

	setitimer(ITIMER_REAL, &it, NULL);
	check_true("signals delivered during the run", n_signals > 100, "only %d",
		   (int)n_signals);
}

/* ---- main ------------------------------------------------------------------- */

static int parse_counts(const char *s, struct plan *p)
{
	char *end;

	p->ncounts = 0;
	while (*s) {
		unsigned long long v = strtoull(s, &end, 10);
		if (end == s || p->ncounts == MAX_COUNTS)
			return -1;
		p->counts[p->ncounts++] = (size_t)v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -1;
	}
	return p->ncounts ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct plan p = {{0, 1, 7, 1001, 262147}, 5, 1, (1 << SMDDP_NUM_DTYPES) - 1,
			 (1 << SMDDP_NUM_OPS) - 1};
	struct group *w = calloc(1, sizeof(*w));
	int skip_split = 0, threads = 0, lifecycle = 0, signals = 0, reuse = 0, rc, r, i;
	double t0 = now_s();

	setvbuf(stdout, NULL, _IOLBF, 0);
	multi_host = getenv("CONFORMANCE_PER_HOST") != NULL;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--large") && i + 1 < argc) {
			p.counts[p.ncounts - 1] = strtoull(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--counts") && i + 1 < argc) {
			if (parse_counts(argv[++i], &p)) {
				fprintf(stderr, "conformance: bad --counts\n");
				return 2;
			}
		} else if (!strcmp(argv[i], "--skip-split")) {
			skip_split = 1;
		} else if (!strcmp(argv[i], "--threads")) {
			threads = 1;
		} else if (!strcmp(argv[i], "--lifecycle")) {
			lifecycle = 1;
		} else if (!strcmp(argv[i], "--signals")) {
			signals = 1;
		} else if (!strcmp(argv[i], "--reuse") && i + 1 < argc) {
			reuse = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--verbose")) {
			verbose = 1;
		} else {
			fprintf(stderr,
				"usage: conformance [--large N] [--counts a,b,c] [--skip-split] [--threads] [--lifecycle] [--signals] [--reuse N] [--verbose]\n");
			return 2;
		}
	}

	tables_init();
	small_init();
	self_test();
	if (lifecycle) {
		free(w);
		return t_lifecycle();
	}
	if (signals)
		start_signals();
	t_api_local();
	rc = smddp_init(&w->comm);
	if (rc != SMDDP_OK) {
		printf("FAIL: smddp_init returned %s (%d): %s\n", rc_name(rc), rc,
		       smddp_last_error(NULL));
		return 1;
	}
	w->name = "world";
	w->rank = world_rank = smddp_comm_rank(w->comm);
	w->size = smddp_comm_size(w->comm);
	if (w->size < 1 || w->size > 1024 || w->rank < 0 || w->rank >= w->size) {
		printf("FAIL: rank %d of size %d\n", w->rank, w->size);
		return 1;
	}
	for (r = 0; r < w->size; r++)
		w->ranks[r] = r;
	{
		const char *er = getenv("SMDDP_RANK"), *es = getenv("SMDDP_WORLD_SIZE");
		if (er)
			check_true("world rank vs SMDDP_RANK", atoi(er) == w->rank,
				   "SMDDP_RANK=%s but smddp_comm_rank() is %d", er, w->rank);
		if (es)
			check_true("world size vs SMDDP_WORLD_SIZE", atoi(es) == w->size,
				   "SMDDP_WORLD_SIZE=%s but smddp_comm_size() is %d", es, w->size);
	}
	check_group_identity(w);
	check_group_order(w);
	t_arg_errors(w);
	if (reuse)
		t_reuse(w, reuse);
	else if (threads)
		t_threads(w, &p);
	else
		run_matrix(w, &p);
	if (!skip_split)
		t_split(w, &p);
	{
		int ae = -1;

		rc = smddp_comm_get_async_error(w->comm, &ae);
		check_true("no async error on a healthy world", rc == SMDDP_OK && ae == SMDDP_OK,
			   "smddp_comm_get_async_error returned %s with %s: %s", rc_name(rc),
			   rc_name(ae), smddp_last_error(w->comm));
	}

	rc = smddp_comm_destroy(w->comm);
	check_true("destroy world", rc == SMDDP_OK, "returned %s: %s", rc_name(rc),
		   smddp_last_error(NULL));
	if (signals)
		stop_signals();
	printf("SUMMARY rank %d of %d: %ld passed, %ld failed, %ld skipped in %.1f s (%.1f s in collectives)\n",
	       world_rank, w->size, n_pass, n_fail, n_skip, now_s() - t0, lib_s);
	free(w);
	return n_fail ? 1 : 0;
}
