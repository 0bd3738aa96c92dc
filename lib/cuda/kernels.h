/* kernels.h - the device kernels of lib/cuda/kernels.cu and kernels-fast.cu, callable from C.
 *
 * One kernel does every data movement of the device collectives: each
 * element i < count is reduced from src[0][i], ..., src[nsrc-1][i], left
 * to right (the order of lib/reduce/, so that every rank and the host path
 * agree), and the result is written to every dst[k][i].  With nsrc == 1 and
 * an op other than AVG it is a copy to ndst places, read once.
 *
 * Semantics are those of sd_reduce() (lib/reduce/reduce.h): integer SUM and PROD
 * wrap; fp16 and bf16 reduce in float and round once to nearest even; AVG is
 * the sum divided by avg_div (floats in their accumulation type, integers
 * the wrapped sum divided truncating toward zero).  A dst may be one of the
 * srcs (each thread reads an element from every source before it writes
 * it); partial overlaps are the caller's to avoid.
 */
#ifndef SD_CUDA_KERNELS_H
#define SD_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define SD_HD __host__ __device__
#else
#define SD_HD
#endif

#define SD_CUDA_MAX_RANKS 32 /* sources and destinations of one launch */

struct sd_cuda_kargs {
	const void *src[SD_CUDA_MAX_RANKS];
	void *dst[SD_CUDA_MAX_RANKS];
	int nsrc, ndst;
	size_t count; /* elements */
	int div;      /* the *_at launch: the AVG divisor; */
	int ntasks;   /* ... in its first task: how many tasks it has */
};

/* npairs copies of bytes bytes each, src[k] to dst[k] (the *_at launch). */
struct sd_cuda_kpairs {
	const void *src[SD_CUDA_MAX_RANKS];
	void *dst[SD_CUDA_MAX_RANKS];
	int npairs, pad;
	size_t bytes;
};

/* Launches the kernel on stream (a cudaStream_t) with at most max_blocks
 * blocks (0: sized from the device).  Returns a cudaError_t (0: queued). */
int sd_cuda_kernel_reduce(const struct sd_cuda_kargs *a, int dtype, int op, int avg_div,
			  void *stream, int max_blocks);

/* npairs copies of bytes bytes each, src[k] to dst[k], in one launch. */
int sd_cuda_kernel_copy_pairs(const void *const *src, void *const *dst, int npairs, size_t bytes,
			      void *stream, int max_blocks);

/* The same kernels with their arguments read when they run, not when they
 * are launched: the launch is queued behind a wait on the stream, and the
 * arguments (the peers' buffers) are known only once the proxy has met the
 * peers (proxy.c).  tasks and groups point into device memory, which the
 * stream fills before the launch (a copy from the proxy's pinned memory:
 * move.c says why not the pinned memory itself).  reduce_at: ntasks
 * reductions, task i of up to max_count elements (a task with nsrc 0 does
 * nothing); pairs_at: ngroups groups of up to max_pairs pairs of up to
 * max_bytes bytes.  The tasks
 * run one after the other, each on the whole grid (most calls have one:
 * a rank's own share); tasks[0].ntasks says how many there are.  Returns a
 * cudaError_t. */
int sd_cuda_kernel_reduce_at(const struct sd_cuda_kargs *tasks, int ntasks, size_t max_count,
			     int dtype, int op, void *stream, int max_blocks);
int sd_cuda_kernel_pairs_at(const struct sd_cuda_kpairs *groups, int ngroups, int max_pairs,
			    size_t max_bytes, void *stream, int max_blocks);

/* Loads every kernel of this file into the current device's context.
 * With lazy module loading (CUDA's default since 12.2) the first launch of
 * a kernel loads it, and loading waits for the whole context: a launch by
 * the proxy while the user's stream waits on the proxy's word
 * (SMDDP_CUDA_ASYNC) never returns.  So they are loaded before any stream
 * is made to wait.  Returns a cudaError_t. */
int sd_cuda_kernels_load(void);


/* ---- the fast path: kernels that meet their peers themselves (fast.c) ----
 *
 * Every rank of a communicator on one node has one window of device
 * memory, mapped by every other rank through CUDA IPC once, when the
 * communicator's first device call sets the path up (lib/cuda/fast.c).
 * A window holds flags and, per parity of the fast call's index (calls
 * alternate between two sets) and per sending rank, an inbox of
 * SD_FAST_MAXB regions, one per block of the kernel.  One kernel serves
 * every collective: what a block pushes to a peer and what it makes of
 * its inbox depend on the collective (a.coll), the protocol does not.
 * With L = a.count elements (the count each rank sends one peer: the
 * allreduce's, broadcast's and reduce's count, the allgather's and
 * reduce_scatter's per-rank count, the alltoall's per-peer count), block
 * b owns elements [b * per, (b + 1) * per) of L, per = region / element
 * size.  Block b of rank r, in call s:
 *   1. waits until every peer q has consumed what r pushed into q's
 *      inbox region b of this parity before (consumed[par][q][b] in r's
 *      window reaches need[b]);
 *   2. copies its chunk b for q into region b of its inbox in every
 *      peer q's window (allreduce, allgather: sendbuf's chunk b; broadcast:
 *      the root's buffer's, from the root only; reduce: to the root only;
 *      reduce_scatter, alltoall: chunk b of sendbuf's block q; nothing
 *      where nothing goes), then stores (tag << 32 | s) into
 *      arrive[par][r][b] of every peer's window (after a system fence),
 *      whether it pushed data there or not;
 *   3. waits until arrive[par][q][b] of its own window holds s for every
 *      peer q (a later call number or another tag is a mismatch);
 *   4. makes chunk b of its output from its own input and its inbox:
 *      allreduce, reduce (the root), reduce_scatter reduce the ranks'
 *      chunks in rank order (its own from sendbuf, the peers' from its
 *      inbox), so that every rank gets the same bits; allgather and
 *      alltoall copy rank q's chunk into block q of recvbuf (its own from
 *      sendbuf, unless in place), broadcast copies the root's into buf;
 *   5. stores s into consumed[par][r][b] of every peer's window.
 * Step 2 of a block reads only its own chunks of sendbuf, and step 4
 * writes only its own chunks of recvbuf, after its step 2: so every in
 * place layout of the API is safe.  Each wait polls its own GPU's memory
 * and, every few thousand polls, the deadline (SMDDP_TIMEOUT from the
 * kernel's start, %globaltimer), the host's abort word and the peers'
 * "gave up" words: a failure is written once into the host record (the
 * first one wins), the rank's own "gave up" word is set, and the kernel
 * ends with its output undefined.
 */
#define SD_FAST_MAXB 32              /* blocks of a fast kernel at most */
#define SD_FAST_FLAGS ((size_t)80 << 10) /* the flags' part of a window (and the direct path's cache) */
#define SD_FAST_GAVEUP ((size_t)48 << 10) /* offset of the "gave up" word */

/* The collectives of the fast path: enum sd_coll's values (fast.c checks
 * that they agree), named here for the kernels, which see no lib/base. */
enum sd_fast_coll {
	SD_FAST_ALLREDUCE,
	SD_FAST_ALLGATHER,
	SD_FAST_REDUCE_SCATTER,
	SD_FAST_BROADCAST,
	SD_FAST_REDUCE,
	SD_FAST_ALLTOALL,
};

/* What a failing kernel tells the host (fast.c words it). */
enum sd_fast_err {
	SD_FAST_OK,
	SD_FAST_TIMEOUT,  /* peer did not arrive (or consume) within the deadline */
	SD_FAST_AHEAD,    /* peer's flag holds a later call number: it made more calls */
	SD_FAST_DESC,     /* peer's call has another tag: count, dtype or op differ */
	SD_FAST_GAVE_UP,  /* peer gave up (its own failure) */
	SD_FAST_ABORTED,  /* the host asked (abort, destroy, cancel, a failure it saw) */
	SD_FAST_UNMAPPED, /* direct: the peer's buffer was not mapped here in time */
};

/* Pinned host memory, mapped into the GPU: one per communicator. */
struct sd_fast_host {
	volatile uint32_t abort; /* host -> kernels: give up (nonzero) */
	uint32_t pad0[15];
	volatile uint32_t code;  /* kernels -> host: enum sd_fast_err of the first failure */
	volatile uint32_t call;  /* ... in this call, */
	volatile int32_t peer;   /* ... waiting on this rank, */
	volatile uint32_t theirs; /* ... whose flag held this call number */
	volatile uint32_t phase; /* 1: its consumption, 3: its arrival */
	volatile uint32_t coll;  /* ... of this collective (enum sd_coll) */
	uint32_t pad1[10];
};

struct sd_fast_args {
	char *win[SD_CUDA_MAX_RANKS]; /* every rank's window, as mapped here */
	const void *send;
	void *recv;
	size_t count;                 /* elements */
	size_t region;                /* bytes of a block's region (a multiple of 64) */
	uint64_t timeout_ns;
	struct sd_fast_host *host;    /* its device address */
	int nranks, rank, nblocks, par;
	int coll, root;               /* enum sd_coll; broadcast's and reduce's root */
	uint32_t call, tag;
	uint32_t need[SD_FAST_MAXB];  /* step 1's call number per block (0: none) */
};

/* Offsets in a window of n ranks with regions of region bytes. */
static inline SD_HD size_t sd_fast_arrive_off(int n, int par, int q, int b)
{
	return (((size_t)par * (size_t)n + (size_t)q) * SD_FAST_MAXB + (size_t)b) * 8;
}
static inline SD_HD size_t sd_fast_consumed_off(int n, int par, int q, int b)
{
	return ((size_t)16 << 10) + (((size_t)par * (size_t)n + (size_t)q) * SD_FAST_MAXB + (size_t)b) * 4;
}
static inline SD_HD size_t sd_fast_inbox_off(int n, size_t region, int par, int q, int b)
{
	return SD_FAST_FLAGS + (((size_t)par * (size_t)n + (size_t)q) * SD_FAST_MAXB + (size_t)b) * region;
}
static inline SD_HD size_t sd_fast_window_bytes(int n, size_t region)
{
	return sd_fast_inbox_off(n, region, 2, 0, 0);
}

/* Launches the fast collective a->coll of a (a->nblocks blocks; op is
 * ignored by the collectives that copy).  Returns a cudaError_t. */
int sd_cuda_kernel_fast(const struct sd_fast_args *a, int dtype, int op, void *stream);

/* Loads the kernels of kernels-fast.cu (sd_cuda_kernels_load calls it). */
int sd_cuda_kernels_load_fast(void);

/* ---- the direct path: kernels that read the peers' own buffers (direct.c) ----
 *
 * A collective larger than the fast path's reads (or writes) the peers'
 * user buffers through CUDA IPC mappings made once per allocation (a
 * registration: rank r's slot j of SD_REG_SLOTS holds one of r's
 * allocations, with a generation g unique on r).  Two kernels on the
 * stream, call s, tag t, rank r:
 *   k_direct_meet, one warp (the only wait that lasts while a peer is
 *   late, so that it holds next to nothing of the GPU):
 *   1. writes (t << 32 | s) and where its sendbuf and recvbuf are
 *      ((slot, generation, offset) each) into ann[r] of every peer's
 *      window (the fields first, a system fence, then the word);
 *   2. waits until ann[q] of its own window holds s for every peer q (a
 *      later call or another tag is a mismatch), then until its host has
 *      mapped q's slot with that generation (the table in pinned memory
 *      that the host thread fills before the launch, or the proxy thread
 *      while the kernel waits; an entry met once is kept in the window's
 *      cache, so that a hit reads no host memory), and writes the peers'
 *      pointers into its own window;
 *   3. writes s into the go word (or, on a failure, the record);
 *   k_direct, every block, once go holds s (else it ends at once):
 *   4. moves its part of what rank r moves: allreduce, its slice (1/n of
 *      the elements) of every rank's sendbuf reduced in rank order into
 *      every rank's recvbuf; reduce, the same into the root's recvbuf
 *      only; broadcast, its slice of the root's buffer into every other
 *      rank's; allgather, its own sendbuf into block r of every rank's
 *      recvbuf (its own too, unless in place); reduce_scatter, block r
 *      of every rank's sendbuf reduced in rank order into out; alltoall,
 *      block r of rank q's sendbuf into block q of out, for every q.
 *      reduce_scatter and alltoall read the peers' sendbufs only and
 *      write only out: this rank's recvbuf, or a stage of the host's
 *      when recvbuf overlaps what the peers read of its sendbuf (in
 *      place), which the host copies into recvbuf behind the kernel;
 *   5. the last block to finish (a counter in the window) stores s into
 *      done[r] of every peer's window and waits until done[q] of its own
 *      holds s for every peer: then nobody reads its sendbuf or writes
 *      its recvbuf any more, and the kernel ends.
 * The waits poll local memory, with the fast path's checks (deadline,
 * abort word, "gave up" words) and its record of a failure, and nap
 * between polls once they have waited long.  The fast kernel writes
 * ann[r]'s word too, so that a call that is fast on one rank and direct
 * on another (another count) is a mismatch, not a wait until the
 * deadline.
 */
#define SD_REG_SLOTS 32 /* allocations of a rank registered at once */
#define SD_DIRECT_ANN ((size_t)32 << 10)   /* ann[q], 64 bytes each */
#define SD_DIRECT_DONE ((size_t)34 << 10)  /* done[q], 4 bytes each */
#define SD_DIRECT_GO ((size_t)35 << 10)    /* the go word (local) */
#define SD_DIRECT_COUNT (SD_DIRECT_GO + 64) /* blocks finished (local) */
#define SD_DIRECT_PTRS ((size_t)36 << 10)  /* [q][2]: the peers' send, recv (local) */
#define SD_DIRECT_CACHE ((size_t)64 << 10) /* [q][slot]: the table's entries met (local) */

struct sd_direct_ann {
	uint64_t word; /* tag << 32 | call */
	uint64_t soff, roff;
	uint32_t sj, sg, rj, rg;
	uint32_t pad[6];
};

/* Pinned host memory, mapped into the GPU: what this rank has mapped of
 * every peer's slots ([rank][slot]).  gen is stored (release) after ptr. */
struct sd_reg_tab {
	volatile uint64_t ptr;
	volatile uint32_t gen;
	uint32_t pad;
};

struct sd_direct_args {
	char *win[SD_CUDA_MAX_RANKS];
	const void *send;
	void *recv;
	void *out;                  /* reduce_scatter, alltoall: where the output goes (step 4) */
	size_t count;               /* elements */
	uint64_t timeout_ns;
	struct sd_fast_host *host;  /* device address */
	struct sd_reg_tab *tab;     /* device address of [SD_CUDA_MAX_RANKS][SD_REG_SLOTS] */
	uint64_t soff, roff;        /* offsets in this rank's own slots */
	uint32_t sj, sg, rj, rg;    /* this rank's slots and their generations */
	int nranks, rank;
	int share;                  /* ranks on this GPU (1: only this one) */
	int coll, root;             /* enum sd_fast_coll; broadcast's and reduce's root */
	uint32_t call, tag;
};

/* The slice of n ranks' allreduce of count elements of es bytes that rank
 * r reduces: [*lo, *lo + return value). */
static inline SD_HD size_t sd_direct_slice(size_t count, size_t es, int n, int r, size_t *lo)
{
	size_t q = 64 / es, per = (count + (size_t)n - 1) / (size_t)n;

	per = (per + q - 1) / q * q;
	*lo = per * (size_t)r;
	if (*lo >= count) {
		*lo = count;
		return 0;
	}
	return count - *lo < per ? count - *lo : per;
}

/* The elements that rank r of n moves in a direct call of collective
 * coll (count elements, of es bytes: per rank for an allgather and a
 * reduce_scatter, per peer for an alltoall): its own input for an
 * allgather, its own output for a reduce_scatter, a block (per peer) for
 * an alltoall, else its slice. */
static inline SD_HD size_t sd_direct_part(int coll, size_t count, size_t es, int n, int r,
					  size_t *lo)
{
	if (coll == SD_FAST_ALLGATHER || coll == SD_FAST_REDUCE_SCATTER || coll == SD_FAST_ALLTOALL) {
		*lo = 0;
		return count;
	}
	return sd_direct_slice(count, es, n, r, lo);
}

/* Launches the direct collective a->coll of a, its two kernels (op:
 * ignored by allgather, broadcast and alltoall).  Returns a cudaError_t. */
int sd_cuda_kernel_direct(const struct sd_direct_args *a, int dtype, int op, void *stream);

#ifdef __cplusplus
}
#endif
#endif
