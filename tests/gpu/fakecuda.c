/* fakecuda.c - a CUDA runtime and driver made of host memory, to run the device path of libsmddp on a machine without a GPU.
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
 * a worker thread of its own (see "streams and events" below): copies,
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
 * FAKECUDA_TICKET_LIMIT=N: the library starts its tickets over once N are
 * taken (sd_cuda_ticket_limit, proxy.c), not near 2^32.
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

#include "cuda/kernels.h"
#include "util/sd.h"

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
};

static struct alloc allocs[FAKE_ALLOCS];
static int nallocs;
static uintptr_t next_free;
static int fake_rank = -1;
/* FAKECUDA_FAIL (see the top): which call of this rank fails, and the counts. */
static int fail_launch, fail_record, n_launch, n_record;
static pthread_mutex_t amu = PTHREAD_MUTEX_INITIALIZER; /* allocs: threads allocate and look up */

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);

	return v && *v ? atoi(v) : dflt;
}

/* Weak: asyncerr-fake has its own proxy entry points and no proxy.c. */
extern uint32_t sd_cuda_ticket_limit __attribute__((weak));

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
	if (&sd_cuda_ticket_limit && env_int("FAKECUDA_TICKET_LIMIT", 0) > 0)
		sd_cuda_ticket_limit = (uint32_t)env_int("FAKECUDA_TICKET_LIMIT", 0);
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
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
/* Broadcast whenever a stream finishes an item or an event is reached. */
static pthread_cond_t progress = PTHREAD_COND_INITIALIZER;

static int is_pinned(uintptr_t p)
{
	int yes = 0;

	pthread_mutex_lock(&mu);
	for (int i = 0; i < npinned && !yes; i++)
		yes = p >= pinned[i].base && p < pinned[i].base + pinned[i].size;
	pthread_mutex_unlock(&mu);
	return yes;
}

/* Does a copy touching dst and src return only when done? */
static int pageable(const void *dst, const void *src)
{
	uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;

	return (!in_region(d) && !is_pinned(d)) || (!in_region(s) && !is_pinned(s));
}

static cudaError_t host_alloc(void **p, size_t size)
{
	cudaError_t e = cudaErrorMemoryAllocation;

	*p = NULL;
	pthread_mutex_lock(&mu);
	if (npinned < FAKE_PINNED && (*p = malloc(size ? size : 1))) {
		pinned[npinned].base = (uintptr_t)*p;
		pinned[npinned].size = size ? size : 1;
		npinned++;
		e = cudaSuccess;
	}
	pthread_mutex_unlock(&mu);
	return e;
}

/* ---- streams and events -------------------------------------------------------
 *
 * A stream is a FIFO of work items, run in order by the stream's own worker
 * thread (started at its first item, detached: a worker blocked forever on
 * a wait, as a GPU would be, does not keep the process from exiting).
 * Items are taken off the FIFO only when done, so "queued - done" is the
 * work pending.  Events carry generations: cudaEventRecord gives the event
 * a new one at the call, the worker marks it reached when it gets there;
 * a wait (on the host or on a stream) takes the generation current at the
 * time of the call, as CUDA does, so an event recorded again later does
 * not move a wait already queued. */

enum wkind { W_COPY, W_COPY2D, W_SET, W_RECORD, W_WAITEV, W_WAIT32, W_WRITE32, W_CALL };

struct fevent {
	uint64_t recorded, reached; /* generations */
	double ms;                  /* when the last generation was reached */
	int refs;                   /* queued items naming it */
	int dead;                   /* destroyed: freed once refs is 0 */
};

struct work {
	struct work *next;
	enum wkind kind;
	void *dst;
	const void *src;
	size_t n, dpitch, spitch, height; /* n: bytes (the width of a 2-D copy) */
	int v;
	struct fevent *ev;
	uint64_t gen;
	volatile uint32_t *addr;
	uint32_t value;
	void (*fn)(void *);
	void *arg;
	int conn;      /* FAKECUDA_CONNECTIONS: its hardware queue, */
	uint64_t cseq; /* ... and its place there */
};

/* FAKECUDA_CONNECTIONS=N (see the top): N hardware queues; stream k's work
 * goes through queue k % N, in the order it was queued. */
#define FAKE_MAX_CONN 32
static int nconn = -1;
static uint64_t conn_queued[FAKE_MAX_CONN], conn_done[FAKE_MAX_CONN];
static int nstreams;

/* Under mu, before the first item or stream. */
static void conn_init(void)
{
	if (nconn < 0) {
		nconn = env_int("FAKECUDA_CONNECTIONS", 0);
		nconn = nconn > FAKE_MAX_CONN ? FAKE_MAX_CONN : nconn < 0 ? 0 : nconn;
	}
}

struct fstream {
	struct fstream *next; /* the live streams */
	struct work *head, *tail;
	uint64_t queued, done;
	unsigned int flags;
	int started, dying;
	int conn; /* its hardware queue (FAKECUDA_CONNECTIONS) */
	pthread_cond_t cv; /* to the worker: work, or destroyed */
};

/* NULL, cudaStreamLegacy and cudaStreamPerThread: one FIFO.  Its implicit
 * synchronization with the other blocking streams is not emulated (every
 * stream of the library and the tests is non-blocking). */
static struct fstream legacy = {.cv = PTHREAD_COND_INITIALIZER};
static struct fstream *live = &legacy;

static struct fstream *sof(cudaStream_t st)
{
	return !st || st == cudaStreamLegacy || st == cudaStreamPerThread ? &legacy
									     : (struct fstream *)st;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void ev_unref(struct fevent *ev)
{
	if (--ev->refs == 0 && ev->dead)
		free(ev);
}

static void run_item(struct work *w)
{
	struct timespec nap = {0, 100 * 1000L};

	switch (w->kind) {
	case W_COPY:
		if (w->n)
			memmove(w->dst, w->src, w->n);
		break;
	case W_COPY2D:
		for (size_t y = 0; y < w->height; y++)
			memmove((char *)w->dst + y * w->dpitch, (const char *)w->src + y * w->spitch,
				w->n);
		break;
	case W_SET:
		memset(w->dst, w->v, w->n);
		break;
	case W_RECORD:
		pthread_mutex_lock(&mu);
		if (w->gen > w->ev->reached) {
			w->ev->reached = w->gen;
			w->ev->ms = now_ms();
		}
		pthread_mutex_unlock(&mu);
		break;
	case W_WAITEV:
		pthread_mutex_lock(&mu);
		while (w->ev->reached < w->gen)
			pthread_cond_wait(&progress, &mu);
		pthread_mutex_unlock(&mu);
		break;
	case W_WAIT32:
		/* CU_STREAM_WAIT_VALUE_GEQ: (int32_t)(*addr - value) >= 0, a
		 * cyclic comparison, as the driver documents it (the release
		 * word of lib/cuda/proxy.c counts calls and may wrap).
		 * Nothing rings when the host writes: poll, gently. */
		while ((int32_t)(__atomic_load_n(w->addr, __ATOMIC_ACQUIRE) - w->value) < 0)
			nanosleep(&nap, NULL);
		break;
	case W_WRITE32:
		__atomic_store_n(w->addr, w->value, __ATOMIC_RELEASE);
		break;
	case W_CALL:
		w->fn(w->arg);
		break;
	}
}

/* FAKECUDA_JITTER_US (see the top): a random delay before each item. */
static void *worker(void *arg)
{
	struct fstream *s = arg;
	int jitter = env_int("FAKECUDA_JITTER_US", 0) % 1000000;
	unsigned int seed = (unsigned int)(uintptr_t)s ^ (unsigned int)getpid();

	pthread_mutex_lock(&mu);
	for (;;) {
		while (!s->head && !s->dying)
			pthread_cond_wait(&s->cv, &mu);
		if (!s->head)
			break;
		struct work *w = s->head;

		/* Its turn in its hardware queue: behind whatever any stream
		 * of that queue put there before. */
		while (nconn > 0 && conn_done[w->conn] != w->cseq)
			pthread_cond_wait(&progress, &mu);
		pthread_mutex_unlock(&mu);
		if (jitter > 0) {
			struct timespec ts = {0, (long)(rand_r(&seed) % (unsigned int)jitter) * 1000L};

			nanosleep(&ts, NULL);
		}
		run_item(w);
		pthread_mutex_lock(&mu);
		if (w->ev)
			ev_unref(w->ev);
		s->head = w->next;
		if (!s->head)
			s->tail = NULL;
		s->done++;
		if (nconn > 0)
			conn_done[w->conn]++;
		pthread_cond_broadcast(&progress);
		free(w);
	}
	/* Destroyed and drained (cudaStreamDestroy returns at once). */
	for (struct fstream **pp = &live; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&mu);
	pthread_cond_destroy(&s->cv);
	free(s);
	return NULL;
}

static cudaError_t put(cudaStream_t st, struct work *w)
{
	struct fstream *s = sof(st);
	cudaError_t e = cudaSuccess;

	pthread_mutex_lock(&mu);
	if (s->dying) {
		e = cudaErrorInvalidResourceHandle;
	} else if (!s->started) {
		pthread_t t;
		pthread_attr_t at;

		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &at, worker, s) != 0)
			e = cudaErrorMemoryAllocation;
		else
			s->started = 1;
		pthread_attr_destroy(&at);
	}
	if (e == cudaSuccess) {
		w->next = NULL;
		if (s->tail)
			s->tail->next = w;
		else
			s->head = w;
		s->tail = w;
		s->queued++;
		conn_init();
		if (nconn > 0) {
			w->conn = s->conn;
			w->cseq = conn_queued[s->conn]++;
		}
		if (w->ev)
			w->ev->refs++;
		/* The generation is taken with the item queued, atomically: a
		 * record that could not be queued leaves the event as it was. */
		if (w->kind == W_RECORD)
			w->gen = ++w->ev->recorded;
		else if (w->kind == W_WAITEV)
			w->gen = w->ev->recorded; /* 0 when never recorded: complete */
		pthread_cond_signal(&s->cv);
	}
	pthread_mutex_unlock(&mu);
	if (e != cudaSuccess)
		free(w);
	return e;
}

static struct work *item(enum wkind kind)
{
	struct work *w = calloc(1, sizeof(*w));

	if (w)
		w->kind = kind;
	return w;
}

/* Under mu: until s has done what was queued on it so far. */
static void drain_locked(struct fstream *s)
{
	uint64_t target = s->queued;

	while (s->done < target)
		pthread_cond_wait(&progress, &mu);
}

/* Until every stream (all = 1), or the legacy stream and the blocking ones
 * (what a synchronous cudaMemcpy waits for), is idle.  The list is scanned
 * afresh after each wait: a destroyed stream's worker frees it once idle. */
static void drain_all(int all)
{
	pthread_mutex_lock(&mu);
	for (;;) {
		int busy = 0;

		for (struct fstream *s = live; s && !busy; s = s->next)
			busy = (all || !(s->flags & cudaStreamNonBlocking)) && s->done != s->queued;
		if (!busy)
			break;
		pthread_cond_wait(&progress, &mu);
	}
	pthread_mutex_unlock(&mu);
}

/* Is every stream idle within secs?  For the frees, which CUDA makes wait
 * for the device: a stream blocked for good (a wait nobody releases) must
 * not hang the process, so they give up and leak instead. */
static int idle_within(double secs)
{
	struct timespec ts;
	int idle = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)secs;
	pthread_mutex_lock(&mu);
	for (;;) {
		idle = 1;
		for (struct fstream *s = live; s && idle; s = s->next)
			idle = s->done == s->queued;
		if (idle || pthread_cond_timedwait(&progress, &mu, &ts) != 0)
			break;
	}
	pthread_mutex_unlock(&mu);
	return idle;
}

static cudaError_t copy_on(cudaStream_t st, void *dst, const void *src, size_t n)
{
	struct work *w = item(W_COPY);
	cudaError_t e;

	if (!w)
		return cudaErrorMemoryAllocation;
	w->dst = dst;
	w->src = src;
	w->n = n;
	if ((e = put(st, w)) == cudaSuccess && pageable(dst, src))
		e = cudaStreamSynchronize(st);
	return e;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned int flags)
{
	struct fstream *s = calloc(1, sizeof(*s));

	if (!s)
		return cudaErrorMemoryAllocation;
	s->flags = flags;
	pthread_cond_init(&s->cv, NULL);
	pthread_mutex_lock(&mu);
	conn_init();
	/* Round robin, the legacy stream (queue 0) counted first. */
	s->conn = nconn > 0 ? ++nstreams % nconn : 0;
	s->next = live;
	live = s;
	pthread_mutex_unlock(&mu);
	*st = (cudaStream_t)s;
	return cudaSuccess;
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t *st, unsigned int flags, int prio)
{
	(void)prio;
	return cudaStreamCreateWithFlags(st, flags);
}

cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
	*least = *greatest = 0;
	return cudaSuccess;
}

cudaError_t cudaStreamGetFlags(cudaStream_t st, unsigned int *flags)
{
	*flags = sof(st)->flags;
	return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *st)
{
	return cudaStreamCreateWithFlags(st, cudaStreamDefault);
}

/* As CUDA: returns at once; the worker finishes the stream's work, then
 * ends and frees it (a stream that never started is freed here). */
cudaError_t cudaStreamDestroy(cudaStream_t st)
{
	struct fstream *s = sof(st);

	if (s == &legacy)
		return cudaErrorInvalidResourceHandle;
	pthread_mutex_lock(&mu);
	s->dying = 1;
	if (s->started) {
		pthread_cond_signal(&s->cv);
		s = NULL;
	} else {
		for (struct fstream **pp = &live; *pp; pp = &(*pp)->next)
			if (*pp == s) {
				*pp = s->next;
				break;
			}
	}
	pthread_mutex_unlock(&mu);
	if (s) {
		pthread_cond_destroy(&s->cv);
		free(s);
	}
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t st)
{
	pthread_mutex_lock(&mu);
	drain_locked(sof(st));
	pthread_mutex_unlock(&mu);
	return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t st)
{
	struct fstream *s = sof(st);
	int busy;

	pthread_mutex_lock(&mu);
	busy = s->done != s->queued;
	pthread_mutex_unlock(&mu);
	return busy ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
	drain_all(1);
	return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
	struct fevent *ev = calloc(1, sizeof(*ev));

	(void)flags;
	if (!ev)
		return cudaErrorMemoryAllocation;
	*e = (cudaEvent_t)ev;
	return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	return cudaEventCreateWithFlags(e, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
	struct fevent *ev = (struct fevent *)e;

	if (!ev)
		return cudaErrorInvalidResourceHandle;
	pthread_mutex_lock(&mu);
	ev->dead = 1;
	if (!ev->refs)
		free(ev);
	pthread_mutex_unlock(&mu);
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st)
{
	struct fevent *ev = (struct fevent *)e;
	struct work *w;

	if (fail_now(&n_record, fail_record))
		return cudaErrorLaunchFailure;
	if (!(w = item(W_RECORD)))
		return cudaErrorMemoryAllocation;
	w->ev = ev;
	return put(st, w);
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t st, unsigned int flags)
{
	(void)flags;
	return cudaEventRecord(e, st);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t e, unsigned int flags)
{
	struct fevent *ev = (struct fevent *)e;
	struct work *w = item(W_WAITEV);

	(void)flags;
	if (!w)
		return cudaErrorMemoryAllocation;
	w->ev = ev;
	return put(st, w);
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
	struct fevent *ev = (struct fevent *)e;
	int done;

	pthread_mutex_lock(&mu);
	done = ev->reached >= ev->recorded;
	pthread_mutex_unlock(&mu);
	return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	struct fevent *ev = (struct fevent *)e;

	pthread_mutex_lock(&mu);
	uint64_t gen = ev->recorded;

	while (ev->reached < gen)
		pthread_cond_wait(&progress, &mu);
	pthread_mutex_unlock(&mu);
	return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	struct fevent *x = (struct fevent *)a, *y = (struct fevent *)b;
	cudaError_t e = cudaSuccess;

	pthread_mutex_lock(&mu);
	if (x->reached < x->recorded || y->reached < y->recorded)
		e = cudaErrorNotReady;
	else
		*ms = (float)(y->ms - x->ms);
	pthread_mutex_unlock(&mu);
	return e;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t st, cudaHostFn_t fn, void *data)
{
	struct work *w = item(W_CALL);

	if (!w)
		return cudaErrorMemoryAllocation;
	w->fn = fn;
	w->arg = data;
	return put(st, w);
}

/* fn(arg) on the stream, arg malloc()ed (NULL: out of memory) and fn's to
 * free; freed here if it cannot be queued. */
static cudaError_t launch_owned(cudaStream_t st, void (*fn)(void *), void *arg)
{
	cudaError_t e = arg ? cudaLaunchHostFunc(st, fn, arg) : cudaErrorMemoryAllocation;

	if (e != cudaSuccess)
		free(arg);
	return e;
}

/* cuStreamWaitValue32, as the library fetches it (lib/cuda/device.c). */
static CUresult fake_wait32(CUstream st, CUdeviceptr addr, cuuint32_t v, unsigned int flags)
{
	struct work *w;

	if ((flags & 0x3) != CU_STREAM_WAIT_VALUE_GEQ)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!(w = item(W_WAIT32)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	w->addr = (volatile uint32_t *)(uintptr_t)addr;
	w->value = v;
	return put((cudaStream_t)st, w) == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult fake_write32(CUstream st, CUdeviceptr addr, cuuint32_t v, unsigned int flags)
{
	struct work *w = item(W_WRITE32);

	(void)flags;
	if (!w)
		return CUDA_ERROR_OUT_OF_MEMORY;
	w->addr = (volatile uint32_t *)(uintptr_t)addr;
	w->value = v;
	return put((cudaStream_t)st, w) == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* cudaStreamAddCallback's older shape of a host function. */
struct cb {
	cudaStreamCallback_t fn;
	cudaStream_t st;
	void *data;
};

static void run_cb(void *arg)
{
	struct cb *cb = arg;

	cb->fn(cb->st, cudaSuccess, cb->data);
	free(cb);
}

cudaError_t cudaStreamAddCallback(cudaStream_t st, cudaStreamCallback_t fn, void *data,
				  unsigned int flags)
{
	struct cb *cb = malloc(sizeof(*cb));

	(void)flags;
	if (cb)
		*cb = (struct cb){.fn = fn, .st = st, .data = data};
	return launch_owned(st, run_cb, cb);
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
	idle_within(10);
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
	pthread_mutex_lock(&mu);
	if (npinned < FAKE_PINNED) {
		pinned[npinned].base = (uintptr_t)p;
		pinned[npinned].size = size ? size : 1;
		npinned++;
		e = cudaSuccess;
	}
	pthread_mutex_unlock(&mu);
	return e;
}

static void unpin(void *p)
{
	int i;

	pthread_mutex_lock(&mu);
	for (i = 0; i < npinned && pinned[i].base != (uintptr_t)p; i++)
		;
	if (i < npinned)
		pinned[i] = pinned[--npinned];
	pthread_mutex_unlock(&mu);
}

/* As cudaFreeHost: after the device is done with it (or 10 s). */
cudaError_t cudaHostUnregister(void *p)
{
	idle_within(10);
	unpin(p);
	return cudaSuccess;
}

cudaError_t cudaHostGetDevicePointer(void **dp, void *p, unsigned int flags)
{
	(void)flags;
	if (!is_pinned((uintptr_t)p))
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
	if (!idle_within(10)) {
		fprintf(stderr, "fakecuda: cudaFreeHost(%p): a stream still runs after 10 s, "
				"leaking it\n", p);
		return cudaSuccess;
	}
	unpin(p);
	free(p);
	return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind k,
			    cudaStream_t st)
{
	(void)k; /* one address space */
	return copy_on(st, dst, src, n);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
			      size_t width, size_t height, enum cudaMemcpyKind k, cudaStream_t st)
{
	struct work *w;
	cudaError_t e;

	(void)k;
	if (width > dpitch || width > spitch)
		return cudaErrorInvalidPitchValue;
	if (!(w = item(W_COPY2D)))
		return cudaErrorMemoryAllocation;
	w->dst = dst;
	w->src = src;
	w->n = width;
	w->dpitch = dpitch;
	w->spitch = spitch;
	w->height = height;
	if ((e = put(st, w)) == cudaSuccess && pageable(dst, src))
		e = cudaStreamSynchronize(st);
	return e;
}

/* The legacy default stream's: after the work queued there and on the
 * blocking streams, done when it returns. */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k)
{
	(void)k;
	drain_all(0);
	if (n)
		memmove(dst, src, n);
	return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t st)
{
	struct work *w = item(W_SET);

	if (!w)
		return cudaErrorMemoryAllocation;
	w->dst = p;
	w->v = v;
	w->n = n;
	return put(st, w);
}

cudaError_t cudaMemset(void *p, int v, size_t n)
{
	drain_all(0);
	memset(p, v, n);
	return cudaSuccess;
}

/* ---- the device -------------------------------------------------------------- */

cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr attr, int dev)
{
	(void)dev;
	*v = attr == cudaDevAttrMultiProcessorCount ? 4 : 0;
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


/* ---- the kernels (lib/cuda/kernels.h), as host work on the stream ------------ */

int sd_cuda_kernels_load(void)
{
	return cudaSuccess;
}

/* A kernel's launch: host work on the stream, unless FAKECUDA_FAIL says
 * this one fails. */
static cudaError_t launch_kernel(cudaStream_t st, void (*fn)(void *), void *arg)
{
	if (fail_now(&n_launch, fail_launch)) {
		free(arg);
		return cudaErrorLaunchOutOfResources;
	}
	return launch_owned(st, fn, arg);
}

struct kreduce {
	struct sd_cuda_kargs a;
	int dtype, op, avg_div;
};

/* The kernel's contract with sd_reduce's arithmetic (kernels.h says they
 * agree): every source is read before any destination is written, as
 * the reduction into dst[0] (which may be a source) finishes before the
 * copies into the others. */
static void k_reduce(void *arg)
{
	struct kreduce *k = arg;
	size_t bytes = k->a.count * smddp_dtype_size((enum smddp_dtype)k->dtype);

	if (k->a.count && k->a.ndst) {
		sd_reduce(k->a.dst[0], k->a.src, k->a.nsrc, k->a.count, (enum smddp_dtype)k->dtype,
			  (enum smddp_op)k->op, k->avg_div);
		for (int i = 1; i < k->a.ndst; i++)
			if (k->a.dst[i] != k->a.dst[0])
				memmove(k->a.dst[i], k->a.dst[0], bytes);
	}
	free(k);
}

int sd_cuda_kernel_reduce(const struct sd_cuda_kargs *a, int dtype, int op, int avg_div,
			  void *stream, int max_blocks)
{
	struct kreduce *k;

	(void)max_blocks;
	if (a->nsrc < 1 || a->nsrc > SD_CUDA_MAX_RANKS || a->ndst < 0 ||
	    a->ndst > SD_CUDA_MAX_RANKS)
		return cudaErrorInvalidValue;
	if ((k = malloc(sizeof(*k))))
		*k = (struct kreduce){.a = *a, .dtype = dtype, .op = op, .avg_div = avg_div};
	return launch_kernel((cudaStream_t)stream, k_reduce, k);
}

struct kpairs {
	int n;
	size_t bytes;
	const void *src[SD_CUDA_MAX_RANKS];
	void *dst[SD_CUDA_MAX_RANKS];
};

static void k_pairs(void *arg)
{
	struct kpairs *k = arg;

	for (int i = 0; i < k->n; i++)
		memmove(k->dst[i], k->src[i], k->bytes);
	free(k);
}

int sd_cuda_kernel_copy_pairs(const void *const *src, void *const *dst, int npairs, size_t bytes,
			      void *stream, int max_blocks)
{
	struct kpairs *k;

	(void)max_blocks;
	if (npairs < 0 || npairs > SD_CUDA_MAX_RANKS)
		return cudaErrorInvalidValue;
	if ((k = malloc(sizeof(*k)))) {
		k->n = npairs;
		k->bytes = bytes;
		for (int i = 0; i < npairs; i++) {
			k->src[i] = src[i];
			k->dst[i] = dst[i];
		}
	}
	return launch_kernel((cudaStream_t)stream, k_pairs, k);
}

/* The *_at kernels read their arguments when they run, as the GPU's do:
 * the proxy writes them after the launch was queued. */
struct kat {
	const struct sd_cuda_kargs *tasks;
	const struct sd_cuda_kpairs *groups;
	int n, dtype, op;
};

static void k_reduce_at(void *arg)
{
	struct kat *k = arg;
	int n = k->tasks[0].ntasks < 0 ? 0 : k->tasks[0].ntasks > k->n ? k->n : k->tasks[0].ntasks;

	for (int i = 0; i < n; i++) {
		struct sd_cuda_kargs a;

		memcpy(&a, (const void *)&k->tasks[i], sizeof(a));
		if (a.nsrc < 1 || a.nsrc > SD_CUDA_MAX_RANKS || a.ndst < 1 ||
		    a.ndst > SD_CUDA_MAX_RANKS || !a.count)
			continue;
		sd_reduce(a.dst[0], a.src, a.nsrc, a.count, (enum smddp_dtype)k->dtype,
			  (enum smddp_op)k->op, a.div < 1 ? 1 : a.div);
		for (int d = 1; d < a.ndst; d++)
			if (a.dst[d] != a.dst[0])
				memmove(a.dst[d], a.dst[0],
					a.count * smddp_dtype_size((enum smddp_dtype)k->dtype));
	}
	free(k);
}

static void k_pairs_at(void *arg)
{
	struct kat *k = arg;

	for (int g = 0; g < k->n; g++) {
		struct sd_cuda_kpairs p;

		memcpy(&p, (const void *)&k->groups[g], sizeof(p));
		for (int i = 0; i < p.npairs && i < SD_CUDA_MAX_RANKS; i++)
			memmove(p.dst[i], p.src[i], p.bytes);
	}
	free(k);
}

static int queue_at(void (*fn)(void *), const struct sd_cuda_kargs *tasks,
		    const struct sd_cuda_kpairs *groups, int n, int dtype, int op, void *stream)
{
	struct kat *k = malloc(sizeof(*k));

	if (k)
		*k = (struct kat){tasks, groups, n, dtype, op};
	return launch_kernel((cudaStream_t)stream, fn, k);
}

/* A GPU can read pinned host memory, but a kernel that every block of
 * which reads its arguments there took about 1.6 us per block on the H200
 * (the reads take turns): the queued kernels read a copy on the GPU
 * (lib/cuda/move.c).  Here that is a rule, so that a test fails if it
 * comes back. */
static int args_on_host(const void *p, const char *kernel)
{
	if (!is_pinned((uintptr_t)p))
		return 0;
	fprintf(stderr, "fakecuda: %s: its arguments are in pinned host memory, where every "
			"block would read them over the bus; give it device memory\n", kernel);
	return 1;
}

int sd_cuda_kernel_reduce_at(const struct sd_cuda_kargs *tasks, int ntasks, size_t max_count,
			     int dtype, int op, void *stream, int max_blocks)
{
	(void)max_blocks;
	if (args_on_host(tasks, "sd_cuda_kernel_reduce_at"))
		return cudaErrorInvalidValue;
	if (ntasks < 1 || ntasks > SD_CUDA_MAX_RANKS)
		return cudaErrorInvalidValue;
	return max_count ? queue_at(k_reduce_at, tasks, NULL, ntasks, dtype, op, stream) : 0;
}

int sd_cuda_kernel_pairs_at(const struct sd_cuda_kpairs *groups, int ngroups, int max_pairs,
			    size_t max_bytes, void *stream, int max_blocks)
{
	(void)max_blocks;
	if (args_on_host(groups, "sd_cuda_kernel_pairs_at"))
		return cudaErrorInvalidValue;
	if (ngroups < 1 || max_pairs < 1 || max_pairs > SD_CUDA_MAX_RANKS)
		return cudaErrorInvalidValue;
	return max_bytes ? queue_at(k_pairs_at, NULL, groups, ngroups, 0, 0, stream) : 0;
}
