/* cmd/bench/bench_data.c - input patterns, poison and the independent check of the benchmark.
 *
 * Element j of rank r's input is a small integer picked from (r, j) (for PROD
 * a power of two, or an integer for integer types), so that every dtype, fp16
 * and bf16 included, holds it exactly and a few ranks' sums stay exact too.
 * The check recomputes every expected element from that pattern alone (in
 * uint64 with wrap-around for integers, in float64 for floats), never from
 * another rank's memory or from the library, and compares exactly for
 * integers and within a rounding tolerance for floats.
 */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "bench.h"

/* ---- fp16 and bf16, written here so as not to trust the library's ---- */

static uint16_t f32_to_f16(float f)
{
	uint32_t x, sign, exp, man;

	memcpy(&x, &f, sizeof(x));
	sign = (x >> 16) & 0x8000;
	exp = (x >> 23) & 0xff;
	man = x & 0x7fffff;
	if (exp == 0xff)
		return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
	int e = (int)exp - 127 + 15;
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00);
	if (e <= 0) { /* subnormal half: value = m * 2^-24 */
		if (e < -10)
			return (uint16_t)sign;
		man |= 0x800000;
		unsigned shift = (unsigned)(14 - e);
		uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), halfway = 1u << (shift - 1);
		if (rem > halfway || (rem == halfway && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++; /* a carry into the exponent is the right answer, up to inf */
	return (uint16_t)(sign | h);
}

static float f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, x;
	float f;

	if (exp == 0) {
		f = ldexpf((float)man, -24);
		return sign ? -f : f;
	}
	if (exp == 31)
		x = sign | 0x7f800000 | (man << 13);
	else
		x = sign | ((exp + 112) << 23) | (man << 13);
	memcpy(&f, &x, sizeof(f));
	return f;
}

static uint16_t f32_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof(x));
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

static float bf16_to_f32(uint16_t b)
{
	uint32_t x = (uint32_t)b << 16;
	float f;

	memcpy(&f, &x, sizeof(f));
	return f;
}

/* ---- the pattern -------------------------------------------------------- */

static int is_float(enum smddp_dtype dt)
{
	return dt == SMDDP_FLOAT16 || dt == SMDDP_BFLOAT16 || dt == SMDDP_FLOAT32 ||
	       dt == SMDDP_FLOAT64;
}

static int is_unsigned(enum smddp_dtype dt)
{
	return dt == SMDDP_UINT8 || dt == SMDDP_UINT32 || dt == SMDDP_UINT64;
}

/* Rank r's element j, as a double that every dtype holds exactly. */
static double gen(enum smddp_dtype dt, enum smddp_op op, int rank, size_t j)
{
	uint64_t r = (uint64_t)rank;

	if (op == SMDDP_PROD) {
		static const double fv[6] = { 1, -1, 2, -0.5, 0.5, -2 };
		static const double sv[6] = { 1, 2, 3, -1, -2, -3 };
		static const double uv[6] = { 1, 2, 3, 4, 5, 6 };
		unsigned k = (unsigned)(((uint64_t)j * 5 + r * 7 + 1) % 6);
		return is_float(dt) ? fv[k] : is_unsigned(dt) ? uv[k] : sv[k];
	}
	int k = (int)(((uint64_t)j * 7 + r * 13 + 5) % 17) - 8;
	return is_unsigned(dt) ? (double)(k + 8) : (double)k;
}

static void store(void *buf, size_t i, enum smddp_dtype dt, double v)
{
	switch (dt) {
	case SMDDP_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
	case SMDDP_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
	case SMDDP_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case SMDDP_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
	case SMDDP_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
	case SMDDP_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
	case SMDDP_FLOAT16: ((uint16_t *)buf)[i] = f32_to_f16((float)v); break;
	case SMDDP_BFLOAT16: ((uint16_t *)buf)[i] = f32_to_bf16((float)v); break;
	case SMDDP_FLOAT32: ((float *)buf)[i] = (float)v; break;
	case SMDDP_FLOAT64: ((double *)buf)[i] = v; break;
	}
}

/* The pattern repeats every period elements, whatever the rank. */
static size_t period_of(enum smddp_op op)
{
	return op == SMDDP_PROD ? 6 : 17;
}

void bench_fill(void *buf, size_t n, size_t base, enum smddp_dtype dtype, enum smddp_op op,
		int rank)
{
	size_t es = smddp_dtype_size(dtype), p = period_of(op), done;
	char *b = buf;

	/* One period, then copies of what is written so far: each copy starts
	 * on a multiple of the period, so the pattern continues. */
	for (done = 0; done < n && done < p; done++)
		store(buf, done, dtype, gen(dtype, op, rank, base + done));
	while (done < n) {
		size_t chunk = done < n - done ? done : n - done;
		memcpy(b + done * es, b, chunk * es);
		done += chunk;
	}
}

/* NaN for floats; 0xa5 bytes for integers, which no pattern sum of a few
 * ranks reaches. */
void bench_poison(void *buf, size_t n, enum smddp_dtype dtype)
{
	memset(buf, is_float(dtype) ? 0xff : 0xa5, n * smddp_dtype_size(dtype));
}

/* ---- the reference -------------------------------------------------------- */

/* Integers: the value in uint64, sign- or zero-extended from the dtype's
 * width, so that wrapped arithmetic followed by norm() is the dtype's. */
static uint64_t norm(enum smddp_dtype dt, uint64_t v)
{
	switch (dt) {
	case SMDDP_INT8: return (uint64_t)(int64_t)(int8_t)(uint8_t)v;
	case SMDDP_UINT8: return v & 0xff;
	case SMDDP_INT32: return (uint64_t)(int64_t)(int32_t)(uint32_t)v;
	case SMDDP_UINT32: return v & 0xffffffffu;
	default: return v;
	}
}

static uint64_t load_int(const void *buf, size_t i, enum smddp_dtype dt)
{
	switch (dt) {
	case SMDDP_INT8: return (uint64_t)(int64_t)((const int8_t *)buf)[i];
	case SMDDP_UINT8: return ((const uint8_t *)buf)[i];
	case SMDDP_INT32: return (uint64_t)(int64_t)((const int32_t *)buf)[i];
	case SMDDP_UINT32: return ((const uint32_t *)buf)[i];
	case SMDDP_INT64: return (uint64_t)((const int64_t *)buf)[i];
	default: return ((const uint64_t *)buf)[i];
	}
}

static double load_float(const void *buf, size_t i, enum smddp_dtype dt)
{
	switch (dt) {
	case SMDDP_FLOAT16: return f16_to_f32(((const uint16_t *)buf)[i]);
	case SMDDP_BFLOAT16: return bf16_to_f32(((const uint16_t *)buf)[i]);
	case SMDDP_FLOAT32: return ((const float *)buf)[i];
	default: return ((const double *)buf)[i];
	}
}

static double round_to(enum smddp_dtype dt, double v)
{
	switch (dt) {
	case SMDDP_FLOAT16: return f16_to_f32(f32_to_f16((float)v));
	case SMDDP_BFLOAT16: return bf16_to_f32(f32_to_bf16((float)v));
	case SMDDP_FLOAT32: return (float)v;
	default: return v;
	}
}

static double eps_of(enum smddp_dtype dt)
{
	switch (dt) {
	case SMDDP_FLOAT16: return 0x1p-10;
	case SMDDP_BFLOAT16: return 0x1p-7;
	case SMDDP_FLOAT32: return 0x1p-23;
	default: return 0x1p-52;
	}
}

/* What element j must be, computed once per residue of the period. */
struct expect {
	double acc;  /* floats: the exact result in float64 */
	double want; /* floats: acc rounded to the dtype */
	double tol;  /* floats: the difference allowed from acc */
	uint64_t iv; /* integers: the result, normalised */
};

/* The reduction over all ranks of their element j. */
static void expect_reduced(enum smddp_dtype dt, enum smddp_op op, int nranks, size_t j,
			   struct expect *e)
{
	if (is_float(dt)) {
		double acc = gen(dt, op, 0, j), sumabs = fabs(acc);
		for (int r = 1; r < nranks; r++) {
			double v = gen(dt, op, r, j);
			sumabs += fabs(v);
			switch (op) {
			case SMDDP_SUM: case SMDDP_AVG: acc += v; break;
			case SMDDP_PROD: acc *= v; break;
			case SMDDP_MIN: acc = v < acc ? v : acc; break;
			case SMDDP_MAX: acc = v > acc ? v : acc; break;
			}
		}
		if (op == SMDDP_AVG) {
			acc /= nranks;
			sumabs /= nranks;
		}
		/* Rounding once per step of a sum of nranks terms, and once at
		 * the end; products are relative; MIN and MAX are exact. */
		double eps = eps_of(dt);
		e->acc = acc;
		e->want = round_to(dt, acc);
		e->tol = op == SMDDP_PROD			  ? (nranks + 1) * eps * fabs(acc)
			 : op == SMDDP_MIN || op == SMDDP_MAX ? 0
							      : nranks * eps * sumabs + eps * fabs(acc);
		return;
	}
	int sgn = !is_unsigned(dt);
	uint64_t acc = norm(dt, (uint64_t)(int64_t)gen(dt, op, 0, j));
	for (int r = 1; r < nranks; r++) {
		uint64_t v = norm(dt, (uint64_t)(int64_t)gen(dt, op, r, j));
		switch (op) {
		case SMDDP_SUM: case SMDDP_AVG: acc = norm(dt, acc + v); break;
		case SMDDP_PROD: acc = norm(dt, acc * v); break;
		case SMDDP_MIN:
			if (sgn ? (int64_t)v < (int64_t)acc : v < acc)
				acc = v;
			break;
		case SMDDP_MAX:
			if (sgn ? (int64_t)v > (int64_t)acc : v > acc)
				acc = v;
			break;
		}
	}
	if (op == SMDDP_AVG) /* the wrapped sum, divided toward zero */
		acc = sgn ? (uint64_t)((int64_t)acc / nranks) : acc / (uint64_t)nranks;
	e->iv = norm(dt, acc);
}

/* Rank src's element j, unchanged. */
static void expect_copied(enum smddp_dtype dt, enum smddp_op op, int src, size_t j,
			  struct expect *e)
{
	double v = gen(dt, op, src, j);

	e->acc = e->want = v;
	e->tol = 0;
	e->iv = norm(dt, (uint64_t)(int64_t)v);
}

static int ok(enum smddp_dtype dt, const struct expect *e, const void *out, size_t i)
{
	if (!is_float(dt))
		return load_int(out, i, dt) == e->iv;
	double got = load_float(out, i, dt);
	if (got == e->want)
		return 1;
	if (isnan(got) || isinf(e->want))
		return 0;
	return fabs(got - e->acc) <= e->tol;
}

/* Wrong elements among out[off .. off+n), which must hold element
 * jbase + i of rank src (src < 0: the reduction over all ranks). */
static uint64_t count_wrong(enum smddp_dtype dt, enum smddp_op op, int src, int nranks,
			    const void *out, size_t off, size_t n, size_t jbase)
{
	struct expect tab[17];
	size_t p = period_of(op), k = 0;
	uint64_t wrong = 0;

	for (size_t t = 0; t < p; t++) {
		if (src < 0)
			expect_reduced(dt, op, nranks, jbase + t, &tab[t]);
		else
			expect_copied(dt, op, src, jbase + t, &tab[t]);
	}
	for (size_t i = 0; i < n; i++) {
		wrong += !ok(dt, &tab[k], out, off + i);
		if (++k == p)
			k = 0;
	}
	return wrong;
}

/* ---- sendrecv's ring and alltoallv's pattern ---------------------------- */

int bench_ring_next(int rank, int nranks)
{
	return (rank + 1) % nranks;
}

int bench_ring_prev(int rank, int nranks)
{
	return (rank + nranks - 1) % nranks;
}

/* Block k of the ramp: floor(2 * count * (k + 1) / (nranks + 1)) for all but
 * the last, which takes what is left of nranks * count (about twice the
 * nominal block, never negative since every floor rounds down).  Small
 * counts give empty blocks too, which is part of what is tested. */
size_t bench_v_block(size_t k, int nranks, size_t count)
{
	uint64_t n = (uint64_t)nranks, c = count, sum = 0;

	if (k + 1 < n)
		return (size_t)(2 * c * (k + 1) / (n + 1));
	for (uint64_t j = 0; j + 1 < n; j++)
		sum += 2 * c * (j + 1) / (n + 1);
	return (size_t)(n * c - sum);
}

void bench_v_layout(int rank, int nranks, size_t count, size_t *sendcounts, size_t *sdispls,
		    size_t *recvcounts, size_t *rdispls)
{
	size_t n = (size_t)nranks, me = (size_t)rank, so = 0, ro = 0;

	for (size_t q = 0; q < n; q++) {
		/* (me + q) % n both ways: what q sends to me is what I send to q */
		sendcounts[q] = recvcounts[q] = bench_v_block((me + q) % n, nranks, count);
		sdispls[q] = so;
		rdispls[q] = ro;
		so += sendcounts[q];
		ro += recvcounts[q];
	}
}

/* Where rank `from` starts the block it sends to rank `to`. */
static size_t v_sdispl(size_t from, size_t to, int nranks, size_t count)
{
	size_t off = 0;

	for (size_t q = 0; q < to; q++)
		off += bench_v_block((from + q) % (size_t)nranks, nranks, count);
	return off;
}

uint64_t bench_check(enum bench_coll coll, enum smddp_dtype dtype, enum smddp_op op, int root,
		     int rank, int nranks, size_t count, const void *out)
{
	uint64_t wrong = 0;
	size_t n = (size_t)nranks, me = (size_t)rank;

	switch (coll) {
	case COLL_REDUCE:
		if (rank == root)
			wrong = count_wrong(dtype, op, -1, nranks, out, 0, count, 0);
		break;
	case COLL_ALLREDUCE:
		wrong = count_wrong(dtype, op, -1, nranks, out, 0, count, 0);
		break;
	case COLL_REDUCESCATTER:
		wrong = count_wrong(dtype, op, -1, nranks, out, 0, count, me * count);
		break;
	case COLL_ALLGATHER:
		for (size_t r = 0; r < n; r++)
			wrong += count_wrong(dtype, op, (int)r, nranks, out, r * count, count, 0);
		break;
	case COLL_BROADCAST:
		wrong = count_wrong(dtype, op, root, nranks, out, 0, count, 0);
		break;
	case COLL_ALLTOALL:
		for (size_t r = 0; r < n; r++)
			wrong += count_wrong(dtype, op, (int)r, nranks, out, r * count, count,
					     me * count);
		break;
	case COLL_SENDRECV:
		wrong = count_wrong(dtype, op, bench_ring_prev(rank, nranks), nranks, out, 0, count,
				    0);
		break;
	case COLL_ALLTOALLV: {
		/* Rank r's block for me lands at my rdispls[r]; it is r's input
		 * from r's sdispls[me] on. */
		size_t roff = 0;
		for (size_t r = 0; r < n; r++) {
			size_t len = bench_v_block((r + me) % n, nranks, count);
			wrong += count_wrong(dtype, op, (int)r, nranks, out, roff, len,
					     v_sdispl(r, me, nranks, count));
			roff += len;
		}
		break;
	}
	default:
		break;
	}
	return wrong;
}
