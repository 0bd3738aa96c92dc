/* fakecuda.c - a CUDA runtime and driver made of host memory, to run the device path of libsmddp on a machine without a GPU.
 *
 * This file: the "device memory", pinned host memory, the device, IPC and
 * the driver entry points; fakecuda-stream.c: streams, events and copies;
 * fakecuda-kernels.c: lib/cuda/kernels.h as host work on the streams.
 *
 * Linked with gpu-conformance (gpu-*.c) and the library's internals into
 * tests/gpu/p2p-fake (p2p-fake.sh, proxy-fake.sh, staged-fake.sh): all of
 * lib/cuda/ runs as it is (p2p.c, proxy.c, move.c, staged.c, ipc.c,
 * device.c) except the kernels; this file stands in for the CUDA runtime,
 * the driver entry points the library fetches, libcuda.so.1 as
 * lib/core/api.c probes it (dlopen is wrapped: -Wl,--wrap), and
 * lib/cuda/kernels.cu.  The real runtime (libcudart_static, on the link
 * line through libsmddp_core.la) is one object: a CUDA function missing
 * here pulls it in and the link fails on duplicates, never silently.
 *
 * "Device memory" is a file in /dev/shm ($FAKECUDA_FILE, removed by
 * the script) that every rank maps at one fixed address, each allocating
 * FAKE_PER_RANK bytes at most in its own part of it, never reused: a CUDA
 * IPC handle is then just an address, valid in every rank, and a receiver
 * reads its peers' buffers as it would through a real mapping.
 *
 * Streams are asynchronous and ordered, as a GPU's: each is a FIFO run by
 * a worker thread of its own (fakecuda-stream.c): copies,
 * 2-D copies, memsets, event records and waits, cuStreamWaitValue32 (GEQ)
 * and cuStreamWriteValue32, host functions and the kernels.  A call that
 * reads a buffer before its stream got there, or a stream that runs past
 * a call it should wait for, gives wrong data here.  What is emulated:
 * queries (cudaErrorNotReady while work is pending), the synchronize
 * calls, CUDA's rule that a copy with pageable host memory returns when
 * done (pinned means cudaMallocHost, cudaHostAlloc, cudaHostRegister),
 * synchronous cudaMemcpy/cudaMemset after the legacy stream's and the
 * blocking streams' work, cudaFree and cudaFreeHost waiting for the
 * device (10 s at most: then cudaFreeHost leaks), cudaStreamDestroy
 * returning at once and its stream finishing its work.  Not emulated:
 * the legacy stream's implicit ordering with blocking streams (the
 * library's and the tests' streams are non-blocking), stream priorities,
 * several devices, errors of the device itself, timing (cudaEventElapsedTime
 * is wall time of the worker).
 *
 * The kernels (lib/cuda/kernels.h) are host work queued on the stream:
 * sd_cuda_kernel_reduce through sd_reduce() (the arithmetic kernels.cu
 * shares with the host path: every dtype and op), copy_pairs as copies,
 * kernels_load a no-op.  So the collectives of one node run in both modes
 * of SMDDP_CUDA_ASYNC (the queued one through the release word and
 * cuStreamWaitValue32), but nothing of the kernels' own code (block
 * sizes, vector loads, rounding in registers) is checked: that needs a GPU.
 *
 * FAKECUDA_NOPEER=1: every rank has a GPU of its own that no other rank
 * sees, so receivers cannot map their peers' buffers and ask for the data
 * staged (round 3 of lib/cuda/p2p.c).  FAKECUDA_JITTER_US=N (< 1000000):
 * every stream item starts after a random 0..N us, to shake out work that
 * only happened to be done before the host looked.
 * FAKECUDA_CONNECTIONS=N (1..32): the process has N hardware queues, as a
 * GPU gives a context a few (CUDA_DEVICE_MAX_CONNECTIONS) and MPS clients
 * share a pool: stream k's items also wait for every item queued before
 * them on queue k % N (the legacy stream is on queue 0), by any stream.
 * A stream held by a wait then holds back the other streams of its queue:
 * the false dependencies that a real GPU may or may not show.
 * FAKECUDA_DEVICES=N (1..8): the process sees N GPUs; cudaSetDevice picks
 * the thread's current one and a stream belongs to the GPU current at its
 * creation (cuStreamGetDevice), memory to the GPU current at its
 * allocation; all GPUs are one (the same UUID, the same memory).
 * FAKECUDA_QUEUE_DEPTH=N: a stream holds at most N items not yet done;
 * queueing one more blocks the caller until one is, as a GPU's command
 * queue does when it is full.
 * FAKECUDA_TICKET_LIMIT=N: the library starts its tickets over once N are
 * taken (sd_cuda_ticket_limit, enqueue.c), not near 2^32.
 * FAKECUDA_PART_ITEMS=N: a staged call between hosts is queued in parts of
 * at most N stream items (sd_cuda_part_items, staged.c), not 128.
 * FAKECUDA_IPC_CLOSE_US=US[:N]: cudaIpcCloseMemHandle, which waits for
 * the device's work queued before it as the driver's does, takes US us
 * more (a busy device), for the process's first N closes only when N is
 * given.
 * FAKECUDA_FAIL=R:launch:N or R:record:N: on rank R the Nth kernel launch
 * (cudaErrorLaunchOutOfResources) or the Nth cudaEventRecord
 * (cudaErrorLaunchFailure) fails, counted from 1 over the whole process:
 * a call that fails halfway on its stream.  Built with
 * -fsanitize=thread the region moves (FAKE_BASE), so that ThreadSanitizer
 * can watch the fake's workers and the library's threads together.
 */
#include "config.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "fakecuda.h"


#if defined(__SANITIZE_THREAD__)
#define FAKE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FAKE_TSAN 1
#endif
#endif
#ifdef FAKE_TSAN
/* ThreadSanitizer's shadow and meta memory take most of the address space
 * and its mmap drops an address outside the application's ranges: this one
 * is in the range of modules and stacks (x86-64), below the libraries. */
#define FAKE_BASE ((uintptr_t)0x7ea000000000ull)
#else
#define FAKE_BASE ((uintptr_t)0x6f0000000000ull)
#endif
#define FAKE_PER_RANK ((size_t)256 << 20)
#define FAKE_RANKS 16
#define FAKE_ALLOCS 4096

struct alloc {
	uintptr_t base;
	size_t size;
	unsigned long long id;
	int pool;
	int dev; /* the GPU current at its allocation (FAKECUDA_DEVICES) */
};

static struct alloc allocs[FAKE_ALLOCS];
static int nallocs;
static uintptr_t next_free;
static int fake_rank = -1;
/* FAKECUDA_FAIL (see the top): which call of this rank fails, and the counts. */
static int fail_launch, fail_record, n_launch, n_record;
static pthread_mutex_t amu = PTHREAD_MUTEX_INITIALIZER; /* allocs: threads allocate and look up */

int fake_env_int(const char *name, int dflt)
{
	const char *v = getenv(name);

	return v && *v ? atoi(v) : dflt;
}

/* Weak: asyncerr-fake has its own proxy entry points and no proxy.c. */
extern uint32_t sd_cuda_ticket_limit __attribute__((weak));
extern size_t sd_cuda_part_items __attribute__((weak));

static void fake_die(const char *what)
{
	fprintf(stderr, "fakecuda: %s\n", what);
	exit(1);
}

/* Maps the shared "device memory" at its fixed address, once. */
static void fake_init(void)
{
	const char *file = getenv("FAKECUDA_FILE");
	size_t total = FAKE_PER_RANK * FAKE_RANKS;
	void *p;
	int fd;

	if (fake_rank >= 0)
		return;
	fake_rank = fake_env_int("RANK", 0);
	if (!file || fake_rank >= FAKE_RANKS)
		fake_die("set FAKECUDA_FILE, at most 16 ranks");
	fd = open(file, O_RDWR | O_CREAT, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)total) != 0)
		fake_die("cannot open or size FAKECUDA_FILE");
	p = mmap((void *)FAKE_BASE, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE,
		 fd, 0);
	if (p != (void *)FAKE_BASE)
		fake_die("cannot map the fake device memory at its address");
	close(fd);
	next_free = FAKE_BASE + (size_t)fake_rank * FAKE_PER_RANK;
	if (&sd_cuda_ticket_limit && fake_env_int("FAKECUDA_TICKET_LIMIT", 0) > 0)
		sd_cuda_ticket_limit = (uint32_t)fake_env_int("FAKECUDA_TICKET_LIMIT", 0);
	if (&sd_cuda_part_items && fake_env_int("FAKECUDA_PART_ITEMS", 0) > 0)
		sd_cuda_part_items = (size_t)fake_env_int("FAKECUDA_PART_ITEMS", 0);
	const char *f = getenv("FAKECUDA_FAIL");
	char what[16];
	int r, n;

	if (f && *f) {
		if (sscanf(f, "%d:%15[a-z]:%d", &r, what, &n) != 3 || n < 1 ||
		    (strcmp(what, "launch") && strcmp(what, "record")))
			fake_die("FAKECUDA_FAIL is RANK:launch:N or RANK:record:N");
		if (r == fake_rank)
			*(strcmp(what, "launch") ? &fail_record : &fail_launch) = n;
	}
}

/* FAKECUDA_FAIL: is this the call that fails? */
static int fail_now(int *count, int at)
{
	return at && __atomic_add_fetch(count, 1, __ATOMIC_RELAXED) == at;
}

int fake_launch_fails(void)
{
	return fail_now(&n_launch, fail_launch);
}

int fake_record_fails(void)
{
	return fail_now(&n_record, fail_record);
}

static int in_region(uintptr_t p)
{
	return p >= FAKE_BASE && p < FAKE_BASE + FAKE_PER_RANK * FAKE_RANKS;
}

/* Entries never change once made: the pointer stays good unlocked. */
static struct alloc *find(uintptr_t p)
{
	struct alloc *a = NULL;

	pthread_mutex_lock(&amu);
	for (int i = nallocs - 1; i >= 0 && !a; i--)
		if (p >= allocs[i].base && p < allocs[i].base + (allocs[i].size ? allocs[i].size : 1))
			a = &allocs[i];
	pthread_mutex_unlock(&amu);
	return a;
}

static cudaError_t fake_alloc(void **out, size_t size, int pool)
{
	size_t len = (size + 511) & ~(size_t)511;

	fake_init();
	pthread_mutex_lock(&amu);
	if (nallocs == FAKE_ALLOCS ||
	    next_free + len > FAKE_BASE + (size_t)(fake_rank + 1) * FAKE_PER_RANK) {
		pthread_mutex_unlock(&amu);
		return cudaErrorMemoryAllocation;
	}
	allocs[nallocs].base = next_free;
	allocs[nallocs].size = size;
	allocs[nallocs].id = (unsigned long long)nallocs + 1;
	allocs[nallocs].pool = pool;
	allocs[nallocs].dev = fake_current_device();
	nallocs++;
	*out = (void *)next_free;
	next_free += len;
	pthread_mutex_unlock(&amu);
	return cudaSuccess;
}

/* ---- host memory the "GPU" may copy from asynchronously -------------------- */

/* Pinned allocations (cudaMallocHost, cudaHostAlloc): a copy between them
 * and the device runs on the stream like any other.  A copy with pageable
 * memory (malloc) on the host side returns only when it is done, as CUDA's
 * does (its staging buffer is then free to reuse). */
#define FAKE_PINNED 1024

static struct {
	uintptr_t base;
	size_t size;
} pinned[FAKE_PINNED];
static int npinned;

/* One lock for pinned memory, streams and events. */
pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;
/* Broadcast whenever a stream finishes an item or an event is reached. */
pthread_cond_t fake_progress = PTHREAD_COND_INITIALIZER;

int fake_is_pinned(uintptr_t p)
{
	int yes = 0;

	pthread_mutex_lock(&fake_mu);
	for (int i = 0; i < npinned && !yes; i++)
		yes = p >= pinned[i].base && p < pinned[i].base + pinned[i].size;
	pthread_mutex_unlock(&fake_mu);
	return yes;
}

/* Does a copy touching dst and src return only when done? */
int fake_pageable(const void *dst, const void *src)
{
	uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;

	return (!in_region(d) && !fake_is_pinned(d)) || (!in_region(s) && !fake_is_pinned(s));
}

static cudaError_t host_alloc(void **p, size_t size)
{
	cudaError_t e = cudaErrorMemoryAllocation;

	*p = NULL;
	pthread_mutex_lock(&fake_mu);
	if (npinned < FAKE_PINNED && (*p = malloc(size ? size : 1))) {
		pinned[npinned].base = (uintptr_t)*p;
		pinned[npinned].size = size ? size : 1;
		npinned++;
		e = cudaSuccess;
	}
	pthread_mutex_unlock(&fake_mu);
	return e;
}

/* ---- memory ------------------------------------------------------------------ */

cudaError_t cudaMalloc(void **p, size_t size)
{
	return fake_alloc(p, size, 0);
}

/* Allocated at once and never reused: valid before the stream gets there,
 * which is all that stream order asks. */
cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t st)
{
	(void)st;
	return fake_alloc(p, size, 1); /* a pool's: no legacy IPC handle */
}

/* cudaFree waits for the device in CUDA; addresses are never reused here
 * (every allocation keeps its id), so a free changes nothing. */
cudaError_t cudaFree(void *p)
{
	(void)p;
	fake_idle_within(10);
	return cudaSuccess;
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t st)
{
	(void)p;
	(void)st;
	return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags)
{
	(void)flags; /* mapped or not: the "GPU" is this process */
	return host_alloc(p, size);
}

cudaError_t cudaMallocHost(void **p, size_t size)
{
	return host_alloc(p, size);
}

cudaError_t cudaHostRegister(void *p, size_t size, unsigned int flags)
{
	cudaError_t e = cudaErrorMemoryAllocation;

	(void)flags;
	pthread_mutex_lock(&fake_mu);
	if (npinned < FAKE_PINNED) {
		pinned[npinned].base = (uintptr_t)p;
		pinned[npinned].size = size ? size : 1;
		npinned++;
		e = cudaSuccess;
	}
	pthread_mutex_unlock(&fake_mu);
	return e;
}

static void unpin(void *p)
{
	int i;

	pthread_mutex_lock(&fake_mu);
	for (i = 0; i < npinned && pinned[i].base != (uintptr_t)p; i++)
		;
	if (i < npinned)
		pinned[i] = pinned[--npinned];
	pthread_mutex_unlock(&fake_mu);
}

/* As cudaFreeHost: after the device is done with it (or 10 s). */
cudaError_t cudaHostUnregister(void *p)
{
	fake_idle_within(10);
	unpin(p);
	return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void **dp, void *p, unsigned int flags)
{
	(void)flags;
	if (!fake_is_pinned((uintptr_t)p))
		return cudaErrorInvalidValue;
	*dp = p;
	return cudaSuccess;
}

/* Waits for the device, as CUDA's does; a stream that copies into the
 * memory still after 10 s (blocked for good) gets it leaked instead. */
cudaError_t cudaFreeHost(void *p)
{
	if (!p)
		return cudaSuccess;
	if (!fake_idle_within(10)) {
		fprintf(stderr, "fakecuda: cudaFreeHost(%p): a stream still runs after 10 s, "
				"leaking it\n", p);
		return cudaSuccess;
	}
	unpin(p);
	free(p);
	return cudaSuccess;
}

/* ---- the device -------------------------------------------------------------- */

cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr attr, int dev)
{
	(void)dev;
	*v = attr == cudaDevAttrMultiProcessorCount ? 4 : 0;
	return cudaSuccess;
}

static __thread int cur_dev;

static int ndevices(void)
{
	int n = fake_env_int("FAKECUDA_DEVICES", 1);

	return n < 1 ? 1 : n > 8 ? 8 : n;
}

cudaError_t cudaGetDeviceCount(int *n)
{
	fake_init();
	*n = ndevices();
	return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
	*v = 13000;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
	if (d < 0 || d >= ndevices())
		return cudaErrorInvalidDevice;
	cur_dev = d;
	return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d)
{
	*d = cur_dev;
	return cudaSuccess;
}

int fake_current_device(void)
{
	return cur_dev;
}

static void fake_uuid(unsigned char *u)
{
	memset(u, 0, 16);
	memcpy(u, "fakegpu", 7);
	if (fake_env_int("FAKECUDA_NOPEER", 0))
		u[15] = (unsigned char)(1 + fake_rank);
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
	(void)d;
	fake_init();
	memset(p, 0, sizeof(*p));
	fake_uuid((unsigned char *)&p->uuid);
	return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *ok, int d, int peer)
{
	*ok = d == 0 && peer == 0;
	return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
	return cudaSuccess;
}

cudaError_t cudaPeekAtLastError(void)
{
	return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e)
{
	return e == cudaSuccess ? "no error" : "fake CUDA error";
}

const char *cudaGetErrorName(cudaError_t e)
{
	return e == cudaSuccess ? "cudaSuccess" : "cudaErrorFake";
}

/* An IPC handle is the allocation's address and size. */
cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p)
{
	struct alloc *a = find((uintptr_t)p);

	if (!a || a->base != (uintptr_t)p || a->pool)
		return cudaErrorInvalidValue;
	memset(h, 0, sizeof(*h));
	memcpy(h->reserved, &a->base, sizeof(a->base));
	memcpy(h->reserved + 8, &a->size, sizeof(a->size));
	return cudaSuccess;
}

/* The mappings open in this process, counted as the driver counts them (a
 * handle opened again gives the same pointer, one more reference), so
 * that a test can ask how many of a rank's allocations are still mapped
 * here (fake_ipc_mapped_of), and a close of a pointer not open fails. */
#define FAKE_MAPS 4096
static struct {
	uintptr_t base;
	int refs;
} maps[FAKE_MAPS];
static int nmaps;
static pthread_mutex_t mapmu = PTHREAD_MUTEX_INITIALIZER;

cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned int flags)
{
	uintptr_t base;
	int i, free_i = -1;

	(void)flags;
	memcpy(&base, h.reserved, sizeof(base));
	if (!in_region(base))
		return cudaErrorInvalidResourceHandle;
	pthread_mutex_lock(&mapmu);
	for (i = 0; i < nmaps; i++) {
		if (maps[i].refs && maps[i].base == base)
			break;
		if (!maps[i].refs && free_i < 0)
			free_i = i;
	}
	if (i == nmaps) {
		i = free_i >= 0 ? free_i : nmaps < FAKE_MAPS ? nmaps++ : -1;
		if (i < 0) {
			pthread_mutex_unlock(&mapmu);
			return cudaErrorMemoryAllocation;
		}
		maps[i].base = base;
	}
	maps[i].refs++;
	pthread_mutex_unlock(&mapmu);
	*p = (void *)base;
	return cudaSuccess;
}

/* As the driver's (lib/cuda/ipc.c): waits for the work queued in the
 * context before it, 10 s at most here (then closes anyway, and says so);
 * FAKECUDA_IPC_CLOSE_US (see the top) on top.  The mapping stays valid
 * until the end, and an open meanwhile takes one more reference. */
cudaError_t cudaIpcCloseMemHandle(void *p)
{
	static int closes;
	cudaError_t e = cudaErrorInvalidValue;
	const char *slow = getenv("FAKECUDA_IPC_CLOSE_US");
	int us = 0, first = 0;

	if (!fake_sync_within(10))
		fprintf(stderr, "fakecuda: cudaIpcCloseMemHandle(%p): the device's work before it "
				"still runs after 10 s, closing anyway (a real driver would wait on)\n",
			p);
	if (slow && sscanf(slow, "%d:%d", &us, &first) >= 1 && us > 0 &&
	    (first <= 0 || __atomic_add_fetch(&closes, 1, __ATOMIC_RELAXED) <= first)) {
		struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000L};

		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&mapmu);
	for (int i = 0; i < nmaps; i++)
		if (maps[i].refs && maps[i].base == (uintptr_t)p) {
			maps[i].refs--;
			e = cudaSuccess;
			break;
		}
	pthread_mutex_unlock(&mapmu);
	return e;
}

int fake_ipc_refs(const void *p)
{
	int n = 0;

	pthread_mutex_lock(&mapmu);
	for (int i = 0; i < nmaps; i++)
		if (maps[i].refs && maps[i].base == (uintptr_t)p)
			n = maps[i].refs;
	pthread_mutex_unlock(&mapmu);
	return n;
}

int fake_ipc_mapped_of(int owner)
{
	uintptr_t lo = FAKE_BASE + (size_t)owner * FAKE_PER_RANK;
	int n = 0;

	pthread_mutex_lock(&mapmu);
	for (int i = 0; i < nmaps; i++)
		n += maps[i].refs && maps[i].base >= lo && maps[i].base < lo + FAKE_PER_RANK;
	pthread_mutex_unlock(&mapmu);
	return n;
}

/* What this rank has not allocated of its part (allocations are never
 * reused here). */
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
	fake_init();
	pthread_mutex_lock(&amu);
	*free_b = FAKE_BASE + (size_t)(fake_rank + 1) * FAKE_PER_RANK - next_free;
	pthread_mutex_unlock(&amu);
	*total = FAKE_PER_RANK;
	return cudaSuccess;
}

/* ---- the driver, as the library fetches it ---------------------------------- */

static CUresult fake_attrs(unsigned int n, CUpointer_attribute *at, void **val, CUdeviceptr p)
{
	struct alloc *a = find((uintptr_t)p);

	for (unsigned int i = 0; i < n; i++)
		switch (at[i]) {
		case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
			*(unsigned int *)val[i] = in_region((uintptr_t)p) ? CU_MEMORYTYPE_DEVICE : 0;
			break;
		case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
			*(int *)val[i] = a ? a->dev : 0;
			break;
		case CU_POINTER_ATTRIBUTE_BUFFER_ID:
			*(unsigned long long *)val[i] = a ? a->id : 0;
			break;
		case CU_POINTER_ATTRIBUTE_IS_MANAGED:
			*(unsigned int *)val[i] = 0;
			break;
		default:
			return CUDA_ERROR_INVALID_VALUE;
		}
	return CUDA_SUCCESS;
}

static CUresult fake_attr(void *val, CUpointer_attribute at, CUdeviceptr p)
{
	struct alloc *a = find((uintptr_t)p);

	if (at != CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE || !a)
		return CUDA_ERROR_INVALID_VALUE;
	*(int *)val = !a->pool;
	return CUDA_SUCCESS;
}

static CUresult fake_device_get(CUdevice *d, int ordinal)
{
	int n;

	cudaGetDeviceCount(&n);
	if (ordinal < 0 || ordinal >= n)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = ordinal;
	return CUDA_SUCCESS;
}

static CUresult fake_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	struct alloc *a = find((uintptr_t)p);

	if (!a)
		return CUDA_ERROR_NOT_FOUND;
	*base = a->base;
	*size = a->size;
	return CUDA_SUCCESS;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *name, void **fn, unsigned int version,
					     unsigned long long flags,
					     enum cudaDriverEntryPointQueryResult *q)
{
	(void)version;
	(void)flags;
	*fn = !strcmp(name, "cuPointerGetAttributes")  ? (void *)fake_attrs
	      : !strcmp(name, "cuPointerGetAttribute") ? (void *)fake_attr
	      : !strcmp(name, "cuMemGetAddressRange")  ? (void *)fake_range
	      : !strcmp(name, "cuStreamWaitValue32")   ? (void *)fake_wait32
	      : !strcmp(name, "cuStreamWriteValue32")  ? (void *)fake_write32
	      : !strcmp(name, "cuStreamGetDevice")     ? (void *)fake_stream_device
	      : !strcmp(name, "cuDeviceGet")           ? (void *)fake_device_get
						       : NULL;
	*q = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
	return cudaSuccess;
}

/* lib/core/api.c finds cuPointerGetAttributes in a loaded libcuda.so.1.  The real
 * dlopen(RTLD_NOLOAD) takes tens of microseconds (it searches the library path), which
 * is the window of threads' first calls at once (gpu-conformance threads): so this one
 * takes 50 us too. */
static int fake_libcuda;
void *__real_dlopen(const char *name, int flags);
void *__real_dlsym(void *h, const char *name);
int __real_dlclose(void *h);

void *__wrap_dlopen(const char *name, int flags)
{
	if (name && !strcmp(name, "libcuda.so.1")) {
		struct timespec ts = {0, 50 * 1000L};

		nanosleep(&ts, NULL);
		return &fake_libcuda;
	}
	return __real_dlopen(name, flags);
}

void *__wrap_dlsym(void *h, const char *name)
{
	if (h == &fake_libcuda)
		return !strcmp(name, "cuPointerGetAttributes") ? (void *)fake_attrs : NULL;
	return __real_dlsym(h, name);
}

int __wrap_dlclose(void *h)
{
	return h == &fake_libcuda ? 0 : __real_dlclose(h);
}
