/* device.h - device.c: the driver's entry points, the buffer checks, the waits on the GPU. */
#ifndef SD_CUDA_DEVICE_H
#define SD_CUDA_DEVICE_H

#include <stdint.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "cuda/internal.h"

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

/* Bytes of sendbuf and recvbuf that call k touches on rank rank. */
void sd_cuda_extents(const struct sd_cuda_call *k, int n, int rank, size_t *sb, size_t *rb);
/* Checks that p is device memory of device *dev (or sets *dev when it is
 * -1) holding bytes bytes, and fills its allocation's base, offset and id. */
int sd_cuda_buffer_info(struct smddp_comm *c, const void *p, size_t bytes, const char *what,
			int *dev, struct buf_pub *b);
/* cuStreamWaitValue32 (GEQ) through the runtime's entry point; a CUresult. */
int sd_cuda_wait32(cudaStream_t st, CUdeviceptr addr, uint32_t value);
/* cuStreamWriteValue32 (after the stream's earlier work, its writes
 * visible first); a CUresult. */
int sd_cuda_write32(cudaStream_t st, CUdeviceptr addr, uint32_t value);
/* Until *w reaches t (a stream wrote it): SMDDP_OK, SMDDP_ECUDA (the
 * context failed, as st shows: *err), SMDDP_ETIMEDOUT after timeout_ns,
 * SMDDP_EABORTED once *stop is set or smddp_comm_cancel is called on
 * cancel_of (NULL: none). */
int sd_cuda_wait_word(const volatile uint32_t *w, uint32_t t, cudaStream_t st, uint64_t timeout_ns,
		      const int *stop, const struct smddp_comm *cancel_of, cudaError_t *err);

/* Host thread: a queued call on stream st goes after the last queued
 * call (of either path) when that was on another stream. */
cudaError_t sd_cuda_after_last(struct sd_cuda *cu, cudaStream_t st);

#endif
