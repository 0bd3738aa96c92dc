/* base/checks.h - one macro per foreign error kind: system calls, CUDA, libfabric.
 *
 * As NVIDIA NCCL's src/include/checks.h: a failure of something that is not
 * ours (errno, a cudaError_t, a negative libfabric code) becomes our result
 * and our sentence in one place, worded one way per kind, so that a user
 * reads the same shape of message whichever file met it:
 *
 *   system call  "<what>: <strerror(errno)>"
 *   CUDA         "<what>: <cudaGetErrorString(e)> (<cudaGetErrorName(e)>)"
 *   libfabric    "libfabric: <what>: <fi_strerror(-ret)>"
 *
 * Each writes into either sink of docs/internals/errors.md: a communicator
 * (sd_comm_error()) or a struct sd_err (sd_err_set()); SD_FAIL() picks by
 * the sink's type.  The ..._ERR forms return the result (return them); the
 * ..._CHECK forms run a call and return on failure, the ..._CHECK_GOTO
 * forms set rc and jump to the one cleanup label.  "what" is a printf
 * format with its arguments.  The CUDA and libfabric macros name their
 * library's functions only where they are expanded, so this header needs
 * neither library: lib/cuda/ and lib/transport/fabric/ include them.
 */
#ifndef SD_BASE_CHECKS_H
#define SD_BASE_CHECKS_H

#include <errno.h>
#include <string.h>

#include "base/comm-types.h"
#include "util/sd.h"

/* The sentence into whichever sink: a struct smddp_comm * or a struct sd_err *. */
#define SD_FAIL(sink, rc, ...)                                                      \
	_Generic((sink),                                                            \
		struct smddp_comm *: sd_comm_error,                                 \
		struct sd_err *: sd_err_set)((sink), (rc), __VA_ARGS__)

/* ---- system calls: -1 with errno ------------------------------------------ */
#define SD_SYS_ERR(sink, rc, fmt, ...) SD_FAIL(sink, rc, fmt ": %s", ##__VA_ARGS__, strerror(errno))
/* call retried on EINTR; -1 returns rc with the sentence. */
#define SD_SYS_CHECK(call, sink, rc, fmt, ...)                                      \
	do {                                                                        \
		if (SD_RETRY_EINTR(call) == -1)                                     \
			return SD_SYS_ERR(sink, rc, fmt, ##__VA_ARGS__);            \
	} while (0)

/* ---- CUDA: a cudaError_t -------------------------------------------------- */
#define SD_CUDA_ERR(sink, e, fmt, ...)                                              \
	SD_FAIL(sink, SMDDP_ECUDA, fmt ": %s (%s)", ##__VA_ARGS__,                  \
		cudaGetErrorString((cudaError_t)(e)), cudaGetErrorName((cudaError_t)(e)))
#define SD_CUDA_CHECK(call, sink, fmt, ...)                                         \
	do {                                                                        \
		cudaError_t sd_e_ = (call);                                         \
		if (sd_e_ != cudaSuccess)                                           \
			return SD_CUDA_ERR(sink, sd_e_, fmt, ##__VA_ARGS__);        \
	} while (0)
#define SD_CUDA_CHECK_GOTO(call, sink, rc, label, fmt, ...)                         \
	do {                                                                        \
		cudaError_t sd_e_ = (call);                                         \
		if (sd_e_ != cudaSuccess) {                                         \
			(rc) = SD_CUDA_ERR(sink, sd_e_, fmt, ##__VA_ARGS__);        \
			goto label;                                                 \
		}                                                                   \
	} while (0)

/* ---- libfabric: a negative code (fi_cq_readerr's err: positive) ----------- */
/* ..._CHECK_GOTO: for the calls that return 0 or a negative code. */
#define SD_FI_ERR(sink, rc, ret, fmt, ...)                                          \
	SD_FAIL(sink, rc, "libfabric: " fmt ": %s", ##__VA_ARGS__,                  \
		fi_strerror((int)((ret) < 0 ? -(ret) : (ret))))
#define SD_FI_CHECK_GOTO(call, sink, rc, label, fmt, ...)                           \
	do {                                                                        \
		long sd_fr_ = (long)(call);                                         \
		if (sd_fr_ != 0) {                                                  \
			(rc) = SD_FI_ERR(sink, SMDDP_ENETWORK, sd_fr_, fmt, ##__VA_ARGS__); \
			goto label;                                                 \
		}                                                                   \
	} while (0)

#endif
