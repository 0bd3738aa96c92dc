/* device.c - the device path's base: the CUDA driver's entry points, the checks of a call's
 * buffers, and the one wait for CUDA work (spin, then sleep, with a deadline). */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "cuda/cuda.h"
#include "cuda/device.h"
#include "cuda/internal.h"
#include "cuda/kernels.h"
#include "transport/transport.h"
#include "util/wait.h"

typedef CUresult (*pfn_attrs)(unsigned int, CUpointer_attribute *, void **, CUdeviceptr);
typedef CUresult (*pfn_range)(CUdeviceptr *, size_t *, CUdeviceptr);
typedef CUresult (*pfn_wait32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*pfn_write32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*pfn_sdev)(CUstream, CUdevice *);
typedef CUresult (*pfn_devget)(CUdevice *, int);

static struct {
	pfn_attrs attrs;
	pfn_range range;
	pfn_wait32 wait32;
	pfn_write32 write32;
	pfn_sdev sdev; /* NULL before CUDA 12.8: a stream's GPU is not checked */
	pfn_devget devget;
	int rc;
	char err[160];
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void *entry(const char *name, unsigned int version)
{
	void *fn = NULL;
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;

	if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &q) !=
		    cudaSuccess ||
	    q != cudaDriverEntryPointSuccess)
		return NULL;
	return fn;
}

static void drv_load(void)
{
	drv.attrs = (pfn_attrs)entry("cuPointerGetAttributes", 12000);
	drv.range = (pfn_range)entry("cuMemGetAddressRange", 12000);
	drv.wait32 = (pfn_wait32)entry("cuStreamWaitValue32", 12000);
	drv.write32 = (pfn_write32)entry("cuStreamWriteValue32", 12000);
	drv.sdev = (pfn_sdev)entry("cuStreamGetDevice", 12080);
	drv.devget = (pfn_devget)entry("cuDeviceGet", 12000);
	if (!drv.attrs || !drv.range || !drv.wait32 || !drv.write32) {
		drv.rc = SMDDP_ECUDA;
		snprintf(drv.err, sizeof(drv.err),
			 "the CUDA driver lacks cuPointerGetAttributes, cuMemGetAddressRange, "
			 "cuStreamWaitValue32 or cuStreamWriteValue32 (driver older than CUDA 12?)");
	}
}

int sd_cuda_wait32(cudaStream_t st, CUdeviceptr addr, uint32_t value)
{
	return (int)drv.wait32((CUstream)st, addr, value, CU_STREAM_WAIT_VALUE_GEQ);
}

int sd_cuda_write32(cudaStream_t st, CUdeviceptr addr, uint32_t value)
{
	return (int)drv.write32((CUstream)st, addr, value, CU_STREAM_WRITE_VALUE_DEFAULT);
}

/* Checks that p is device memory of device dev (or sets dev when it is -1)
 * holding bytes bytes, and fills its allocation's base, offset and id. */
int sd_cuda_buffer_info(struct smddp_comm *c, const void *p, size_t bytes, const char *what,
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
void sd_cuda_extents(const struct sd_cuda_call *k, int n, int rank, size_t *sb, size_t *rb)
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
	sd_cuda_extents(k, c->size, c->rank, &sb, &rb);
	memset(b, 0, 2 * sizeof(*b));
	if (sb)
		SD_CHECK(sd_cuda_buffer_info(c, k->sendbuf, sb, "sendbuf", &dev, &b[0]));
	if (rb)
		SD_CHECK(sd_cuda_buffer_info(c, k->recvbuf,
				     rb, k->coll == SD_COLL_BROADCAST ? "buf" : "recvbuf", &dev, &b[1]));
	if (b[0].present && b[1].present && b[0].base == b[1].base) {
		/* Overlaps other than the documented in-place layouts would
		 * make a rank read what it or a peer already overwrote. */
		uint64_t s0 = b[0].off, s1 = b[0].off + sb, r0 = b[1].off, r1 = b[1].off + rb;
		int overlap = s0 < r1 && r0 < s1, ok = !overlap || s0 == r0;
		uint64_t m = (uint64_t)k->count * es;

		/* An allgather's input is block rank of recvbuf in place; the
		 * same pointer elsewhere is block 0, which rank 0's data
		 * overwrites before the peers have read it. */
		if (k->coll == SD_COLL_ALLGATHER)
			ok = !overlap || s0 == r0 + (uint64_t)c->rank * m;
		if (k->coll == SD_COLL_REDUCE_SCATTER)
			ok = ok || r0 == s0 + (uint64_t)c->rank * m;
		if (!ok)
			return sd_comm_error(c, SMDDP_EINVAL,
					     "sendbuf and recvbuf overlap, but not in place (%s): use "
					     "separate buffers",
					     k->coll == SD_COLL_ALLGATHER
						     ? "sendbuf = recvbuf + rank * sendcount"
					     : k->coll == SD_COLL_REDUCE_SCATTER
						     ? "the same pointer, or recvbuf = sendbuf + rank * "
						       "recvcount"
						     : "the same pointer");
	}
	/* A stream of another GPU than the buffers' is refused whatever the
	 * communicator's size: with peers it would fail at its first use,
	 * with part of the call queued.  The special handles (NULL, legacy,
	 * per-thread) are the current GPU's, which the call makes the
	 * buffers'. */
	if (dev >= 0 && drv.sdev && drv.devget && (uintptr_t)k->stream > 2) {
		CUdevice sdev, bdev;

		if (drv.sdev((CUstream)k->stream, &sdev) == CUDA_SUCCESS &&
		    drv.devget(&bdev, dev) == CUDA_SUCCESS && sdev != bdev)
			return sd_comm_error(c, SMDDP_EINVAL,
					     "the stream is of GPU %d and the buffers are on GPU %d: "
					     "pass a stream of the buffers' GPU",
					     (int)sdev, dev);
	}
	*devp = dev;
	return SMDDP_OK;
}

/* A CUDA query being waited for: what sd_wait's callbacks look at. */
struct cwait {
	cudaError_t (*query)(void *);
	void *obj;
	cudaError_t *err;
	const struct smddp_comm *cancel_of; /* whose smddp_comm_cancel ends it, or NULL */
};

static int cuda_ready(void *arg, int *rc)
{
	struct cwait *w = arg;
	cudaError_t e = w->query(w->obj);

	if (e == cudaSuccess)
		return SD_WAIT_DONE;
	if (e == cudaErrorNotReady)
		return SD_WAIT_NOT_YET;
	*w->err = e;
	*rc = SMDDP_ECUDA;
	return SD_WAIT_FAILED;
}

/* Nothing rings when the GPU is done: sleep, a little longer each time. */
static int cuda_sleep(void *arg, uint64_t ns, int *rc)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
			      .tv_nsec = (long)(ns % 1000000000ull)};

	(void)arg;
	(void)rc;
	nanosleep(&ts, NULL);
	return SD_WAIT_NOT_YET;
}

/* Asked after the first 100 us, then before every nap. */
static int cuda_cancel_asked(void *arg)
{
	const struct cwait *w = arg;

	return sd_comm_cancel_asked(w->cancel_of) ? SMDDP_EABORTED : SMDDP_OK;
}

int sd_cuda_wait_cancel(cudaError_t (*query)(void *), void *obj, uint64_t timeout_ns,
			const int *stop, const struct smddp_comm *cancel_of, cudaError_t *err)
{
	struct cwait cw = {.query = query, .obj = obj, .err = err, .cancel_of = cancel_of};
	/* Yield for 100 us (the GPU often finishes within that), then
	 * sleep from 2 us up to about half a millisecond at a time: the
	 * proxy thread must not take a core from the ranks. */
	struct sd_wait w = {
		.spin = INT_MAX,
		.yield_mask = 0,
		.spin_ns = 100000,
		.nap_ns = 2000,
		.nap_max_ns = 512000,
		.timeout_ns = timeout_ns,
		.stop = stop,
		.ready = cuda_ready,
		.sleep = cuda_sleep,
		.health = cancel_of ? cuda_cancel_asked : NULL,
		.arg = &cw,
	};

	return sd_wait(&w);
}

int sd_cuda_wait(cudaError_t (*query)(void *), void *obj, uint64_t timeout_ns, const int *stop,
		 cudaError_t *err)
{
	return sd_cuda_wait_cancel(query, obj, timeout_ns, stop, NULL, err);
}

struct word_wait {
	const volatile uint32_t *w;
	uint32_t t;
	cudaStream_t st;
};

/* The word, else a fault of the context (sticky: every stream of it
 * reports it, st too) rather than waiting out the deadline. */
static cudaError_t q_word(void *arg)
{
	const struct word_wait *ww = arg;
	cudaError_t e;

	if ((int32_t)(__atomic_load_n(ww->w, __ATOMIC_ACQUIRE) - ww->t) >= 0)
		return cudaSuccess;
	e = cudaStreamQuery(ww->st);
	return e == cudaSuccess ? cudaErrorNotReady : e;
}

int sd_cuda_wait_word(const volatile uint32_t *w, uint32_t t, cudaStream_t st, uint64_t timeout_ns,
		      const int *stop, const struct smddp_comm *cancel_of, cudaError_t *err)
{
	struct word_wait ww = {w, t, st};

	return sd_cuda_wait_cancel(q_word, &ww, timeout_ns, stop, cancel_of, err);
}

int sd_cuda_stopped(struct smddp_comm *c, const char *when)
{
	if (sd_comm_cancel_asked(c))
		return sd_comm_cancelled(c);
	return sd_comm_error(c, SMDDP_EABORTED, "the communicator was destroyed or aborted %s",
			     when);
}

cudaError_t sd_cuda_q_event(void *e)
{
	return cudaEventQuery((cudaEvent_t)e);
}

/* Host thread, a queued call on stream st: after the last queued call on
 * the GPU when that was on another stream (its end event), as calls share
 * the staging slots, the scratch copy, the up word and the fast path's
 * window. */
cudaError_t sd_cuda_after_last(struct sd_cuda *cu, cudaStream_t st)
{
	if (cu->last_st == st)
		return cudaSuccess;
	if (cu->last_fast)
		return cudaStreamWaitEvent(st, cu->fast_ev, 0);
	if (cu->last_slot >= 0 && cu->out_used[cu->last_slot] == OUT_RECORDED)
		return cudaStreamWaitEvent(st, cu->ev_out[cu->last_slot], 0);
	return cudaSuccess;
}
