/* internal.h - what the files of lib/cuda/ share: the buffer checks and the wait (device.c). */
#ifndef SD_CUDA_INTERNAL_H
#define SD_CUDA_INTERNAL_H

#include <stdint.h>

#include <cuda_runtime.h>

#include "cuda/cuda.h"

/* A buffer as its owner publishes it. */
struct buf_pub {
	cudaIpcMemHandle_t h;
	uint64_t base, off, id, size;
	int32_t present, pad;
};

/* The buffers of call k: cudaMalloc'ed memory of one GPU (*dev, or set
 * there when -1), long enough for the call, overlapping only in the
 * documented in-place layouts; b[0] sendbuf, b[1] recvbuf (present 0 when
 * the call does not touch it on this rank).  Loads the driver's entry
 * points first.  SMDDP_EINVAL with a sentence, or SMDDP_ECUDA. */
int sd_cuda_check_call(struct smddp_comm *c, const struct sd_cuda_call *k, int *dev,
		       struct buf_pub b[2]);

/* Polls query(obj) (sd_cuda_q_event: cudaEventQuery) until it says yes
 * (SMDDP_OK), fails (SMDDP_ECUDA, the CUDA error in *err), timeout_ns
 * passes (SMDDP_ETIMEDOUT) or *stop turns nonzero (SMDDP_EABORTED; stop
 * may be NULL): the loop of lib/util/wait.c.  No message: the caller
 * words it. */
int sd_cuda_wait(cudaError_t (*query)(void *), void *obj, uint64_t timeout_ns, const int *stop,
		 cudaError_t *err);
struct smddp_comm;
/* ... and SMDDP_EABORTED once smddp_comm_cancel is called on cancel_of
 * (NULL: none): for the waits that do not involve the peers yet, which
 * the transport's health checks would not see. */
int sd_cuda_wait_cancel(cudaError_t (*query)(void *), void *obj, uint64_t timeout_ns,
			const int *stop, const struct smddp_comm *cancel_of, cudaError_t *err);
/* The SMDDP_EABORTED of such a wait as the call's result: the cancel's
 * sentence if smddp_comm_cancel was called on c, else "the communicator
 * was destroyed or aborted <when>". */
int sd_cuda_stopped(struct smddp_comm *c, const char *when);
cudaError_t sd_cuda_q_event(void *event);

/* A 32-bit tag of what call k is (collective, count, dtype, op, root), which the
 * kernels of fast.c and direct.c compare with their peers': one function,
 * so that a call fast on one rank and direct on another (another count)
 * is told from a match. */
static inline uint32_t sd_cuda_call_tag(const struct sd_cuda_call *k)
{
	uint64_t x = (uint64_t)k->count * 0x9e3779b97f4a7c15ull;

	x ^= (uint64_t)(k->coll * 131 + k->dtype * 17 + k->op) * 0xc2b2ae3d27d4eb4full;
	x ^= (uint64_t)(uint32_t)k->root * 0x165667b19e3779f9ull;
	x ^= x >> 29;
	return (uint32_t)x | 1u;
}

#endif
