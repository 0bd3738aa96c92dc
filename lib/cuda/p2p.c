/* p2p.c - sends, receives, alltoallv, gather and scatter of CUDA device memory, through host copies.
 *
 * Each device buffer of the batch is copied into host memory on the
 * caller's stream (after the work queued before the call), the batch runs
 * on the host copies (lib/coll/p2p.c: shared memory inside the node, the
 * fabric between hosts), and what was received is copied back on the same
 * stream, which the call waits for before it returns: as the collectives'
 * default (SMDDP_CUDA_ASYNC=0), the call returns when done, and the work
 * queued on the stream after it sees the result.  Moving the data by CUDA
 * IPC inside a node, without the host copies, is not done yet.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "base/comm-types.h"
#include "coll/coll.h"
#include "cuda/cuda.h"

static int fail(struct smddp_comm *c, cudaError_t e, const char *what)
{
	return sd_comm_error(c, SMDDP_ECUDA, "%s: %s (%s)", what, cudaGetErrorString(e),
			     cudaGetErrorName(e));
}

int sd_cuda_p2p(struct smddp_comm *c, struct sd_p2p_op *ops, int n, void *stream)
{
	cudaStream_t st = stream;
	void **dev = calloc((size_t)n + 1, sizeof(*dev));
	struct cudaPointerAttributes at;
	cudaError_t e = cudaSuccess;
	int rc = SMDDP_OK, old = -1, gpu = -1;

	if (!dev)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	/* The GPU of the buffers: the copies run there. */
	for (int i = 0; i < n && gpu < 0; i++)
		if (ops[i].bytes && cudaPointerGetAttributes(&at, ops[i].buf) == cudaSuccess &&
		    at.type == cudaMemoryTypeDevice)
			gpu = at.device;
	cudaGetDevice(&old);
	if (gpu >= 0 && (e = cudaSetDevice(gpu)) != cudaSuccess) {
		rc = fail(c, e, "cudaSetDevice");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		void *h;

		if (!ops[i].bytes)
			continue;
		h = malloc(ops[i].bytes);
		if (!h) {
			rc = sd_comm_error(c, SMDDP_ENOMEM, "out of memory for %zu bytes",
					   ops[i].bytes);
			goto out;
		}
		dev[i] = ops[i].buf;
		ops[i].buf = h;
		if (ops[i].is_send &&
		    (e = cudaMemcpyAsync(h, dev[i], ops[i].bytes, cudaMemcpyDeviceToHost, st)) !=
			    cudaSuccess) {
			rc = fail(c, e, "copying a send buffer to the host");
			goto out;
		}
	}
	if ((e = cudaStreamSynchronize(st)) != cudaSuccess) {
		rc = fail(c, e, "waiting for the stream");
		goto out;
	}
	rc = sd_coll_p2p(c, ops, n);
	for (int i = 0; i < n; i++)
		if (dev[i] && !ops[i].is_send && ops[i].done &&
		    (e = cudaMemcpyAsync(dev[i], ops[i].buf, ops[i].bytes, cudaMemcpyHostToDevice,
					 st)) != cudaSuccess) {
			rc = rc ? rc : fail(c, e, "copying a received message to the device");
			break;
		}
	/* The host copies go at the end: the stream must be past them. */
	if ((e = cudaStreamSynchronize(st)) != cudaSuccess && !rc)
		rc = fail(c, e, "waiting for the stream");
out:
	for (int i = 0; i < n; i++)
		if (dev[i]) {
			free(ops[i].buf);
			ops[i].buf = dev[i];
		}
	free(dev);
	if (old >= 0)
		cudaSetDevice(old);
	return rc;
}
