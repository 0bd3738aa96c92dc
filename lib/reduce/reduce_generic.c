/* reduce_generic.c - sd_reduce() for the base instruction set of the target. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "util/sd.h"
#include "reduce/half.h"
#include "reduce/reduce.h"

#define SD_REDUCE_ENTRY sd_reduce_generic
#include "reduce/reduce_kernels.h"
