/* proxy.c - stream-ordered collectives on CUDA device memory among the ranks of one node.
 *
 * Design.  A call on device memory is ordered on the user's stream: the
 * calling thread records an event on the stream (the input is ready when
 * the stream passes it).  In the queue-and-return mode, NCCL's, it then
 * makes the stream wait until a word in pinned host memory reaches the
 * call's number (cuStreamWaitValue32) and returns; the communicator's proxy
 * thread does the call.  In the blocking mode the calling thread does the
 * call itself and returns when it is done.  Either way the call waits for
 * the event, meets the peers through the communicator's shared-memory
 * transport (its barrier has the deadlines, dead-peer detection and abort
 * of the host path), moves the data with kernels on the communicator's own
 * stream through the peers' buffers mapped by CUDA IPC, meets the peers
 * again, and (queued) writes the word: the user's stream goes on.
 *
 * SMDDP_CUDA_ASYNC=auto (the default) queues and returns unless other ranks
 * share this GPU without MPS (see decide()); the first call, which shows
 * where the ranks are, is done blocking.  Every kernel is loaded before a
 * stream is first made to wait (kernels.h: lazy loading would deadlock).
 *
 * Why the host meets the peers and not the kernels: several ranks may share
 * one GPU (tests, small jobs), and without MPS the kernels of different
 * processes are time-sliced, so a kernel spinning on a flag that another
 * process's kernel will write can crawl or hang.  The host side also bounds
 * every wait by SMDDP_TIMEOUT, so a dead peer never leaves a GPU waiting:
 * whatever happens (error, deadline, abort, destroy), the proxy writes the
 * word and the stream is released.
 *
 * Per call: [wait input event] publish buffers (IPC handle of the
 * allocation, offset, buffer id), barrier, map peers' buffers (cached per
 * rank and buffer id: a freed and reallocated address has a new id and is
 * mapped afresh), one kernel, wait for it, barrier, release.  Algorithms:
 *   allreduce   rank r reduces partition r of every rank's input and writes
 *               it into every rank's output (reduce-scatter and all-gather
 *               in one pass: each input byte read once, each output byte
 *               written once, 2 * n * size bytes through HBM in all); each
 *               element is reduced by one rank, so all get the same bits,
 *               and in place is safe (an element is read and written by the
 *               same thread of the same rank only).
 *   reduce      the same, writing into the root's output only.
 *   reduce_scatter  rank r reduces block r of every input into its output.
 *   allgather   rank r writes its input into block r of every output.
 *   broadcast   the root writes its buffer into every other rank's.
 *   alltoall    rank r writes its block q into block r of rank q's output
 *               (in place: from a private copy of its input taken first).
 *
 * Errors of a queued call are reported by the next call on the
 * communicator (and smddp_last_error()); a failure breaks the communicator
 * as on the host path, the peers are told at once (transport abort), and
 * later queued calls are released without moving data.
 *
 * Threads: the host thread queues; the proxy alone uses the transport while
 * calls are queued (host collectives, barrier, split and destroy first wait
 * until the queue is empty: sd_cuda_collect(c, 1)).  The proxy works on a
 * private copy of the communicator struct ("shadow"), so that the host
 * thread can write c->cur and c->last_error meanwhile; c->step, the slot
 * half counter, belongs to the proxy while calls are queued.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "core/comm.h"
#include "cuda/cuda.h"
#include "cuda/internal.h"
#include "cuda/kernels.h"
#include "transport/transport.h"

#define QCAP 128          /* calls queued at most */
#define OWN_CACHE 64      /* IPC handles of our own allocations */
#define MAP_PER_PEER 32   /* mappings of a peer's allocations kept */
#define PUB_MAGIC 0x43444d53u

/* ---- the driver entry points (through the runtime: no -lcuda) ------------ */

typedef CUresult (*pfn_attrs)(unsigned int, CUpointer_attribute *, void **, CUdeviceptr);
typedef CUresult (*pfn_range)(CUdeviceptr *, size_t *, CUdeviceptr);
typedef CUresult (*pfn_wait32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

static struct {
	pfn_attrs attrs;
	pfn_range range;
	pfn_wait32 wait32;
	int rc;
	char err[160];
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void *entry(const char *name)
{
	void *fn = NULL;
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;

	if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) !=
		    cudaSuccess ||
	    q != cudaDriverEntryPointSuccess)
		return NULL;
	return fn;
}

static void drv_load(void)
{
	drv.attrs = (pfn_attrs)entry("cuPointerGetAttributes");
	drv.range = (pfn_range)entry("cuMemGetAddressRange");
	drv.wait32 = (pfn_wait32)entry("cuStreamWaitValue32");
	if (!drv.attrs || !drv.range || !drv.wait32) {
		drv.rc = SMDDP_ECUDA;
		snprintf(drv.err, sizeof(drv.err),
			 "the CUDA driver lacks cuPointerGetAttributes, cuMemGetAddressRange or "
			 "cuStreamWaitValue32 (driver older than CUDA 12?)");
	}
}

/* ---- state --------------------------------------------------------------- */


/* What each rank puts in its slot for one call. */
struct pub {
	uint32_t magic, seq;
	struct sd_coll_desc desc;
	int32_t dev;
	int32_t scratch;     /* in-place alltoall: sends from a private copy */
	int32_t copied;      /* ... made already (else the worker makes it) */
	unsigned char uuid[16]; /* the GPU, to see whether all ranks share one */
	struct buf_pub b[2]; /* sendbuf, recvbuf */
	struct buf_pub s;    /* the private copy, when scratch */
};

struct op {
	uint32_t seq; /* the value of the release word that lets the stream go */
	struct sd_coll_desc desc;
	struct sd_cuda_call k;
	struct buf_pub b[2]; /* base, off, id, size; h filled by the proxy */
	void *scratch;       /* in-place alltoall: a private copy of the input */
	struct buf_pub sb;   /* ... published, so that one rank may send it */
	int slot;
};

struct own_entry {
	uint64_t id, base, used;
	cudaIpcMemHandle_t h;
};

struct map_entry {
	int rank;
	uint64_t id, base, used;
	void *ptr;
};

struct sd_cuda {
	int dev;
	cudaStream_t st;        /* the proxy's own, non-blocking */
	cudaEvent_t ev_in[QCAP];  /* recorded on the user's stream at the call */
	cudaEvent_t ev_out[QCAP]; /* ... after its wait: the stream passed it */
	unsigned char out_used[QCAP];
	volatile uint32_t *word;  /* pinned, mapped: the last released call */
	CUdeviceptr word_dev;
	uint32_t enq;             /* calls queued so far */

	pthread_t thr;
	int thr_started;
	pthread_mutex_t mu;
	pthread_cond_t cv;      /* to the proxy: a call was queued, or stop */
	pthread_cond_t cv_done; /* to the host: a call finished */
	struct op ring[QCAP];
	uint64_t head, tail;    /* proxy takes ring[head], host puts ring[tail] */
	int stop;
	int failed;             /* sticky: the communicator is broken */
	int pending;            /* one-off (EMISMATCH): reported once */
	char errmsg[1024];

	struct smddp_comm sh;   /* the proxy's copy of the communicator */
	struct own_entry own[OWN_CACHE];
	struct map_entry *maps;
	int nmaps, maxmaps;
	uint64_t tick;
	void *scratch;
	size_t scratch_len;
	int max_blocks;
	int async;              /* calls return once queued (the proxy thread runs) */
	int mode;               /* SMDDP_CUDA_ASYNC: -1 auto, 0 blocking, 1 queue-and-return */
	int decided;            /* async is final (auto waits for the first call) */
	int shared;             /* other ranks on this GPU, as the last call showed */
	int one_gpu;            /* every rank on this GPU (-1: no call yet) */
	void **stale;           /* peers' mappings to close once no stream waits */
	int nstale, maxstale;   /* (under mu) */
	unsigned char uuid[16];
};

static int cuda_error(struct smddp_comm *c, cudaError_t e, const char *what)
{
	return sd_comm_error(c, SMDDP_ECUDA, "%s: %s (%s)", what, cudaGetErrorString(e),
			     cudaGetErrorName(e));
}

static size_t dtsize(int dt)
{
	return smddp_dtype_size((enum smddp_dtype)dt);
}

/* ---- buffers --------------------------------------------------------------- */

/* Checks that p is device memory of device dev (or sets dev when it is -1)
 * holding bytes bytes, and fills its allocation's base, offset and id. */
static int buffer_info(struct smddp_comm *c, const void *p, size_t bytes, const char *what,
		       int *dev, struct buf_pub *b)
{
	CUpointer_attribute at[4] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				     CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
				     CU_POINTER_ATTRIBUTE_BUFFER_ID, CU_POINTER_ATTRIBUTE_IS_MANAGED};
	unsigned int type = 0, managed = 0;
	int ordinal = -1;
	unsigned long long id = 0;
	void *val[4] = {&type, &ordinal, &id, &managed};
	CUdeviceptr base = 0;
	size_t size = 0;
	CUresult r;

	memset(b, 0, sizeof(*b));
	if (!p)
		return sd_comm_error(c, SMDDP_EINVAL, "%s is NULL", what);
	r = drv.attrs(4, at, val, (CUdeviceptr)(uintptr_t)p);
	if (r != CUDA_SUCCESS || type != CU_MEMORYTYPE_DEVICE || managed)
		return sd_comm_error(c, SMDDP_EINVAL,
				     "%s (%p) is not CUDA device memory from cudaMalloc (%s): pass "
				     "device buffers for every argument of a call on the GPU",
				     what, p, managed ? "managed memory" : "host memory");
	if (*dev >= 0 && ordinal != *dev)
		return sd_comm_error(c, SMDDP_EINVAL,
				     "%s is on GPU %d, but this communicator works on GPU %d: one "
				     "communicator uses one GPU per rank",
				     what, ordinal, *dev);
	r = drv.range(&base, &size, (CUdeviceptr)(uintptr_t)p);
	if (r != CUDA_SUCCESS)
		return sd_comm_error(c, SMDDP_EINVAL, "%s (%p): cannot find its allocation (CUDA "
				     "error %d)", what, p, (int)r);
	if ((uintptr_t)p - base + bytes > size)
		return sd_comm_error(c, SMDDP_EINVAL,
				     "%s (%p) has %llu bytes to the end of its allocation, the call "
				     "needs %zu: is count right?",
				     what, p, (unsigned long long)(base + size - (uintptr_t)p), bytes);
	*dev = ordinal;
	b->present = 1;
	b->base = base;
	b->off = (uintptr_t)p - base;
	b->id = id;
	b->size = size;
	return SMDDP_OK;
}

/* Bytes of sendbuf and recvbuf that call k touches on rank rank. */
static void extents(const struct sd_cuda_call *k, int n, int rank, size_t *sb, size_t *rb)
{
	size_t m = k->count * dtsize(k->dtype);

	switch (k->coll) {
	case SD_COLL_ALLGATHER: *sb = m; *rb = m * (size_t)n; break;
	case SD_COLL_REDUCE_SCATTER: *sb = m * (size_t)n; *rb = m; break;
	case SD_COLL_ALLTOALL: *sb = *rb = m * (size_t)n; break;
	case SD_COLL_BROADCAST: *sb = 0; *rb = m; break; /* the one buffer is recvbuf */
	case SD_COLL_REDUCE: *sb = m; *rb = rank == k->root ? m : 0; break;
	default: *sb = *rb = m; break;
	}
}

/* ---- setup ------------------------------------------------------------------ */

static void *proxy_main(void *arg);
static void flush_stale(struct sd_cuda *cu);
static int run_call(struct smddp_comm *c, struct sd_cuda *cu, struct op *o);

/* SMDDP_CUDA_ASYNC: auto (-1), or a boolean (the parameter's check has
 * accepted it). */
static int async_param(void)
{
	const char *v = sd_param_str("SMDDP_CUDA_ASYNC");
	int b = 0;

	if (!*v || !strcasecmp(v, "auto"))
		return -1;
	return sd_parse_bool(v, &b) == 0 ? b : -1;
}

/* Is the CUDA MPS daemon serving this user?  The rule CUDA's client uses:
 * its control socket in $CUDA_MPS_PIPE_DIRECTORY (else /tmp/nvidia-mps). */
static int mps_active(void)
{
	const char *d = getenv("CUDA_MPS_PIPE_DIRECTORY");
	char path[4096];
	struct stat st;

	snprintf(path, sizeof(path), "%s/control", d && *d ? d : "/tmp/nvidia-mps");
	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* The proxy thread exists for the queue-and-return mode only: otherwise
 * the calling thread does the work itself. */
static int start_proxy(struct smddp_comm *c, struct sd_cuda *cu)
{
	int e = pthread_create(&cu->thr, NULL, proxy_main, c);

	if (e != 0)
		return sd_comm_error(c, SMDDP_ESYSTEM, "cannot start the GPU proxy thread: %s",
				     strerror(e));
	cu->thr_started = 1;
	return SMDDP_OK;
}

/* SMDDP_CUDA_ASYNC=auto, after the first call has shown where the ranks
 * are: calls return once queued unless other ranks share this GPU without
 * MPS.  Then the kernels of the processes are time-sliced: a stream held
 * back on the GPU keeps its context's time slices while it waits, and
 * each switch costs hundreds of microseconds, so the caller does the work
 * instead.  Each rank decides for itself: the two modes meet the peers
 * the same way. */
static int decide(struct smddp_comm *c, struct sd_cuda *cu)
{
	int mps = cu->shared ? mps_active() : 0;

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
	SD_CHECK(start_proxy(c, cu));
	cu->async = 1;
	return SMDDP_OK;
}

static int state_init(struct smddp_comm *c, int dev)
{
	struct sd_cuda *cu;
	pthread_condattr_t ca;
	cudaError_t e;
	int old = -1, rc = SMDDP_OK, attr = 0;

	cu = calloc(1, sizeof(*cu));
	if (!cu)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	cu->dev = dev;
	cu->mode = async_param();
	cu->decided = cu->mode >= 0;
	cu->async = cu->mode == 1;
	cu->shared = -1;
	cu->one_gpu = -1;
	cudaGetDevice(&old);
	if ((e = cudaSetDevice(dev)) != cudaSuccess) {
		rc = cuda_error(c, e, "cannot use the buffers' GPU");
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
		rc = cuda_error(c, e, "cannot create the communicator's stream");
		goto fail;
	}
	/* Before any stream waits on the word (see kernels.h). */
	if ((e = (cudaError_t)sd_cuda_kernels_load()) != cudaSuccess) {
		rc = cuda_error(c, e, "cannot load libsmddp's GPU kernels");
		goto fail;
	}
	for (int i = 0; i < QCAP; i++) {
		if ((e = cudaEventCreateWithFlags(&cu->ev_in[i], cudaEventDisableTiming)) != cudaSuccess ||
		    (e = cudaEventCreateWithFlags(&cu->ev_out[i], cudaEventDisableTiming)) != cudaSuccess) {
			rc = cuda_error(c, e, "cannot create events");
			goto fail;
		}
	}
	if ((e = cudaHostAlloc((void **)&cu->word, 64, cudaHostAllocMapped | cudaHostAllocPortable)) !=
	    cudaSuccess) {
		cu->word = NULL;
		rc = cuda_error(c, e, "cannot allocate pinned host memory for the release word");
		goto fail;
	}
	*cu->word = 0;
	void *dp = NULL;
	if ((e = cudaHostGetDevicePointer(&dp, (void *)cu->word, 0)) != cudaSuccess) {
		rc = cuda_error(c, e, "cannot map the release word into the GPU");
		goto fail;
	}
	cu->word_dev = (CUdeviceptr)(uintptr_t)dp;
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
	if (cu->async && (rc = start_proxy(c, cu)) != SMDDP_OK) {
		c->cuda = NULL;
		goto fail;
	}
	if (old >= 0 && old != dev)
		cudaSetDevice(old);
	if (cu->decided)
		SD_INFO(SD_SUB_COLL, "device collectives on GPU %d: %s (SMDDP_CUDA_ASYNC=%d)", dev,
			cu->async ? "calls return once queued" : "calls return when done",
			cu->mode);
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

static void ts_after(struct timespec *ts, uint64_t ns)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ns += (uint64_t)ts->tv_nsec;
	ts->tv_sec += (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* Host thread: every queued call finished (bounded: the proxy's own waits
 * have deadlines; this one is a backstop). */
static int drain(struct smddp_comm *c, struct sd_cuda *cu)
{
	struct timespec ts;
	int rc = 0;

	ts_after(&ts, c->timeout_ns + 30ull * 1000000000ull);
	pthread_mutex_lock(&cu->mu);
	while (cu->head != cu->tail && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&cu->cv_done, &cu->mu, &ts);
	int busy = cu->head != cu->tail;
	pthread_mutex_unlock(&cu->mu);
	if (busy) {
		c->failed = SMDDP_ETIMEDOUT;
		return sd_comm_error(c, SMDDP_ETIMEDOUT,
				     "the GPU proxy did not finish its queued calls within "
				     "SMDDP_TIMEOUT + 30 s: the communicator is broken");
	}
	return SMDDP_OK;
}

int sd_cuda_collect(struct smddp_comm *c, int do_drain)
{
	struct sd_cuda *cu = c ? c->cuda : NULL;
	int rc = SMDDP_OK;

	if (!cu)
		return SMDDP_OK;
	if (do_drain) {
		SD_CHECK(drain(c, cu));
		flush_stale(cu);
	}
	pthread_mutex_lock(&cu->mu);
	if (cu->failed) {
		rc = cu->failed;
		if (!c->failed) {
			c->failed = rc;
			snprintf(c->last_error, sizeof(c->last_error), "%s", cu->errmsg);
		}
	} else if (cu->pending) {
		rc = cu->pending;
		cu->pending = 0;
		snprintf(c->last_error, sizeof(c->last_error), "%s", cu->errmsg);
	}
	pthread_mutex_unlock(&cu->mu);
	return rc;
}

int sd_cuda_async_error(struct smddp_comm *c, char *msg, size_t len)
{
	struct sd_cuda *cu = c ? c->cuda : NULL;
	int rc;

	if (!cu)
		return 0;
	pthread_mutex_lock(&cu->mu);
	rc = cu->failed ? cu->failed : cu->pending;
	if (rc)
		snprintf(msg, len, "%s", cu->errmsg);
	pthread_mutex_unlock(&cu->mu);
	return rc;
}

/* ---- queueing (host thread) --------------------------------------------------- */

/* The buffers of call k: device memory of one GPU (*dev, or set when -1),
 * long enough, overlapping only in the documented in-place layouts. */
int sd_cuda_check_call(struct smddp_comm *c, const struct sd_cuda_call *k, int *devp,
		       struct buf_pub b[2])
{
	size_t sb, rb, es = dtsize(k->dtype);
	int dev = *devp;

	pthread_once(&drv_once, drv_load);
	if (drv.rc)
		return sd_comm_error(c, drv.rc, "%s", drv.err);
	extents(k, c->size, c->rank, &sb, &rb);
	memset(b, 0, 2 * sizeof(*b));
	if (sb)
		SD_CHECK(buffer_info(c, k->sendbuf, sb, "sendbuf", &dev, &b[0]));
	if (rb)
		SD_CHECK(buffer_info(c, k->recvbuf,
				     rb, k->coll == SD_COLL_BROADCAST ? "buf" : "recvbuf", &dev, &b[1]));
	if (b[0].present && b[1].present && b[0].base == b[1].base) {
		/* Overlaps other than the documented in-place layouts would
		 * make a rank read what it or a peer already overwrote. */
		uint64_t s0 = b[0].off, s1 = b[0].off + sb, r0 = b[1].off, r1 = b[1].off + rb;
		int overlap = s0 < r1 && r0 < s1, ok = !overlap || s0 == r0;
		uint64_t m = (uint64_t)k->count * es;

		if (k->coll == SD_COLL_ALLGATHER)
			ok = ok || s0 == r0 + (uint64_t)c->rank * m;
		if (k->coll == SD_COLL_REDUCE_SCATTER)
			ok = ok || r0 == s0 + (uint64_t)c->rank * m;
		if (!ok)
			return sd_comm_error(c, SMDDP_EINVAL,
					     "sendbuf and recvbuf overlap, but not in place (same "
					     "pointer%s): use separate buffers",
					     k->coll == SD_COLL_ALLGATHER
						     ? ", or sendbuf = recvbuf + rank * count"
					     : k->coll == SD_COLL_REDUCE_SCATTER
						     ? ", or recvbuf = sendbuf + rank * recvcount"
						     : "");
	}
	*devp = dev;
	return SMDDP_OK;
}

int sd_cuda_enqueue(struct smddp_comm *c, const struct sd_cuda_call *k)
{
	struct sd_cuda *cu = c->cuda;
	struct buf_pub b[2];
	size_t sb, rb, es = dtsize(k->dtype);
	int dev = cu ? cu->dev : -1, old = -1, rc;
	cudaStream_t st = (cudaStream_t)k->stream;
	cudaError_t e;

	if (c->local_size != c->size || c->net)
		return sd_comm_error(c, SMDDP_EINTERNAL,
				     "a communicator across hosts reached the device path of one "
				     "node");
	if (c->size > SD_CUDA_MAX_RANKS)
		return sd_comm_error(c, SMDDP_EUNSUPPORTED,
				     "device collectives take at most %d ranks on one node, this "
				     "communicator has %d",
				     SD_CUDA_MAX_RANKS, c->size);
	SD_CHECK(sd_cuda_check_call(c, k, &dev, b));
	extents(k, c->size, c->rank, &sb, &rb);
	if (c->size == 1) {
		/* Nothing to meet: a copy on the user's stream does it. */
		void *dst = k->recvbuf;
		const void *src = k->coll == SD_COLL_BROADCAST ? k->recvbuf : k->sendbuf;
		size_t len = k->count * es;

		if (k->coll == SD_COLL_BROADCAST || dst == src)
			return SMDDP_OK;
		cudaGetDevice(&old);
		cudaSetDevice(dev);
		e = cudaMemcpyAsync(dst, src, len, cudaMemcpyDeviceToDevice, st);
		if (old >= 0 && old != dev)
			cudaSetDevice(old);
		if (e != cudaSuccess)
			return cuda_error(c, e, "cannot queue the copy on the stream");
		return SMDDP_OK;
	}
	if (!cu) {
		SD_CHECK(state_init(c, dev));
		cu = c->cuda;
	}
	flush_stale(cu);
	void *scratch = NULL;
	struct buf_pub sbp;

	memset(&sbp, 0, sizeof(sbp));
	if (k->coll == SD_COLL_ALLTOALL && b[0].base == b[1].base &&
	    b[0].off < b[1].off + rb && b[1].off < b[0].off + sb) {
		/* In place: rank r's block q is overwritten by rank q while rank r
		 * still has to send it; the proxy first copies the input here. */
		if (cu->scratch_len < sb) {
			SD_CHECK(drain(c, cu));
			cudaGetDevice(&old);
			cudaSetDevice(dev);
			if (cu->scratch)
				cudaFree(cu->scratch);
			cu->scratch = NULL;
			cu->scratch_len = 0;
			e = cudaMalloc(&cu->scratch, sb);
			if (old >= 0 && old != dev)
				cudaSetDevice(old);
			if (e != cudaSuccess) {
				cu->scratch = NULL;
				return cuda_error(c, e, "cannot allocate GPU memory for an in-place "
							"alltoall");
			}
			cu->scratch_len = sb;
		}
		scratch = cu->scratch;
		SD_CHECK(buffer_info(c, scratch, sb, "the in-place alltoall's copy", &dev, &sbp));
	}

	if (!cu->async) {
		/* This thread runs the call, and returns when the collective is
		 * done, with its own error; work queued on the stream before
		 * the call comes first (the input event), work queued after it
		 * follows.  Under SMDDP_CUDA_ASYNC=auto the first call is done
		 * so, and shows whether other ranks share this GPU. */
		struct op *o = &cu->ring[0];

		memset(o, 0, sizeof(*o));
		o->seq = ++cu->enq;
		o->desc = c->cur;
		o->k = *k;
		o->b[0] = b[0];
		o->b[1] = b[1];
		o->scratch = scratch;
		o->sb = sbp;
		o->slot = 0;
		cudaGetDevice(&old);
		cudaSetDevice(dev);
		e = cudaEventRecord(cu->ev_in[0], st);
		if (e == cudaSuccess)
			run_call(c, cu, o);
		if (old >= 0 && old != dev)
			cudaSetDevice(old);
		if (e != cudaSuccess)
			return cuda_error(c, e, "cannot record an event on the stream (is it a "
						"stream of this GPU?)");
		rc = sd_cuda_collect(c, 0);
		if (!rc && !cu->decided && cu->shared >= 0)
			rc = decide(c, cu);
		return rc;
	}
	pthread_mutex_lock(&cu->mu);
	if (cu->tail - cu->head >= QCAP) {
		struct timespec ts;

		ts_after(&ts, c->timeout_ns);
		while (cu->tail - cu->head >= QCAP && !cu->failed)
			if (pthread_cond_timedwait(&cu->cv_done, &cu->mu, &ts) == ETIMEDOUT)
				break;
		if (cu->tail - cu->head >= QCAP) {
			pthread_mutex_unlock(&cu->mu);
			return sd_comm_error(c, SMDDP_ETIMEDOUT,
					     "%d calls are queued on the GPU and none finished within "
					     "SMDDP_TIMEOUT",
					     QCAP);
		}
	}
	int slot = (int)(cu->tail % QCAP);
	struct op *o = &cu->ring[slot];
	pthread_mutex_unlock(&cu->mu);

	memset(o, 0, sizeof(*o));
	o->seq = cu->enq + 1;
	o->desc = c->cur;
	o->k = *k;
	o->b[0] = b[0];
	o->b[1] = b[1];
	o->scratch = scratch;
	o->sb = sbp;
	o->slot = slot;
	cudaGetDevice(&old);
	cudaSetDevice(dev);
	rc = SMDDP_OK;
	if ((e = cudaEventRecord(cu->ev_in[slot], st)) != cudaSuccess) {
		rc = cuda_error(c, e, "cannot record an event on the stream (is it a stream of "
				      "this GPU?)");
	} else {
		CUresult r = drv.wait32((CUstream)st, cu->word_dev, o->seq, CU_STREAM_WAIT_VALUE_GEQ);

		if (r != CUDA_SUCCESS) {
			/* The event is recorded but nothing waits: the proxy
			 * is not told, so the stream runs on untouched. */
			rc = sd_comm_error(c, SMDDP_ECUDA,
					   "cannot make the stream wait (cuStreamWaitValue32: CUDA "
					   "error %d)",
					   (int)r);
		} else if ((e = cudaEventRecord(cu->ev_out[slot], st)) == cudaSuccess) {
			cu->out_used[slot] = 1;
		}
	}
	if (old >= 0 && old != dev)
		cudaSetDevice(old);
	if (rc)
		return rc;
	cu->enq = o->seq;
	pthread_mutex_lock(&cu->mu);
	cu->tail++;
	pthread_cond_signal(&cu->cv);
	pthread_mutex_unlock(&cu->mu);
	return SMDDP_OK;
}

/* ---- the proxy ------------------------------------------------------------------ */

/* Polls query(obj) until it says yes (1), fails (<0: a CUDA error in *err)
 * or the deadline passes (0), or *stop turns nonzero (2; stop may be NULL);
 * spins first, then sleeps a little longer each time. */
int sd_cuda_wait(cudaError_t (*query)(void *), void *obj, uint64_t deadline, const int *stop,
		 cudaError_t *err)
{
	uint64_t t0 = sd_now_ns();
	long sleep_ns = 2000;

	for (;;) {
		cudaError_t e = query(obj);

		if (e == cudaSuccess)
			return 1;
		if (e != cudaErrorNotReady) {
			*err = e;
			return -1;
		}
		uint64_t now = sd_now_ns();

		if (now >= deadline)
			return 0;
		if (stop && __atomic_load_n(stop, __ATOMIC_ACQUIRE))
			return 2;
		if (now - t0 < 100000) {
			sched_yield();
			continue;
		}
		struct timespec ts = {0, sleep_ns};

		nanosleep(&ts, NULL);
		if (sleep_ns < 500000)
			sleep_ns *= 2;
	}
}

static int wait_cuda(struct sd_cuda *cu, cudaError_t (*query)(void *), void *obj, uint64_t deadline,
		     int stoppable, cudaError_t *err)
{
	return sd_cuda_wait(query, obj, deadline, stoppable ? &cu->stop : NULL, err);
}

cudaError_t sd_cuda_q_event(void *e)
{
	return cudaEventQuery((cudaEvent_t)e);
}

static cudaError_t q_stream(void *s)
{
	return cudaStreamQuery((cudaStream_t)s);
}

/* Our own allocation's IPC handle, cached by buffer id. */
static int own_handle(struct sd_cuda *cu, struct buf_pub *b)
{
	struct own_entry *victim = &cu->own[0];
	cudaError_t e;

	for (int i = 0; i < OWN_CACHE; i++) {
		struct own_entry *x = &cu->own[i];

		if (x->id == b->id && x->base == b->base && x->used) {
			x->used = ++cu->tick;
			b->h = x->h;
			return SMDDP_OK;
		}
		if (x->used < victim->used)
			victim = x;
	}
	e = cudaIpcGetMemHandle(&b->h, (void *)(uintptr_t)b->base);
	if (e != cudaSuccess)
		return sd_comm_error(&cu->sh, SMDDP_ECUDA,
				     "cannot share a buffer with the other ranks through CUDA IPC "
				     "(cudaIpcGetMemHandle: %s): allocate it with cudaMalloc (memory "
				     "pools of cudaMallocAsync and cuMemCreate cannot be shared this "
				     "way)",
				     cudaGetErrorString(e));
	victim->id = b->id;
	victim->base = b->base;
	victim->h = b->h;
	victim->used = ++cu->tick;
	return SMDDP_OK;
}

/* CUDA IPC lets a process open a peer's allocation once per device: every
 * communicator of the process (a split shares the world's buffers) takes
 * its mappings from this one registry, counted. */
struct ipc_open {
	pid_t pid;
	int dev;
	uint64_t id;
	void *ptr;
	int refs;
	struct ipc_open *next;
};
static pthread_mutex_t ipc_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ipc_open *ipc_opens;

static cudaError_t ipc_open(pid_t pid, int dev, const struct buf_pub *b, void **out)
{
	struct ipc_open *x;
	cudaError_t e = cudaSuccess;

	pthread_mutex_lock(&ipc_mu);
	for (x = ipc_opens; x; x = x->next)
		if (x->pid == pid && x->dev == dev && x->id == b->id)
			break;
	if (x) {
		x->refs++;
		*out = x->ptr;
	} else if (!(x = calloc(1, sizeof(*x)))) {
		e = cudaErrorMemoryAllocation;
	} else if ((e = cudaIpcOpenMemHandle(out, b->h, cudaIpcMemLazyEnablePeerAccess)) !=
		   cudaSuccess) {
		free(x);
	} else {
		x->pid = pid;
		x->dev = dev;
		x->id = b->id;
		x->ptr = *out;
		x->refs = 1;
		x->next = ipc_opens;
		ipc_opens = x;
	}
	pthread_mutex_unlock(&ipc_mu);
	return e;
}

static void ipc_close(void *ptr)
{
	struct ipc_open **pp, *x;

	pthread_mutex_lock(&ipc_mu);
	for (pp = &ipc_opens; (x = *pp); pp = &x->next) {
		if (x->ptr != ptr)
			continue;
		if (--x->refs == 0) {
			*pp = x->next;
			cudaIpcCloseMemHandle(x->ptr);
			free(x);
		}
		break;
	}
	pthread_mutex_unlock(&ipc_mu);
}

/* Closing a mapping (cudaIpcCloseMemHandle) waits for the whole context,
 * so the proxy must not close one while a user's stream waits on its word:
 * it would wait for itself.  Mappings that go are kept here and closed by
 * the host thread when nothing is queued (flush_stale). */
static int retire(struct sd_cuda *cu, void *ptr)
{
	int rc = SMDDP_OK;

	pthread_mutex_lock(&cu->mu);
	if (cu->nstale == cu->maxstale) {
		int m = cu->maxstale ? 2 * cu->maxstale : 16;
		void **p = realloc(cu->stale, (size_t)m * sizeof(*p));

		if (p) {
			cu->stale = p;
			cu->maxstale = m;
		}
	}
	if (cu->nstale < cu->maxstale)
		cu->stale[cu->nstale++] = ptr;
	else
		rc = sd_comm_error(&cu->sh, SMDDP_ENOMEM, "out of memory");
	pthread_mutex_unlock(&cu->mu);
	return rc;
}

/* Host thread: closes the retired mappings if no call is queued (no
 * stream of ours waits on the word). */
static void flush_stale(struct sd_cuda *cu)
{
	void **v = NULL;
	int n = 0;

	pthread_mutex_lock(&cu->mu);
	if (cu->head == cu->tail && cu->nstale) {
		v = cu->stale;
		n = cu->nstale;
		cu->stale = NULL;
		cu->nstale = cu->maxstale = 0;
	}
	pthread_mutex_unlock(&cu->mu);
	for (int i = 0; i < n; i++)
		ipc_close(v[i]);
	free(v);
}

/* Rank q's buffer mapped here: cached per (rank, buffer id); an entry of
 * the same rank and base but another id is a freed and reallocated buffer,
 * and is unmapped. */
static int peer_ptr(struct sd_cuda *cu, int q, const struct buf_pub *b, char **out)
{
	struct map_entry *free_e = NULL, *lru = NULL;
	int used_by_q = 0;
	cudaError_t e;
	void *p = NULL;

	for (int i = 0; i < cu->nmaps; i++) {
		struct map_entry *x = &cu->maps[i];

		if (!x->ptr) {
			free_e = free_e ? free_e : x;
			continue;
		}
		if (x->rank != q)
			continue;
		if (x->id == b->id) {
			x->used = ++cu->tick;
			*out = (char *)x->ptr + b->off;
			return SMDDP_OK;
		}
		if (x->base == b->base) {
			SD_CHECK(retire(cu, x->ptr));
			x->ptr = NULL;
			free_e = free_e ? free_e : x;
			continue;
		}
		used_by_q++;
		if (!lru || x->used < lru->used)
			lru = x;
	}
	if (used_by_q >= MAP_PER_PEER && lru) {
		SD_CHECK(retire(cu, lru->ptr));
		lru->ptr = NULL;
		free_e = lru;
	}
	if (!free_e) {
		if (cu->nmaps == cu->maxmaps)
			return sd_comm_error(&cu->sh, SMDDP_EINTERNAL, "IPC mapping table full");
		free_e = &cu->maps[cu->nmaps++];
	}
	e = ipc_open(cu->sh.pids[q], cu->dev, b, &p);
	if (e != cudaSuccess)
		return sd_comm_error(&cu->sh, SMDDP_ECUDA,
				     "cannot map rank %d's buffer through CUDA IPC "
				     "(cudaIpcOpenMemHandle: %s): are both ranks on GPUs that can "
				     "reach each other?",
				     q, cudaGetErrorString(e));
	free_e->rank = q;
	free_e->id = b->id;
	free_e->base = b->base;
	free_e->ptr = p;
	free_e->used = ++cu->tick;
	*out = (char *)p + b->off;
	return SMDDP_OK;
}

/* Elements in each rank's partition: 64-byte multiples, as lib/coll does. */
static size_t part_elems(size_t n, int nranks, size_t es)
{
	size_t align = es >= 64 ? 1 : 64 / es;
	size_t part = (n + (size_t)nranks - 1) / (size_t)nranks;

	return (part + align - 1) / align * align;
}

static int launch_reduce(struct sd_cuda *cu, struct sd_cuda_kargs *a, int dt, int op, int div)
{
	int e = sd_cuda_kernel_reduce(a, dt, op, div, cu->st, cu->max_blocks);

	if (e)
		return sd_comm_error(&cu->sh, SMDDP_ECUDA, "cannot launch the reduction kernel: %s",
				     cudaGetErrorString((cudaError_t)e));
	return SMDDP_OK;
}

/* Does rank q's reduce_scatter stage its result in its own send block (its
 * recvbuf overlaps its sendbuf elsewhere than at block q)? */
static int rs_staged(const struct buf_pub *b, size_t m, int n, int q)
{
	return b[0].present && b[1].present && b[0].base == b[1].base &&
	       b[1].off < b[0].off + m * (size_t)n && b[0].off < b[1].off + m &&
	       b[1].off != b[0].off + (size_t)q * m;
}

/* Queues this rank's share of the data movement on cu->st.  ps[q] and pr[q]
 * are rank q's sendbuf and recvbuf as seen here (NULL where not mapped).
 *
 * Who works: when every rank is on one GPU, a single rank (0, or the root
 * of a broadcast) moves everything: the kernels of different processes on
 * one GPU are time-sliced, and each switch between processes costs hundreds
 * of microseconds, while one process's kernel has the whole GPU anyway.
 * With a GPU per rank, each rank moves its share, in parallel. */
static int move_data(struct sd_cuda *cu, const struct op *o, const struct pub *const *pubs,
		     char *const *ps, char *const *pr, char *const *pss, int worker)
{
	const struct sd_cuda_call *k = &o->k;
	struct smddp_comm *c = &cu->sh;
	struct sd_cuda_kargs a;
	size_t es = dtsize(k->dtype), m = k->count * es;
	int n = c->size, me = c->rank, all = worker >= 0;

	if (all && me != worker)
		return SMDDP_OK;
	memset(&a, 0, sizeof(a));
	switch (k->coll) {
	case SD_COLL_ALLREDUCE:
	case SD_COLL_REDUCE: {
		size_t part = part_elems(k->count, n, es), lo = part * (size_t)me, hi = lo + part;

		if (all)
			lo = 0, hi = k->count;
		if (hi > k->count)
			hi = k->count;
		if (lo >= hi)
			return SMDDP_OK;
		for (int q = 0; q < n; q++)
			a.src[q] = ps[q] + lo * es;
		a.nsrc = n;
		if (k->coll == SD_COLL_ALLREDUCE) {
			for (int q = 0; q < n; q++)
				a.dst[q] = pr[q] + lo * es;
			a.ndst = n;
		} else {
			a.dst[0] = pr[k->root] + lo * es;
			a.ndst = 1;
		}
		a.count = hi - lo;
		return launch_reduce(cu, &a, k->dtype, k->op, n);
	}
	case SD_COLL_REDUCE_SCATTER:
		/* Block q of every input into rank q's output; a rank whose
		 * recvbuf is its sendbuf gets it in its own block q (read by
		 * nobody else) and moves it once every rank is done. */
		for (int q = all ? 0 : me; q < (all ? n : me + 1); q++) {
			for (int p = 0; p < n; p++)
				a.src[p] = ps[p] + (size_t)q * m;
			a.nsrc = n;
			a.dst[0] = rs_staged(pubs[q]->b, m, n, q) ? ps[q] + (size_t)q * m : pr[q];
			a.ndst = 1;
			a.count = k->count;
			SD_CHECK(launch_reduce(cu, &a, k->dtype, k->op, n));
		}
		return SMDDP_OK;
	case SD_COLL_ALLGATHER:
		for (int q = all ? 0 : me; q < (all ? n : me + 1); q++) {
			const struct buf_pub *b = pubs[q]->b;
			int inplace = b[0].base == b[1].base && b[0].off == b[1].off + (size_t)q * m;

			a.src[0] = ps[q];
			a.nsrc = 1;
			a.ndst = 0;
			for (int p = 0; p < n; p++)
				if (!(p == q && inplace))
					a.dst[a.ndst++] = pr[p] + (size_t)q * m;
			a.count = k->count;
			if (a.ndst)
				SD_CHECK(launch_reduce(cu, &a, k->dtype, SMDDP_SUM, 1));
		}
		return SMDDP_OK;
	case SD_COLL_BROADCAST:
		if (me != k->root)
			return SMDDP_OK;
		a.src[0] = pr[me];
		a.nsrc = 1;
		for (int q = 0; q < n; q++)
			if (q != me)
				a.dst[a.ndst++] = pr[q];
		a.count = k->count;
		return launch_reduce(cu, &a, k->dtype, SMDDP_SUM, 1);
	case SD_COLL_ALLTOALL:
		/* Rank q's block p into block q of rank p's output (from q's
		 * private copy when q works in place; one worker takes the
		 * copies that the ranks left to it first, on the same stream). */
		if (all) {
			const void *src[SD_CUDA_MAX_RANKS];
			void *dst[SD_CUDA_MAX_RANKS];
			int np = 0;

			for (int q = 0; q < n; q++)
				if (pubs[q]->scratch && !pubs[q]->copied) {
					src[np] = ps[q];
					dst[np++] = pss[q];
				}
			int e = np ? sd_cuda_kernel_copy_pairs(src, dst, np, m * (size_t)n, cu->st,
							       cu->max_blocks)
				   : 0;
			if (e)
				return sd_comm_error(c, SMDDP_ECUDA, "cannot launch the copy kernel: %s",
						     cudaGetErrorString((cudaError_t)e));
		}
		for (int q = all ? 0 : me; q < (all ? n : me + 1); q++) {
			const void *src[SD_CUDA_MAX_RANKS];
			void *dst[SD_CUDA_MAX_RANKS];
			const char *from = pubs[q]->scratch ? pss[q] : ps[q];

			for (int p = 0; p < n; p++) {
				src[p] = from + (size_t)p * m;
				dst[p] = pr[p] + (size_t)q * m;
			}
			int e = sd_cuda_kernel_copy_pairs(src, dst, n, m, cu->st, cu->max_blocks);
			if (e)
				return sd_comm_error(c, SMDDP_ECUDA, "cannot launch the copy kernel: %s",
						     cudaGetErrorString((cudaError_t)e));
		}
		return SMDDP_OK;
	default:
		return sd_comm_error(c, SMDDP_EINTERNAL, "no device algorithm for %s",
				     sd_coll_name(k->coll));
	}
}

static int wait_stream(struct sd_cuda *cu)
{
	cudaError_t e = cudaSuccess;
	/* Kernels always end; the deadline only guards against a GPU gone bad. */
	int r = wait_cuda(cu, q_stream, cu->st, sd_now_ns() + cu->sh.timeout_ns, 0, &e);

	if (r == 1)
		return SMDDP_OK;
	if (r < 0)
		return sd_comm_error(&cu->sh, SMDDP_ECUDA, "a kernel of this call failed: %s (%s)",
				     cudaGetErrorString(e), cudaGetErrorName(e));
	return sd_comm_error(&cu->sh, SMDDP_ETIMEDOUT,
			     "the GPU did not finish this call's kernel within SMDDP_TIMEOUT");
}

/* One call, start to end, on the proxy thread. */
static int run_op(struct sd_cuda *cu, struct op *o, int *one_off)
{
	struct smddp_comm *c = &cu->sh;
	const struct sd_transport_ops *tp = c->tp;
	char *ps[SD_CUDA_MAX_RANKS], *pr[SD_CUDA_MAX_RANKS];
	cudaError_t e = cudaSuccess;
	int n = c->size, me = c->rank, after = 0, r, rc;
	size_t es = dtsize(o->k.dtype);

	c->cur = o->desc;
	c->last_error[0] = 0;
	/* 1. The stream reached the call: the input is there. */
	r = wait_cuda(cu, sd_cuda_q_event, cu->ev_in[o->slot], sd_now_ns() + c->timeout_ns, 1, &e);
	if (r == 2)
		return sd_comm_error(c, SMDDP_EABORTED, "the communicator was destroyed or aborted "
							"before this call ran");
	if (r < 0)
		return sd_comm_error(c, SMDDP_ECUDA,
				     "the stream failed before this call: %s (%s)",
				     cudaGetErrorString(e), cudaGetErrorName(e));
	if (r == 0)
		return sd_comm_error(c, SMDDP_ETIMEDOUT,
				     "the stream did not reach this call within SMDDP_TIMEOUT: is "
				     "the work queued before it stuck?");
	/* In-place alltoall: the private copy is taken before the ranks meet,
	 * since peers write into this input once they have met; except where
	 * one rank does all the work (one GPU, known from the last call): it
	 * takes every copy itself, sparing each process a kernel of its own
	 * (time-sliced processes: hundreds of microseconds each). */
	int copy_first = o->scratch && cu->one_gpu != 1;

	if (copy_first) {
		size_t sb, rb;

		extents(&o->k, n, me, &sb, &rb);
		if ((e = cudaMemcpyAsync(o->scratch, o->k.sendbuf, sb, cudaMemcpyDeviceToDevice,
					 cu->st)) != cudaSuccess)
			return sd_comm_error(c, SMDDP_ECUDA, "cannot copy the input aside: %s",
					     cudaGetErrorString(e));
		SD_CHECK(wait_stream(cu));
	}
	SD_TRACE(SD_SUB_COLL, "GPU call %u: input ready", o->seq);
	/* 2. Publish our buffers, meet, map theirs. */
	for (int i = 0; i < 2; i++)
		if (o->b[i].present)
			SD_CHECK(own_handle(cu, &o->b[i]));
	if (o->sb.present)
		SD_CHECK(own_handle(cu, &o->sb));
	int h = (int)(c->step++ & 1);
	struct pub *mine = tp->slot(c, me, h);

	mine->magic = PUB_MAGIC;
	mine->seq = o->seq;
	mine->desc = o->desc;
	mine->dev = cu->dev;
	mine->scratch = o->scratch != NULL;
	mine->copied = copy_first;
	memcpy(mine->uuid, cu->uuid, sizeof(mine->uuid));
	mine->b[0] = o->b[0];
	mine->b[1] = o->b[1];
	mine->s = o->sb;
	SD_TRACE(SD_SUB_COLL, "GPU call %u: handles ready", o->seq);
	SD_CHECK(tp->barrier(c));
	SD_TRACE(SD_SUB_COLL, "GPU call %u: every rank is here", o->seq);
	int mismatch = 0, one_gpu = 1, worker, map;
	char *pss[SD_CUDA_MAX_RANKS];
	char theirs[160], ours[160], msg[400] = "";
	const struct pub *pubs[SD_CUDA_MAX_RANKS];

	cu->shared = 0;
	for (int q = 0; q < n; q++) {
		pubs[q] = tp->slot(c, q, h);
		int same = !memcmp(pubs[q]->uuid, cu->uuid, sizeof(cu->uuid));

		one_gpu &= same;
		cu->shared += same && q != me;
	}
	cu->one_gpu = one_gpu;
	for (int q = 0; q < n && !one_gpu; q++)
		if (pubs[q]->scratch && !pubs[q]->copied)
			return sd_comm_error(c, SMDDP_EINTERNAL,
					     "rank %d left its in-place alltoall copy to a worker, but "
					     "the ranks are on several GPUs", q);
	/* One GPU for all: one rank moves everything (see move_data). */
	worker = !one_gpu ? -1 : o->k.coll == SD_COLL_BROADCAST ? o->k.root : 0;
	map = worker < 0 || worker == me;
	for (int q = 0; q < n; q++) {
		const struct pub *p = pubs[q];

		if (p->magic != PUB_MAGIC || p->seq != o->seq)
			return sd_comm_error(c, SMDDP_EMISMATCH,
					     "rank %d is at another call on the GPU (its call %u, ours "
					     "%u): did every rank make the same calls on device memory?",
					     q, p->seq, o->seq);
		if (c->check_coll && memcmp(&p->desc, &o->desc, sizeof(o->desc)) && !mismatch) {
			sd_coll_describe(&p->desc, theirs, sizeof(theirs));
			snprintf(msg, sizeof(msg), "rank %d called %s", q, theirs);
			mismatch = 1;
		}
		/* Whatever SMDDP_CHECK_COLL says: a rank that moved another
		 * count, dtype or root would read or write past the peers'
		 * buffers.  Every rank sees every descriptor: all fail alike. */
		if (!mismatch &&
		    (p->desc.coll != o->desc.coll || p->desc.count != o->desc.count ||
		     p->desc.dtype != o->desc.dtype || p->desc.root != o->desc.root)) {
			sd_coll_describe(&p->desc, theirs, sizeof(theirs));
			sd_coll_describe(&o->desc, ours, sizeof(ours));
			return sd_comm_error(c, SMDDP_EMISMATCH,
					     "rank %d called %s, this rank %s: every rank must make "
					     "the same calls on device memory",
					     q, theirs, ours);
		}
		ps[q] = pr[q] = pss[q] = NULL;
		if (q == me) {
			ps[q] = (char *)o->k.sendbuf;
			pr[q] = o->k.recvbuf;
			pss[q] = o->scratch;
			continue;
		}
		if (mismatch || !map)
			continue;
		if (p->b[0].present)
			SD_CHECK(peer_ptr(cu, q, &p->b[0], &ps[q]));
		if (p->b[1].present)
			SD_CHECK(peer_ptr(cu, q, &p->b[1], &pr[q]));
		if (p->scratch && p->s.present)
			SD_CHECK(peer_ptr(cu, q, &p->s, &pss[q]));
	}
	if (mismatch) {
		/* Everybody saw every descriptor: all stop here, in step. */
		SD_CHECK(tp->barrier(c));
		sd_coll_describe(&o->desc, ours, sizeof(ours));
		*one_off = 1;
		return sd_comm_error(c, SMDDP_EMISMATCH,
				     "ranks disagree (SMDDP_CHECK_COLL): this rank called %s, but %s",
				     ours, msg);
	}
	/* 3. Move, wait, meet: then every rank's output is complete. */
	SD_TRACE(SD_SUB_COLL, "GPU call %u: peers' buffers mapped", o->seq);
	after = o->k.coll == SD_COLL_REDUCE_SCATTER &&
		rs_staged(o->b, o->k.count * es, n, me);
	rc = move_data(cu, o, pubs, ps, pr, pss, worker);
	if (!rc)
		rc = wait_stream(cu);
	if (rc)
		return rc; /* the peers learn it at the next barrier (abort) */
	SD_TRACE(SD_SUB_COLL, "GPU call %u: kernel done", o->seq);
	SD_CHECK(tp->barrier(c));
	SD_TRACE(SD_SUB_COLL, "GPU call %u: every rank is done", o->seq);
	if (after) {
		size_t m = o->k.count * es;

		if ((e = cudaMemcpyAsync(o->k.recvbuf, (char *)o->k.sendbuf + (size_t)me * m, m,
					 cudaMemcpyDeviceToDevice, cu->st)) != cudaSuccess)
			return sd_comm_error(c, SMDDP_ECUDA, "cannot copy the result into recvbuf: %s",
					     cudaGetErrorString(e));
		SD_CHECK(wait_stream(cu));
	}
	return SMDDP_OK;
}

static void release(struct sd_cuda *cu, uint32_t seq)
{
	/* The GPU reads the word over the bus: a plain store, ordered after
	 * everything the proxy did (its kernels completed before). */
	__atomic_store_n((uint32_t *)cu->word, seq, __ATOMIC_SEQ_CST);
}

/* One call through run_op, and its failure recorded for sd_cuda_collect().
 * c->step belongs to whoever runs calls while they run (the host thread
 * drains the queue before its own collectives). */
static int run_call(struct smddp_comm *c, struct sd_cuda *cu, struct op *o)
{
	int one_off = 0, rc;

	cu->sh.step = c->step;
	rc = run_op(cu, o, &one_off);
	c->step = cu->sh.step;
	if (rc) {
		pthread_mutex_lock(&cu->mu);
		snprintf(cu->errmsg, sizeof(cu->errmsg), "%s", cu->sh.last_error);
		if (one_off)
			cu->pending = rc;
		else
			cu->failed = rc;
		pthread_mutex_unlock(&cu->mu);
		if (!one_off) {
			/* Tell the peers now, with the reason. */
			cu->sh.failed = rc;
			cu->sh.tp->abort(&cu->sh);
		}
	}
	return rc;
}

static void *proxy_main(void *arg)
{
	struct smddp_comm *c = arg;
	struct sd_cuda *cu = c->cuda;

	cudaSetDevice(cu->dev);
	pthread_mutex_lock(&cu->mu);
	for (;;) {
		while (cu->head == cu->tail && !cu->stop)
			pthread_cond_wait(&cu->cv, &cu->mu);
		if (cu->head == cu->tail)
			break;
		struct op *o = &cu->ring[cu->head % QCAP];
		int skip = cu->failed || cu->stop;
		pthread_mutex_unlock(&cu->mu);

		if (!skip)
			run_call(c, cu, o);
		release(cu, o->seq);
		pthread_mutex_lock(&cu->mu);
		cu->head++;
		pthread_cond_broadcast(&cu->cv_done);
	}
	pthread_mutex_unlock(&cu->mu);
	return NULL;
}

void sd_cuda_comm_free(struct smddp_comm *c)
{
	struct sd_cuda *cu = c ? c->cuda : NULL;
	int old = -1, passed = 1;

	if (c)
		sd_cuda_stage_free(c);
	if (!cu)
		return;
	if (cu->thr_started) {
		pthread_mutex_lock(&cu->mu);
		__atomic_store_n(&cu->stop, 1, __ATOMIC_RELEASE);
		pthread_cond_signal(&cu->cv);
		pthread_mutex_unlock(&cu->mu);
		pthread_join(cu->thr, NULL);
	}
	/* Every queued call is released; let the streams pass their waits
	 * before the word goes (bounded: a stream stuck in the user's own
	 * work keeps the word, which is then leaked rather than freed). */
	release(cu, cu->enq);
	cudaGetDevice(&old);
	cudaSetDevice(cu->dev);
	uint64_t deadline = sd_now_ns() + 10ull * 1000000000ull;
	for (int i = 0; i < QCAP; i++) {
		cudaError_t e = cudaSuccess;

		if (cu->out_used[i] &&
		    wait_cuda(cu, sd_cuda_q_event, cu->ev_out[i], deadline, 0, &e) == 0)
			passed = 0;
	}
	for (int i = 0; i < cu->nmaps; i++)
		if (cu->maps[i].ptr)
			ipc_close(cu->maps[i].ptr);
	flush_stale(cu);
	if (cu->scratch)
		cudaFree(cu->scratch);
	for (int i = 0; i < QCAP; i++) {
		cudaEventDestroy(cu->ev_in[i]);
		cudaEventDestroy(cu->ev_out[i]);
	}
	cudaStreamDestroy(cu->st);
	if (passed)
		cudaFreeHost((void *)cu->word);
	else
		SD_WARN(SD_SUB_COLL, "a stream still waits on a call of this communicator after "
				     "10 s: its release word is left allocated");
	if (old >= 0 && old != cu->dev)
		cudaSetDevice(old);
	pthread_mutex_destroy(&cu->mu);
	pthread_cond_destroy(&cu->cv);
	pthread_cond_destroy(&cu->cv_done);
	free(cu->maps);
	free(cu);
	c->cuda = NULL;
}
