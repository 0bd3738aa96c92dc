/* staged.c - collectives on CUDA device memory between hosts, staged through pinned host memory.
 *
 * A communicator whose ranks are on several hosts moves device buffers by
 * copying them through pinned host memory and running the host algorithms
 * of lib/transport/net/net.c (shared memory inside each host, libfabric between
 * hosts) on the copies.  The call is cut into chunks of the same elements
 * on every rank; each chunk is its own host collective, with its own
 * number on the wire (c->wire), so that messages of different chunks never
 * match.
 *
 * Stream order.  At the call, every copy is queued on the caller's own
 * stream (a large call's in parts, below), with chunk i's ticket t(i)
 * (consecutive numbers, proxy.c's release word):
 *
 *   up(0) up(1) | wait(t0) down(0) up(2) | wait(t1) down(1) up(3) | ... | wait(tN) down(N)
 *
 * up(i) copies chunk i into slot i % NSLOT and then writes t(i) into the
 * "up" word (cuStreamWriteValue32, after the copy); wait(t) holds the
 * stream until the release word reaches t (cuStreamWaitValue32); down(i)
 * copies the chunk's result back.  The host side (the proxy thread when
 * calls return once queued, else the caller) waits for the up word to
 * reach t(i), runs chunk i's host collective on its slot, and writes t(i)
 * into the release word.  While the host runs chunk i+1 the GPU copies
 * chunk i down and chunk i+2 up, into the slot chunk i just left: the
 * stream orders that reuse.  So the call returns once queued, like NCCL's:
 * work queued before it is its input, work queued after it sees its
 * result.
 *
 * Streamed chunks.  An allreduce, allgather or reduce_scatter over a flat
 * ring (one rank a host, or SMDDP_ALGO=ring) copies each chunk in pieces
 * (the ring's blocks, cut to about PIECES_WANT pieces), each with a
 * ticket of its own: up in the order the
 * ring reads its input, down in the order it finishes its output
 * (struct sd_net_stream_plan).  The ring asks for a piece before it reads
 * it and says when output is final (struct sd_net_stream), so the copies
 * overlap the network as NCCL's steps do; the last piece down is let go
 * only once the collective is over, as the stream then reuses the slot.
 *
 * Parts.  A stream takes only so many operations before a queueing call
 * blocks until those ahead drain, and those ahead wait for tickets that
 * only the host side lets go, once it knows of the call: all of a call's
 * copies queued before it is told hung so on an H100 (~3000 operations).
 * So a call of more than sd_cuda_part_items operations is queued in
 * parts, ops of their own, each told to the host side before the next:
 * part j queues down(i) up(i + NSLOT) for its chunks i (the first part
 * up(0) up(1) before), in the one sequence above, so that the parts
 * pipeline as one call does.
 *
 * Why one stream: a stream held by a wait must never hold back the work
 * that the wait depends on.  Here that work is the caller's stream's own,
 * queued ahead of the wait, so no sharing of hardware queues between
 * streams (a process has few of them, fewer under MPS) can deadlock it.
 * The cost is that copies up and down take turns instead of overlapping.
 *
 * Chunk layout, for a chunk of L elements at element o of each block
 * (m = count elements per block, r this rank, n ranks):
 *   allreduce, reduce     S = sendbuf[o, o+L), reduced in place
 *   broadcast             S = root's buf[o, o+L)
 *   allgather             S[r] = sendbuf[o, o+L); S[q] -> recvbuf block q at o
 *   reduce_scatter        S[q] = sendbuf block q at o; S[r] -> recvbuf[o, o+L)
 *   alltoall              S[q] = sendbuf block q at o; S[n + q] -> recvbuf block q at o
 * (strided copies are cudaMemcpy2DAsync).  The in-place layouts of
 * smddp(3) are safe: a chunk's input is in host memory before any output
 * of that chunk is written back, and the chunks touch disjoint elements.
 *
 * Failure: the host side stops and releases every ticket of the call (and
 * the proxy those of later calls), so the stream always goes on; the
 * output then holds whatever the slots held (smddp(3): undefined).  Every
 * wait of the host side is bounded by SMDDP_TIMEOUT.
 *
 * GPUDirect (FI_HMEM, the provider reading device memory) is not used yet:
 * the tcp provider does not offer it, and no machine here has EFA.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "base/checks.h"
#include "base/comm-types.h"
#include "clock/clock.h"
#include "coll/coll.h"
#include "coll/net.h"
#include "cuda/cuda.h"
#include "cuda/device.h"
#include "cuda/internal.h"
#include "cuda/staged.h"
#include "transport/net/net.h"
#include "transport/transport.h"

#define NSLOT 2
#define CHUNK_MAX ((size_t)4 << 20)   /* bytes of data of a chunk, at most (unless streamed
					* in larger ones: SMDDP_CUDA_STREAM_CHUNK) */
#define CHUNK_MIN ((size_t)256 << 10) /* ... and at least, unless the call is smaller,
					* or the network's own step is larger */
#define PIECES_MAX 16                  /* copies of a streamed chunk, each way, at most */
#define PIECES_WANT 8                  /* ... and as many as blocks are cut in, where larger */
#define PIECE_MIN ((size_t)256 << 10)  /* bytes of a piece, at least, where a block has more */

struct sd_stage {
	char *host; /* NSLOT slots of slot bytes, pinned */
	size_t slot;
};

void sd_cuda_stage_free(struct sd_cuda *cu, int poisoned)
{
	struct sd_stage *s = cu->stage;

	if (!s)
		return;
	if (s->host && poisoned)
		/* The provider may still write into a slot (a transfer the
		 * failed call left behind): keep them, as net.c keeps its own. */
		SD_WARN(SD_SUB_COLL, "the fabric endpoint was left with transfers in flight: the "
				     "pinned staging memory (%zu bytes) is left allocated",
			 NSLOT * s->slot);
	else if (s->host)
		cudaFreeHost(s->host);
	free(s);
	cu->stage = NULL;
}

/* The slots, made at the first call: NSLOT of the largest chunk's bytes
 * (or of one chunk's unit, where that is larger), so that they never have
 * to grow under copies still queued. */
static int stage_get(struct smddp_comm *c, struct sd_cuda *cu, size_t unit, struct sd_stage **out)
{
	struct sd_stage *s = cu->stage;
	size_t most = cu->stream_chunk > CHUNK_MAX ? cu->stream_chunk : CHUNK_MAX;
	size_t slot = ((unit > most ? unit : most) + 63) / 64 * 64;
	cudaError_t e;

	if (s && s->slot < unit)
		return sd_comm_error(c, SMDDP_EUNSUPPORTED,
				     "one element of every block of this call (%zu bytes) does not "
				     "fit the staging slots (%zu bytes)",
				     unit, s->slot);
	if (!s) {
		if (!(s = calloc(1, sizeof(*s))))
			return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
		e = cudaHostAlloc((void **)&s->host, NSLOT * slot, cudaHostAllocPortable);
		if (e != cudaSuccess) {
			free(s);
			return sd_comm_error(c, SMDDP_ENOMEM,
					     "cannot allocate %zu bytes of pinned host memory to stage "
					     "device buffers between hosts: %s",
					     NSLOT * slot, cudaGetErrorString(e));
		}
		s->slot = slot;
		cu->stage = s;
	}
	*out = s;
	return SMDDP_OK;
}

/* A streamed chunk's pieces: byte ranges of its slot and the block of the
 * plan (struct sd_net_stream_plan) each is in, in the order they are
 * copied up (the ring's reading order) and down (its finishing order).  Up
 * piece u writes ticket base + u into the up word; the copy down d waits
 * for base + d; the chunk takes max(nu, nd) tickets. */
struct pieces {
	int nu, nd;
	size_t ulo[PIECES_MAX], uhi[PIECES_MAX], dlo[PIECES_MAX], dhi[PIECES_MAX];
	int ub[PIECES_MAX], db[PIECES_MAX];
	size_t cut[SD_NET_STREAM_MAX + 1];
};

struct plan {
	const struct sd_cuda_call *k;
	size_t es, m;    /* element size; bytes of a block (count elements) */
	size_t len, nch; /* elements per chunk, chunks */
	int n, r, words; /* words: blocks of len elements in a slot */
	int stream;      /* chunks are streamed (a flat ring's allreduce, allgather, reduce_scatter) */
	int per;         /* tickets of a chunk (its pieces; the last chunk's may be fewer) */
	uint32_t t0;     /* chunk i's first ticket: t0 + i * per */
	size_t tickets;  /* of the whole call */
	struct pieces full, tail; /* every chunk's pieces but the last's; the last's */
};

static const struct pieces *chunk_pieces(const struct plan *p, size_t i)
{
	return i == p->nch - 1 ? &p->tail : &p->full;
}

/* Chunk i: elements [o, o + L) of each block, staged in slot S. */
struct chunk {
	char *S;
	size_t L, Lb; /* elements, bytes */
	size_t ob;    /* o in bytes */
};

static struct chunk chunk_of(const struct sd_stage *s, const struct plan *p, size_t i)
{
	struct chunk ch;
	size_t o = i * p->len;

	ch.S = s->host + (i % NSLOT) * s->slot;
	ch.L = p->k->count - o < p->len ? p->k->count - o : p->len;
	ch.Lb = ch.L * p->es;
	ch.ob = o * p->es;
	return ch;
}

/* Blocks of the plan, in order, cut in pieces of at least PIECE_MIN, up
 * to PIECES_WANT in all (at least one a block). */
static int cut_pieces(const struct sd_net_stream_plan *sp, const int *order, int nb, size_t es,
		      size_t *lo, size_t *hi, int *blk)
{
	int n = 0, want = PIECES_WANT / nb > 1 ? PIECES_WANT / nb : 1;

	for (int s = 0; s < nb; s++) {
		int b = order[s];
		size_t bytes = sp->cut[b + 1] - sp->cut[b], el = bytes / es;
		int m = (int)(bytes / PIECE_MIN);

		m = m > want ? want : m < 1 ? 1 : m;
		for (int j = 0; j < m; j++, n++) {
			lo[n] = sp->cut[b] + el * (size_t)j / (size_t)m * es;
			hi[n] = sp->cut[b] + el * (size_t)(j + 1) / (size_t)m * es;
			blk[n] = b;
		}
	}
	return n;
}

/* Chunk i's pieces; where the chunk is not streamed, one each way, the
 * whole chunk (block -1).  The same on the host thread and the caller's
 * (c: either's copy of the communicator). */
static void pieces_of(struct smddp_comm *c, const struct plan *p, size_t i, struct pieces *pc)
{
	const struct sd_cuda_call *k = p->k;
	size_t L = k->count - i * p->len < p->len ? k->count - i * p->len : p->len;
	struct sd_net_stream_plan sp;

	if (!p->stream || !sd_net_stream_plan(c, k->coll, L, (enum smddp_dtype)k->dtype,
					      (enum smddp_op)k->op, &sp)) {
		pc->nu = pc->nd = 1;
		pc->ulo[0] = pc->dlo[0] = 0;
		pc->uhi[0] = pc->dhi[0] = L * p->es * (size_t)p->words;
		pc->ub[0] = pc->db[0] = -1;
		return;
	}
	memcpy(pc->cut, sp.cut, sizeof(pc->cut));
	pc->nu = cut_pieces(&sp, sp.in, sp.nin, p->es, pc->ulo, pc->uhi, pc->ub);
	pc->nd = cut_pieces(&sp, sp.out, sp.nout, p->es, pc->dlo, pc->dhi, pc->db);
}

static int span_of(const struct pieces *pc)
{
	return pc->nu > pc->nd ? pc->nu : pc->nd;
}

/* Where slot bytes [lo, ...) of block b come from (up) or go (down):
 * the allreduce's chunk is one range; the allgather's and
 * reduce_scatter's blocks are the call's blocks at chunk offset ob. */
static size_t dev_off(const struct plan *p, const struct chunk *ch, const struct pieces *pc,
		      int up, int b, size_t lo)
{
	switch (p->k->coll) {
	case SD_COLL_ALLREDUCE: return ch->ob + lo;
	case SD_COLL_ALLGATHER:
		return (up ? 0 : (size_t)b * p->m) + ch->ob + lo - pc->cut[b];
	default: /* reduce_scatter */
		return (up ? (size_t)b * p->m : 0) + ch->ob + lo - pc->cut[b];
	}
}

/* cudaMemcpy2DAsync, or one copy per row where a pitch is beyond what it
 * takes (2^31 - 1 bytes on current GPUs: blocks over 2 GiB). */
static cudaError_t copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
			  size_t height, enum cudaMemcpyKind kind, cudaStream_t st)
{
	cudaError_t e = cudaSuccess;

	if (dpitch < ((size_t)1 << 31) && spitch < ((size_t)1 << 31))
		return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, st);
	for (size_t y = 0; y < height && e == cudaSuccess; y++)
		e = cudaMemcpyAsync((char *)dst + y * dpitch, (const char *)src + y * spitch, width,
				    kind, st);
	return e;
}

/* Queue chunk i's copy up into its slot, then its ticket into the up word;
 * a streamed chunk's piece by piece, each with its ticket. */
static cudaError_t copy_up(struct sd_cuda *cu, const struct plan *p, size_t i, cudaStream_t st)
{
	const struct sd_cuda_call *k = p->k;
	const struct chunk ch = chunk_of(cu->stage, p, i);
	uint32_t base = p->t0 + (uint32_t)(i * (size_t)p->per);
	cudaError_t e = cudaSuccess;
	const struct pieces *pc = chunk_pieces(p, i);

	for (int u = 0; pc->ub[0] >= 0 && u < pc->nu && e == cudaSuccess; u++) {
		e = cudaMemcpyAsync(ch.S + pc->ulo[u],
				    (const char *)k->sendbuf + dev_off(p, &ch, pc, 1, pc->ub[u], pc->ulo[u]),
				    pc->uhi[u] - pc->ulo[u], cudaMemcpyDeviceToHost, st);
		if (e == cudaSuccess && sd_cuda_write32(st, cu->up_dev, base + (uint32_t)u))
			e = cudaErrorNotSupported;
	}
	if (pc->ub[0] >= 0)
		return e;
	switch (k->coll) {
	case SD_COLL_ALLREDUCE:
	case SD_COLL_REDUCE:
		e = cudaMemcpyAsync(ch.S, (const char *)k->sendbuf + ch.ob, ch.Lb,
				    cudaMemcpyDeviceToHost, st);
		break;
	case SD_COLL_BROADCAST:
		if (p->r == k->root)
			e = cudaMemcpyAsync(ch.S, (const char *)k->recvbuf + ch.ob, ch.Lb,
					    cudaMemcpyDeviceToHost, st);
		break;
	case SD_COLL_ALLGATHER:
		e = cudaMemcpyAsync(ch.S + (size_t)p->r * ch.Lb, (const char *)k->sendbuf + ch.ob,
				    ch.Lb, cudaMemcpyDeviceToHost, st);
		break;
	default: /* reduce_scatter, alltoall: block q at o into S[q] */
		e = copy2d(ch.S, ch.Lb, (const char *)k->sendbuf + ch.ob, p->m, ch.Lb,
			   (size_t)p->n, cudaMemcpyDeviceToHost, st);
		break;
	}
	if (e == cudaSuccess && sd_cuda_write32(st, cu->up_dev, base))
		e = cudaErrorNotSupported; /* stream memory operations unavailable */
	return e;
}

/* Queue the wait for chunk i's release, then its copy down; a streamed
 * chunk's piece by piece, each behind its own ticket. */
static cudaError_t copy_down(struct sd_cuda *cu, const struct plan *p, size_t i, cudaStream_t st)
{
	const struct sd_cuda_call *k = p->k;
	const struct chunk ch = chunk_of(cu->stage, p, i);
	uint32_t base = p->t0 + (uint32_t)(i * (size_t)p->per);
	cudaError_t e = cudaSuccess;
	char *R = k->recvbuf ? (char *)k->recvbuf + ch.ob : NULL; /* NULL: reduce, not root */
	const struct pieces *pc = chunk_pieces(p, i);

	for (int d = 0; pc->db[0] >= 0 && d < pc->nd && e == cudaSuccess; d++) {
		/* the chunk's last ticket goes with its last copy down */
		uint32_t t = base + (uint32_t)(d == pc->nd - 1 ? span_of(pc) - 1 : d);

		if (sd_cuda_wait32(st, cu->word_dev, t))
			return cudaErrorNotSupported;
		e = cudaMemcpyAsync((char *)k->recvbuf + dev_off(p, &ch, pc, 0, pc->db[d], pc->dlo[d]),
				    ch.S + pc->dlo[d], pc->dhi[d] - pc->dlo[d], cudaMemcpyHostToDevice,
				    st);
	}
	if (pc->db[0] >= 0)
		return e;
	if (sd_cuda_wait32(st, cu->word_dev, base))
		return cudaErrorNotSupported; /* stream memory operations unavailable */
	switch (k->coll) {
	case SD_COLL_ALLREDUCE:
		e = cudaMemcpyAsync(R, ch.S, ch.Lb, cudaMemcpyHostToDevice, st);
		break;
	case SD_COLL_REDUCE:
		if (p->r == k->root)
			e = cudaMemcpyAsync(R, ch.S, ch.Lb, cudaMemcpyHostToDevice, st);
		break;
	case SD_COLL_BROADCAST:
		if (p->r != k->root)
			e = cudaMemcpyAsync(R, ch.S, ch.Lb, cudaMemcpyHostToDevice, st);
		break;
	case SD_COLL_ALLGATHER:
		e = copy2d(R, p->m, ch.S, ch.Lb, ch.Lb, (size_t)p->n, cudaMemcpyHostToDevice, st);
		break;
	case SD_COLL_REDUCE_SCATTER:
		e = cudaMemcpyAsync(R, ch.S + (size_t)p->r * ch.Lb, ch.Lb, cudaMemcpyHostToDevice,
				    st);
		break;
	default: /* alltoall */
		e = copy2d(R, p->m, ch.S + (size_t)p->n * ch.Lb, ch.Lb, ch.Lb, (size_t)p->n,
			   cudaMemcpyHostToDevice, st);
		break;
	}
	return e;
}

/* The host collective of chunk i, on its slot. */
static int host_chunk(struct smddp_comm *c, const struct sd_stage *s, const struct plan *p,
		      size_t i)
{
	const struct sd_cuda_call *k = p->k;
	const struct chunk ch = chunk_of(s, p, i);
	enum smddp_dtype dt = (enum smddp_dtype)k->dtype;
	enum smddp_op op = (enum smddp_op)k->op;

	switch (k->coll) {
	case SD_COLL_ALLREDUCE: return sd_coll_allreduce(c, ch.S, ch.S, ch.L, dt, op);
	case SD_COLL_REDUCE: return sd_coll_reduce(c, ch.S, ch.S, ch.L, dt, op, k->root);
	case SD_COLL_BROADCAST: return sd_coll_broadcast(c, ch.S, ch.L, dt, k->root);
	case SD_COLL_ALLGATHER:
		return sd_coll_allgather(c, ch.S + (size_t)p->r * ch.Lb, ch.S, ch.L, dt);
	case SD_COLL_REDUCE_SCATTER:
		return sd_coll_reduce_scatter(c, ch.S, ch.S + (size_t)p->r * ch.Lb, ch.L, dt, op);
	case SD_COLL_ALLTOALL:
		return sd_coll_alltoall(c, ch.S, ch.S + (size_t)p->n * ch.Lb, ch.L, dt);
	default:
		return sd_comm_error(c, SMDDP_EINTERNAL, "no staged algorithm for %s",
				     sd_coll_name(k->coll));
	}
}

/* The smallest chunk: each is a host collective of its own, with its own
 * start and drain, so a chunk below the network's pipelined step
 * (sd_net_chunk(), the same on every rank) costs more than the overlap of
 * its copies saves. */
static size_t least_chunk(const struct smddp_comm *c)
{
	size_t m = sd_net_chunk(c) > CHUNK_MIN ? sd_net_chunk(c) : CHUNK_MIN;

	return m < CHUNK_MAX ? m : CHUNK_MAX;
}

/* Chunks of about bytes / split each, within [least, most]. */
static void cut_chunks(struct plan *p, size_t least, size_t split, size_t most)
{
	size_t unit = (size_t)p->words * p->es, want = p->m * (size_t)p->words / split;

	want = want < least ? least : want > most ? most : want;
	p->len = want / unit ? want / unit : 1;
	if (p->len > p->k->count)
		p->len = p->k->count;
	p->nch = (p->k->count + p->len - 1) / p->len;
}

/* Call k's chunks, the same on every rank: a quarter of the call each (so
 * that one chunk's copies overlap another's host collective), within
 * [least, CHUNK_MAX], streamed where they can be (a flat ring's allreduce,
 * allgather, reduce_scatter: their pieces overlap the copies with the
 * network inside a chunk too).  With SMDDP_CUDA_STREAM_CHUNK, streamed
 * chunks are as large as it allows instead: every chunk is a host
 * collective with its own start and drain, which larger ones pay less
 * often, and the pieces already overlap the copies. */
static void plan_of(struct plan *p, struct smddp_comm *c, const struct sd_cuda_call *k,
		    size_t least, int stream, size_t stream_chunk)
{
	int n = c->size;

	memset(p, 0, sizeof(*p));
	p->k = k;
	p->n = n;
	p->r = c->rank;
	p->per = 1;
	p->es = smddp_dtype_size((enum smddp_dtype)k->dtype);
	p->m = k->count * p->es;
	p->words = k->coll == SD_COLL_ALLTOALL ? 2 * n
		   : k->coll == SD_COLL_ALLGATHER || k->coll == SD_COLL_REDUCE_SCATTER ? n
											: 1;
	p->stream = stream && (k->coll == SD_COLL_ALLREDUCE || k->coll == SD_COLL_ALLGATHER ||
			       k->coll == SD_COLL_REDUCE_SCATTER);
	if (p->stream && stream_chunk) {
		cut_chunks(p, least, 1, stream_chunk > least ? stream_chunk : least);
		pieces_of(c, p, 0, &p->full);
		p->stream = p->full.ub[0] >= 0;
		if (!p->stream) {
			/* Not streamed after all: quarters, in whole pieces. */
			cut_chunks(p, least, 4, CHUNK_MAX);
			pieces_of(c, p, 0, &p->full);
		}
	} else {
		cut_chunks(p, least, 4, CHUNK_MAX);
		pieces_of(c, p, 0, &p->full);
		p->stream = p->full.ub[0] >= 0;
	}
	if (p->stream)
		p->per = span_of(&p->full);
	if (p->nch > 1)
		pieces_of(c, p, p->nch - 1, &p->tail);
	else
		p->tail = p->full;
	p->tickets = (p->nch - 1) * (size_t)p->per + (size_t)span_of(&p->tail);
}

/* Stream operations one part of a call queues, at most: well below the
 * ~380 of a call that ran in whole chunks on an H100.  Global, so that
 * the fake CUDA of the tests can lower it (FAKECUDA_PART_ITEMS). */
size_t sd_cuda_part_items = 128;

/* The part of the call from chunk ch0 on: its end, within
 * sd_cuda_part_items stream operations (a chunk's copies, ticket writes
 * and waits: two each way for a whole chunk, per piece for a streamed
 * one; the first part's copies up of its first NSLOT chunks besides), at
 * least one chunk. */
static size_t part_end(const struct plan *p, size_t ch0)
{
	size_t items = 4 * (size_t)p->per, first = ch0 ? 0 : NSLOT * 2 * (size_t)p->per;
	size_t n = sd_cuda_part_items > first ? (sd_cuda_part_items - first) / items : 0;

	n = n ? n : 1;

	return p->nch - ch0 > n ? ch0 + n : p->nch;
}

/* The last ticket of chunks before ch (all of them, ch = nch). */
static uint32_t ticket_before(const struct plan *p, size_t ch)
{
	return p->t0 + (uint32_t)(ch < p->nch ? ch * (size_t)p->per : p->tickets) - 1;
}

int sd_cuda_staged_queue(struct smddp_comm *c, struct sd_cuda *cu, struct op *o)
{
	cudaStream_t st = (cudaStream_t)o->k.stream;
	struct sd_stage *s;
	struct plan p;
	cudaError_t e = cudaSuccess;

	plan_of(&p, c, &o->k, least_chunk(c), cu->stream, cu->stream_chunk);
	SD_CHECK(stage_get(c, cu, (size_t)p.words * p.es, &s));
	if (p.tickets > ((size_t)1 << 24)) /* see enqueue.c, rewind_tickets() */
		return sd_comm_error(c, SMDDP_EINVAL, "count %zu is too large for the device path "
						      "between hosts", o->k.count);
	/* Parts after the first start where the last left off. */
	p.t0 = o->seq - (uint32_t)(o->ch0 * (size_t)p.per);
	o->ch1 = part_end(&p, o->ch0);
	o->more = o->ch1 < p.nch;
	o->last = ticket_before(&p, o->ch1);
	o->upto = ticket_before(&p, o->ch1 + NSLOT < p.nch ? o->ch1 + NSLOT : p.nch);
	/* The call's number on the wire; its chunks take more when it runs
	 * (cu->xwire), once the ranks agree on it (SMDDP_CHECK_COLL). */
	o->wire = c->wire;
	SD_TRACE(SD_SUB_COLL, "staged between hosts: chunks %zu-%zu of %zu, of %zu elements%s, "
			      "tickets %u-%u",
		 o->ch0 + 1, o->ch1, p.nch, p.len, p.stream ? " streamed" : "", o->seq, o->last);
	for (size_t up = 0; !o->ch0 && up < p.nch && up < NSLOT && e == cudaSuccess; up++)
		e = copy_up(cu, &p, up, st);
	for (size_t i = o->ch0; i < o->ch1 && e == cudaSuccess; i++) {
		e = copy_down(cu, &p, i, st);
		if (e == cudaSuccess && i + NSLOT < p.nch)
			e = copy_up(cu, &p, i + NSLOT, st);
	}
	/* Even when queueing failed halfway, waits may be queued: the ticket
	 * numbers stay taken, and the call's runner releases them unrun
	 * (o->broken); the end event still orders what follows. */
	int recorded = sd_cuda_end_queued(cu, st, o->slot);

	if (recorded && e == cudaSuccess)
		return SMDDP_OK;
	o->broken = 1;
	if (e == cudaSuccess)
		return sd_comm_error(c, SMDDP_ECUDA, "cannot record an event on the stream");
	return SD_CUDA_ERR(c, e, "cannot queue the copies of a device call between hosts on the "
				 "stream (is it a stream of this GPU?)");
}

/* A streamed chunk as its host collective runs: the ring asks for input
 * (its pieces' copies up, in order) and says what output is final; the
 * copies down are let go in their order, all but the last, which goes once
 * the host collective is over (the slot is then free for the next use). */
struct flow {
	struct sd_cuda *cu;
	struct smddp_comm *c;
	const struct pieces *pc;
	const char *S;          /* the slot */
	uint32_t base;
	size_t fin[PIECES_MAX]; /* bytes of each piece down final */
	int released;           /* copies down let go */
};

static int up_failed(struct smddp_comm *c, int rc, cudaError_t e, size_t i)
{
	if (rc == SMDDP_EABORTED)
		return sd_cuda_stopped(c, "during this call");
	if (rc == SMDDP_ECUDA)
		return SD_CUDA_ERR(c, e, "a copy between the GPU and host memory failed");
	return sd_comm_error(c, SMDDP_ETIMEDOUT,
			     i ? "a copy from the GPU to host memory did not finish within %s"
			       : "the stream did not reach this call within %s: is the work queued "
				 "before it stuck?",
			     c->timeout_from);
}

static int flow_need(void *arg, const void *ptr, size_t len)
{
	struct flow *f = arg;
	size_t lo = (size_t)((const char *)ptr - f->S), hi = lo + len;
	cudaError_t e = cudaSuccess;
	int last = f->pc->nu - 1, rc;

	/* up pieces complete in order: the last one covering [lo, hi) */
	for (int u = f->pc->nu - 1; u >= 0; u--)
		if (f->pc->ulo[u] < hi && lo < f->pc->uhi[u]) {
			last = u;
			break;
		}
	rc = sd_cuda_wait_word(f->cu->upw, f->base + (uint32_t)last, f->cu->st, f->c->timeout_ns,
			       &f->cu->stop, NULL, &e);
	return rc ? up_failed(f->c, rc, e, 1) : SMDDP_OK;
}

static void flow_done(void *arg, const void *ptr, size_t len)
{
	struct flow *f = arg;
	size_t lo = (size_t)((const char *)ptr - f->S), hi = lo + len;

	for (int d = 0; d < f->pc->nd; d++) {
		size_t a = lo > f->pc->dlo[d] ? lo : f->pc->dlo[d];
		size_t b = hi < f->pc->dhi[d] ? hi : f->pc->dhi[d];

		if (a < b)
			f->fin[d] += b - a;
	}
	while (f->released < f->pc->nd - 1 &&
	       f->fin[f->released] >= f->pc->dhi[f->released] - f->pc->dlo[f->released])
		sd_cuda_release(f->cu, f->base + (uint32_t)f->released++);
}

/* SMDDP_DEBUG=TRACE: how long after the last release the stream passes
 * the call's end (its wait, the copy down, the event); polled tightly, up
 * to 100 ms, so that the figure is not the wait loop's nap. */
static void trace_end(struct sd_cuda *cu, const struct op *o)
{
	uint64_t t0 = sd_now_ns(), t = t0;
	cudaError_t e = cudaErrorNotReady;

	while (t - t0 < 100000000ull && (e = cudaEventQuery(cu->ev_out[o->slot])) == cudaErrorNotReady)
		t = sd_now_ns();
	SD_TRACE(SD_SUB_COLL, "staged call: the stream passed its end %.1f us after the last release (%s)",
		 (double)(t - t0) / 1e3, e == cudaSuccess ? "done" : cudaGetErrorString(e));
}

int sd_cuda_staged_run(struct sd_cuda *cu, struct op *o, int *one_off)
{
	struct smddp_comm *c = &cu->sh;
	struct plan p;
	cudaError_t e = cudaSuccess;
	int rc;

	c->cur = o->desc;
	c->last_error[0] = 0;
	if (c->check_coll && !o->ch0) {
		c->wire = o->wire + cu->xwire;
		rc = sd_coll_compare(c);
		if (rc) {
			*one_off = rc == SMDDP_EMISMATCH;
			return rc;
		}
	}
	plan_of(&p, c, &o->k, least_chunk(c), cu->stream, cu->stream_chunk);
	p.t0 = o->seq - (uint32_t)(o->ch0 * (size_t)p.per);
	/* Agreed: each chunk but the first takes a number of its own, counted
	 * at the first part. */
	uint64_t wire = o->wire + cu->xwire - (o->ch0 ? p.nch - 1 : 0);

	if (!o->ch0)
		cu->xwire += p.nch - 1;
	for (size_t i = o->ch0; i < o->ch1; i++) {
		const struct chunk ch = chunk_of(cu->stage, &p, i);
		const struct pieces *pc = chunk_pieces(&p, i);
		struct flow f = {cu, c, pc, ch.S, p.t0 + (uint32_t)(i * (size_t)p.per), {0}, 0};

		/* The first piece waits for the stream to reach the call: a
		 * cancel is seen there too (the peers are not involved yet). */
		uint64_t t_wait = sd_now_ns(), t_host;

		rc = sd_cuda_wait_word(cu->upw, f.base, cu->st, c->timeout_ns, &cu->stop,
				       i ? NULL : c, &e);
		if (rc)
			return up_failed(c, rc, e, i);
		c->wire = wire + i;
		t_host = sd_now_ns();
		if (pc->ub[0] >= 0) {
			struct sd_net_stream sm = {flow_need, flow_done, &f};
			char *mine = ch.S + (size_t)p.r * ch.Lb;

			SD_CHECK(sd_net_stream(c, o->k.coll,
					       o->k.coll == SD_COLL_ALLGATHER ? mine : ch.S,
					       o->k.coll == SD_COLL_REDUCE_SCATTER ? mine : ch.S,
					       ch.L, (enum smddp_dtype)o->k.dtype,
					       (enum smddp_op)o->k.op, &sm));
		} else {
			SD_CHECK(host_chunk(c, cu->stage, &p, i));
		}
		sd_cuda_release(cu, f.base + (uint32_t)span_of(pc) - 1);
		/* Where a staged call's time goes (SMDDP_DEBUG=TRACE). */
		SD_TRACE(SD_SUB_COLL, "staged chunk %zu of %zu: %.1f us after the call was queued, "
				      "%.1f us waiting for its copy up, %.1f us on the host collective"
				      " (%d pieces up and down, %d let go early)",
			 i + 1, p.nch, (double)(t_wait - o->made_ns) / 1e3,
			 (double)(t_host - t_wait) / 1e3, (double)(sd_now_ns() - t_host) / 1e3,
			 pc->ub[0] >= 0 ? pc->nu + pc->nd : 1, f.released);
	}
	if (!o->more && __atomic_load_n(&sd_log_level, __ATOMIC_RELAXED) >= SD_LOG_TRACE)
		trace_end(cu, o);
	return SMDDP_OK;
}
