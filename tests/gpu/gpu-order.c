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

#include <cuda.h>
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
	/* smddp_comm_get_cuda_mode: auto has not decided before the first
	 * device collective (one rank always queues its copy), and says the
	 * mode that the timing below expects after it. */
	const char *av = getenv("SMDDP_CUDA_ASYNC");
	int mode = -2, want = av && *av && strcmp(av, "auto") ? async
				: nranks == 1 ? SMDDP_CUDA_QUEUED : SMDDP_CUDA_UNDECIDED;

	if (smddp_comm_get_cuda_mode(comm, &mode) != SMDDP_OK || mode != want) {
		printf("FAIL rank %d: order: mode before the first call %d, not %d\n", rank, mode, want);
		failures++;
	} else {
		passed++;
	}
	/* The first call sets the communicator's GPU side up: not timed. */
	if (smddp_allreduce(dsend, drecv, 16, SMDDP_FLOAT32, SMDDP_SUM, comm, stream) != SMDDP_OK) {
		printf("FAIL rank %d: order: first allreduce: %s\n", rank, smddp_last_error(comm));
		failures++;
		return;
	}
	if (smddp_comm_get_cuda_mode(comm, &mode) != SMDDP_OK || mode != async) {
		printf("FAIL rank %d: order: mode after the first call %d, not %d\n", rank, mode, async);
		failures++;
	} else {
		printf("ok rank %d: order: smddp_comm_get_cuda_mode says %s\n", rank,
		       mode ? "queued" : "blocking");
		passed++;
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
			float expect = tri * (float)(j % 100 + round);
			if (hres[j] != expect) {
				printf("FAIL rank %d: order round %d: element %zu is %g, expected %g\n",
				       rank, round, j, hres[j], expect);
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

/* ---- torch's DDP, its order of calls (python/bench/torch_nccl_bench.py's hang) ---- */

static int ddp_check(const char *what, const float *dev, size_t n, float scale, size_t salt,
		     float *h)
{
	CK(cudaMemcpyAsync(h, dev, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
	CK(cudaStreamSynchronize(stream));
	for (size_t j = 0; j < n; j++) {
		float want = scale * (float)((j + salt) % 89);

		if (h[j] != want) {
			printf("FAIL rank %d: ddp: %s: element %zu is %g, want %g\n", rank, what, j,
			       (double)h[j], (double)want);
			failures++;
			return 1;
		}
	}
	return 0;
}

static void ddp_fill(float *dev, size_t n, float scale, size_t salt, float *h)
{
	for (size_t j = 0; j < n; j++)
		h[j] = scale * (float)((j + salt) % 89);
	CK(cudaMemcpyAsync(dev, h, n * sizeof(float), cudaMemcpyHostToDevice, stream));
	CK(cudaStreamSynchronize(stream));
}

/* What a DistributedDataParallel's construction and first steps call on
 * its group, each tensor a fresh allocation as torch's caching allocator
 * hands them out: an allgather and a broadcast of a few words (the fast
 * path), two broadcasts of the parameters flattened into two buckets, both
 * queued before the first is waited for (broadcast_coalesced), copied back
 * into the parameters (views at offsets of one allocation); then the first
 * backward's allreduce of every parameter at once (one bucket, a new
 * allocation), rank 1 late to it by 300 ms; then the rebuilt buckets:
 * allreduces of views at offsets of another new allocation, one after the
 * other without a host wait, for three steps.  Sizes above SMDDP_CUDA_FAST
 * (the direct path where calls are queued).  Every result checked. */
void ddp(void)
{
	enum { NP = 3 };
	const size_t w = ((size_t)1 << 18) + 7, bias = 33, per = w + bias, total = NP * per;
	const size_t a_n = 2 * per, b_n = per; /* the broadcast buckets */
	float *h, *params, *flat_a, *flat_b, *bucket, *rebuilt;
	int64_t *meta, *gath;
	int bad = 0;

	CK(cudaMallocHost((void **)&h, total * sizeof(float)));
	CK(cudaMalloc((void **)&meta, 64));
	CK(cudaMalloc((void **)&gath, 64 * (size_t)nranks));
	CK(cudaMalloc((void **)&params, total * sizeof(float)));
	ddp_fill(params, total, (float)(rank + 7), 0, h);
	/* _verify_param_shape_across_processes */
	CK(cudaMemsetAsync(meta, rank == 0 ? 1 : 2, 64, stream));
	if (smddp_allgather(meta, gath, 1, SMDDP_INT64, comm, stream) != SMDDP_OK ||
	    smddp_broadcast(meta, 8, SMDDP_INT64, 0, comm, stream) != SMDDP_OK) {
		printf("FAIL rank %d: ddp: verify: %s\n", rank, smddp_last_error(comm));
		failures++;
		bad = 1;
	}
	CK(cudaStreamSynchronize(stream));
	/* _sync_module_states: broadcast_coalesced, two buckets in flight */
	if (!bad) {
		CK(cudaMalloc((void **)&flat_a, a_n * sizeof(float)));
		CK(cudaMalloc((void **)&flat_b, b_n * sizeof(float)));
		CK(cudaMemcpyAsync(flat_a, params, a_n * sizeof(float), cudaMemcpyDeviceToDevice,
				   stream));
		if (smddp_broadcast(flat_a, a_n, SMDDP_FLOAT32, 0, comm, stream) != SMDDP_OK)
			bad = 1;
		CK(cudaMemcpyAsync(flat_b, params + a_n, b_n * sizeof(float),
				   cudaMemcpyDeviceToDevice, stream));
		if (!bad && smddp_broadcast(flat_b, b_n, SMDDP_FLOAT32, 0, comm, stream) != SMDDP_OK)
			bad = 1;
		if (bad) {
			printf("FAIL rank %d: ddp: broadcast: %s\n", rank, smddp_last_error(comm));
			failures++;
		}
		CK(cudaMemcpyAsync(params, flat_a, a_n * sizeof(float), cudaMemcpyDeviceToDevice,
				   stream));
		CK(cudaMemcpyAsync(params + a_n, flat_b, b_n * sizeof(float),
				   cudaMemcpyDeviceToDevice, stream));
		if (!bad)
			bad = ddp_check("parameters after the broadcasts", params, total, 7, 0, h);
	}
	/* the first backward: one bucket of every parameter, a new allocation */
	CK(cudaMalloc((void **)&bucket, total * sizeof(float)));
	if (!bad) {
		ddp_fill(bucket, total, (float)(rank + 1), 1, h);
		if (rank == 1) {
			int ms = 300;

			hold(&ms);
			CK(cudaStreamSynchronize(stream));
		}
		if (smddp_allreduce(bucket, bucket, total, SMDDP_FLOAT32, SMDDP_SUM, comm, stream) !=
		    SMDDP_OK) {
			printf("FAIL rank %d: ddp: first bucket: %s\n", rank, smddp_last_error(comm));
			failures++;
			bad = 1;
		} else {
			bad = ddp_check("the first step's bucket", bucket, total,
					(float)(nranks * (nranks + 1) / 2), 1, h);
		}
	}
	/* the rebuilt buckets: views of one new allocation, in reverse order */
	CK(cudaMalloc((void **)&rebuilt, total * sizeof(float)));
	for (int step = 1; step <= 3 && !bad; step++) {
		ddp_fill(rebuilt, total, (float)(rank + 1), (size_t)step, h);
		if (rank == step % nranks) {
			int ms = 100;

			hold(&ms);
			CK(cudaStreamSynchronize(stream));
		}
		for (int k = NP - 1; k >= 0 && !bad; k--)
			if (smddp_allreduce(rebuilt + (size_t)k * per, rebuilt + (size_t)k * per, per,
					    SMDDP_FLOAT32, SMDDP_SUM, comm, stream) != SMDDP_OK) {
				printf("FAIL rank %d: ddp: step %d bucket %d: %s\n", rank, step, k,
				       smddp_last_error(comm));
				failures++;
				bad = 1;
			}
		if (!bad)
			bad = ddp_check("a rebuilt bucket", rebuilt, total,
					(float)(nranks * (nranks + 1) / 2), (size_t)step, h);
	}
	if (!bad) {
		printf("ok rank %d: ddp: the calls of a DDP construction and 4 steps checked\n", rank);
		passed++;
	}
	cudaFreeHost(h);
}

/* ---- a peer's first launch of a kernel while our direct kernel waits for it ---- */

/* An empty kernel in PTX: a module this process has not loaded yet. */
static const char lateload_ptx[] = ".version 7.0\n.target sm_52\n.address_size 64\n"
				   ".visible .entry smddp_lateload_nop()\n{\n\tret;\n}\n";

/* The candidate cause of the DDP hang on one GPU under MPS (docs/internals/
 * cuda.md, the direct path): with CUDA_MODULE_LOADING=LAZY (the default
 * since CUDA 12.2) the first launch of a kernel loads it, and the load waits for
 * the GPU's work to drain, holding the context's lock.  Rank 0's direct
 * allreduce waits on the GPU for rank 1, which first loads and launches a
 * kernel it never ran (as a DDP step's first GEMM), 300 ms late.  If the
 * load waits for rank 0's kernel, it returns only when that kernel gives
 * up (SMDDP_TIMEOUT) and the allreduce fails: said as FAIL with the time
 * the load took.  Only on a GPU (the fake CUDA lacks cuModuleLoadData):
 * SKIP there. */
void lateload(void)
{
	typedef CUresult (*pfn_load)(CUmodule *, const void *);
	typedef CUresult (*pfn_getf)(CUfunction *, CUmodule, const char *);
	typedef CUresult (*pfn_launch)(CUfunction, unsigned, unsigned, unsigned, unsigned,
				       unsigned, unsigned, unsigned, CUstream, void **, void **);
	enum cudaDriverEntryPointQueryResult q;
	void *fl = NULL, *fg = NULL, *fk = NULL;
	const size_t count = ((size_t)1 << 20) + 3, m = count * sizeof(float);
	float *buf, *h;
	int bad = 0;

	if (cudaGetDriverEntryPointByVersion("cuModuleLoadData", &fl, 12000, cudaEnableDefault,
					     &q) != cudaSuccess || !fl ||
	    cudaGetDriverEntryPointByVersion("cuModuleGetFunction", &fg, 12000,
					     cudaEnableDefault, &q) != cudaSuccess || !fg ||
	    cudaGetDriverEntryPointByVersion("cuLaunchKernel", &fk, 12000, cudaEnableDefault,
					     &q) != cudaSuccess || !fk) {
		(void)cudaGetLastError();
		printf("ok rank %d: lateload: SKIP (no cuModuleLoadData: not a real GPU)\n", rank);
		passed++;
		return;
	}
	CK(cudaMallocHost((void **)&h, m));
	CK(cudaMalloc((void **)&buf, m));
	for (int round = 0; round < 2 && !bad; round++) {
		double took = 0;

		for (size_t j = 0; j < count; j++)
			h[j] = (float)(rank + 1) * (float)(j % 89);
		CK(cudaMemcpyAsync(buf, h, m, cudaMemcpyHostToDevice, stream));
		CK(cudaStreamSynchronize(stream));
		if (round == 1 && rank == 1) {
			/* round 0 loaded the direct kernel on both ranks */
			CUmodule mod;
			CUfunction fn;
			struct timespec t0, t1;

			usleep(300 * 1000);
			clock_gettime(CLOCK_MONOTONIC, &t0);
			if (((pfn_load)fl)(&mod, lateload_ptx) != CUDA_SUCCESS ||
			    ((pfn_getf)fg)(&fn, mod, "smddp_lateload_nop") != CUDA_SUCCESS ||
			    ((pfn_launch)fk)(fn, 1, 1, 1, 32, 1, 1, 0, (CUstream)stream, NULL, NULL) !=
				    CUDA_SUCCESS) {
				printf("FAIL rank %d: lateload: cannot load or launch the PTX kernel\n",
				       rank);
				failures++;
				bad = 1;
				break;
			}
			CK(cudaStreamSynchronize(stream));
			clock_gettime(CLOCK_MONOTONIC, &t1);
			took = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
			printf("# lateload rank 1: loading and running a new kernel took %.3f s while "
			       "rank 0's direct kernel waited\n", took);
		}
		if (smddp_allreduce(buf, buf, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream) !=
			    SMDDP_OK ||
		    cudaStreamSynchronize(stream) != cudaSuccess) {
			printf("FAIL rank %d: lateload: round %d: %s%s\n", rank, round,
			       smddp_last_error(comm),
			       took > 1 ? " (the peer's first launch of a kernel waited for this "
					  "rank's direct kernel: CUDA lazy loading)" : "");
			failures++;
			bad = 1;
			break;
		}
		int ae = SMDDP_OK;

		smddp_comm_get_async_error(comm, &ae);
		CK(cudaMemcpyAsync(h, buf, m, cudaMemcpyDeviceToHost, stream));
		CK(cudaStreamSynchronize(stream));
		for (size_t j = 0; j < count && !bad; j++)
			if (ae != SMDDP_OK ||
			    h[j] != (float)(nranks * (nranks + 1) / 2) * (float)(j % 89)) {
				printf("FAIL rank %d: lateload: round %d: element %zu is %g (%s)%s\n",
				       rank, round, j, (double)h[j], smddp_strerror(ae),
				       took > 1 ? ": the first launch of a kernel waited for the "
						  "peer's direct kernel (CUDA lazy loading)" : "");
				failures++;
				bad = 1;
			}
	}
	if (!bad) {
		printf("ok rank %d: lateload: a late peer's first kernel launch did not wait for "
		       "the direct kernel\n", rank);
		passed++;
	}
	cudaFree(buf);
	cudaFreeHost(h);
}
