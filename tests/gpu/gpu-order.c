/* gpu-order.c - gpu-conformance: stream ordering (order, twostreams, overlap) and the rule for
 * whether a device call returns once queued.
 */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include <smddp/smddp.h>

#include "gpu-conformance.h"

/* ---- stream ordering --------------------------------------------------------- */

/* Does a device call return once queued?  smddp(7)'s rule for
 * SMDDP_CUDA_ASYNC, applied independently: auto means yes between hosts
 * unless compute-sanitizer is loaded; on one node, yes unless other ranks
 * share this GPU (here: more ranks on the node than GPUs, as ranks take GPU
 * local_rank % count) and the MPS daemon's control socket is absent. */
int queued_mode(void)
{
	const char *av = getenv("SMDDP_CUDA_ASYNC"), *pd = getenv("CUDA_MPS_PIPE_DIRECTORY");
	char path[4096];
	struct stat st;
	int ndev = 0;

	const char *inj = getenv("CUDA_INJECTION64_PATH");

	if (av && *av && strcmp(av, "auto"))
		return !strcmp(av, "1") || !strcmp(av, "true") || !strcmp(av, "yes") ||
		       !strcmp(av, "on");
	if (inj && strstr(inj, "sanitizer"))
		return 0;
	if (smddp_comm_local_size(comm) != smddp_comm_size(comm))
		return 1;
	cudaGetDeviceCount(&ndev);
	if (smddp_comm_local_size(comm) <= ndev)
		return 1;
	snprintf(path, sizeof(path), "%s/control", pd && *pd ? pd : "/tmp/nvidia-mps");
	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

void CUDART_CB hold(void *arg)
{
	int ms = arg ? *(const int *)arg : 300;
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

void order(void)
{
	size_t count = 1 << 20, m = count * 4;
	int async = queued_mode();
	float *hin, *hres;
	char *after;

	CK(cudaMallocHost((void **)&hin, m));
	CK(cudaMallocHost((void **)&hres, m));
	CK(cudaMalloc((void **)&after, m));
	/* The first call sets the communicator's GPU side up: not timed. */
	if (smddp_allreduce(dsend, drecv, 16, SMDDP_FLOAT32, SMDDP_SUM, comm, stream) != SMDDP_OK) {
		printf("FAIL rank %d: order: first allreduce: %s\n", rank, smddp_last_error(comm));
		failures++;
		return;
	}
	for (int round = 0; round < 3; round++) {
		for (size_t j = 0; j < count; j++)
			hin[j] = (float)(rank + 1) * (float)(j % 100 + round);
		CK(cudaMemsetAsync(dsend, 0, m, stream));
		CK(cudaMemsetAsync(drecv, 0xff, m, stream));
		/* Held back 300 ms, then the input arrives: a call that read
		 * early would sum zeros. */
		CK(cudaLaunchHostFunc(stream, hold, NULL));
		CK(cudaMemcpyAsync(dsend, hin, m, cudaMemcpyHostToDevice, stream));
		double t0 = sd_now_s();
		int rc = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
		double dt = sd_now_s() - t0;
		/* The copy after: reads the output the moment the stream allows. */
		CK(cudaMemcpyAsync(after, drecv, m, cudaMemcpyDeviceToDevice, stream));
		CK(cudaMemcpyAsync(hres, after, m, cudaMemcpyDeviceToHost, stream));
		if (rc) {
			printf("FAIL rank %d: order: allreduce returned %s: %s\n", rank,
			       smddp_strerror(rc), smddp_last_error(comm));
			failures++;
			return;
		}
		if (async && dt > 0.1) {
			printf("FAIL rank %d: order: the call blocked %.3f s while its stream was "
			       "held: in the queue-and-return mode it must only queue\n", rank, dt);
			failures++;
		}
		if (!async && dt < 0.25) {
			printf("FAIL rank %d: order: the call returned after %.3f s, before its "
			       "stream (held 300 ms) could have reached it\n", rank, dt);
			failures++;
		}
		CK(cudaStreamSynchronize(stream));
		float tri = (float)(nranks * (nranks + 1) / 2);
		int bad = 0;
		for (size_t j = 0; j < count && bad < 3; j++) {
			float want = tri * (float)(j % 100 + round);
			if (hres[j] != want) {
				printf("FAIL rank %d: order round %d: element %zu is %g, expected %g\n",
				       rank, round, j, hres[j], want);
				bad++;
			}
		}
		if (bad)
			failures++;
		else
			passed++;
		if (rank == 0)
			printf("# order round %d (%s): the call returned after %.1f us, its stream "
			       "held 300 ms\n", round, async ? "async" : "sync", dt * 1e6);
	}
	cudaFree(after);
	cudaFreeHost(hin);
	cudaFreeHost(hres);
}

/* Calls of one communicator on two streams, the first held 300 ms by a
 * host function: the second stream's call must still come after it (the
 * staged path shares its slots between calls), and both be right. */
void twostreams(void)
{
	size_t count = 1 << 20, m = count * 4;
	cudaStream_t s2;
	float *hin, *hres;
	char *in2, *out2;

	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaMallocHost((void **)&hin, 2 * m));
	CK(cudaMallocHost((void **)&hres, 2 * m));
	CK(cudaMalloc((void **)&in2, m));
	CK(cudaMalloc((void **)&out2, m));
	for (int round = 0; round < 3; round++) {
		for (size_t j = 0; j < count; j++) {
			hin[j] = (float)(rank + 1) * (float)(j % 100 + round);
			hin[count + j] = (float)(rank + 1) * (float)(j % 7 + 2 * round);
		}
		CK(cudaLaunchHostFunc(stream, hold, NULL));
		CK(cudaMemcpyAsync(dsend, hin, m, cudaMemcpyHostToDevice, stream));
		int rc = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
		CK(cudaMemcpyAsync(in2, hin + count, m, cudaMemcpyHostToDevice, s2));
		if (!rc)
			rc = smddp_allreduce(in2, out2, count, SMDDP_FLOAT32, SMDDP_SUM, comm, s2);
		CK(cudaMemcpyAsync(hres, drecv, m, cudaMemcpyDeviceToHost, stream));
		CK(cudaMemcpyAsync(hres + count, out2, m, cudaMemcpyDeviceToHost, s2));
		CK(cudaStreamSynchronize(stream));
		CK(cudaStreamSynchronize(s2));
		if (rc) {
			printf("FAIL rank %d: twostreams: allreduce returned %s: %s\n", rank,
			       smddp_strerror(rc), smddp_last_error(comm));
			failures++;
			break;
		}
		float tri = (float)(nranks * (nranks + 1) / 2);
		int bad = 0;
		for (size_t j = 0; j < count && bad < 3; j++) {
			float w1 = tri * (float)(j % 100 + round), w2 = tri * (float)(j % 7 + 2 * round);
			if (hres[j] != w1 || hres[count + j] != w2) {
				printf("FAIL rank %d: twostreams round %d: element %zu is %g and %g, "
				       "expected %g and %g\n", rank, round, j, hres[j], hres[count + j],
				       w1, w2);
				bad++;
			}
		}
		if (bad)
			failures++;
		else
			passed++;
	}
	cudaFree(in2);
	cudaFree(out2);
	cudaFreeHost(hin);
	cudaFreeHost(hres);
	cudaStreamDestroy(s2);
}

/* The call returns while long GPU work queued before it still runs
 * (queue-and-return mode), or after it (blocking mode); the work ends by
 * writing the input, so a call that read early sums the wrong values. */
void overlap(void)
{
	size_t big = (size_t)1 << 30, count = 1 << 18, m = count * 4;
	int async = queued_mode(), reps = 200;
	cudaEvent_t e0, e1;
	float *hres, ms = 0;
	char *work;

	CK(cudaMalloc((void **)&work, big));
	CK(cudaMallocHost((void **)&hres, m));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	/* The first call sets the GPU side up (and decides the mode). */
	if (smddp_allreduce(dsend, drecv, 16, SMDDP_FLOAT32, SMDDP_SUM, comm, stream) != SMDDP_OK) {
		printf("FAIL rank %d: overlap: first allreduce: %s\n", rank, smddp_last_error(comm));
		failures++;
		return;
	}
	CK(cudaStreamSynchronize(stream));
	for (int round = 0; round < 3; round++) {
		CK(cudaMemsetAsync(drecv, 0, m, stream));
		CK(cudaEventRecord(e0, stream));
		for (int i = 0; i < reps; i++)
			CK(cudaMemsetAsync(work, i, big, stream));
		/* bytes of 1 + round + rank: float bits, summed exactly */
		CK(cudaMemsetAsync(dsend, 0x3f, m, stream));
		CK(cudaEventRecord(e1, stream));
		double t0 = sd_now_s();
		int rc = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
		double dt = sd_now_s() - t0;

		CK(cudaMemcpyAsync(hres, drecv, m, cudaMemcpyDeviceToHost, stream));
		CK(cudaStreamSynchronize(stream));
		CK(cudaEventElapsedTime(&ms, e0, e1));
		if (rc) {
			printf("FAIL rank %d: overlap: allreduce returned %s: %s\n", rank,
			       smddp_strerror(rc), smddp_last_error(comm));
			failures++;
			break;
		}
		float one;
		uint32_t bits = 0x3f3f3f3fu;
		memcpy(&one, &bits, 4);
		int bad = 0;
		for (size_t j = 0; j < count && !bad; j++)
			if (hres[j] != one * (float)nranks) {
				printf("FAIL rank %d: overlap round %d: element %zu is %g, expected "
				       "%g\n", rank, round, j, hres[j], one * (float)nranks);
				bad = 1;
			}
		double work_s = ms / 1e3;
		if (async && dt > 0.1 * work_s) {
			printf("FAIL rank %d: overlap: the call took %.1f ms to return, %.0f %% of "
			       "the %.1f ms of work queued before it (at most 10 %%)\n", rank,
			       dt * 1e3, 100 * dt / work_s, work_s * 1e3);
			bad = 1;
		}
		if (!async && dt < 0.5 * work_s) {
			printf("FAIL rank %d: overlap: the call returned after %.1f ms, before the "
			       "%.1f ms of work queued before it could have ended\n", rank, dt * 1e3,
			       work_s * 1e3);
			bad = 1;
		}
		if (bad)
			failures++;
		else
			passed++;
		printf("# overlap rank %d round %d (%s): the call returned after %.3f ms, %.1f %% "
		       "of the %.1f ms of GPU work queued before it\n", rank, round,
		       async ? "queued" : "blocking", dt * 1e3, 100 * dt / work_s, work_s * 1e3);
	}
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	cudaFree(work);
	cudaFreeHost(hres);
}

/* ---- the direct path's registrations (lib/cuda/direct.c) ----------------------- */

/* Allreduces a little over 1 MiB (above SMDDP_CUDA_FAST's default: the
 * direct path where calls are queued) over more allocations than a rank
 * has registration slots, three passes round-robin, at offsets that differ
 * by rank, in place every third call; then one allocation freed and made
 * anew (a new buffer id, often the same address).  Rank 0 sleeps 200 ms
 * before its first call on each new allocation, so that the peers' kernels
 * wait until their hosts have mapped it (a miss).  Every result checked. */
void regs(void)
{
	enum { NB = 40 };
	const size_t count = ((size_t)1 << 18) + 5, m = count * 4, len = m + 4096;
	char *buf[NB];
	float *hin, *hres;
	int bad = 0, calls = 0;

	CK(cudaMallocHost((void **)&hin, m));
	CK(cudaMallocHost((void **)&hres, m));
	for (int i = 0; i < NB; i++)
		CK(cudaMalloc((void **)&buf[i], len));
	for (int pass = 0; pass < 4 && !bad; pass++) {
		if (pass == 3) {
			/* A new allocation where buffer 7 was. */
			CK(cudaFree(buf[7]));
			CK(cudaMalloc((void **)&buf[7], len));
		}
		for (int i = 0; i < NB && !bad; i++) {
			int b = pass == 3 ? 7 : i, inplace = i % 3 == 0;
			float *in = (float *)(buf[b] + 64 * (size_t)rank);
			float *out = inplace ? in : (float *)(buf[(b + 1) % NB] + 64 * (size_t)((rank + 1) % 3));
			int rc;

			if (pass == 3 && i > 2)
				break;
			for (size_t j = 0; j < count; j++)
				hin[j] = (float)(rank + 1) * (float)(j % 97 + (size_t)i + (size_t)pass);
			CK(cudaMemcpyAsync(in, hin, m, cudaMemcpyHostToDevice, stream));
			if (rank == 0 && (pass == 0 || (pass == 3 && i == 0))) {
				int ms = 200;

				CK(cudaStreamSynchronize(stream));
				hold(&ms);
			}
			rc = smddp_allreduce(in, out, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
			calls++;
			if (rc != SMDDP_OK) {
				printf("FAIL rank %d: regs: pass %d buffer %d: %s\n", rank, pass, b,
				       smddp_last_error(comm));
				failures++;
				bad = 1;
				break;
			}
			CK(cudaMemcpyAsync(hres, out, m, cudaMemcpyDeviceToHost, stream));
			CK(cudaStreamSynchronize(stream));
			for (size_t j = 0; j < count; j++) {
				float want = (float)(nranks * (nranks + 1) / 2) *
					     (float)(j % 97 + (size_t)i + (size_t)pass);

				if (hres[j] != want) {
					printf("FAIL rank %d: regs: pass %d buffer %d%s: element %zu is %g, "
					       "want %g\n",
					       rank, pass, b, inplace ? " (in place)" : "", j,
					       (double)hres[j], (double)want);
					failures++;
					bad = 1;
					break;
				}
			}
		}
	}
	if (!bad) {
		printf("ok rank %d: regs: %d allreduces over %d allocations checked\n", rank, calls, NB);
		passed++;
	}
	for (int i = 0; i < NB; i++)
		cudaFree(buf[i]);
	cudaFreeHost(hin);
	cudaFreeHost(hres);
}
