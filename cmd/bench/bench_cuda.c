/* cmd/bench/bench_cuda.c - device buffers, the stream and GPU choice of smddp-allreduce-bench --device cuda.
 *
 * Built only with --with-cuda.  One stream per process (non-blocking); the
 * fill, poison and check of bench_data.c work on host copies of the device
 * buffers, moved on the stream, never inside a timed region.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>

#include "bench.h"

static cudaStream_t stream;
static int device = -1;
static char devname[256];

static int fail(char *err, size_t len, const char *what, cudaError_t e)
{
	snprintf(err, len, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
	return -1;
}

int bench_cuda_init(int local_rank, int gpu, char *err, size_t len)
{
	struct cudaDeviceProp prop;
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess || n < 1) {
		snprintf(err, len, "--device cuda: no CUDA GPU is usable here (%s)",
			 e != cudaSuccess ? cudaGetErrorString(e) : "none found");
		return -1;
	}
	if (gpu >= n) {
		snprintf(err, len, "--gpu %d: this machine has %d GPU%s (0..%d)", gpu, n,
			 n > 1 ? "s" : "", n - 1);
		return -1;
	}
	device = gpu >= 0 ? gpu : local_rank % n;
	if ((e = cudaSetDevice(device)) != cudaSuccess)
		return fail(err, len, "cudaSetDevice", e);
	if ((e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) != cudaSuccess)
		return fail(err, len, "cudaStreamCreate", e);
	if (cudaGetDeviceProperties(&prop, device) == cudaSuccess)
		snprintf(devname, sizeof(devname), "%s", prop.name);
	return 0;
}

int bench_cuda_device(void)
{
	return device;
}

const char *bench_cuda_device_name(void)
{
	return devname;
}

void *bench_cuda_stream(void)
{
	return stream;
}

void *bench_cuda_alloc(size_t bytes, char *err, size_t len)
{
	void *p = NULL;
	cudaError_t e = cudaMalloc(&p, bytes ? bytes : 256);

	if (e != cudaSuccess) {
		fail(err, len, "cudaMalloc of the buffers (lower -e?)", e);
		return NULL;
	}
	if ((e = cudaMemset(p, 0, bytes ? bytes : 256)) == cudaSuccess)
		e = cudaDeviceSynchronize();
	if (e != cudaSuccess) {
		fail(err, len, "cudaMemset of the buffers", e);
		cudaFree(p);
		return NULL;
	}
	return p;
}

void bench_cuda_free(void *p)
{
	if (p)
		cudaFree(p);
}

int bench_cuda_copy(void *dst, const void *src, size_t bytes, int kind, char *err, size_t len)
{
	static const enum cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
						    cudaMemcpyDeviceToDevice};
	cudaError_t e;

	if (!bytes)
		return 0;
	/* On the benchmark's stream, always: a plain cudaMemcpy from pageable
	 * memory may return before its DMA lands, and nothing would order it
	 * before the next call on this (non-blocking) stream. */
	e = cudaMemcpyAsync(dst, src, bytes, kinds[kind], stream);
	if (e == cudaSuccess && kind != 2)
		e = cudaStreamSynchronize(stream);
	if (e != cudaSuccess)
		return fail(err, len, "cudaMemcpyAsync", e);
	return 0;
}

int bench_cuda_sync(char *err, size_t len)
{
	cudaError_t e = cudaStreamSynchronize(stream);

	if (e != cudaSuccess)
		return fail(err, len, "cudaStreamSynchronize", e);
	return 0;
}
