/* fakecuda-stream.c - the fake CUDA's streams, events and copies (see fakecuda.c).
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "clock/clock.h"
#include "fakecuda.h"

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
	uint64_t gseq; /* its place among the process's items (fake_sync_within) */
};

/* FAKECUDA_CONNECTIONS=N (see the top): N hardware queues; stream k's work
 * goes through queue k % N, in the order it was queued. */
#define FAKE_MAX_CONN 32
static int nconn = -1;
static uint64_t conn_queued[FAKE_MAX_CONN], conn_done[FAKE_MAX_CONN];
static int nstreams;
static uint64_t items_queued; /* by every stream: the next item's gseq */
static int depth = -1;        /* FAKECUDA_QUEUE_DEPTH: items a stream holds, at most (0: any) */

/* Under fake_mu, before the first item or stream. */
static void conn_init(void)
{
	if (nconn < 0) {
		nconn = fake_env_int("FAKECUDA_CONNECTIONS", 0);
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
	int dev;  /* the GPU current at its creation (FAKECUDA_DEVICES) */
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
		pthread_mutex_lock(&fake_mu);
		if (w->gen > w->ev->reached) {
			w->ev->reached = w->gen;
			w->ev->ms = (sd_now_s() * 1e3);
		}
		pthread_mutex_unlock(&fake_mu);
		break;
	case W_WAITEV:
		pthread_mutex_lock(&fake_mu);
		while (w->ev->reached < w->gen)
			pthread_cond_wait(&fake_progress, &fake_mu);
		pthread_mutex_unlock(&fake_mu);
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
	int jitter = fake_env_int("FAKECUDA_JITTER_US", 0) % 1000000;
	unsigned int seed = (unsigned int)(uintptr_t)s ^ (unsigned int)getpid();

	pthread_mutex_lock(&fake_mu);
	for (;;) {
		while (!s->head && !s->dying)
			pthread_cond_wait(&s->cv, &fake_mu);
		if (!s->head)
			break;
		struct work *w = s->head;

		/* Its turn in its hardware queue: behind whatever any stream
		 * of that queue put there before. */
		while (nconn > 0 && conn_done[w->conn] != w->cseq)
			pthread_cond_wait(&fake_progress, &fake_mu);
		pthread_mutex_unlock(&fake_mu);
		if (jitter > 0) {
			struct timespec ts = {0, (long)(rand_r(&seed) % (unsigned int)jitter) * 1000L};

			nanosleep(&ts, NULL);
		}
		run_item(w);
		pthread_mutex_lock(&fake_mu);
		if (w->ev)
			ev_unref(w->ev);
		s->head = w->next;
		if (!s->head)
			s->tail = NULL;
		s->done++;
		if (nconn > 0)
			conn_done[w->conn]++;
		pthread_cond_broadcast(&fake_progress);
		free(w);
	}
	/* Destroyed and drained (cudaStreamDestroy returns at once). */
	for (struct fstream **pp = &live; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&fake_mu);
	pthread_cond_destroy(&s->cv);
	free(s);
	return NULL;
}

static cudaError_t fake_put(cudaStream_t st, struct work *w)
{
	struct fstream *s = sof(st);
	cudaError_t e = cudaSuccess;

	pthread_mutex_lock(&fake_mu);
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
	if (depth < 0)
		depth = fake_env_int("FAKECUDA_QUEUE_DEPTH", 0);
	/* A full queue blocks the caller (FAKECUDA_QUEUE_DEPTH). */
	while (e == cudaSuccess && depth > 0 && s->queued - s->done >= (uint64_t)depth && !s->dying)
		pthread_cond_wait(&fake_progress, &fake_mu);
	if (e == cudaSuccess) {
		w->next = NULL;
		if (s->tail)
			s->tail->next = w;
		else
			s->head = w;
		s->tail = w;
		s->queued++;
		w->gseq = items_queued++;
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
	pthread_mutex_unlock(&fake_mu);
	if (e != cudaSuccess)
		free(w);
	return e;
}

struct work *fake_item(enum wkind kind)
{
	struct work *w = calloc(1, sizeof(*w));

	if (w)
		w->kind = kind;
	return w;
}

/* Under fake_mu: until s has done what was queued on it so far. */
static void drain_locked(struct fstream *s)
{
	uint64_t target = s->queued;

	while (s->done < target)
		pthread_cond_wait(&fake_progress, &fake_mu);
}

/* Until every stream (all = 1), or the legacy stream and the blocking ones
 * (what a synchronous cudaMemcpy waits for), is idle.  The list is scanned
 * afresh after each wait: a destroyed stream's worker frees it once idle. */
static void fake_drain_all(int all)
{
	pthread_mutex_lock(&fake_mu);
	for (;;) {
		int busy = 0;

		for (struct fstream *s = live; s && !busy; s = s->next)
			busy = (all || !(s->flags & cudaStreamNonBlocking)) && s->done != s->queued;
		if (!busy)
			break;
		pthread_cond_wait(&fake_progress, &fake_mu);
	}
	pthread_mutex_unlock(&fake_mu);
}

/* Until every stream has done the work queued on it before the call, as a
 * context synchronization waits (what comes later does not hold it), or
 * secs passed: whether they have.  A stream's head is its oldest item not
 * done, so the work before is done once no head is older than the call. */
int fake_sync_within(double secs)
{
	struct timespec ts;
	uint64_t before;
	int done = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)secs;
	pthread_mutex_lock(&fake_mu);
	before = items_queued;
	for (;;) {
		done = 1;
		for (struct fstream *s = live; s && done; s = s->next)
			done = !s->head || s->head->gseq >= before;
		if (done || pthread_cond_timedwait(&fake_progress, &fake_mu, &ts) != 0)
			break;
	}
	pthread_mutex_unlock(&fake_mu);
	return done;
}

/* Is every stream idle within secs?  For the frees, which CUDA makes wait
 * for the device: a stream blocked for good (a wait nobody releases) must
 * not hang the process, so they give up and leak instead. */
int fake_idle_within(double secs)
{
	struct timespec ts;
	int idle = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)secs;
	pthread_mutex_lock(&fake_mu);
	for (;;) {
		idle = 1;
		for (struct fstream *s = live; s && idle; s = s->next)
			idle = s->done == s->queued;
		if (idle || pthread_cond_timedwait(&fake_progress, &fake_mu, &ts) != 0)
			break;
	}
	pthread_mutex_unlock(&fake_mu);
	return idle;
}

static cudaError_t fake_copy_on(cudaStream_t st, void *dst, const void *src, size_t n)
{
	struct work *w = fake_item(W_COPY);
	cudaError_t e;

	if (!w)
		return cudaErrorMemoryAllocation;
	w->dst = dst;
	w->src = src;
	w->n = n;
	if ((e = fake_put(st, w)) == cudaSuccess && fake_pageable(dst, src))
		e = cudaStreamSynchronize(st);
	return e;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *st, unsigned int flags)
{
	struct fstream *s = calloc(1, sizeof(*s));

	if (!s)
		return cudaErrorMemoryAllocation;
	s->flags = flags;
	s->dev = fake_current_device();
	pthread_cond_init(&s->cv, NULL);
	pthread_mutex_lock(&fake_mu);
	conn_init();
	/* Round robin, the legacy stream (queue 0) counted first. */
	s->conn = nconn > 0 ? ++nstreams % nconn : 0;
	s->next = live;
	live = s;
	pthread_mutex_unlock(&fake_mu);
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
	pthread_mutex_lock(&fake_mu);
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
	pthread_mutex_unlock(&fake_mu);
	if (s) {
		pthread_cond_destroy(&s->cv);
		free(s);
	}
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t st)
{
	pthread_mutex_lock(&fake_mu);
	drain_locked(sof(st));
	pthread_mutex_unlock(&fake_mu);
	return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t st)
{
	struct fstream *s = sof(st);
	int busy;

	pthread_mutex_lock(&fake_mu);
	busy = s->done != s->queued;
	pthread_mutex_unlock(&fake_mu);
	return busy ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
	fake_drain_all(1);
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
	pthread_mutex_lock(&fake_mu);
	ev->dead = 1;
	if (!ev->refs)
		free(ev);
	pthread_mutex_unlock(&fake_mu);
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t st)
{
	struct fevent *ev = (struct fevent *)e;
	struct work *w;

	if (fake_record_fails())
		return cudaErrorLaunchFailure;
	if (!(w = fake_item(W_RECORD)))
		return cudaErrorMemoryAllocation;
	w->ev = ev;
	return fake_put(st, w);
}

cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t st, unsigned int flags)
{
	(void)flags;
	return cudaEventRecord(e, st);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t e, unsigned int flags)
{
	struct fevent *ev = (struct fevent *)e;
	struct work *w = fake_item(W_WAITEV);

	(void)flags;
	if (!w)
		return cudaErrorMemoryAllocation;
	w->ev = ev;
	return fake_put(st, w);
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
	struct fevent *ev = (struct fevent *)e;
	int done;

	pthread_mutex_lock(&fake_mu);
	done = ev->reached >= ev->recorded;
	pthread_mutex_unlock(&fake_mu);
	return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
	struct fevent *ev = (struct fevent *)e;

	pthread_mutex_lock(&fake_mu);
	uint64_t gen = ev->recorded;

	while (ev->reached < gen)
		pthread_cond_wait(&fake_progress, &fake_mu);
	pthread_mutex_unlock(&fake_mu);
	return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	struct fevent *x = (struct fevent *)a, *y = (struct fevent *)b;
	cudaError_t e = cudaSuccess;

	pthread_mutex_lock(&fake_mu);
	if (x->reached < x->recorded || y->reached < y->recorded)
		e = cudaErrorNotReady;
	else
		*ms = (float)(y->ms - x->ms);
	pthread_mutex_unlock(&fake_mu);
	return e;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t st, cudaHostFn_t fn, void *data)
{
	struct work *w = fake_item(W_CALL);

	if (!w)
		return cudaErrorMemoryAllocation;
	w->fn = fn;
	w->arg = data;
	return fake_put(st, w);
}

/* fn(arg) on the stream, arg malloc()ed (NULL: out of memory) and fn's to
 * free; freed here if it cannot be queued. */
cudaError_t fake_launch_owned(cudaStream_t st, void (*fn)(void *), void *arg)
{
	cudaError_t e = arg ? cudaLaunchHostFunc(st, fn, arg) : cudaErrorMemoryAllocation;

	if (e != cudaSuccess)
		free(arg);
	return e;
}

/* cuStreamWaitValue32, as the library fetches it (lib/cuda/device.c). */
CUresult fake_wait32(CUstream st, CUdeviceptr addr, cuuint32_t v, unsigned int flags)
{
	struct work *w;

	if ((flags & 0x3) != CU_STREAM_WAIT_VALUE_GEQ)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!(w = fake_item(W_WAIT32)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	w->addr = (volatile uint32_t *)(uintptr_t)addr;
	w->value = v;
	return fake_put((cudaStream_t)st, w) == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult fake_stream_device(CUstream st, CUdevice *dev)
{
	struct fstream *s = sof((cudaStream_t)st);

	*dev = s == &legacy ? fake_current_device() : s->dev;
	return CUDA_SUCCESS;
}

CUresult fake_write32(CUstream st, CUdeviceptr addr, cuuint32_t v, unsigned int flags)
{
	struct work *w = fake_item(W_WRITE32);

	(void)flags;
	if (!w)
		return CUDA_ERROR_OUT_OF_MEMORY;
	w->addr = (volatile uint32_t *)(uintptr_t)addr;
	w->value = v;
	return fake_put((cudaStream_t)st, w) == cudaSuccess ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
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
	return fake_launch_owned(st, run_cb, cb);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind k,
			    cudaStream_t st)
{
	(void)k; /* one address space */
	return fake_copy_on(st, dst, src, n);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
			      size_t width, size_t height, enum cudaMemcpyKind k, cudaStream_t st)
{
	struct work *w;
	cudaError_t e;

	(void)k;
	if (width > dpitch || width > spitch)
		return cudaErrorInvalidPitchValue;
	if (!(w = fake_item(W_COPY2D)))
		return cudaErrorMemoryAllocation;
	w->dst = dst;
	w->src = src;
	w->n = width;
	w->dpitch = dpitch;
	w->spitch = spitch;
	w->height = height;
	if ((e = fake_put(st, w)) == cudaSuccess && fake_pageable(dst, src))
		e = cudaStreamSynchronize(st);
	return e;
}

/* The legacy default stream's: after the work queued there and on the
 * blocking streams, done when it returns. */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k)
{
	(void)k;
	fake_drain_all(0);
	if (n)
		memmove(dst, src, n);
	return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t st)
{
	struct work *w = fake_item(W_SET);

	if (!w)
		return cudaErrorMemoryAllocation;
	w->dst = p;
	w->v = v;
	w->n = n;
	return fake_put(st, w);
}

cudaError_t cudaMemset(void *p, int v, size_t n)
{
	fake_drain_all(0);
	memset(p, v, n);
	return cudaSuccess;
}
