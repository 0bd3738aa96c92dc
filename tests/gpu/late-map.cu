// tests/gpu/late-map.cu - does compute-sanitizer memcheck accept memory a
// running kernel is given after its launch?
//
// The queued device mode (SMDDP_CUDA_ASYNC=1) launches its kernel first and
// maps the peers' buffers afterwards, while the kernel waits on a flag.  This
// probe does the same in one process, without IPC: a kernel waits for a
// pointer in mapped host memory and reads through it; the buffer is
// allocated before the launch ("early") or after it ("late").  Without a
// sanitizer both must read the right value (the sanitizer stage of
// run-on-device.sh runs them plain first); under memcheck, a report for
// "late" alone says the tool checks a kernel against the allocations of
// its launch.
//
// Usage: late-map early|late.  Exit 0: the value was read; 1: it was not.
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#define CHECK(x)                                                                 \
	do {                                                                     \
		cudaError_t e_ = (x);                                            \
		if (e_ != cudaSuccess) {                                         \
			fprintf(stderr, "late-map: %s: %s\n", #x, cudaGetErrorString(e_)); \
			return 1;                                                \
		}                                                                \
	} while (0)

// Waits (at most about 2^33 cycles, some seconds) for *slot, then copies one int.
__global__ void k_read_late(int *volatile *slot, int *out)
{
	long long t0 = clock64();
	int *p;
	while ((p = *slot) == NULL)
		if (clock64() - t0 > (1LL << 33)) {
			*out = -2;
			return;
		}
	*out = *p;
}

int main(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "early") && strcmp(argv[1], "late"))) {
		fprintf(stderr, "usage: late-map early|late\n");
		return 2;
	}
	int late = !strcmp(argv[1], "late");
	int **slot, *out, *buf = NULL, want = 42;
	cudaStream_t st;
	CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	CHECK(cudaHostAlloc((void **)&slot, sizeof *slot, cudaHostAllocMapped));
	CHECK(cudaHostAlloc((void **)&out, sizeof *out, cudaHostAllocMapped));
	*slot = NULL;
	*out = -1;
	if (!late) {
		CHECK(cudaMalloc((void **)&buf, sizeof *buf));
		CHECK(cudaMemcpy(buf, &want, sizeof want, cudaMemcpyHostToDevice));
	}
	k_read_late<<<1, 1, 0, st>>>((int *volatile *)slot, out);
	CHECK(cudaGetLastError());
	if (late) {
		CHECK(cudaMalloc((void **)&buf, sizeof *buf));
		// on the kernel's stream's side: a stream of its own, not the legacy one
		cudaStream_t cp;
		CHECK(cudaStreamCreateWithFlags(&cp, cudaStreamNonBlocking));
		CHECK(cudaMemcpyAsync(buf, &want, sizeof want, cudaMemcpyHostToDevice, cp));
		CHECK(cudaStreamSynchronize(cp));
		CHECK(cudaStreamDestroy(cp));
	}
	*(int *volatile *)slot = buf;
	cudaError_t e = cudaStreamSynchronize(st);
	printf("late-map %s: %s, read %d (want %d)\n", argv[1], cudaGetErrorString(e), *out, want);
	return e == cudaSuccess && *out == want ? 0 : 1;
}
