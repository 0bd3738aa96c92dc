/* reduce.c - sd_reduce(): argument checks and the choice of implementation. */
#include "config.h"

#include <stddef.h>
#include <string.h>

#include "util/sd.h"
#include "reduce/half.h"
#include "reduce/reduce.h"

#ifdef SD_REDUCE_HAVE_AVX2
#include <cpuid.h>
#endif

static const struct {
	const char *name;
	sd_reduce_fn *fn;
} isas[] = {
	{"generic", sd_reduce_generic},
#ifdef SD_REDUCE_HAVE_AVX2
	{"avx2", sd_reduce_avx2},
#endif
};

static int isa_usable(size_t i)
{
#ifdef SD_REDUCE_HAVE_AVX2
	if (isas[i].fn == sd_reduce_avx2) {
		unsigned a, b, c, d;

		/* avx2 through the builtin, which also checks that the OS saves
		 * the ymm registers; f16c through cpuid (not every compiler's
		 * builtin knows it). */
		__builtin_cpu_init();
		return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) &&
		       (c & bit_F16C);
	}
#endif
	return 1;
}

/* Index into isas, -1 until the first call picks one.  Racing first calls
 * pick the same answer, so relaxed atomics are enough. */
static int chosen = -1;

static int best_isa(void)
{
	int best = 0;

	for (size_t i = 1; i < sizeof(isas) / sizeof(isas[0]); i++)
		if (isa_usable(i))
			best = (int)i;
	return best;
}

void sd_reduce(void *dst, const void *const *srcs, int nsrc, size_t count,
	       enum smddp_dtype dtype, enum smddp_op op, int avg_div)
{
	int i = __atomic_load_n(&chosen, __ATOMIC_RELAXED);

	/* Callers check their arguments; these are the cases that would
	 * otherwise crash or divide by zero. */
	if (count == 0 || nsrc < 1 || (unsigned)dtype >= SMDDP_NUM_DTYPES ||
	    (unsigned)op >= SMDDP_NUM_OPS)
		return;
	if (avg_div < 1)
		avg_div = 1;
	if (i < 0) {
		i = best_isa();
		__atomic_store_n(&chosen, i, __ATOMIC_RELAXED);
	}
	isas[i].fn(dst, srcs, nsrc, count, dtype, op, avg_div);
}

int sd_reduce_set_isa(const char *name)
{
	if (!name) {
		__atomic_store_n(&chosen, best_isa(), __ATOMIC_RELAXED);
		return 0;
	}
	for (size_t i = 0; i < sizeof(isas) / sizeof(isas[0]); i++) {
		if (strcmp(isas[i].name, name) == 0) {
			if (!isa_usable(i))
				return -1;
			__atomic_store_n(&chosen, (int)i, __ATOMIC_RELAXED);
			return 0;
		}
	}
	return -1;
}

const char *sd_reduce_isa(void)
{
	int i = __atomic_load_n(&chosen, __ATOMIC_RELAXED);

	return isas[i < 0 ? best_isa() : i].name;
}

float sd_half_to_float(uint16_t h)
{
	return half_to_float_inline(h);
}

uint16_t sd_float_to_half(float f)
{
	return float_to_half_inline(f);
}

float sd_bf16_to_float(uint16_t b)
{
	return bf16_to_float_inline(b);
}

uint16_t sd_float_to_bf16(float f)
{
	return float_to_bf16_inline(f);
}
