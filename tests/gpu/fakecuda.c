/* fakecuda.c - a CUDA runtime and driver made of host memory, to run the device p2p protocol on a machine without a GPU.
 *
 * Linked with gpu-conformance.c and the library's internals into
 * tests/gpu/p2p-fake (tests/gpu/p2p-fake.sh): lib/cuda/p2p.c, ipc.c and
 * device.c run as they are; this file stands in for the CUDA runtime,
 * the driver entry points they fetch, libcuda.so.1 as lib/core/api.c
 * probes it (dlopen is wrapped: -Wl,--wrap), and the parts of the device
 * path that p2p does not use (proxy.c, move.c, staged.c and the kernels:
 * the collectives on device memory fail with SMDDP_EUNSUPPORTED here).
 *
 * "Device memory" is a file in /dev/shm ($FAKECUDA_FILE, removed by
 * the script) that every rank maps at one fixed address, each allocating
 * in its own part of it: a CUDA IPC handle is then just an address, valid
 * in every rank, and a receiver reads its peers' buffers as it would
 * through a real mapping.  Every copy is done at once (streams are
 * always idle), so this checks the protocol (rounds, matching, sizes,
 * in-place copies, staging), not stream ordering or concurrency.
 *
 * FAKECUDA_NOPEER=1: every rank has a GPU of its own that no other rank
 * sees, so receivers cannot map their peers' buffers and ask for the data
 * staged (round 3 of lib/cuda/p2p.c).
 */
#include "config.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "cuda/proxy.h"

#define FAKE_BASE ((uintptr_t)0x6f0000000000ull)
#define FAKE_PER_RANK ((size_t)256 << 20)
#define FAKE_RANKS 16
#define FAKE_ALLOCS 4096

struct alloc {
	uintptr_t base;
	size_t size;
	unsigned long long id;
	int pool;
};

static struct alloc allocs[FAKE_ALLOCS];
static int nallocs;
static uintptr_t next_free;
static int fake_rank = -1;

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);

	return v && *v ? atoi(v) : dflt;
}

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
	fake_rank = env_int("RANK", 0);
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
}

static int in_region(uintptr_t p)
{
	return p >= FAKE_BASE && p < FAKE_BASE + FAKE_PER_RANK * FAKE_RANKS;
}

static struct alloc *find(uintptr_t p)
{
	for (int i = nallocs - 1; i >= 0; i--)
		if (p >= allocs[i].base && p < allocs[i].base + (allocs[i].size ? allocs[i].size : 1))
			return &allocs[i];
	return NULL;
}

static cudaError_t fake_alloc(void **out, size_t size, int pool)
{
	size_t len = (size + 511) & ~(size_t)511;

	fake_init();
	if (nallocs == FAKE_ALLOCS ||
	    next_free + len > FAKE_BASE + (size_t)(fake_rank + 1) * FAKE_PER_RANK)
		return cudaErrorMemoryAllocation;
	allocs[nallocs].base = next_free;
	allocs[nallocs].size = size;
	allocs[nallocs].id = (unsigned long long)nallocs + 1;
	allocs[nallocs].pool = pool;
	nallocs++;
	*out = (void *)next_free;
	next_free += len;
	return cudaSuccess;
}

/* ---- the runtime ------------------------------------------------------------ */

cudaError_t cudaMalloc(void **p, size_t size)
{
	return fake_alloc(p, size, 0);
}

cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t st)
{
	(void)st;
	return fake_alloc(p, size, 1); /* a pool's: no legacy IPC handle */
}

cudaError_t cudaFree(void *p)
{
	(void)p; /* addresses are not reused: every allocation keeps its id */
	return cudaSuccess;
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t st)
{
	(void)st;
	return cudaFree(p);
}

cudaError_t cudaMallocHost(void **p, size_t size)
{
	*p = malloc(size ? size : 1);
	return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void *p)
{
	free(p);
	return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind k,
			    cudaStream_t st)
{
	(void)k;
	(void)st;
	if (n)
		memmove(dst, src, n);
	return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k)
{
	return cudaMemcpyAsync(dst, src, n, k, NULL);
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t st)
{
	(void)st;
	memset(p, v, n);
	return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t st, cudaHostFn_t fn, void *data)
{
	(void)st;
	fn(data);
	return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned int flags)
{
	static int dummy;

	(void)flags;
	*st = (cudaStream_t)&dummy;
	return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t st)
{
	(void)st;
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t st)
{
	(void)st;
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
	return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	static int dummy;

	*e = (cudaEvent_t)&dummy;
	return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
	(void)flags;
	return cudaEventCreate(e);
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	(void)e;
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st)
{
	(void)e;
	(void)st;
	return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
	(void)e;
	return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	(void)a;
	(void)b;
	*ms = 0;
	return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *n)
{
	fake_init();
	*n = 1;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
	return d == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaGetDevice(int *d)
{
	*d = 0;
	return cudaSuccess;
}

static void fake_uuid(unsigned char *u)
{
	memset(u, 0, 16);
	memcpy(u, "fakegpu", 7);
	if (env_int("FAKECUDA_NOPEER", 0))
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

cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned int flags)
{
	uintptr_t base;

	(void)flags;
	memcpy(&base, h.reserved, sizeof(base));
	if (!in_region(base))
		return cudaErrorInvalidResourceHandle;
	*p = (void *)base;
	return cudaSuccess;
}

cudaError_t cudaIpcCloseMemHandle(void *p)
{
	(void)p;
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
			*(int *)val[i] = 0;
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

static CUresult fake_range(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
	struct alloc *a = find((uintptr_t)p);

	if (!a)
		return CUDA_ERROR_NOT_FOUND;
	*base = a->base;
	*size = a->size;
	return CUDA_SUCCESS;
}

static CUresult fake_wait32(CUstream st, CUdeviceptr addr, cuuint32_t v, unsigned int flags)
{
	(void)st;
	(void)addr;
	(void)v;
	(void)flags;
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
						       : NULL;
	*q = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
	return cudaSuccess;
}

/* lib/core/api.c finds cuPointerGetAttributes in a loaded libcuda.so.1. */
static int fake_libcuda;
void *__real_dlopen(const char *name, int flags);
void *__real_dlsym(void *h, const char *name);
int __real_dlclose(void *h);

void *__wrap_dlopen(const char *name, int flags)
{
	if (name && !strcmp(name, "libcuda.so.1"))
		return &fake_libcuda;
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

/* ---- the parts of lib/cuda that p2p does not use ------------------------------ */

int sd_cuda_enqueue(struct smddp_comm *c, const struct sd_cuda_call *k)
{
	(void)k;
	return sd_comm_error(c, SMDDP_EUNSUPPORTED, "no device collectives in tests/gpu/fakecuda.c");
}

int sd_cuda_staged(struct smddp_comm *c, const struct sd_cuda_call *k)
{
	return sd_cuda_enqueue(c, k);
}

/* Set by a test (asyncerr-fake.c): the error queued work met, else 0,
 * as sd_cuda_async_error reports it; and the one that a drain meets, as
 * sd_cuda_collect(c, 1) returns a sticky one. */
int fakecuda_async_rc, fakecuda_drain_rc;
char fakecuda_async_msg[256];

int sd_cuda_collect(struct smddp_comm *c, int drain)
{
	if (!drain || !fakecuda_drain_rc)
		return 0;
	c->failed = fakecuda_drain_rc;
	snprintf(c->last_error, sizeof(c->last_error), "%s", fakecuda_async_msg);
	return fakecuda_drain_rc;
}

int sd_cuda_async_error(struct smddp_comm *c, struct sd_err *err)
{
	(void)c;
	if (fakecuda_async_rc)
		sd_err_set(err, fakecuda_async_rc, "%s", fakecuda_async_msg);
	return fakecuda_async_rc;
}

int sd_cuda_state(struct smddp_comm *c, int dev, struct sd_cuda **out)
{
	struct sd_cuda *cu = c->cuda;

	if (!cu) {
		if (!(cu = calloc(1, sizeof(*cu))))
			return SMDDP_ENOMEM;
		cu->dev = dev;
		fake_uuid(cu->uuid);
		cu->maxmaps = c->size * MAP_PER_PEER;
		if (!(cu->maps = calloc((size_t)cu->maxmaps, sizeof(*cu->maps)))) {
			free(cu);
			return SMDDP_ENOMEM;
		}
		pthread_mutex_init(&cu->mu, NULL);
		memcpy(&cu->sh, c, sizeof(cu->sh));
		cu->sh.cuda = NULL;
		c->cuda = cu;
	}
	*out = cu;
	return SMDDP_OK;
}

void sd_cuda_comm_free(struct smddp_comm *c)
{
	struct sd_cuda *cu = c ? c->cuda : NULL;

	if (!cu)
		return;
	free(cu->maps);
	free(cu->stale);
	pthread_mutex_destroy(&cu->mu);
	free(cu);
	c->cuda = NULL;
}
