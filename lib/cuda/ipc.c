/* ipc.c - CUDA IPC between the ranks of a node: the handles of our own allocations,
 * the peers' allocations mapped here (cached, counted across communicators), and
 * their closing, deferred while a user's stream waits on the proxy, then done by a
 * thread of its own. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "cuda/cuda.h"
#include "cuda/internal.h"
#include "cuda/ipc.h"
#include "cuda/kernels.h"
#include "transport/transport.h"
/* Our own allocation's IPC handle, cached by buffer id. */
int sd_cuda_own_handle(struct sd_cuda *cu, struct buf_pub *b)
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
 * its mappings from this one registry, counted.
 *
 * Closing a mapping (cudaIpcCloseMemHandle) waits for the whole context, so
 * it runs after ipc_mu is dropped: one communicator's close never holds
 * another's threads back from mapping a buffer (a direct kernel or a
 * queued stream of that one may be what the close waits for).  The last
 * reference leaves the registry under the lock, before its close: an open
 * of the same handle meanwhile opens it anew, and the runtime counts a
 * handle opened twice in one context (the same pointer, one more
 * reference: cudaIpcOpenMemHandle's documentation), so the close drops
 * the old reference and never unmaps what the new one handed out. */
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

cudaError_t sd_cuda_ipc_open(pid_t pid, int dev, const struct buf_pub *b, void **out)
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

/* One reference to the mapping at ptr dropped: the entry, out of the
 * registry, when it was the last (the caller closes and frees it). */
static struct ipc_open *unref(void *ptr)
{
	struct ipc_open **pp, *x, *last = NULL;

	pthread_mutex_lock(&ipc_mu);
	for (pp = &ipc_opens; (x = *pp); pp = &x->next) {
		if (x->ptr != ptr)
			continue;
		if (--x->refs == 0) {
			*pp = x->next;
			last = x;
		}
		break;
	}
	pthread_mutex_unlock(&ipc_mu);
	return last;
}

void sd_cuda_ipc_close(void *ptr)
{
	struct ipc_open *last = unref(ptr);

	if (last) {
		cudaIpcCloseMemHandle(last->ptr);
		free(last);
	}
}

/* The closer: a thread of the process that closes the mappings the host
 * threads retire (sd_cuda_flush_stale).  A close waits for the whole
 * context, the kernels of the other communicators too, which may wait for
 * a peer rank whose thread is itself in a close, waiting for kernels that
 * wait for this rank's thread: closing on a user's thread could hold two
 * ranks until SMDDP_TIMEOUT (tests/gpu/threads-fake.sh, threads-churn).
 * Nobody waits for the closer but a communicator's free, and an exit. */
static pthread_once_t closer_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t closer_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t closer_cv, closer_done; /* CLOCK_MONOTONIC */
static struct ipc_open *closer_q;             /* to close, by ->next */
static uint64_t closer_queued, closer_closed;
static int closer_up;

static void *closer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&closer_mu);
	for (;;) {
		struct ipc_open *x;

		while (!(x = closer_q))
			pthread_cond_wait(&closer_cv, &closer_mu);
		closer_q = x->next;
		pthread_mutex_unlock(&closer_mu);
		cudaSetDevice(x->dev);
		cudaIpcCloseMemHandle(x->ptr);
		(void)cudaGetLastError(); /* this thread's, nobody reads it */
		free(x);
		pthread_mutex_lock(&closer_mu);
		closer_closed++;
		pthread_cond_broadcast(&closer_done);
	}
	return NULL;
}

/* The closes handed over so far done, within ns: whether they are. */
static int closer_wait(uint64_t ns)
{
	struct timespec ts;
	uint64_t want;
	int rc = 0;

	sd_cuda_ts_after(&ts, ns);
	pthread_mutex_lock(&closer_mu);
	want = closer_queued;
	while (closer_closed < want && !rc)
		rc = pthread_cond_timedwait(&closer_done, &closer_mu, &ts);
	rc = closer_closed >= want;
	pthread_mutex_unlock(&closer_mu);
	return rc;
}

/* At exit, before the runtime's own handler (registered earlier, so run
 * later) tears the context down under a close in progress. */
static void closer_at_exit(void)
{
	closer_wait(2ull * 1000000000ull);
}

static void closer_start(void)
{
	pthread_condattr_t ca;
	pthread_attr_t at;
	pthread_t t;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&closer_cv, &ca);
	pthread_cond_init(&closer_done, &ca);
	pthread_condattr_destroy(&ca);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	closer_up = pthread_create(&t, &at, closer_main, NULL) == 0;
	pthread_attr_destroy(&at);
	if (closer_up)
		atexit(closer_at_exit);
}

/* The last reference to ptr closed by the closer (here, if it cannot
 * start). */
void sd_cuda_ipc_close_later(void *ptr)
{
	struct ipc_open *last = unref(ptr);

	if (!last)
		return;
	pthread_once(&closer_once, closer_start);
	if (!closer_up) {
		cudaIpcCloseMemHandle(last->ptr);
		free(last);
		return;
	}
	pthread_mutex_lock(&closer_mu);
	last->next = closer_q;
	closer_q = last;
	closer_queued++;
	pthread_cond_signal(&closer_cv);
	pthread_mutex_unlock(&closer_mu);
}

void sd_cuda_ipc_settle(void)
{
	if (__atomic_load_n(&closer_up, __ATOMIC_ACQUIRE) && !closer_wait(10ull * 1000000000ull))
		SD_WARN(SD_SUB_COLL, "peers' CUDA IPC mappings retired by this process were not all "
				     "closed within 10 s (the GPU busy, or a stream stuck): they are "
				     "closed once it is done");
}

/* Closing a mapping (cudaIpcCloseMemHandle) waits for the whole context,
 * so the proxy must not close one while a user's stream waits on its word:
 * it would wait for itself.  Mappings that go are kept here and handed to
 * the closer by the host thread when nothing is queued
 * (sd_cuda_flush_stale). */
int sd_cuda_ipc_retire(struct sd_cuda *cu, void *ptr)
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
		cu->stale[__atomic_fetch_add(&cu->nstale, 1, __ATOMIC_RELAXED)] = ptr;
	else
		rc = sd_comm_error(&cu->sh, SMDDP_ENOMEM, "out of memory");
	pthread_mutex_unlock(&cu->mu);
	return rc;
}

/* Host thread: hands the retired mappings to the closer if no call is
 * queued (no stream of ours waits on the word) and no kernel of ours may
 * read through them. */
void sd_cuda_flush_stale(struct sd_cuda *cu)
{
	void **v = NULL;
	int n = 0;

	/* Called on every device call; the list is almost always empty. */
	if (!__atomic_load_n(&cu->nstale, __ATOMIC_RELAXED))
		return;
	/* Nor while a fast or direct kernel may still read through them. */
	if (cu->fast_pending && cudaEventQuery(cu->fast_ev) == cudaErrorNotReady)
		return;
	pthread_mutex_lock(&cu->mu);
	if (cu->head == cu->tail && cu->nstale) {
		v = cu->stale;
		n = cu->nstale;
		cu->stale = NULL;
		__atomic_store_n(&cu->nstale, 0, __ATOMIC_RELAXED);
		cu->maxstale = 0;
	}
	pthread_mutex_unlock(&cu->mu);
	for (int i = 0; i < n; i++)
		sd_cuda_ipc_close_later(v[i]);
	free(v);
}

/* Rank q's buffer mapped here: cached per (rank, buffer id); an entry of
 * the same rank and base but another id is a freed and reallocated buffer,
 * and is unmapped. */
int sd_cuda_peer_ptr(struct sd_cuda *cu, int q, const struct buf_pub *b, char **out)
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
			SD_CHECK(sd_cuda_ipc_retire(cu, x->ptr));
			x->ptr = NULL;
			free_e = free_e ? free_e : x;
			continue;
		}
		used_by_q++;
		if (!lru || x->used < lru->used)
			lru = x;
	}
	if (used_by_q >= MAP_PER_PEER && lru) {
		SD_CHECK(sd_cuda_ipc_retire(cu, lru->ptr));
		lru->ptr = NULL;
		free_e = lru;
	}
	if (!free_e) {
		if (cu->nmaps == cu->maxmaps)
			return sd_comm_error(&cu->sh, SMDDP_EINTERNAL, "IPC mapping table full");
		free_e = &cu->maps[cu->nmaps++];
	}
	e = sd_cuda_ipc_open(cu->sh.pids[q], cu->dev, b, &p);
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
