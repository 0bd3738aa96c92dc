/* reduce_avx2.c - sd_reduce() for x86 CPUs with AVX2 and F16C, chosen at run time. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "util/sd.h"
#include "reduce/half.h"
#include "reduce/reduce.h"

#ifdef SD_REDUCE_HAVE_AVX2
#include <immintrin.h>

/* Everything below, the inline conversions of half.h included once they
 * are inlined here, is compiled for AVX2; reduce.c calls it only on CPUs
 * that have it.  No FMA: results must not depend on the path taken. */
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx2,f16c"))), apply_to = function)
#else
#pragma GCC target("avx2,f16c")
#endif

#define SD_REDUCE_ENTRY sd_reduce_avx2
#define SD_REDUCE_F16C 1
#include "reduce/reduce_kernels.h"

#ifdef __clang__
#pragma clang attribute pop
#endif
#endif
