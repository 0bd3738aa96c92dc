/* ipc.c - CUDA IPC between the ranks of a node: the handles of our own allocations,
 * the peers' allocations mapped here (cached, counted across communicators), and
 * their closing, deferred while a user's stream waits on the proxy. */
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

void sd_cuda_ipc_close(void *ptr)
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
	if (last) {
		cudaIpcCloseMemHandle(last->ptr);
		free(last);
	}
}

/* Closing a mapping (cudaIpcCloseMemHandle) waits for the whole context,
 * so the proxy must not close one while a user's stream waits on its word:
 * it would wait for itself.  Mappings that go are kept here and closed by
 * the host thread when nothing is queued (sd_cuda_flush_stale). */
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

/* Host thread: closes the retired mappings if no call is queued (no
 * stream of ours waits on the word). */
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
		sd_cuda_ipc_close(v[i]);
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
