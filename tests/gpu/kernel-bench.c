/* kernel-bench.c - the device reduction kernel against the GPU's own device-to-device copy, same run.
 *
 * For float32, bfloat16 and float16 (and any dtype named) at one size per
 * buffer (256 MiB unless -b says; well above the L2 for the roofline,
 * small to see a launch's fixed costs): the bandwidth of cudaMemcpyAsync device to
 * device (bytes read + bytes written) and of lib/cuda's kernel reducing two
 * sources into one destination (2 reads + 1 write) and into two (the shape
 * of a 2-rank allreduce partition: 2 reads + 2 writes), and the kernel as a
 * plain copy, and the 2 -> 2 reduction as a queued call launches it: its
 * arguments copied from pinned host memory to the GPU on the stream, then
 * read by the kernel when it runs ("queued"), and read from the pinned
 * memory by every block ("host args", the way that cost a queued call
 * about 1.6 us per block).  Each time is the median of -n launches timed
 * by CUDA events around the launch, queued while the stream is held, after
 * warm-up; the inputs are random finite values, not zeros.  Last,
 * cudaMemcpyAsync between the device and pinned host memory, each way (the
 * ceiling of device calls staged between hosts).
 *
 * Usage: kernel-bench [-b BYTES] [-n ITERS] [-d DTYPE]...   (BYTES per buffer, default 256M)
 * Prints one table; exit 0, 1 on a CUDA error, 77 without a GPU.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

#include "config/param.h"
#include "util/sd.h"
#include "cuda/kernels.h"

#define CK(call)                                                                              \
	do {                                                                                  \
		cudaError_t e_ = (call);                                                      \
		if (e_ != cudaSuccess) {                                                      \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,         \
				cudaGetErrorString(e_));                                      \
			exit(1);                                                              \
		}                                                                             \
	} while (0)

static int cmp(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return x < y ? -1 : x > y;
}

enum {
	COPY_API,
	KERNEL_COPY,
	RED_2_1,
	RED_2_2,
	RED_2_2_AT,
	RED_2_2_AT_HOST,
	PINNED_D2H,
	PINNED_H2D
};

/* Holds the stream while the host queues a launch and its events, so that
 * they time the GPU's work and not the host's queueing. */
static void CUDART_CB hold(void *arg)
{
	struct timespec ts = {0, 200000};

	(void)arg;
	nanosleep(&ts, NULL);
}

static float time_one(int what, int dt, void **buf, size_t bytes, int iters, cudaStream_t st)
{
	cudaEvent_t a, b;
	float *ms = calloc((size_t)iters, sizeof(float)), med;
	size_t count = bytes / smddp_dtype_size(dt);
	struct sd_cuda_kargs k, *at = NULL, *at_dev = NULL, *at_gpu = NULL;

	memset(&k, 0, sizeof(k));
	if (what == RED_2_2_AT || what == RED_2_2_AT_HOST) {
		/* As a queued call has them: written to pinned host memory,
		 * copied to the GPU on the stream, read there by the kernel
		 * (lib/cuda/move.c); or read from the pinned memory itself. */
		CK(cudaHostAlloc((void **)&at, sizeof(*at), cudaHostAllocMapped));
		CK(cudaHostGetDevicePointer((void **)&at_dev, at, 0));
		CK(cudaMalloc((void **)&at_gpu, sizeof(*at)));
	}
	k.count = count;
	k.src[0] = buf[0];
	k.src[1] = buf[1];
	k.dst[0] = buf[2];
	k.dst[1] = buf[3];
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	for (int i = -3; i < iters; i++) {
		CK(cudaLaunchHostFunc(st, hold, NULL));
		CK(cudaEventRecord(a, st));
		switch (what) {
		case COPY_API:
			CK(cudaMemcpyAsync(buf[2], buf[0], bytes, cudaMemcpyDeviceToDevice, st));
			break;
		case PINNED_D2H: /* buf[3] is pinned host memory here */
			CK(cudaMemcpyAsync(buf[3], buf[0], bytes, cudaMemcpyDeviceToHost, st));
			break;
		case PINNED_H2D:
			CK(cudaMemcpyAsync(buf[0], buf[3], bytes, cudaMemcpyHostToDevice, st));
			break;
		case KERNEL_COPY:
			k.nsrc = 1, k.ndst = 1;
			CK((cudaError_t)sd_cuda_kernel_reduce(&k, dt, SMDDP_SUM, 1, st, 0));
			break;
		case RED_2_1:
			k.nsrc = 2, k.ndst = 1;
			CK((cudaError_t)sd_cuda_kernel_reduce(&k, dt, SMDDP_SUM, 1, st, 0));
			break;
		case RED_2_2_AT:
		case RED_2_2_AT_HOST:
			k.nsrc = 2, k.ndst = 2, k.ntasks = 1, k.div = 1;
			*at = k;
			if (what == RED_2_2_AT)
				CK(cudaMemcpyAsync(at_gpu, at, sizeof(*at), cudaMemcpyHostToDevice,
						   st));
			CK((cudaError_t)sd_cuda_kernel_reduce_at(what == RED_2_2_AT ? at_gpu : at_dev,
								 1, count, dt, SMDDP_SUM, st, 0));
			break;
		default:
			k.nsrc = 2, k.ndst = 2;
			CK((cudaError_t)sd_cuda_kernel_reduce(&k, dt, SMDDP_SUM, 1, st, 0));
			break;
		}
		CK(cudaEventRecord(b, st));
		CK(cudaEventSynchronize(b));
		if (i >= 0)
			CK(cudaEventElapsedTime(&ms[i], a, b));
	}
	qsort(ms, (size_t)iters, sizeof(float), cmp);
	med = ms[iters / 2];
	free(ms);
	cudaEventDestroy(a);
	cudaEventDestroy(b);
	if (at) {
		cudaFreeHost(at);
		cudaFree(at_gpu);
	}
	return med;
}

int main(int argc, char **argv)
{
	uint64_t bytes = 256ull << 20;
	int iters = 20, dts[SMDDP_NUM_DTYPES], ndt = 0, ndev = 0;
	void *buf[4];
	cudaStream_t st;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-b") && i + 1 < argc) {
			if (sd_parse_size(argv[++i], &bytes) || bytes < 4096) {
				fprintf(stderr, "kernel-bench: -b: a size of 4K or more, e.g. 256M\n");
				return 2;
			}
		} else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
			iters = atoi(argv[++i]);
			if (iters < 1) {
				fprintf(stderr, "kernel-bench: -n: a positive count\n");
				return 2;
			}
		} else if (!strcmp(argv[i], "-d") && i + 1 < argc && ndt < SMDDP_NUM_DTYPES) {
			const char *name = argv[++i];
			int found = -1;
			for (int d = 0; d < SMDDP_NUM_DTYPES; d++)
				if (!strcmp(smddp_dtype_name((enum smddp_dtype)d), name))
					found = d;
			if (found < 0) {
				fprintf(stderr, "kernel-bench: -d: unknown dtype '%s'\n", name);
				return 2;
			}
			dts[ndt++] = found;
		} else {
			fprintf(stderr, "usage: kernel-bench [-b BYTES] [-n ITERS] [-d DTYPE]...\n");
			return 2;
		}
	}
	if (!ndt) {
		dts[ndt++] = SMDDP_FLOAT32;
		dts[ndt++] = SMDDP_BFLOAT16;
		dts[ndt++] = SMDDP_FLOAT16;
	}
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
		printf("SKIP: no CUDA GPU here\n");
		return 77;
	}
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	{
		/* Random finite values: every 16-bit and 32-bit lane masked with
		 * 0x3f3f keeps its exponent well below infinity. */
		uint32_t *h = malloc(bytes);
		uint64_t z = 88172645463325252ull;
		if (!h) {
			fprintf(stderr, "kernel-bench: out of host memory\n");
			return 1;
		}
		for (size_t i = 0; i < bytes / 4; i++) {
			z ^= z << 13, z ^= z >> 7, z ^= z << 17;
			h[i] = (uint32_t)z & 0x3f3f3f3fu;
		}
		for (int i = 0; i < 4; i++) {
			CK(cudaMalloc(&buf[i], bytes));
			CK(cudaMemcpy(buf[i], h, bytes, cudaMemcpyHostToDevice));
		}
		free(h);
	}
	struct cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, 0));
	printf("# kernel-bench on %s (%d SMs): %llu MiB per buffer, median of %d, GB/s = (bytes read "
	       "+ written) / time\n", prop.name, prop.multiProcessorCount,
	       (unsigned long long)(bytes >> 20), iters);
	printf("# %-9s %12s %12s %12s %12s %12s %12s %10s %10s %10s\n", "dtype", "memcpy D2D",
	       "kernel copy", "reduce 2->1", "reduce 2->2", "2->2 queued", "host args",
	       "2->1/copy", "2->2/copy", "queued/2->2");
	for (int d = 0; d < ndt; d++) {
		int dt = dts[d];
		double t_copy = time_one(COPY_API, dt, buf, bytes, iters, st) / 1e3;
		double t_kc = time_one(KERNEL_COPY, dt, buf, bytes, iters, st) / 1e3;
		double t_r21 = time_one(RED_2_1, dt, buf, bytes, iters, st) / 1e3;
		double t_r22 = time_one(RED_2_2, dt, buf, bytes, iters, st) / 1e3;
		double t_at = time_one(RED_2_2_AT, dt, buf, bytes, iters, st) / 1e3;
		double t_ah = time_one(RED_2_2_AT_HOST, dt, buf, bytes, iters, st) / 1e3;
		double bw_copy = 2.0 * bytes / t_copy / 1e9, bw_kc = 2.0 * bytes / t_kc / 1e9;
		double bw21 = 3.0 * bytes / t_r21 / 1e9, bw22 = 4.0 * bytes / t_r22 / 1e9;
		double bwat = 4.0 * bytes / t_at / 1e9, bwah = 4.0 * bytes / t_ah / 1e9;
		printf("  %-9s %12.1f %12.1f %12.1f %12.1f %12.1f %12.1f %10.3f %10.3f %10.3f\n",
		       smddp_dtype_name((enum smddp_dtype)dt), bw_copy, bw_kc, bw21, bw22, bwat, bwah,
		       bw21 / bw_copy, bw22 / bw_copy, bwat / bw22);
	}
	{
		/* Pinned host memory each way: the ceiling of staging device
		 * buffers between hosts (GB/s = bytes moved / time). */
		void *pb[4] = {buf[0], buf[1], buf[2], NULL};
		CK(cudaHostAlloc(&pb[3], bytes, cudaHostAllocPortable));
		memset(pb[3], 1, bytes);
		double t_d2h = time_one(PINNED_D2H, SMDDP_FLOAT32, pb, bytes, iters, st) / 1e3;
		double t_h2d = time_one(PINNED_H2D, SMDDP_FLOAT32, pb, bytes, iters, st) / 1e3;
		printf("# pinned host memory, %llu MiB: device to host %.1f GB/s, host to device "
		       "%.1f GB/s\n", (unsigned long long)(bytes >> 20), bytes / t_d2h / 1e9,
		       bytes / t_h2d / 1e9);
		cudaFreeHost(pb[3]);
	}
	for (int i = 0; i < 4; i++)
		cudaFree(buf[i]);
	cudaStreamDestroy(st);
	return 0;
}
