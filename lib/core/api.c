/* api.c - the public collective entry points: argument checks, SMDDP_CHECK_COLL, dispatch.
 *
 * Every collective first sorts its buffers: host memory goes to lib/coll/
 * (the call blocks until done; stream must be NULL), CUDA device memory to
 * lib/cuda/ (stream-ordered on the given stream, NULL meaning CUDA's legacy
 * default stream), in builds with --with-cuda.  A call mixing the two, or a
 * stream with host memory, is SMDDP_EINVAL.  Host work first waits until
 * the device calls queued before it have finished, so that one thread at a
 * time uses the transport.
 */
#include "config.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/errors.h"
#include "coll/coll.h"
#include "core/api.h"
#include "core/said.h"
#include "core/trace.h"
#include "bootstrap/bootstrap.h"
#include "cuda/cuda.h"
#include "transport/net/net.h"
#include "transport/transport.h"

/* ---- device pointers ----------------------------------------------------
 * When the process has the CUDA driver loaded, the driver says which
 * pointers are device memory: moved by lib/cuda/ in builds with CUDA,
 * refused otherwise instead of being read by the CPU (a crash).  The driver
 * is never loaded by this test: a process without it has host memory only.
 * Managed memory is host-readable and counts as host memory. */
typedef int (*cu_ptr_attrs_fn)(unsigned int n, int *attributes, void **data,
			       unsigned long long ptr);
static cu_ptr_attrs_fn cu_ptr_attrs;

/* dl_iterate_phdr's view of the loaded objects: the load counter, and the
 * name of the last object of the list (the caller's namespace). */
struct loads {
	unsigned long long adds;
	char tail[512];
};

static int count_loads(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	*(unsigned long long *)data = info->dlpi_adds;
	return 1; /* the first object carries the counter: enough */
}

static int find_tail(struct dl_phdr_info *info, size_t size, void *data)
{
	struct loads *l = data;
	const char *name = info->dlpi_name ? info->dlpi_name : "";

	(void)size;
	l->adds = info->dlpi_adds;
	if (strlen(name) < sizeof(l->tail))
		memcpy(l->tail, name, strlen(name) + 1);
	else
		l->tail[0] = 0;
	return 0;
}

/* The last loaded object when a try found no driver, held open by a
 * handle of ours (NULL: none).  The loader appends every object it loads
 * to the end of its namespace's list, after the last one, so while the
 * anchor's l_next is NULL nothing has been loaded since that try, and the
 * driver is still absent: one load, where dl_iterate_phdr takes the
 * loader's lock.  The handle keeps the anchor's link map from being freed
 * under that read (objects after it may come and go: a new one is still
 * appended after the anchor, or after an object that is after it, so a
 * driver loaded after the try keeps l_next set while it is loaded).
 * While an object follows it, the calls go back to the load counter; the
 * anchor is set once, so one object, the last one loaded before the first
 * try, stays loaded while the process runs (at startup that is one of the
 * program's own libraries, which are never unloaded). */
static struct link_map *anchor;

/* Under the probe's lock, after a try at count `adds` found no driver. */
static void set_anchor(unsigned long long adds)
{
	struct loads l = {0};
	struct link_map *lm = NULL;
	void *h;

	if (__atomic_load_n(&anchor, __ATOMIC_RELAXED))
		return; /* set once */
	dl_iterate_phdr(find_tail, &l);
	if (l.adds != adds || !l.tail[0])
		return; /* loaded since the try, or no name to open it by */
	h = dlopen(l.tail, RTLD_NOLOAD | RTLD_LAZY);
	if (!h)
		return;
	/* Still the tail, and nothing loaded since the try: the counter
	 * moves with every load, so the object opened is the one seen. */
	l.adds = ~0ull;
	dl_iterate_phdr(count_loads, &l.adds);
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm || l.adds != adds ||
	    __atomic_load_n(&lm->l_next, __ATOMIC_ACQUIRE)) {
		dlclose(h);
		return;
	}
	__atomic_store_n(&anchor, lm, __ATOMIC_RELEASE);
}

/* Until the process loads the driver, every call looks again; once found,
 * it stays.  A dlopen(RTLD_NOLOAD) of a library that is not loaded searches
 * the library path (a dozen failed openat calls, tens of microseconds), so
 * it is tried again only when the process has loaded something since the
 * last try: nothing follows the anchor (above), or else dl_iterate_phdr's
 * load counter moved.
 * The try is under a lock: a thread that saw another's try under way would
 * otherwise take the driver for absent, and a device buffer for host memory
 * (three threads' first calls at once, on an H200).  So tried_at is
 * published only once its try is over, after the driver's entry point:
 * a count equal to it says, without the lock, that a finished try at this
 * count found no driver (the lock and its unlock cost about as much as the
 * rest of a small broadcast's entry). */
static cu_ptr_attrs_fn cuda_probe(void)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static unsigned long long tried_at = ~0ull;
	cu_ptr_attrs_fn f = __atomic_load_n(&cu_ptr_attrs, __ATOMIC_ACQUIRE);
	struct link_map *a = __atomic_load_n(&anchor, __ATOMIC_ACQUIRE);
	unsigned long long loads = 0;
	void *h;

	if (f)
		return f;
	/* The anchor is published after a try that found no driver. */
	if (a && !__atomic_load_n(&a->l_next, __ATOMIC_ACQUIRE))
		return NULL;
	dl_iterate_phdr(count_loads, &loads);
	if (__atomic_load_n(&tried_at, __ATOMIC_ACQUIRE) == loads)
		return __atomic_load_n(&cu_ptr_attrs, __ATOMIC_ACQUIRE);
	pthread_mutex_lock(&lock);
	f = __atomic_load_n(&cu_ptr_attrs, __ATOMIC_ACQUIRE);
	if (!f && __atomic_load_n(&tried_at, __ATOMIC_RELAXED) != loads) {
		h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
		if (h) {
			f = (cu_ptr_attrs_fn)dlsym(h, "cuPointerGetAttributes");
			dlclose(h); /* RTLD_NOLOAD took a reference of a library that stays */
			__atomic_store_n(&cu_ptr_attrs, f, __ATOMIC_RELEASE);
		}
		if (!f)
			set_anchor(loads);
		__atomic_store_n(&tried_at, loads, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&lock);
	return f;
}

/* f: cuda_probe()'s answer, asked once for all the buffers of a call. */
static int is_device_ptr_with(cu_ptr_attrs_fn f, const void *p)
{
	/* CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2, CU_MEMORYTYPE_DEVICE = 2,
	 * CU_POINTER_ATTRIBUTE_IS_MANAGED = 8 (managed memory is host-readable).
	 * The plural call answers 0 for host memory instead of an error. */
	int at[2] = {2, 8};
	unsigned int type = 0, managed = 0;
	void *val[2] = {&type, &managed};

	if (!f || !p || f(2, at, val, (unsigned long long)(uintptr_t)p) != 0)
		return 0;
	return type == 2 && !managed;
}

static int is_device_ptr(const void *p)
{
	return p ? is_device_ptr_with(cuda_probe(), p) : 0;
}

int sd_api_device_ptr(const void *p)
{
	return is_device_ptr(p);
}

int sd_api_cuda_loaded(void)
{
	return cuda_probe() != NULL;
}

/* The buffers call k uses on this rank, by name. */
static int call_buffers(const struct smddp_comm *c, const struct sd_cuda_call *k,
			const void **p, const char **name)
{
	int n = 0;

	if (k->coll == SD_COLL_BROADCAST) {
		p[n] = k->recvbuf;
		name[n++] = "buf";
		return n;
	}
	p[n] = k->sendbuf;
	name[n++] = "sendbuf";
	if (k->coll != SD_COLL_REDUCE || c->rank == k->root) {
		p[n] = k->recvbuf;
		name[n++] = "recvbuf";
	}
	return n;
}

enum { MEM_HOST = 0, MEM_DEVICE = 1 };

/* Host or device memory, or an error (positive, with a sentence in msg).
 * Local: nothing is written to the communicator. */
static int classify(const struct smddp_comm *c, const struct sd_cuda_call *k, char *msg,
		    size_t len)
{
	const void *p[2];
	const char *name[2];
	int n = call_buffers(c, k, p, name), dev[2] = {0, 0}, ndev = 0, nhost = 0;
	cu_ptr_attrs_fn f = k->count ? cuda_probe() : NULL;

	for (int i = 0; i < n && k->count; i++) {
		if (!p[i])
			continue; /* NULL with a count: the path's own check says so */
		dev[i] = f && is_device_ptr_with(f, p[i]); /* no driver: host memory */
		ndev += dev[i];
		nhost += !dev[i];
	}
#ifdef HAVE_CUDA
	if (ndev && nhost) {
		snprintf(msg, len,
			 "%s: %s is %s memory but %s is %s memory: pass device buffers (with a "
			 "stream) or host buffers (with stream NULL), not both",
			 sd_coll_name(k->coll), name[0], dev[0] ? "CUDA device" : "host", name[1],
			 dev[1] ? "CUDA device" : "host");
		return SMDDP_EINVAL;
	}
	if (ndev)
		return MEM_DEVICE;
	/* NULL buffers alone say nothing of the memory: the NULL is the error */
	if (k->stream && nhost) {
		/* "Not supported by this memory": host calls are not
		 * stream-ordered. */
		snprintf(msg, len,
			 "%s: a CUDA stream was given with host memory: host calls block until "
			 "done and take stream NULL; pass device buffers to order the call on "
			 "the stream",
			 sd_coll_name(k->coll));
		return SMDDP_EUNSUPPORTED;
	}
	return k->stream ? MEM_DEVICE : MEM_HOST;
#else
	if (k->stream) {
		snprintf(msg, len,
			 "%s: a CUDA stream was given, but this build of libsmddp moves host memory "
			 "only (configure --with-cuda for device memory): pass NULL",
			 sd_coll_name(k->coll));
		return SMDDP_EUNSUPPORTED;
	}
	for (int i = 0; i < n; i++) {
		if (dev[i]) {
			snprintf(msg, len,
				 "%s is CUDA device memory, which this build of libsmddp does not "
				 "move (configure --with-cuda): pass host memory",
				 name[i]);
			return SMDDP_EUNSUPPORTED;
		}
	}
	return MEM_HOST;
#endif
}

/* This rank's own argument errors: 0, or a code with the sentence in why.
 * k (NULL for calls without buffers): its buffers are checked too. */
static int check_args(const struct smddp_comm *c, int coll, size_t count, int dtype, int op,
		      int root, const struct sd_cuda_call *k, char *why, size_t len)
{
	/* The name only for a sentence: the calls that pass pay nothing. */
	if ((unsigned)dtype >= SMDDP_NUM_DTYPES) {
		snprintf(why, len, "%s: unknown dtype %d", sd_coll_name(coll), dtype);
		return SMDDP_EINVAL;
	}
	if ((unsigned)op >= SMDDP_NUM_OPS) {
		snprintf(why, len, "%s: unknown op %d", sd_coll_name(coll), op);
		return SMDDP_EINVAL;
	}
	if (root < 0 || root >= c->size) {
		snprintf(why, len, "%s: root %d is not a rank of 0..%d", sd_coll_name(coll), root,
			 c->size - 1);
		return SMDDP_EINVAL;
	}
	if (count > ((size_t)1 << 56)) {
		snprintf(why, len, "%s: count %zu is too large", sd_coll_name(coll), count);
		return SMDDP_EINVAL;
	}
	if (k && count) {
		const void *p[2];
		const char *pname[2];
		int n = call_buffers(c, k, p, pname);

		for (int i = 0; i < n; i++)
			if (!p[i]) {
				snprintf(why, len, "%s is NULL with count %zu", pname[i], count);
				return SMDDP_EINVAL;
			}
	}
	return SMDDP_OK;
}

/* How an entry compares its call across ranks (SMDDP_CHECK_COLL). */
enum {
	CMP_NONE = 0, /* the device path compares on its proxy, or its kernels */
	CMP_HERE = 1, /* this thread compares (host work, and calls that queue nothing) */
	CMP_TOLD = 2, /* numbered as compared, but the peers' kernels were told instead */
};

/* The checks of every entry; compare: CMP_*.
 *
 * An argument error skips the call on this rank alone, while the others
 * may make it and pair their next call with this rank's next.  Under
 * SMDDP_CHECK_COLL the call is still counted and compared, marked
 * refused, so that every rank fails it and they stay in step (calls of
 * count 0 too: a rank that passed 0 must not skip what its peers do). */
static int api_enter(struct smddp_comm *c, int coll, size_t count, int dtype, int op, int root,
		     int mem, int compare, const struct sd_cuda_call *k, int refuse,
		     const char *refuse_why)
{
	char why[400];
	int arg, rc;

	if (c->failed)
		return c->failed;
	memset(&c->cur, 0, sizeof(c->cur));
	if ((rc = sd_comm_cancelled(c)))
		return rc;
	arg = check_args(c, coll, count, dtype, op, root, k, why, sizeof(why));
	if (!arg && refuse) {
		/* the caller's own refusal (buffers of both kinds, say) */
		arg = refuse;
		snprintf(why, sizeof(why), "%s", refuse_why);
	}
	if (!c->check_coll)
		compare = CMP_NONE;
	if (arg && !compare)
		return sd_comm_error(c, arg, "%s", why);
	c->cur.seq = ++c->seq;
	c->wire++;
	c->cur.coll = coll;
	c->cur.count = count;
	c->cur.dtype = dtype;
	c->cur.op = op;
	c->cur.root = root;
	c->cur.mem = mem;
	c->cur.refused = arg != 0;
	c->last_error[0] = 0;
	c->nwaited_on = 0;
	sd_trace_begin(c);
	if (!compare)
		return SMDDP_OK;
	rc = compare == CMP_TOLD ? SMDDP_OK : sd_coll_compare(c);
	if (arg && (!rc || rc == SMDDP_EMISMATCH))
		return sd_comm_error(c, arg, "%s", why);
	return rc;
}

/* Host work (and split, destroy): after the device calls queued before.
 * The caller has forgotten the thread's async error (a thread-local, read
 * through __tls_get_addr in a shared library: once a call). */
static int host_enter(struct smddp_comm *c, int coll, size_t count, int dtype, int op, int root,
		      const struct sd_cuda_call *k)
{
	int rc = sd_cuda_collect(c, 1);

	if (rc)
		return rc;
	return api_enter(c, coll, count, dtype, op, root, MEM_HOST, CMP_HERE, k, 0, NULL);
}

int sd_api_enter(struct smddp_comm *c, int coll, size_t count, int dtype, int op, int root,
		 void *stream)
{
	(void)stream;
	if (!c)
		return sd_err_set(sd_init_err(), SMDDP_EINVAL, "%s: communicator is NULL",
				  sd_coll_name(coll));
	sd_api_async_forget(c);
	return host_enter(c, coll, count, dtype, op, root, NULL);
}

/* An error of this rank's own that leaves the communicator working (a
 * refused argument, a mismatch) is left where the peers look when a
 * rank's process ends (the transport's note; across hosts the world's
 * bootstrap): a program that exits on it is then named with its error,
 * not as a bare death.  The bootstrap only while no CUDA proxy thread
 * may be using it. */
static void leave_note(struct smddp_comm *c, int rc)
{
	char why[sizeof(c->last_error) + 64];
	struct sd_boot *boot = c->boot ? c->boot : c->net ? sd_net_job(c)->boot : NULL;

	snprintf(why, sizeof(why), "%s (%s)", c->last_error, smddp_strerror(rc));
	if (c->tp)
		c->tp->note(c, why);
	if (boot && !c->cuda)
		sd_boot_note(boot, why);
}

/* A failure that leaves ranks at different places in the protocol breaks
 * the communicator for good. */
int sd_api_leave(struct smddp_comm *c, int rc)
{
	/* A failure of this call, not an argument error nor the sticky
	 * result of an earlier one: the flight recorder is dumped. */
	int fresh = rc && rc != SMDDP_EINVAL && rc != SMDDP_EUNSUPPORTED && !c->failed;
	int breaks = fresh && rc != SMDDP_EMISMATCH;
	int keeps = rc && !breaks && !c->failed; /* this rank's own: refused, mismatched */

	/* The device calls queued before this one end first (they may still
	 * succeed), or report their own failure: the root cause. */
	if (breaks)
		rc = sd_cuda_settle(c, rc);
	sd_trace_end(c, rc);
	if (breaks) {
		c->failed = rc;
		/* Tell the peers now, with the reason, rather than when the
		 * communicator is destroyed: they then report the root cause,
		 * not this rank's later exit. */
		sd_cuda_abort(c);
	}
	if (fresh)
		sd_trace_failed(c, rc);
	if (keeps)
		leave_note(c, rc);
	memset(&c->cur, 0, sizeof(c->cur));
	return rc;
}

static int host_call(struct smddp_comm *comm, const struct sd_cuda_call *k)
{
	const void *sb = k->sendbuf;
	void *rb = k->recvbuf;
	size_t n = k->count;
	int rc = host_enter(comm, k->coll, n, k->dtype, k->op, k->root, k);

	if (rc)
		return sd_api_leave(comm, rc);
	if (n == 0)
		return sd_api_leave(comm, SMDDP_OK);
	switch (k->coll) {
	case SD_COLL_ALLREDUCE:
		rc = sd_coll_allreduce(comm, sb, rb, n, k->dtype, k->op);
		break;
	case SD_COLL_ALLGATHER:
		rc = sd_coll_allgather(comm, sb, rb, n, k->dtype);
		break;
	case SD_COLL_REDUCE_SCATTER:
		rc = sd_coll_reduce_scatter(comm, sb, rb, n, k->dtype, k->op);
		break;
	case SD_COLL_BROADCAST:
		rc = sd_coll_broadcast(comm, rb, n, k->dtype, k->root);
		break;
	case SD_COLL_REDUCE:
		rc = sd_coll_reduce(comm, sb, rb, n, k->dtype, k->op, k->root);
		break;
	case SD_COLL_ALLTOALL:
		rc = sd_coll_alltoall(comm, sb, rb, n, k->dtype);
		break;
	default:
		rc = sd_comm_error(comm, SMDDP_EINTERNAL, "no host algorithm for %s",
				   sd_coll_name(k->coll));
	}
	return sd_api_leave(comm, rc);
}

/* A device call takes its number even when this rank refuses it on its own
 * arguments (or it has count 0): the peers that made it meet this rank's
 * next call by number, see a number ahead of theirs and fail it with
 * SMDDP_EMISMATCH naming this rank, rather than pair it with this rank's
 * next call and move the wrong data. */
static void count_device_call(struct smddp_comm *comm, int rc)
{
	if (!comm->failed && (rc == SMDDP_OK || rc == SMDDP_EINVAL || rc == SMDDP_EUNSUPPORTED))
		comm->dev_calls++;
}

/* Device memory: checked and queued; see lib/cuda/enqueue.c.  The error of an
 * earlier queued call comes first. */
static int device_call(struct smddp_comm *comm, const struct sd_cuda_call *k)
{
	char why[400];
	/* SMDDP_CHECK_COLL compares on whichever thread runs the call.
	 * Between hosts nothing else meets the peers' staged calls (one node
	 * compares the calls' numbers as the ranks meet): a call that queues
	 * nothing here (count 0, or refused on its own arguments) compares on
	 * this thread, once the calls queued before it have run. */
	int here = comm->check_coll && comm->net &&
		   (!k->count || check_args(comm, k->coll, k->count, k->dtype, k->op, k->root, k,
					    why, sizeof(why)));
	int rc = sd_cuda_collect(comm, here);

	if (!rc)
		rc = api_enter(comm, k->coll, k->count, k->dtype, k->op, k->root, MEM_DEVICE,
			       here ? CMP_HERE : CMP_NONE, k, 0, NULL);
	count_device_call(comm, rc);
	if (rc)
		return sd_api_leave(comm, rc);
	if (k->count == 0)
		return sd_api_leave(comm, SMDDP_OK);
#ifdef HAVE_CUDA
	return sd_api_leave(comm, sd_cuda_enqueue(comm, k));
#else
	return sd_api_leave(comm, sd_comm_error(comm, SMDDP_EINTERNAL, "device call in a build "
							       "without CUDA"));
#endif
}

static int collective(struct smddp_comm *comm, int coll, const void *sendbuf, void *recvbuf,
		      size_t count, int dtype, int op, int root, void *stream)
{
	struct sd_cuda_call k = {coll, sendbuf, recvbuf, count, dtype, op, root, stream};
	char msg[400];
	int kind;

	if (!comm)
		return sd_err_set(sd_init_err(), SMDDP_EINVAL, "%s: communicator is NULL",
				  sd_coll_name(coll));
	sd_api_async_forget(comm);
	/* root is checked by the entry; classify only needs it in range. */
	if (root < 0 || root >= comm->size)
		k.root = 0;
	kind = classify(comm, &k, msg, sizeof(msg));
	k.root = root;
	if (kind == MEM_HOST)
		return host_call(comm, &k);
	if (kind == MEM_DEVICE)
		return device_call(comm, &k);
	/* A bad mix: counted like any call, then refused (compared first
	 * under SMDDP_CHECK_COLL, so that the other ranks fail it too).  The
	 * compare runs on this thread, so the device calls queued before go
	 * first: the proxy alone uses the transport while they are queued,
	 * and the wire numbers their staged chunks take are counted. */
	int rc = sd_cuda_collect(comm, comm->check_coll), told = 0;

	/* On one node the peers may run the call on kernels, which meet no
	 * host barrier: they are told of the refusal where they look, under
	 * the number it takes below. */
	if (!rc && stream && comm->check_coll)
		rc = sd_cuda_refused(comm, &k, comm->dev_calls + 1, &told);
	if (!rc)
		rc = api_enter(comm, coll, count, dtype, op, root, MEM_HOST, told ? CMP_TOLD : CMP_HERE,
			       NULL, kind, msg);
	if (stream) /* meant for device memory */
		count_device_call(comm, rc);
	return sd_api_leave(comm, rc);
}

SD_EXPORT int smddp_allreduce(const void *sendbuf, void *recvbuf, size_t count,
			      enum smddp_dtype dtype, enum smddp_op op, struct smddp_comm *comm,
			      void *stream)
{
	return collective(comm, SD_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, op, 0, stream);
}

SD_EXPORT int smddp_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
			      enum smddp_dtype dtype, struct smddp_comm *comm, void *stream)
{
	return collective(comm, SD_COLL_ALLGATHER, sendbuf, recvbuf, sendcount, dtype, 0, 0,
			  stream);
}

SD_EXPORT int smddp_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
				   enum smddp_dtype dtype, enum smddp_op op,
				   struct smddp_comm *comm, void *stream)
{
	return collective(comm, SD_COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dtype, op, 0,
			  stream);
}

SD_EXPORT int smddp_broadcast(void *buf, size_t count, enum smddp_dtype dtype, int root,
			      struct smddp_comm *comm, void *stream)
{
	return collective(comm, SD_COLL_BROADCAST, buf, buf, count, dtype, 0, root, stream);
}

SD_EXPORT int smddp_reduce(const void *sendbuf, void *recvbuf, size_t count,
			   enum smddp_dtype dtype, enum smddp_op op, int root,
			   struct smddp_comm *comm, void *stream)
{
	return collective(comm, SD_COLL_REDUCE, sendbuf, recvbuf, count, dtype, op, root, stream);
}

SD_EXPORT int smddp_alltoall(const void *sendbuf, void *recvbuf, size_t count,
			     enum smddp_dtype dtype, struct smddp_comm *comm, void *stream)
{
	return collective(comm, SD_COLL_ALLTOALL, sendbuf, recvbuf, count, dtype, 0, 0, stream);
}

/* Never writes comm: another thread may be inside a call on it. */
SD_EXPORT int smddp_comm_get_async_error(struct smddp_comm *comm, int *async_error)
{
	struct sd_err err;
	int rc;

	if (!comm || !async_error)
		return sd_err_set(sd_init_err(), SMDDP_EINVAL,
				  "smddp_comm_get_async_error: %s is NULL",
				  comm ? "async_error" : "comm");
	rc = sd_cuda_async_error(comm, &err);
	if (rc) {
		sd_api_async_keep(comm, &err);
	} else {
		sd_api_async_forget(comm);
		rc = comm->failed;
	}
	*async_error = rc;
	return SMDDP_OK;
}

SD_EXPORT int smddp_comm_get_cuda_mode(const struct smddp_comm *comm, int *mode)
{
	if (!comm || !mode)
		return sd_err_set(sd_init_err(), SMDDP_EINVAL, "smddp_comm_get_cuda_mode: %s is NULL",
				  comm ? "mode" : "comm");
	*mode = sd_cuda_mode(comm);
	return SMDDP_OK;
}

SD_EXPORT int smddp_barrier(struct smddp_comm *comm)
{
	int rc = sd_api_enter(comm, SD_COLL_BARRIER, 0, 0, 0, 0, NULL);

	if (rc)
		return comm ? sd_api_leave(comm, rc) : rc;
	return sd_api_leave(comm, comm->tp->barrier(comm));
}
