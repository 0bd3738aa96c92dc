/* state.c - a communicator's device state: its mode, made at the first device call, and freed.
 *
 * The mode (SMDDP_CUDA_ASYNC) and why the queued one goes through the
 * proxy thread: proxy.c.  The state is made at the communicator's first
 * device call (on the buffers' GPU, which the communicator does not know
 * before), and freed when the communicator goes, once no stream can still
 * wait on what it holds.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "base/checks.h"
#include "clock/clock.h"
#include "coll/net.h"
#include "config/param.h"
#include "cuda/cuda.h"
#include "cuda/device.h"
#include "cuda/direct.h"
#include "cuda/fast.h"
#include "cuda/internal.h"
#include "cuda/ipc.h"
#include "cuda/kernels.h"
#include "cuda/proxy.h"
#include "cuda/staged.h"
#include "cuda/state.h"

/* SMDDP_CUDA_ASYNC: auto (-1), or a boolean (the parameter's check has
 * accepted it). */
int sd_cuda_async_param(void)
{
	const char *v = sd_param_str("SMDDP_CUDA_ASYNC");
	int b = 0;

	if (!*v || !strcasecmp(v, "auto"))
		return -1;
	return sd_parse_bool(v, &b) == 0 ? b : -1;
}

/* Is the CUDA MPS daemon serving this user?  The rule CUDA's client uses:
 * its control socket in $CUDA_MPS_PIPE_DIRECTORY (else /tmp/nvidia-mps). */
int sd_cuda_mps_active(void)
{
	const char *d = getenv("CUDA_MPS_PIPE_DIRECTORY");
	char path[4096];
	struct stat st;

	snprintf(path, sizeof(path), "%s/control", d && *d ? d : "/tmp/nvidia-mps");
	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* SMDDP_CUDA_ASYNC=auto, after the first call has shown where the ranks
 * are: calls return once queued unless other ranks share this GPU without
 * MPS.  Then the kernels of the processes are time-sliced: a stream held
 * back on the GPU keeps its context's time slices while it waits, and
 * each switch costs hundreds of microseconds, so the caller does the work
 * instead.  Each rank decides for itself: the two modes meet the peers
 * the same way. */
int sd_cuda_decide(struct smddp_comm *c, struct sd_cuda *cu)
{
	int mps = cu->shared ? sd_cuda_mps_active() : 0;

	cu->decided = 1;
	if (cu->shared && !mps) {
		SD_INFO(SD_SUB_COLL,
			"device collectives on GPU %d: %d other rank%s of this node use%s it and "
			"MPS is not running: calls return when done (SMDDP_CUDA_ASYNC=1 makes "
			"them return once queued)",
			cu->dev, cu->shared, cu->shared == 1 ? "" : "s", cu->shared == 1 ? "s" : "");
		return SMDDP_OK;
	}
	SD_INFO(SD_SUB_COLL, "device collectives on GPU %d: calls return once queued (%s)",
		cu->dev, mps ? "ranks share the GPU under MPS" : "no other rank uses this GPU");
	SD_CHECK(sd_cuda_proxy_start(c, cu));
	cu->async = 1;
	return SMDDP_OK;
}

/* A queued call's kernel is launched before the peers' buffers are mapped
 * (the launch cannot wait for the peers), and compute-sanitizer's memcheck
 * checks a kernel against the allocations of its launch: it stops that
 * kernel as out of bounds (tests/gpu/late-map.cu shows it without IPC).  So
 * auto is blocking under the sanitizer, decided before the first call; an
 * explicit SMDDP_CUDA_ASYNC=1 is obeyed, with a warning.  Said once per
 * communicator, when its device state is made. */
static void say_sanitizer(const struct sd_cuda *cu, const char *inject)
{
	if (cu->mode == 1)
		SD_WARN(SD_SUB_COLL,
			"device collectives on GPU %d: SMDDP_CUDA_ASYNC=1 under compute-sanitizer "
			"(CUDA_INJECTION64_PATH=%s): its memcheck stops a queued call's kernel that reads "
			"a peer's buffer mapped after the launch; unset it (auto) or set 0 to sanitize",
			cu->dev, inject);
	else
		SD_INFO(SD_SUB_COLL,
			"device collectives on GPU %d: compute-sanitizer is loaded "
			"(CUDA_INJECTION64_PATH=%s): calls return when done, as its memcheck cannot "
			"follow the buffers a queued call maps after its launch (SMDDP_CUDA_ASYNC=1 "
			"queues them anyway)",
			cu->dev, inject);
}

static int state_init(struct smddp_comm *c, int dev)
{
	struct sd_cuda *cu;
	pthread_condattr_t ca;
	cudaError_t e;
	const char *inject = getenv("CUDA_INJECTION64_PATH");
	int old = -1, rc = SMDDP_OK, attr = 0, sanitized;

	cu = calloc(1, sizeof(*cu));
	if (!cu)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	cu->dev = dev;
	cu->mode = sd_cuda_async_param();
	sanitized = cu->mode != 0 && sd_cuda_sanitizer(inject);
	/* auto: blocking under the sanitizer.  Between hosts no kernel waits
	 * on a peer and the GPU only copies (staged.c), so auto queues and
	 * returns there at once, whoever shares the GPU. */
	cu->decided = cu->mode >= 0 || sanitized || c->net;
	cu->async = cu->mode == 1 || (cu->mode < 0 && !sanitized && c->net);
	cu->shared = -1;
	cu->stream = sd_param_int("SMDDP_CUDA_STREAM") != 0;
	cu->stream_chunk = (size_t)sd_param_int("SMDDP_CUDA_STREAM_CHUNK");
	cu->last_slot = -1;
	cudaGetDevice(&old);
	if ((e = cudaSetDevice(dev)) != cudaSuccess) {
		rc = SD_CUDA_ERR(c, e, "cannot use the buffers' GPU");
		goto fail;
	}
	cudaDeviceGetAttribute(&attr, cudaDevAttrMultiProcessorCount, dev);
	{
		struct cudaDeviceProp prop;

		if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
			memcpy(cu->uuid, &prop.uuid, sizeof(cu->uuid));
	}
	cu->max_blocks = attr > 0 ? 4 * attr : 0;
	if ((e = cudaStreamCreateWithFlags(&cu->st, cudaStreamNonBlocking)) != cudaSuccess) {
		rc = SD_CUDA_ERR(c, e, "cannot create the communicator's stream");
		goto fail;
	}
	/* Before any stream waits on the word (see kernels.h). */
	if ((e = (cudaError_t)sd_cuda_kernels_load()) != cudaSuccess) {
		rc = SD_CUDA_ERR(c, e, "cannot load libsmddp's GPU kernels");
		goto fail;
	}
	for (int i = 0; i < QCAP; i++) {
		if ((e = cudaEventCreateWithFlags(&cu->ev_in[i], cudaEventDisableTiming)) != cudaSuccess ||
		    (e = cudaEventCreateWithFlags(&cu->ev_out[i], cudaEventDisableTiming)) != cudaSuccess) {
			rc = SD_CUDA_ERR(c, e, "cannot create events");
			goto fail;
		}
	}
	/* Two words on lines of their own: the release word (the host writes
	 * it) and the up word (staged.c: the GPU writes it). */
	if ((e = cudaHostAlloc((void **)&cu->word, 128, cudaHostAllocMapped | cudaHostAllocPortable)) !=
	    cudaSuccess) {
		cu->word = NULL;
		rc = SD_CUDA_ERR(c, e, "cannot allocate pinned host memory for the release word");
		goto fail;
	}
	*cu->word = 0;
	cu->upw = (volatile uint32_t *)((volatile char *)cu->word + 64);
	*cu->upw = 0;
	void *dp = NULL;
	if ((e = cudaHostGetDevicePointer(&dp, (void *)cu->word, 0)) != cudaSuccess) {
		rc = SD_CUDA_ERR(c, e, "cannot map the release word into the GPU");
		goto fail;
	}
	cu->word_dev = (CUdeviceptr)(uintptr_t)dp;
	cu->up_dev = cu->word_dev + 64;
	cu->maxmaps = c->size * MAP_PER_PEER;
	cu->maps = calloc((size_t)cu->maxmaps, sizeof(*cu->maps));
	if (!cu->maps) {
		rc = sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
		goto fail;
	}
	/* The proxy's copy of the communicator: everything it needs (transport,
	 * pids, tunables) is fixed once the communicator exists. */
	memcpy(&cu->sh, c, sizeof(cu->sh));
	cu->sh.cuda = NULL;
	pthread_mutex_init(&cu->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cu->cv, &ca);
	pthread_cond_init(&cu->cv_done, &ca);
	pthread_condattr_destroy(&ca);
	c->cuda = cu;
	if (cu->async && (rc = sd_cuda_proxy_start(c, cu)) != SMDDP_OK) {
		c->cuda = NULL;
		pthread_cond_destroy(&cu->cv_done);
		pthread_cond_destroy(&cu->cv);
		pthread_mutex_destroy(&cu->mu);
		goto fail;
	}
	if (old >= 0 && old != dev)
		cudaSetDevice(old);
	if (sanitized)
		say_sanitizer(cu, inject);
	else if (cu->decided)
		SD_INFO(SD_SUB_COLL, "device collectives %son GPU %d: %s (SMDDP_CUDA_ASYNC=%s)",
			c->net ? "between hosts " : "", dev,
			cu->async ? "calls return once queued" : "calls return when done",
			cu->mode < 0 ? "auto" : cu->mode ? "1" : "0");
	return SMDDP_OK;
fail:
	if (cu->word)
		cudaFreeHost((void *)cu->word);
	for (int i = 0; i < QCAP; i++) {
		if (cu->ev_in[i])
			cudaEventDestroy(cu->ev_in[i]);
		if (cu->ev_out[i])
			cudaEventDestroy(cu->ev_out[i]);
	}
	if (cu->st)
		cudaStreamDestroy(cu->st);
	free(cu->maps);
	free(cu);
	if (old >= 0 && old != dev)
		cudaSetDevice(old);
	return rc;
}

/* For lib/cuda/p2p.c, which uses the IPC caches and the scratch buffer of
 * this state (on the host thread, the queue drained) but queues nothing. */
int sd_cuda_state(struct smddp_comm *c, int dev, struct sd_cuda **out)
{
	if (!c->cuda)
		SD_CHECK(state_init(c, dev));
	*out = c->cuda;
	return SMDDP_OK;
}

/* Before the device state exists (no device collective yet) the mode is
 * what the first call will do: one rank copies on the stream and returns
 * (one_rank), an explicit SMDDP_CUDA_ASYNC is obeyed (state_init), and
 * auto decides at that call. */
int sd_cuda_mode(const struct smddp_comm *c)
{
	const struct sd_cuda *cu = c->cuda;
	int mode;

	if (cu)
		return !cu->decided ? SMDDP_CUDA_UNDECIDED
				    : cu->async ? SMDDP_CUDA_QUEUED : SMDDP_CUDA_BLOCKING;
	mode = sd_cuda_async_param();
	if (c->size == 1)
		return mode == 0 ? SMDDP_CUDA_BLOCKING : SMDDP_CUDA_QUEUED;
	return mode < 0 ? SMDDP_CUDA_UNDECIDED : mode ? SMDDP_CUDA_QUEUED : SMDDP_CUDA_BLOCKING;
}

void sd_cuda_comm_free(struct smddp_comm *c)
{
	struct sd_cuda *cu = c ? c->cuda : NULL;
	int old = -1;
	const char *stuck = NULL; /* why what a stream may still use is kept */

	if (!cu)
		return;
	sd_cuda_proxy_stop(cu);
	/* Every queued call is released; let the streams pass their waits
	 * before the word goes (bounded: a stream stuck in the user's own
	 * work keeps the word, which is then leaked rather than freed). */
	sd_cuda_release(cu, cu->enq);
	cudaGetDevice(&old);
	cudaSetDevice(cu->dev);
	uint64_t deadline = sd_now_ns() + 10ull * 1000000000ull;
	for (int i = 0; i < QCAP; i++) {
		cudaError_t e = cudaSuccess;

		uint64_t now = sd_now_ns();

		if (cu->out_used[i] == OUT_BLIND)
			stuck = "the end of a call of this communicator on its stream could not be "
				"recorded";
		else if (!stuck && cu->out_used[i] &&
			 sd_cuda_wait(sd_cuda_q_event, cu->ev_out[i],
				      deadline > now ? deadline - now : 0, NULL,
				      &e) == SMDDP_ETIMEDOUT)
			stuck = "a stream still waits on a call of this communicator after 10 s";
	}
	/* What a stream may still read or wait on is leaked, not freed; so
	 * are the peers' mappings and the scratch copy, since closing or
	 * freeing them waits for the device, the stuck stream included. */
	sd_cuda_fast_free(c, cu, stuck != NULL);
	sd_cuda_direct_free(c, cu, stuck != NULL);
	if (stuck)
		SD_WARN(SD_SUB_COLL, "%s: its release word, kernel arguments, staging memory and "
				     "the peers' mappings are left allocated",
			stuck);
	for (int i = 0; !stuck && i < cu->nmaps; i++)
		if (cu->maps[i].ptr)
			sd_cuda_ipc_close(cu->maps[i].ptr);
	if (!stuck) {
		sd_cuda_flush_stale(cu);
		sd_cuda_ipc_settle(); /* nothing of ours left mapped once freed */
	}
	if (cu->scratch && !stuck)
		cudaFree(cu->scratch);
	if (!stuck && cu->args) {
		cudaFreeHost(cu->args);
		cudaFree(cu->args_gpu);
	}
	if (!stuck)
		sd_cuda_stage_free(cu, sd_net_poisoned(c));
	for (int i = 0; i < QCAP; i++) {
		cudaEventDestroy(cu->ev_in[i]);
		cudaEventDestroy(cu->ev_out[i]);
	}
	cudaStreamDestroy(cu->st);
	if (!stuck)
		cudaFreeHost((void *)cu->word);
	if (old >= 0 && old != cu->dev)
		cudaSetDevice(old);
	pthread_mutex_destroy(&cu->mu);
	pthread_cond_destroy(&cu->cv);
	pthread_cond_destroy(&cu->cv_done);
	free(cu->maps);
	free(cu);
	c->cuda = NULL;
}
