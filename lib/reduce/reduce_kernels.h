/* reduce_kernels.h - one implementation of sd_reduce(), compiled once per ISA.
 *
 * Include after defining SD_REDUCE_ENTRY (the name of the entry point) and,
 * where the F16C instructions may be used, SD_REDUCE_F16C.
 *
 * Design.  Every dtype x op has four loops over restrict-qualified arrays,
 * which GCC vectorises without run-time alias checks:
 *   k2:   d = a op b       acc:  d = d op b       racc: d = a op d
 *   acc2: d = (d op a) op b, to take the sources two at a time.
 * The sources are walked in blocks of BLOCK_BYTES (L1-sized).  Two sources
 * combine straight into dst, whichever of them dst is.  More sources
 * accumulate, per block, in a buffer on the stack, and the last source is
 * combined into dst; so each source is read once and dst written once, and
 * dst may be any one of the sources: its block is written only after every
 * source's block has been read.  AVG is SUM then a pass over the block of
 * dst while it is in cache.  The order of the operands is srcs[0], srcs[1],
 * ... left to right, on every path.  fp16 and bf16 widen each source to
 * float as they read it, reduce in float and narrow once, at the end.
 */

#ifndef SD_REDUCE_ENTRY
#error "define SD_REDUCE_ENTRY before including reduce_kernels.h"
#endif

#define BLOCK_BYTES 8192
#define HBLOCK 2048 /* fp16/bf16 elements per block: a float accumulator of 8 KiB */

typedef void k2_fn(void *restrict d, const void *restrict a, const void *restrict b, size_t n);
typedef void k1_fn(void *restrict d, const void *restrict b, size_t n);
typedef void fin2_fn(void *restrict d, const void *restrict s, size_t n, int div);
typedef void fin1_fn(void *d, size_t n, int div);

struct kset {
	k2_fn *k2;
	k1_fn *acc;
	k1_fn *racc;
	k2_fn *acc2; /* d = (d op a) op b: halves the trips of acc through L1 */
};

#define DEF_OP(name, T, EXPR)                                                              \
	static void name##_k2(void *restrict dv, const void *restrict av,                  \
			      const void *restrict bv, size_t n)                           \
	{                                                                                  \
		T *restrict d = dv;                                                        \
		const T *restrict a = av, *restrict b = bv;                                \
		for (size_t i = 0; i < n; i++) {                                           \
			const T x = a[i], y = b[i];                                        \
			d[i] = (T)(EXPR);                                                  \
		}                                                                          \
	}                                                                                  \
	static void name##_acc(void *restrict dv, const void *restrict bv, size_t n)       \
	{                                                                                  \
		T *restrict d = dv;                                                        \
		const T *restrict b = bv;                                                  \
		for (size_t i = 0; i < n; i++) {                                           \
			const T x = d[i], y = b[i];                                        \
			d[i] = (T)(EXPR);                                                  \
		}                                                                          \
	}                                                                                  \
	static void name##_racc(void *restrict dv, const void *restrict av, size_t n)      \
	{                                                                                  \
		T *restrict d = dv;                                                        \
		const T *restrict a = av;                                                  \
		for (size_t i = 0; i < n; i++) {                                           \
			const T x = a[i], y = d[i];                                        \
			d[i] = (T)(EXPR);                                                  \
		}                                                                          \
	}                                                                                  \
	static void name##_acc2(void *restrict dv, const void *restrict av,                \
				const void *restrict bv, size_t n)                         \
	{                                                                                  \
		T *restrict d = dv;                                                        \
		const T *restrict a = av, *restrict b = bv;                                \
		for (size_t i = 0; i < n; i++) {                                           \
			T x = d[i], y = a[i];                                              \
			x = (T)(EXPR);                                                     \
			y = b[i];                                                          \
			d[i] = (T)(EXPR);                                                  \
		}                                                                          \
	}                                                                                  \
	static const struct kset name = {name##_k2, name##_acc, name##_racc, name##_acc2};

/* Sums and products wrap, so signed types use the unsigned kernels. */
#define DEF_INT_OPS(tag, S, U)                                                             \
	DEF_OP(tag##_sum, U, x + y)                                                        \
	DEF_OP(tag##_prod, U, x * y)                                                       \
	DEF_OP(tag##_min, S, y < x ? y : x)                                                \
	DEF_OP(tag##_max, S, y > x ? y : x)

DEF_INT_OPS(i8, int8_t, uint8_t)
DEF_INT_OPS(u8, uint8_t, uint8_t)
DEF_INT_OPS(i32, int32_t, uint32_t)
DEF_INT_OPS(u32, uint32_t, uint32_t)
DEF_INT_OPS(i64, int64_t, uint64_t)
DEF_INT_OPS(u64, uint64_t, uint64_t)

/* MIN/MAX of a NaN: the x < y ? x : y of minps; which operand comes out is
 * not part of the contract. */
DEF_OP(f32_sum, float, x + y)
DEF_OP(f32_prod, float, x * y)
DEF_OP(f32_min, float, x < y ? x : y)
DEF_OP(f32_max, float, x > y ? x : y)
DEF_OP(f64_sum, double, x + y)
DEF_OP(f64_prod, double, x * y)
DEF_OP(f64_min, double, x < y ? x : y)
DEF_OP(f64_max, double, x > y ? x : y)

/* AVG: divide the (wrapped) sum.  Integer division does not vectorise, so
 * 8- and 32-bit integers divide in float/double: the quotient's rounding
 * error is below half an ulp, far less than its distance 1/div to the next
 * integer when it is not one, so truncating gives C's x / div. */
#define DEF_FIN(name, T, Q, QINIT, EXPR)                                                  \
	static void name##_fin2(void *restrict dv, const void *restrict sv, size_t n,      \
				int div)                                                   \
	{                                                                                  \
		T *restrict d = dv;                                                        \
		const T *restrict s = sv;                                                  \
		const Q q = (QINIT);                                                       \
		for (size_t i = 0; i < n; i++) {                                           \
			const T x = s[i];                                                  \
			d[i] = (T)(EXPR);                                                  \
		}                                                                          \
	}                                                                                  \
	static void name##_fin1(void *dv, size_t n, int div)                               \
	{                                                                                  \
		T *restrict d = dv;                                                        \
		const Q q = (QINIT);                                                       \
		for (size_t i = 0; i < n; i++) {                                           \
			const T x = d[i];                                                  \
			d[i] = (T)(EXPR);                                                  \
		}                                                                          \
	}

DEF_FIN(i8, int8_t, float, (float)div, (int32_t)((float)x / q))
DEF_FIN(u8, uint8_t, float, (float)div, (int32_t)((float)x / q))
DEF_FIN(i32, int32_t, double, div, (int32_t)((double)x / q))
DEF_FIN(u32, uint32_t, double, div, (int64_t)((double)x / q))
DEF_FIN(i64, int64_t, int64_t, div, x / q)
DEF_FIN(u64, uint64_t, uint64_t, (uint64_t)div, x / q)
DEF_FIN(f32, float, float, (float)div, x / q)
DEF_FIN(f64, double, double, div, x / q)

struct dtype_kernels {
	size_t size;
	const struct kset *op[4]; /* SUM PROD MIN MAX; AVG is SUM then fin */
	fin2_fn *fin2;
	fin1_fn *fin1;
};

#define DTK(tag, T)                                                                        \
	{                                                                                  \
		sizeof(T), {&tag##_sum, &tag##_prod, &tag##_min, &tag##_max}, tag##_fin2,   \
			tag##_fin1                                                         \
	}

static const struct dtype_kernels native[] = {
	[SMDDP_INT8] = DTK(i8, int8_t),	    [SMDDP_UINT8] = DTK(u8, uint8_t),
	[SMDDP_INT32] = DTK(i32, int32_t),   [SMDDP_UINT32] = DTK(u32, uint32_t),
	[SMDDP_INT64] = DTK(i64, int64_t),   [SMDDP_UINT64] = DTK(u64, uint64_t),
	[SMDDP_FLOAT32] = DTK(f32, float),   [SMDDP_FLOAT64] = DTK(f64, double),
};

#define AT(p, off) ((const unsigned char *)(p) + (off))

static void reduce_native(unsigned char *dst, const void *const *srcs, int nsrc, size_t count,
			  const struct dtype_kernels *dk, enum smddp_op op, int avg_div)
{
	unsigned char acc[BLOCK_BYTES] __attribute__((aligned(64)));
	const struct kset *k = dk->op[op == SMDDP_AVG ? SMDDP_SUM : op];
	const size_t sz = dk->size, blk = BLOCK_BYTES / sz;
	const void *last = srcs[nsrc - 1];
	/* Two sources: straight into dst, unless all three are one buffer. */
	const int direct = nsrc == 2 && !(dst == srcs[0] && dst == srcs[1]);

	for (size_t i = 0; i < count; i += blk) {
		const size_t n = count - i < blk ? count - i : blk, off = i * sz;
		unsigned char *d = dst + off;

		if (nsrc == 1) {
			if (dst == srcs[0])
				dk->fin1(d, n, avg_div);
			else
				dk->fin2(d, AT(srcs[0], off), n, avg_div);
			continue;
		}
		if (direct) {
			if (dst == srcs[0])
				k->acc(d, AT(srcs[1], off), n);
			else if (dst == srcs[1])
				k->racc(d, AT(srcs[0], off), n);
			else
				k->k2(d, AT(srcs[0], off), AT(srcs[1], off), n);
		} else {
			int j = 2;

			k->k2(acc, AT(srcs[0], off), AT(srcs[1], off), n);
			for (; j + 1 < nsrc - 1; j += 2)
				k->acc2(acc, AT(srcs[j], off), AT(srcs[j + 1], off), n);
			if (j < nsrc - 1)
				k->acc(acc, AT(srcs[j], off), n);
			if (nsrc == 2)
				memcpy(d, acc, n * sz);
			else if (dst == last)
				k->racc(d, acc, n);
			else
				k->k2(d, acc, AT(last, off), n);
		}
		if (op == SMDDP_AVG)
			dk->fin1(d, n, avg_div);
	}
}

/* ---- fp16 and bf16 --------------------------------------------------------
 * Per block: acc = widen(s0) op widen(s1), acc = acc op widen(sj) for the
 * others, then dst = narrow(acc) (divided first for AVG), the only store to
 * dst.  The widening is fused into the op, so a block of acc makes one trip
 * through L1 per source.
 */

typedef void first16_fn(float *restrict acc, const uint16_t *restrict a,
			const uint16_t *restrict b, size_t n);
typedef void acc16_fn(float *restrict acc, const uint16_t *restrict b, size_t n);

struct kset16 {
	first16_fn *first;
	acc16_fn *acc;
};

struct fmt16 {
	void (*widen)(float *restrict d, const uint16_t *restrict s, size_t n);
	/* d = narrow(acc), or narrow(acc / q) when avg. */
	void (*out)(uint16_t *restrict d, const float *restrict acc, size_t n, int avg, float q);
	const struct kset16 *op[4];
};

/* Scalar element code that GCC vectorises. */
#define DEF_OP16(name, WIDEN, EXPR)                                                        \
	static void name##_first(float *restrict acc, const uint16_t *restrict a,          \
				 const uint16_t *restrict b, size_t n)                     \
	{                                                                                  \
		for (size_t i = 0; i < n; i++) {                                           \
			const float x = WIDEN(a[i]), y = WIDEN(b[i]);                      \
			acc[i] = (EXPR);                                                   \
		}                                                                          \
	}                                                                                  \
	static void name##_acc(float *restrict acc, const uint16_t *restrict b, size_t n)  \
	{                                                                                  \
		for (size_t i = 0; i < n; i++) {                                           \
			const float x = acc[i], y = WIDEN(b[i]);                           \
			acc[i] = (EXPR);                                                   \
		}                                                                          \
	}                                                                                  \
	static const struct kset16 name = {name##_first, name##_acc};

#define DEF_FMT16(tag, WIDEN, NARROW)                                                      \
	static void tag##_widen(float *restrict d, const uint16_t *restrict s, size_t n)   \
	{                                                                                  \
		for (size_t i = 0; i < n; i++)                                             \
			d[i] = WIDEN(s[i]);                                                \
	}                                                                                  \
	static void tag##_out(uint16_t *restrict d, const float *restrict acc, size_t n,   \
			      int avg, float q)                                            \
	{                                                                                  \
		if (avg)                                                                   \
			for (size_t i = 0; i < n; i++)                                     \
				d[i] = NARROW(acc[i] / q);                                 \
		else                                                                       \
			for (size_t i = 0; i < n; i++)                                     \
				d[i] = NARROW(acc[i]);                                     \
	}

/* Which operand a NaN comparison returns: as for float (minps order). */
#define DEF_OPS16(tag, WIDEN, NARROW)                                                      \
	DEF_OP16(tag##_sum, WIDEN, x + y)                                                  \
	DEF_OP16(tag##_prod, WIDEN, x * y)                                                 \
	DEF_OP16(tag##_min, WIDEN, x < y ? x : y)                                          \
	DEF_OP16(tag##_max, WIDEN, x > y ? x : y)                                          \
	DEF_FMT16(tag, WIDEN, NARROW)                                                      \
	static const struct fmt16 tag##_fmt = {                                            \
		tag##_widen, tag##_out, {&tag##_sum, &tag##_prod, &tag##_min, &tag##_max}};

DEF_OPS16(bf16, bf16_to_float_inline, float_to_bf16_inline)

#ifdef SD_REDUCE_F16C
/* The F16C instructions convert 8 at a time, rounding to nearest even
 * whatever MXCSR says; the scalar tails give the same bits (half.h).
 * _mm256_min_ps(x, y) is x < y ? x : y, NaNs included. */
static inline __m256 h8_load(const uint16_t *p)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline void h8_store(uint16_t *p, __m256 v)
{
	_mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

#define DEF_OP16_F16C(name, VEXPR, EXPR)                                                   \
	static void name##_first(float *restrict acc, const uint16_t *restrict a,          \
				 const uint16_t *restrict b, size_t n)                     \
	{                                                                                  \
		size_t i = 0;                                                              \
		for (; i + 8 <= n; i += 8) {                                               \
			const __m256 x = h8_load(a + i), y = h8_load(b + i);               \
			_mm256_storeu_ps(acc + i, VEXPR);                                  \
		}                                                                          \
		for (; i < n; i++) {                                                       \
			const float x = half_to_float_inline(a[i]);                        \
			const float y = half_to_float_inline(b[i]);                        \
			acc[i] = (EXPR);                                                   \
		}                                                                          \
	}                                                                                  \
	static void name##_acc(float *restrict acc, const uint16_t *restrict b, size_t n)  \
	{                                                                                  \
		size_t i = 0;                                                              \
		for (; i + 8 <= n; i += 8) {                                               \
			const __m256 x = _mm256_loadu_ps(acc + i), y = h8_load(b + i);     \
			_mm256_storeu_ps(acc + i, VEXPR);                                  \
		}                                                                          \
		for (; i < n; i++) {                                                       \
			const float x = acc[i], y = half_to_float_inline(b[i]);            \
			acc[i] = (EXPR);                                                   \
		}                                                                          \
	}                                                                                  \
	static const struct kset16 name = {name##_first, name##_acc};

DEF_OP16_F16C(half_sum, _mm256_add_ps(x, y), x + y)
DEF_OP16_F16C(half_prod, _mm256_mul_ps(x, y), x * y)
DEF_OP16_F16C(half_min, _mm256_min_ps(x, y), x < y ? x : y)
DEF_OP16_F16C(half_max, _mm256_max_ps(x, y), x > y ? x : y)

static void half_widen(float *restrict d, const uint16_t *restrict s, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(d + i, h8_load(s + i));
	for (; i < n; i++)
		d[i] = half_to_float_inline(s[i]);
}

static void half_out(uint16_t *restrict d, const float *restrict acc, size_t n, int avg, float q)
{
	const __m256 vq = _mm256_set1_ps(q);
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		const __m256 x = _mm256_loadu_ps(acc + i);

		h8_store(d + i, avg ? _mm256_div_ps(x, vq) : x);
	}
	for (; i < n; i++)
		d[i] = float_to_half_inline(avg ? acc[i] / q : acc[i]);
}

static const struct fmt16 half_fmt = {
	half_widen, half_out, {&half_sum, &half_prod, &half_min, &half_max}};
#else
DEF_OPS16(half, half_to_float_inline, float_to_half_inline)
#endif

static void reduce_16(uint16_t *dst, const void *const *srcs, int nsrc, size_t count,
		      const struct fmt16 *f, enum smddp_op op, int avg_div)
{
	float acc[HBLOCK] __attribute__((aligned(64)));
	const struct kset16 *k = f->op[op == SMDDP_AVG ? SMDDP_SUM : op];
	const uint16_t *const *s = (const uint16_t *const *)srcs;

	for (size_t i = 0; i < count; i += HBLOCK) {
		const size_t n = count - i < HBLOCK ? count - i : HBLOCK;

		if (nsrc == 1) {
			f->widen(acc, s[0] + i, n);
		} else {
			k->first(acc, s[0] + i, s[1] + i, n);
			for (int j = 2; j < nsrc; j++)
				k->acc(acc, s[j] + i, n);
		}
		f->out(dst + i, acc, n, op == SMDDP_AVG, (float)avg_div);
	}
}

/* Arguments checked by sd_reduce(): 1 <= nsrc, count > 0, dtype and op in
 * range, avg_div >= 1. */
void SD_REDUCE_ENTRY(void *dst, const void *const *srcs, int nsrc, size_t count,
		     enum smddp_dtype dtype, enum smddp_op op, int avg_div)
{
	if (nsrc == 1 && op != SMDDP_AVG) {
		if (dst != srcs[0])
			memcpy(dst, srcs[0], count * smddp_dtype_size(dtype));
		return;
	}
	/* Two sources within one block (a small reduce's root): the block
	 * loop's one step, without its frame (the accumulator on the stack). */
	if (nsrc == 2 && dtype != SMDDP_FLOAT16 && dtype != SMDDP_BFLOAT16 &&
	    count <= BLOCK_BYTES / native[dtype].size && !(dst == srcs[0] && dst == srcs[1])) {
		const struct dtype_kernels *dk = &native[dtype];
		const struct kset *k = dk->op[op == SMDDP_AVG ? SMDDP_SUM : op];

		if (dst == srcs[0])
			k->acc(dst, srcs[1], count);
		else if (dst == srcs[1])
			k->racc(dst, srcs[0], count);
		else
			k->k2(dst, srcs[0], srcs[1], count);
		if (op == SMDDP_AVG)
			dk->fin1(dst, count, avg_div);
		return;
	}
	switch (dtype) {
	case SMDDP_FLOAT16:
		reduce_16(dst, srcs, nsrc, count, &half_fmt, op, avg_div);
		break;
	case SMDDP_BFLOAT16:
		reduce_16(dst, srcs, nsrc, count, &bf16_fmt, op, avg_div);
		break;
	default:
		reduce_native(dst, srcs, nsrc, count, &native[dtype], op, avg_div);
		break;
	}
}
