/* direct.c - large queued collectives whose kernels read the peers' own buffers: no host meeting per call.
 *
 * Design.  Above SMDDP_CUDA_FAST, copying through the window's inboxes
 * would double the bytes through HBM; the blocking mode's kernel reads
 * the peers' buffers through CUDA IPC mappings instead, and so does this
 * path, without meeting the peers on the host:
 *
 * - Registrations.  Each rank keeps SD_REG_SLOTS slots of its own
 *   allocations (the base that cuMemGetAddressRange gives, told apart by
 *   the driver's buffer id, so a freed and reallocated address is a new
 *   allocation), published in a shared-memory segment of its own that
 *   every peer mapped at setup: per slot its generation (unique on that
 *   rank), IPC handle, base and buffer id, and a version counter.  A call
 *   whose buffer is in no slot takes one (a free one, else the least
 *   recently used whose calls are done: the peers' kernels for those calls
 *   are done too, since a direct kernel ends only when every rank is done
 *   with its buffers) and publishes it.  torch's caching allocator reuses
 *   its segments, so after the first calls every buffer is in a slot.
 * - Mappings.  Each rank maps the peers' slots it sees published (the
 *   host thread before a launch, and the proxy thread while a direct call
 *   is in flight, every 200 us) and writes each one's address and
 *   generation into a table in pinned memory that the kernels read.
 * - Agreement without a host round trip.  Which path a call takes is a
 *   function of its size only (above the fast path's largest, when every
 *   rank turned the path on at setup), so every rank takes the same one.
 *   What may differ is whether a rank has mapped a peer's buffer yet: the
 *   kernel then waits (polling the table) until its host has, within
 *   SMDDP_TIMEOUT, with the fast path's checks (abort word, "gave up"
 *   words, deadline).  A miss costs the first call with a new buffer the
 *   time the peers' hosts take to map it (cudaIpcOpenMemHandle, tens to
 *   hundreds of microseconds); a hit costs nothing on the host but two
 *   loads of a version counter per peer.
 * - The kernels (kernels.h): one warp announces the call (its tag and
 *   number, where its buffers are) in every peer's window, waits for the
 *   peers' announcements and resolves their buffers; the data kernel
 *   behind it on the stream moves this rank's part: a 1/n slice of every
 *   rank's input reduced into every rank's output (allreduce; reduce into
 *   the root's), its input into every rank's output (allgather), a slice
 *   of the root's buffer into every other rank's (broadcast), or what
 *   this rank receives, read from the peers' inputs (reduce_scatter,
 *   alltoall); its last block to finish tells the peers and waits until
 *   they are done with this rank's buffers.  Only the one warp waits for
 *   a late peer: a rank's first launch of a kernel it never ran (lazy
 *   module loading) or its other work is never held back by a GPU full
 *   of our waiting blocks (docs/internals/cuda.md, the direct path).
 *   Stream order is the user's stream's; a call on another stream waits
 *   for the last call's event (shared with the fast path).  Mismatches
 *   (another call number, another tag, also a fast call met by a direct
 *   one), deadlines, abort, cancel and dead peers take the fast path's
 *   machinery (fast.c).
 * - In place.  reduce_scatter and alltoall write only this rank's output,
 *   which in place overlaps the input its peers read meanwhile: the
 *   kernel then writes into a stage of this rank's own, copied into
 *   recvbuf behind the kernel, once every peer is done.  Each rank
 *   decides that for itself; the path is the same on all.
 * - Closing a mapping waits for the whole context, so a peer's slot that
 *   changed is retired (ipc.c) and handed by the host thread, when no
 *   kernel of ours runs, to ipc.c's closer thread; a mapping opened but
 *   never published (no memory to retire the old one) goes to the closer
 *   at once, after reg_mu is dropped: sync_peers may run on the proxy
 *   thread, which a kernel may be waiting for.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "base/checks.h"
#include "cuda/cuda.h"
#include "cuda/device.h"
#include "cuda/direct.h"
#include "cuda/internal.h"
#include "cuda/ipc.h"
#include "cuda/kernels.h"
#include "transport/transport.h"

#define REG_MAGIC 0x47455244u /* "DREG" */

/* One slot as its owner publishes it: gen is 0 while it changes. */
struct sd_reg_ent {
	uint32_t gen, pad;
	uint64_t id, base, size;
	cudaIpcMemHandle_t h;
};

struct sd_reg_shm {
	uint32_t magic, version;
	uint32_t pad[14];
	struct sd_reg_ent e[SD_REG_SLOTS];
};

/* What our slot holds, host side. */
struct sd_reg_own {
	uint64_t id, base;
	uint32_t gen;
	uint32_t last_k; /* the last direct call that used it (cu->direct_k) */
};

int sd_cuda_direct_make(struct smddp_comm *c, struct sd_cuda *cu, char *name)
{
	static unsigned seq;
	cudaError_t e;
	void *dp = NULL;
	int fd = -1;

	name[0] = 0;
	pthread_mutex_init(&cu->reg_mu, NULL);
	cu->reg_own = calloc(SD_REG_SLOTS, sizeof(*cu->reg_own));
	cu->reg_ptr = calloc((size_t)SD_CUDA_MAX_RANKS * SD_REG_SLOTS, sizeof(*cu->reg_ptr));
	if (!cu->reg_own || !cu->reg_ptr)
		goto fail;
	if ((e = cudaHostAlloc((void **)&cu->reg_tab,
			       (size_t)SD_CUDA_MAX_RANKS * SD_REG_SLOTS * sizeof(*cu->reg_tab),
			       cudaHostAllocMapped | cudaHostAllocPortable)) != cudaSuccess) {
		(void)cudaGetLastError();
		cu->reg_tab = NULL;
		goto fail;
	}
	memset((void *)cu->reg_tab, 0, (size_t)SD_CUDA_MAX_RANKS * SD_REG_SLOTS * sizeof(*cu->reg_tab));
	if (cudaHostGetDevicePointer(&dp, (void *)cu->reg_tab, 0) != cudaSuccess) {
		(void)cudaGetLastError();
		goto fail;
	}
	cu->reg_tab_dev = dp;
	snprintf(cu->reg_name, sizeof(cu->reg_name), "/smddp-%s-%08x%04x%04x", c->jobid,
		 (unsigned)getpid(), (unsigned)c->rank & 0xffff,
		 __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED) & 0xffff);
	fd = SD_RETRY_EINTR(shm_open(cu->reg_name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
	if (fd < 0 || ftruncate(fd, sizeof(struct sd_reg_shm)) != 0)
		goto fail;
	cu->reg_mine = mmap(NULL, sizeof(struct sd_reg_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	fd = -1;
	if (cu->reg_mine == MAP_FAILED) {
		cu->reg_mine = NULL;
		goto fail;
	}
	cu->reg_mine->magic = REG_MAGIC;
	snprintf(name, SD_REG_NAME, "%s", cu->reg_name);
	return SMDDP_OK;
fail:
	SD_INFO(SD_SUB_COLL, "device collectives on GPU %d: no registrations for the direct path "
			     "(%s): large queued collectives meet the peers on the host",
		cu->dev, strerror(errno ? errno : ENOMEM));
	if (fd >= 0)
		close(fd);
	sd_cuda_direct_setup_done(cu, 0);
	return SMDDP_OK;
}

int sd_cuda_direct_open(struct smddp_comm *c, struct sd_cuda *cu, const char *const *names)
{
	for (int q = 0; q < c->size; q++) {
		int fd;
		void *p;

		if (q == c->rank)
			continue;
		fd = SD_RETRY_EINTR(shm_open(names[q], O_RDONLY | O_CLOEXEC, 0));
		if (fd < 0) {
			SD_INFO(SD_SUB_COLL, "device collectives: cannot open rank %d's registrations "
					     "(%s): the direct path is off",
				q, strerror(errno));
			return 0;
		}
		p = mmap(NULL, sizeof(struct sd_reg_shm), PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		if (p == MAP_FAILED || ((struct sd_reg_shm *)p)->magic != REG_MAGIC) {
			if (p != MAP_FAILED)
				munmap(p, sizeof(struct sd_reg_shm));
			return 0;
		}
		cu->reg_peer[q] = p;
	}
	return 1;
}

void sd_cuda_direct_setup_done(struct sd_cuda *cu, int on)
{
	if (cu->reg_name[0]) {
		/* Every peer has it open (or the path is off). */
		shm_unlink(cu->reg_name);
		cu->reg_name[0] = 0;
	}
	cu->direct_on = on;
	if (on)
		return;
	for (int q = 0; q < SD_CUDA_MAX_RANKS; q++) {
		if (cu->reg_peer[q])
			munmap(cu->reg_peer[q], sizeof(struct sd_reg_shm));
		cu->reg_peer[q] = NULL;
	}
	if (cu->reg_mine)
		munmap(cu->reg_mine, sizeof(struct sd_reg_shm));
	cu->reg_mine = NULL;
	if (cu->reg_tab)
		cudaFreeHost((void *)cu->reg_tab);
	cu->reg_tab = NULL;
	free(cu->reg_own);
	free(cu->reg_ptr);
	cu->reg_own = NULL;
	cu->reg_ptr = NULL;
}

int sd_cuda_direct_takes(const struct sd_cuda *cu, const struct sd_cuda_call *k)
{
	return sd_cuda_kernels_run(k->coll) && cu->direct_on &&
	       k->count * dtsize(k->dtype) > cu->fast_max;
}

/* The peers' slots that changed since we looked, mapped, into the table.
 * Either thread; errors in words into msg. */
static int sync_peers(struct sd_cuda *cu, int n, int me, char *msg, size_t len)
{
	int rc = SMDDP_OK;
	void *unused = NULL; /* opened, never published: closed off reg_mu */

	pthread_mutex_lock(&cu->reg_mu);
	for (int q = 0; q < n && !rc; q++) {
		const struct sd_reg_shm *r = cu->reg_peer[q];
		uint32_t v;
		int all = 1;

		if (q == me || !r)
			continue;
		v = __atomic_load_n(&r->version, __ATOMIC_ACQUIRE);
		if (v == cu->reg_seen[q])
			continue;
		for (int j = 0; j < SD_REG_SLOTS; j++) {
			struct sd_reg_tab *t = &cu->reg_tab[q * SD_REG_SLOTS + j];
			uint32_t g = __atomic_load_n(&r->e[j].gen, __ATOMIC_ACQUIRE);
			struct buf_pub b;
			void *p = NULL, **old = &cu->reg_ptr[q * SD_REG_SLOTS + j];
			cudaError_t e;

			if (!g || g == t->gen) {
				all &= g != 0 || !r->e[j].base;
				continue;
			}
			memset(&b, 0, sizeof(b));
			memcpy(&b.h, (const void *)&r->e[j].h, sizeof(b.h));
			b.id = r->e[j].id;
			b.base = r->e[j].base;
			b.size = r->e[j].size;
			/* The owner changed it while we copied: next time. */
			if (__atomic_load_n(&r->e[j].gen, __ATOMIC_ACQUIRE) != g) {
				all = 0;
				continue;
			}
			if ((e = sd_cuda_ipc_open(cu->sh.pids[q], cu->dev, &b, &p)) != cudaSuccess) {
				(void)cudaGetLastError();
				snprintf(msg, len,
					 "cannot map rank %d's buffer for a direct collective "
					 "(cudaIpcOpenMemHandle: %s): are both ranks on GPUs that can "
					 "reach each other? (SMDDP_CUDA_DIRECT=0 turns the path off)",
					 q, cudaGetErrorString(e));
				rc = SMDDP_ECUDA;
				break;
			}
			if (*old && (rc = sd_cuda_ipc_retire(cu, *old)) != SMDDP_OK) {
				snprintf(msg, len, "out of memory");
				unused = p;
				break;
			}
			*old = p;
			t->ptr = (uint64_t)(uintptr_t)p;
			__atomic_store_n(&t->gen, g, __ATOMIC_RELEASE);
			cu->direct_maps++;
		}
		if (all && !rc)
			cu->reg_seen[q] = v;
	}
	pthread_mutex_unlock(&cu->reg_mu);
	if (unused)
		sd_cuda_ipc_close_later(unused);
	return rc;
}

int sd_cuda_direct_poll(struct sd_cuda *cu, char *msg, size_t len)
{
	int rc;

	if (!cu->direct_on)
		return SMDDP_OK;
	uint64_t before = cu->direct_maps;

	rc = sync_peers(cu, cu->sh.size, cu->sh.rank, msg, len);
	cu->direct_waits += cu->direct_maps - before;
	return rc;
}

/* Host thread: the direct calls launched so far are done (all of them,
 * when the last fast or direct call's event is). */
static int all_done(struct sd_cuda *cu)
{
	if (cu->direct_done_k != cu->direct_k && cudaEventQuery(cu->fast_ev) == cudaSuccess)
		cu->direct_done_k = cu->direct_k;
	(void)cudaGetLastError();
	return cu->direct_done_k == cu->direct_k;
}

/* Host thread: wait until the direct calls in flight are done, before
 * something a peer may still read is reused; why ends the timeout's words. */
static int wait_direct_done(struct smddp_comm *c, struct sd_cuda *cu, const char *why)
{
	cudaError_t ee = cudaSuccess;
	int rc = sd_cuda_wait(sd_cuda_q_event, cu->fast_ev, c->timeout_ns, NULL, &ee);

	if (rc == SMDDP_ECUDA)
		return SD_CUDA_ERR(c, ee, "an earlier collective on the GPU failed");
	if (rc)
		return sd_comm_error(c, SMDDP_ETIMEDOUT,
				     "an earlier direct collective did not finish within %s "
				     "(waited %s)",
				     c->timeout_from, why);
	cu->direct_done_k = cu->direct_k;
	return SMDDP_OK;
}

/* Host thread: our slot for allocation b (taking and publishing one when
 * it has none), its generation into *g. */
static int own_slot(struct smddp_comm *c, struct sd_cuda *cu, const struct buf_pub *b, uint32_t *j,
		    uint32_t *g)
{
	struct sd_reg_own *v = NULL;
	struct sd_reg_ent *x;
	cudaIpcMemHandle_t h;
	cudaError_t e;
	int rc;

	for (int i = 0; i < SD_REG_SLOTS; i++) {
		struct sd_reg_own *o = &cu->reg_own[i];

		if (o->gen && o->id == b->id && o->base == b->base) {
			o->last_k = cu->direct_k + 1; /* this call's: not evicted by its other buffer */
			*j = (uint32_t)i;
			*g = o->gen;
			return SMDDP_OK;
		}
		/* A free slot, else the least recently used. */
		if (!v || (v->gen && (!o->gen || (int32_t)(o->last_k - v->last_k) < 0)))
			v = o;
	}
	/* Its last call may still run (rare: SD_REG_SLOTS allocations in
	 * flight): a peer may still read it. */
	if (v->gen && (int32_t)(v->last_k - cu->direct_done_k) > 0 && !all_done(cu) &&
	    (rc = wait_direct_done(c, cu, "to reuse a registration slot")))
		return rc;
	if ((e = cudaIpcGetMemHandle(&h, (void *)(uintptr_t)b->base)) != cudaSuccess) {
		(void)cudaGetLastError();
		return sd_comm_error(c, SMDDP_ECUDA,
				     "cannot share a buffer with the other ranks through CUDA IPC "
				     "(cudaIpcGetMemHandle: %s): allocate it with cudaMalloc (memory "
				     "pools of cudaMallocAsync and cuMemCreate cannot be shared this "
				     "way)",
				     cudaGetErrorString(e));
	}
	*j = (uint32_t)(v - cu->reg_own);
	x = &cu->reg_mine->e[*j];
	/* Readers skip a slot whose gen is 0 or changes while they copy it. */
	__atomic_store_n(&x->gen, 0, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	memcpy(&x->h, &h, sizeof(h));
	x->id = b->id;
	x->base = b->base;
	x->size = b->size;
	v->gen = ++cu->reg_gen ? cu->reg_gen : ++cu->reg_gen;
	v->id = b->id;
	v->base = b->base;
	v->last_k = cu->direct_k + 1;
	__atomic_store_n(&x->gen, v->gen, __ATOMIC_RELEASE);
	__atomic_fetch_add(&cu->reg_mine->version, 1, __ATOMIC_RELEASE);
	*g = v->gen;
	SD_TRACE(SD_SUB_COLL, "device allocation %#llx (id %llu) registered in slot %u, generation %u",
		 (unsigned long long)b->base, (unsigned long long)b->id, *j, *g);
	return SMDDP_OK;
}

/* Host thread: does this rank's reduce_scatter or alltoall output (rb
 * bytes) overlap what its peers read of its input (sb bytes)?  Then the
 * kernel writes it into the stage, copied into recvbuf once the peers are
 * done.  A reduce_scatter's output at block rank of its input is read
 * by this rank alone, element by element before it is written. */
static int needs_stage(const struct smddp_comm *c, const struct sd_cuda_call *k,
		       const struct buf_pub b[2], size_t sb, size_t rb)
{
	uint64_t s0 = b[0].off, r0 = b[1].off;

	if (!b[0].present || !b[1].present || b[0].base != b[1].base ||
	    !(s0 < r0 + rb && r0 < s0 + sb))
		return 0;
	return !(k->coll == SD_COLL_REDUCE_SCATTER &&
		 r0 == s0 + (uint64_t)c->rank * k->count * dtsize(k->dtype));
}

/* Host thread: the stage, at least bytes long.  A larger one waits until
 * the direct calls in flight are done with the old one (in-place
 * reduce_scatters and alltoalls are rare, and torch reuses its buffers:
 * this happens a few times per communicator). */
static int stage_for(struct smddp_comm *c, struct sd_cuda *cu, size_t bytes, void **out)
{
	cudaError_t e;

	if (cu->direct_stage_len < bytes) {
		int rc;

		if (cu->direct_stage && !all_done(cu) &&
		    (rc = wait_direct_done(c, cu, "to grow the in-place stage")))
			return rc;
		if (cu->direct_stage)
			cudaFree(cu->direct_stage);
		size_t len = sd_cuda_scratch_size(cu->direct_stage_len, bytes);

		cu->direct_stage = NULL;
		cu->direct_stage_len = 0;
		if ((e = cudaMalloc(&cu->direct_stage, len)) != cudaSuccess) {
			cu->direct_stage = NULL;
			(void)cudaGetLastError(); /* ours, not left for the caller's next check */
			return SD_CUDA_ERR(c, e, "cannot allocate GPU memory for an in-place "
						"collective's output");
		}
		cu->direct_stage_len = len;
	}
	*out = cu->direct_stage;
	return SMDDP_OK;
}

int sd_cuda_direct_call(struct smddp_comm *c, struct sd_cuda *cu, const struct sd_cuda_call *k,
			const struct buf_pub b[2])
{
	/* A buffer the call does not touch on this rank (broadcast's
	 * sendbuf, a reduce's recvbuf off the root) is announced as the
	 * other one: nobody reads or writes it. */
	const struct buf_pub *sb = b[0].present ? &b[0] : &b[1], *rb = b[1].present ? &b[1] : &b[0];
	struct sd_direct_args a;
	cudaStream_t st = (cudaStream_t)k->stream;
	char msg[sizeof(cu->errmsg)];
	cudaError_t e;
	int rc, ke;

	/* reduce_scatter and alltoall: the peers read only our sendbuf, so
	 * our recvbuf is announced as our sendbuf (no mapping of it). */
	const int pull = k->coll == SD_COLL_REDUCE_SCATTER || k->coll == SD_COLL_ALLTOALL;
	size_t sbytes, rbytes;
	void *stage = NULL;

	memset(&a, 0, sizeof(a));
	if ((rc = sync_peers(cu, c->size, c->rank, msg, sizeof(msg))) != SMDDP_OK)
		return sd_comm_error(c, rc, "%s", msg);
	sd_cuda_extents(k, c->size, c->rank, &sbytes, &rbytes);
	if (pull && needs_stage(c, k, b, sbytes, rbytes))
		SD_CHECK(stage_for(c, cu, rbytes, &stage));
	SD_CHECK(own_slot(c, cu, sb, &a.sj, &a.sg));
	if (pull) {
		a.rj = a.sj;
		a.rg = a.sg;
		rb = sb;
	} else {
		SD_CHECK(own_slot(c, cu, rb, &a.rj, &a.rg));
	}
	for (int q = 0; q < c->size; q++)
		a.win[q] = cu->fast_peer[q];
	a.send = k->sendbuf;
	a.recv = k->recvbuf;
	a.out = stage ? stage : k->recvbuf;
	a.count = k->count;
	a.timeout_ns = c->timeout_ns;
	a.host = cu->fast_host_dev;
	a.tab = cu->reg_tab_dev;
	a.soff = sb->off;
	a.roff = rb->off;
	a.nranks = c->size;
	a.rank = c->rank;
	a.share = cu->shared + 1;
	a.coll = k->coll;
	a.root = k->coll == SD_COLL_BROADCAST || k->coll == SD_COLL_REDUCE ? k->root : 0;
	a.call = c->dev_calls;
	a.tag = sd_cuda_call_tag(k);
	if (cu->last_st != st && (e = sd_cuda_after_last(cu, st)) != cudaSuccess)
		return SD_CUDA_ERR(c, e, "cannot order the stream after the last call on another "
					"stream");
	if ((ke = sd_cuda_kernel_direct(&a, k->dtype, k->op, st)) != 0)
		return SD_CUDA_ERR(c, ke, "cannot launch the %s kernel (is the stream one of this GPU?)",
				   sd_coll_name(k->coll));
	/* The stage into recvbuf, once the kernel (and so every peer) is done
	 * with our sendbuf: our own kernel, loaded with the others, rather
	 * than a copy whose code the driver may load at its first use. */
	if (stage) {
		const void *src = stage;
		void *dst = k->recvbuf;

		if ((ke = sd_cuda_kernel_copy_pairs(&src, &dst, 1, rbytes, st, cu->max_blocks)) != 0)
			return SD_CUDA_ERR(c, ke, "cannot launch the copy of an in-place %s's output",
					   sd_coll_name(k->coll));
	}
	cu->direct_k++;
	cu->reg_own[a.sj].last_k = cu->direct_k;
	cu->reg_own[a.rj].last_k = cu->direct_k;
	cu->direct_calls++;
	cu->direct_by[k->coll]++;
	if ((e = sd_cuda_kernels_launched(c, cu, st)) != cudaSuccess)
		return SD_CUDA_ERR(c, e, "cannot record an event on the stream");
	SD_TRACE(SD_SUB_COLL, "GPU call %u: direct %s of %zu elements (slots %u/%u, %u/%u%s), queued",
		 a.call, sd_coll_name(k->coll), k->count, a.sj, a.sg, a.rj, a.rg,
		 stage ? ", staged" : "");
	return SMDDP_OK;
}

void sd_cuda_direct_free(struct smddp_comm *c, struct sd_cuda *cu, int stuck)
{
	if (!cu->reg_own && !cu->reg_name[0])
		return;
	if (cu->direct_on)
		SD_INFO(SD_SUB_COLL,
			"device collectives on GPU %d: %llu call(s) read the peers' buffers directly "
			"(allreduce %llu, allgather %llu, broadcast %llu, reduce %llu, reduce_scatter "
			"%llu, alltoall %llu); %llu peer allocation(s) mapped for them, %llu by the "
			"proxy thread while a kernel waited",
			cu->dev, (unsigned long long)cu->direct_calls,
			(unsigned long long)cu->direct_by[SD_FAST_ALLREDUCE],
			(unsigned long long)cu->direct_by[SD_FAST_ALLGATHER],
			(unsigned long long)cu->direct_by[SD_FAST_BROADCAST],
			(unsigned long long)cu->direct_by[SD_FAST_REDUCE],
			(unsigned long long)cu->direct_by[SD_FAST_REDUCE_SCATTER],
			(unsigned long long)cu->direct_by[SD_FAST_ALLTOALL],
			(unsigned long long)cu->direct_maps, (unsigned long long)cu->direct_waits);
	if (cu->reg_ptr && !stuck)
		for (int i = 0; i < SD_CUDA_MAX_RANKS * SD_REG_SLOTS; i++)
			if (cu->reg_ptr[i])
				sd_cuda_ipc_close(cu->reg_ptr[i]);
	if (stuck) {
		/* A stream may still run a kernel that reads the table, or
		 * writes the stage. */
		cu->reg_tab = NULL;
	} else if (cu->direct_stage) {
		cudaFree(cu->direct_stage);
	}
	cu->direct_stage = NULL;
	(void)c;
	pthread_mutex_destroy(&cu->reg_mu);
	sd_cuda_direct_setup_done(cu, 0);
}
