/* reduce.h - the host reduction: sd_reduce() for the layers above, and its internals for the tests.
 *
 * lib/reduce/reduce_kernels.h is one implementation of sd_reduce(), written
 * so that GCC vectorises it; it is compiled once per instruction set
 * (reduce_generic.c: the base ISA of the target; reduce_avx2.c: AVX2 and
 * F16C), and reduce.c picks the best one the CPU has, once.
 */
#ifndef SD_REDUCE_REDUCE_H
#define SD_REDUCE_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include <smddp/smddp.h>

#include "util/sd.h"

/* dst[i] = op(srcs[0][i], ..., srcs[nsrc-1][i]) for i < count.  dst may be
 * equal to any srcs[j] (never partially overlapping).  fp16 and bf16 reduce
 * in float and round once to nearest even.  For SMDDP_AVG the sum is divided
 * by avg_div (floats: in the accumulation type; integers: wrapped sum,
 * truncating toward zero).  Integer overflow wraps (two's complement).
 */
void sd_reduce(void *dst, const void *const *srcs, int nsrc, size_t count,
	       enum smddp_dtype dtype, enum smddp_op op, int avg_div);
float sd_half_to_float(uint16_t h);
uint16_t sd_float_to_half(float f);
float sd_bf16_to_float(uint16_t b);
uint16_t sd_float_to_bf16(float f);

typedef void sd_reduce_fn(void *dst, const void *const *srcs, int nsrc, size_t count,
			  enum smddp_dtype dtype, enum smddp_op op, int avg_div);

/* One entry per implementation compiled in; the arguments are checked. */
sd_reduce_fn sd_reduce_generic;
#if defined(__x86_64__) || defined(__i386__)
#define SD_REDUCE_HAVE_AVX2 1
sd_reduce_fn sd_reduce_avx2;
#endif

/* Test hooks.  The names are "generic" and "avx2".  set_isa(NULL) goes back
 * to the automatic choice; it returns -1 (and changes nothing) for an ISA
 * that is not compiled in or that this CPU lacks.  Not thread-safe against
 * concurrent sd_reduce() calls: for tests only. */
int sd_reduce_set_isa(const char *name);
const char *sd_reduce_isa(void);

#endif
