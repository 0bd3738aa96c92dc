/* errors.c - result strings, version, dtype and op names, the per-thread init error sink. */
#include "config.h"

#include <stdio.h>

#include "base/errors.h"
#include "util/sd.h"

static const char *const result_str[] = {
	[SMDDP_OK] = "success",
	[SMDDP_EINVAL] = "invalid argument",
	[SMDDP_ENOMEM] = "out of memory",
	[SMDDP_ESYSTEM] = "system call failed",
	[SMDDP_ETIMEDOUT] = "timed out",
	[SMDDP_EPEER] = "peer rank failed",
	[SMDDP_EMISMATCH] = "ranks called mismatched collectives or message sizes",
	[SMDDP_EUNSUPPORTED] = "not supported",
	[SMDDP_ECUDA] = "CUDA error",
	[SMDDP_ENETWORK] = "network error",
	[SMDDP_EABORTED] = "communicator aborted",
	[SMDDP_ECONFIG] = "configuration error",
	[SMDDP_EINTERNAL] = "internal error (a bug in libsmddp)",
};

SD_EXPORT const char *smddp_strerror(int result)
{
	if (result < 0 || (size_t)result >= sizeof(result_str) / sizeof(result_str[0]))
		return "unknown result code";
	return result_str[result];
}

SD_EXPORT const char *smddp_version(void)
{
	return PACKAGE_VERSION;
}

static const struct {
	const char *name;
	size_t size;
} dtypes[SMDDP_NUM_DTYPES] = {
	[SMDDP_INT8] = {"int8", 1},	  [SMDDP_UINT8] = {"uint8", 1},
	[SMDDP_INT32] = {"int32", 4},	  [SMDDP_UINT32] = {"uint32", 4},
	[SMDDP_INT64] = {"int64", 8},	  [SMDDP_UINT64] = {"uint64", 8},
	[SMDDP_FLOAT16] = {"float16", 2}, [SMDDP_BFLOAT16] = {"bfloat16", 2},
	[SMDDP_FLOAT32] = {"float32", 4}, [SMDDP_FLOAT64] = {"float64", 8},
};

static const char *const ops[SMDDP_NUM_OPS] = {
	[SMDDP_SUM] = "sum", [SMDDP_PROD] = "prod", [SMDDP_MIN] = "min",
	[SMDDP_MAX] = "max", [SMDDP_AVG] = "avg",
};

SD_EXPORT size_t smddp_dtype_size(enum smddp_dtype dtype)
{
	if ((unsigned)dtype >= SMDDP_NUM_DTYPES)
		return 0;
	return dtypes[dtype].size;
}

SD_EXPORT const char *smddp_dtype_name(enum smddp_dtype dtype)
{
	if ((unsigned)dtype >= SMDDP_NUM_DTYPES)
		return NULL;
	return dtypes[dtype].name;
}

SD_EXPORT const char *smddp_op_name(enum smddp_op op)
{
	if ((unsigned)op >= SMDDP_NUM_OPS)
		return NULL;
	return ops[op];
}

static __thread struct sd_err init_err;

struct sd_err *sd_init_err(void)
{
	return &init_err;
}
