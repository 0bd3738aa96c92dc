// tests/gpu/ipc-close.cu - what a CUDA IPC close waits for, and what an open beside it does.
//
// lib/cuda/ipc.c closes a peer's mapping (cudaIpcCloseMemHandle) after
// dropping its process-wide lock, on two premises taken from an H200 hang
// (commit d1ccde1) and from cudaIpcOpenMemHandle's documentation: the
// close waits for the whole context (work on other streams too), and an
// open of the same handle meanwhile takes one more reference on the same
// mapping, which the close does not unmap.  This probe checks both on the
// driver at hand, and whether the driver itself holds an open back while
// a close waits (then no lock of ours matters).
//
// A child process allocates buffers A and B, fills them with 0x5a and
// passes their handles; the parent maps A, then, with a kernel spinning
// SPIN_MS on another stream, closes A on a thread while the main thread,
// 200 ms into that close, opens B and then A again; it reads A through
// the second mapping after the close returned.  Lines "PROBE name value";
// exit 0 when the second mapping of A was the same pointer and still
// read right, 1 otherwise (a premise of ipc.c fails), 2 on a CUDA error.
//
// Usage: ipc-close [SPIN_MS] (default 1000).
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(x)                                                                         \
	do {                                                                             \
		cudaError_t e_ = (x);                                                    \
		if (e_ != cudaSuccess) {                                                 \
			fprintf(stderr, "ipc-close: %s: %s\n", #x, cudaGetErrorString(e_)); \
			exit(2);                                                         \
		}                                                                        \
	} while (0)

#define LEN (4 << 20)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

// Spins about ns nanoseconds of the GPU's global timer.
__global__ void k_spin(long long ns)
{
	unsigned long long t0, t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	while ((long long)(t - t0) < ns);
}

static void *closed_at_ptr;
static double close_start, close_end;

static void *closer(void *p)
{
	close_start = now();
	CHECK(cudaIpcCloseMemHandle(p));
	close_end = now();
	return NULL;
}

static int child(int to_parent, int from_parent)
{
	cudaIpcMemHandle_t h[2];
	void *buf[2];
	char done;

	for (int i = 0; i < 2; i++) {
		CHECK(cudaMalloc(&buf[i], LEN));
		CHECK(cudaMemset(buf[i], 0x5a, LEN));
		CHECK(cudaIpcGetMemHandle(&h[i], buf[i]));
	}
	CHECK(cudaDeviceSynchronize());
	if (write(to_parent, h, sizeof(h)) != (ssize_t)sizeof(h))
		return 2;
	// until the parent is done with the mappings
	if (read(from_parent, &done, 1) < 0)
		return 2;
	return 0;
}

int main(int argc, char **argv)
{
	int spin_ms = argc > 1 ? atoi(argv[1]) : 1000, up[2], down[2], st, bad = 0;
	cudaIpcMemHandle_t h[2];
	cudaStream_t s;
	void *a = NULL, *b = NULL, *a2 = NULL;
	double t0, open_b, open_a, b_end, a_end;
	pthread_t t;
	unsigned char *host;

	if (pipe(up) || pipe(down))
		return 2;
	pid_t pid = fork();
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		_exit(child(up[1], down[0]));
	}
	close(up[1]);
	close(down[0]);
	if (read(up[0], h, sizeof(h)) != (ssize_t)sizeof(h)) {
		fprintf(stderr, "ipc-close: no handles from the child\n");
		return 2;
	}
	CHECK(cudaSetDevice(0));
	CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	host = (unsigned char *)malloc(LEN);

	// an idle close, for scale
	CHECK(cudaIpcOpenMemHandle(&a, h[0], cudaIpcMemLazyEnablePeerAccess));
	t0 = now();
	CHECK(cudaIpcCloseMemHandle(a));
	printf("PROBE close-idle-s %.6f\n", now() - t0);

	// the close beside a kernel on another stream; the opens 200 ms into it
	CHECK(cudaIpcOpenMemHandle(&a, h[0], cudaIpcMemLazyEnablePeerAccess));
	closed_at_ptr = a;
	k_spin<<<1, 1, 0, s>>>((long long)spin_ms * 1000000);
	CHECK(cudaGetLastError());
	pthread_create(&t, NULL, closer, a);
	usleep(200000);
	t0 = now();
	CHECK(cudaIpcOpenMemHandle(&b, h[1], cudaIpcMemLazyEnablePeerAccess));
	b_end = now();
	open_b = b_end - t0;
	t0 = now();
	cudaError_t e = cudaIpcOpenMemHandle(&a2, h[0], cudaIpcMemLazyEnablePeerAccess);
	a_end = now();
	open_a = a_end - t0;
	pthread_join(t, NULL);
	printf("PROBE close-beside-%d-ms-kernel-s %.6f\n", spin_ms, close_end - close_start);
	printf("PROBE open-other-during-close-s %.6f (the close %s when it returned)\n", open_b,
	       close_end > b_end ? "still ran" : "had ended");
	printf("PROBE open-same-during-close-s %.6f (the close %s when it returned): %s\n", open_a,
	       close_end > a_end ? "still ran" : "had ended",
	       e == cudaSuccess ? (a2 == closed_at_ptr ? "same pointer" : "another pointer")
				: cudaGetErrorString(e));
	if (e != cudaSuccess) {
		bad = 1;
	} else {
		cudaError_t r = cudaMemcpy(host, a2, LEN, cudaMemcpyDeviceToHost);
		int ok = r == cudaSuccess;

		for (size_t i = 0; ok && i < LEN; i++)
			ok = host[i] == 0x5a;
		printf("PROBE reopened-mapping-after-close %s\n",
		       r != cudaSuccess ? cudaGetErrorString(r) : ok ? "reads right" : "reads WRONG");
		bad = !ok;
		(void)cudaGetLastError();
		CHECK(cudaIpcCloseMemHandle(a2));
	}
	CHECK(cudaIpcCloseMemHandle(b));
	printf("PROBE verdict: %s\n",
	       bad ? "a premise of lib/cuda/ipc.c does not hold here"
		   : close_end - close_start < spin_ms / 2000.0
			 ? "the close did not wait for the other stream's kernel; the re-open holds"
		   : open_b > 0.1 || open_a > 0.1
			 ? "the close waits for the context, and the driver holds opens back meanwhile"
			 : "the close waits for the context; opens beside it go through; the re-open holds");
	if (write(down[1], "x", 1) != 1)
		bad = 1;
	waitpid(pid, &st, 0);
	return bad;
}
