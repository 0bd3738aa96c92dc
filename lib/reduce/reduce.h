/* reduce.h - internals of the host reduction kernels, shared with their tests.
 *
 * lib/reduce/reduce_kernels.h is one implementation of sd_reduce(), written
 * so that GCC vectorises it; it is compiled once per instruction set
 * (reduce_generic.c: the base ISA of the target; reduce_avx2.c: AVX2 and
 * F16C), and reduce.c picks the best one the CPU has, once.
 */
#ifndef SD_REDUCE_REDUCE_H
#define SD_REDUCE_REDUCE_H

#include "util/sd.h"

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
