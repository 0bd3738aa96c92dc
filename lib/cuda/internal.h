/* internal.h - what every file of lib/cuda/ shares: a communicator's device state (struct sd_cuda)
 * and the small helpers on it.
 *
 * It declares no function of any file: each file's functions are in its
 * own header (device.h, ipc.h, direct.h, move.h, staged.h, fast.h,
 * proxy.h, state.h), and calls point one way, down this list:
 *   enqueue.c, p2p.c   a call's way onto its stream (the host thread)
 *   state.c            the state and its mode, made and freed
 *   proxy.c            the proxy thread and the host's waits for it
 *   fast.c             kernels that meet the peers (-> direct.c)
 *   direct.c, move.c, staged.c
 *                      large kernels reading the peers' buffers; one proxy
 *                      call (meet, map, move); between hosts
 *   ipc.c              CUDA IPC handles and mappings
 *   device.c           the driver's entry points, buffer checks, waits
 *   internal.h, kernels.h, cuda.h   types, the kernels, the face to lib/core
 * tests/layers/map gives each its rank, so an include that climbs fails
 * tests/layers/check.sh. */
#ifndef SD_CUDA_INTERNAL_H
#define SD_CUDA_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "base/comm-types.h"
#include "cuda/cuda.h"
#include "cuda/kernels.h"

/* A buffer as its owner publishes it. */
struct buf_pub {
	cudaIpcMemHandle_t h;
	uint64_t base, off, id, size;
	int32_t present, pad;
};

#define QCAP 128          /* calls queued at most */
#define OWN_CACHE 64      /* IPC handles of our own allocations */
#define MAP_PER_PEER 32   /* mappings of a peer's allocations kept */
#define PUB_MAGIC 0x43444d53u

struct sd_stage;

/* What each rank puts in its slot for one call. */
struct pub {
	uint32_t magic, call;
	struct sd_coll_desc desc;
	int32_t dev;
	int32_t scratch;     /* in-place alltoall: sends from a private copy */
	int32_t copied;      /* ... made already (else the worker makes it) */
	unsigned char uuid[16]; /* the GPU, to see whether all ranks share one */
	struct buf_pub b[2]; /* sendbuf, recvbuf */
	struct buf_pub s;    /* the private copy, when scratch */
};

/* The scratch buffer's size for need bytes: whole 2 MiB pages (the
 * granularity of device allocations), and a doubling when it grows.  A
 * small cudaMalloc can share its page with another allocation, and a peer
 * that maps both through CUDA IPC gets "resource already mapped"; and a
 * reallocation leaves the peers' mapping of the old one open until their
 * queues drain (ipc.c), which a new allocation on the same page also
 * trips. */
static inline size_t sd_cuda_scratch_size(size_t have, size_t need)
{
	size_t page = (size_t)2 << 20, n = have * 2 > need ? have * 2 : need;

	return (n + page - 1) / page * page;
}

struct op {
	uint32_t call; /* the device call's number on this communicator, the same on
			* every rank (tickets are not: a mode takes its own number);
			* c->dev_calls when it was made */
	uint32_t seq;  /* the value of the release word that lets the stream go */
	uint32_t last; /* ... its last one (staged.c: one per chunk; else seq) */
	uint64_t wire; /* staged.c: the call's first number on the wire */
	size_t ch0, ch1; /* staged.c: the part of the call this op is, chunks [ch0, ch1) */
	int more;        /* ... and chunks past ch1 are later ops */
	uint32_t upto;   /* ... the last ticket its copies up write (past last where more) */
	int staged;    /* between hosts (staged.c), else on one node (move.c) */
	int broken;    /* its queueing failed halfway: release it unrun */
	int queued;    /* one node, queue-and-return: kernels on the user's stream (move.c) */
	int copy_first; /* in-place alltoall: this rank takes its private copy itself */
	struct sd_coll_desc desc;
	struct sd_cuda_call k;
	struct buf_pub b[2]; /* base, off, id, size; h filled by the proxy */
	void *scratch;       /* in-place alltoall: a private copy of the input */
	struct buf_pub sb;   /* ... published, so that one rank may send it */
	int slot;
	uint64_t made_ns; /* sd_now_ns() when the caller queued it: for SD_TRACE */
};

/* What ev_out[s] tells of the last call queued in ring slot s. */
enum out_state {
	OUT_NONE,     /* nothing to wait for */
	OUT_RECORDED, /* its stream passed the call once the event completes */
	OUT_BLIND,    /* its record failed: when the stream passes it cannot be
		       * told, so the slot's memory must never be reused or freed */
};

struct own_entry {
	uint64_t id, base, used;
	cudaIpcMemHandle_t h;
};

struct map_entry {
	int rank;
	uint64_t id, base, used;
	void *ptr;
};

/* The name of a rank's registrations' segment: "/smddp-JOB-HEX", as the
 * shm transport names its own, so that smddp-run removes the segment of a
 * rank that died before its peers had it open (the job id: at most 32
 * characters). */
#define SD_REG_NAME 64

struct sd_cuda {
	int dev;
	cudaStream_t st;        /* the proxy's own, non-blocking */
	cudaEvent_t ev_in[QCAP];  /* recorded on the user's stream at the call */
	cudaEvent_t ev_out[QCAP]; /* ... after its wait: the stream passed it */
	unsigned char out_used[QCAP]; /* enum out_state */
	volatile uint32_t *word;  /* pinned, mapped: the last released ticket */
	CUdeviceptr word_dev;
	volatile uint32_t *upw;   /* staged.c: the last ticket copied up (the stream writes it) */
	CUdeviceptr up_dev;
	uint32_t enq;             /* tickets taken so far (a call takes one, or one per chunk) */
	uint64_t xwire;           /* wire numbers the runs took beyond one per call
				   * (staged.c's chunks), not yet in c->wire */
	cudaStream_t last_st;     /* queued calls: the stream of the last, */
	int last_slot;            /* ... and its ring slot (-1: none) */
	struct sd_stage *stage;   /* staged.c: pinned slots */
	char *args;               /* move.c, queued mode: kernel arguments per ring slot, */
	void *args_gpu;           /* ... pinned, and their copy on the GPU that the kernels read */

	pthread_t thr;
	int thr_started;
	pthread_mutex_t mu;
	pthread_cond_t cv;      /* to the proxy: a call was queued, or stop */
	pthread_cond_t cv_done; /* to the host: a call finished */
	struct op ring[QCAP];
	uint64_t head, tail;    /* proxy takes ring[head], host puts ring[tail] */
	int stop;
	int failed;             /* sticky: the communicator is broken */
	int pending;            /* one-off (EMISMATCH): reported once */
	int abort_asked;        /* the host thread wants the transport aborted (sd_cuda_abort):
				 * 2 after a failure (cu->failed, errmsg), 1 smddp_comm_abort */
	int aborted;            /* ... and the proxy did it */
	char errmsg[1024];

	struct smddp_comm sh;   /* the proxy's copy of the communicator */
	struct own_entry own[OWN_CACHE];
	struct map_entry *maps;
	int nmaps, maxmaps;
	uint64_t tick;
	void *scratch;
	size_t scratch_len;
	int max_blocks;
	int async;              /* calls return once queued (the proxy thread runs) */
	int mode;               /* SMDDP_CUDA_ASYNC: -1 auto, 0 blocking, 1 queue-and-return */
	int decided;            /* async is final (auto waits for the first call) */
	int shared;             /* other ranks on this GPU, as the last call showed */
	int stream;             /* SMDDP_CUDA_STREAM: staged.c streams its chunks */
	size_t stream_chunk;    /* SMDDP_CUDA_STREAM_CHUNK: its largest streamed chunk, 0: quarters */
	/* fast.c: allreduces whose kernels meet the peers themselves */
	int fast_tried;         /* set up (or found impossible) at the first collective */
	int fast_on;            /* every rank maps every window: calls may take the path */
	size_t fast_max;        /* bytes per peer of the largest call that takes it */
	size_t fast_region;     /* bytes of a block's region in an inbox */
	void *fast_win;         /* this rank's window */
	char *fast_peer[SD_CUDA_MAX_RANKS]; /* every rank's window as mapped here */
	struct sd_fast_host *fast_host;     /* pinned: the abort word, the kernels' record */
	struct sd_fast_host *fast_host_dev; /* ... its address on the GPU */
	uint32_t fast_k;        /* fast calls launched (their parity picks the inboxes) */
	uint32_t fast_need[2][SD_FAST_MAXB]; /* the last call per parity and block */
	cudaEvent_t fast_ev;    /* the end of the last fast call */
	int fast_pending;       /* ... recorded */
	int fast_stopped;       /* the abort word is set: the communicator is going */
	uint64_t fast_calls[SD_FAST_ALLTOALL + 1]; /* per collective, for the INFO line at the end */
	struct sd_coll_desc fast_last; /* the last call launched on the fast or direct path (mu):
					* the one the watch names when a peer fails */
	int last_fast;          /* the last call was a fast or direct one (on last_st) */
	/* direct.c: large collectives whose kernels read the peers' buffers */
	int direct_on;          /* every rank publishes and maps registrations */
	struct sd_reg_shm *reg_mine;                 /* our registrations (shared memory) */
	struct sd_reg_shm *reg_peer[SD_CUDA_MAX_RANKS]; /* ... every peer's, read only */
	char reg_name[SD_REG_NAME]; /* our segment's name until it is unlinked */
	struct sd_reg_own *reg_own;                  /* [SD_REG_SLOTS]: what our slots hold */
	uint32_t reg_gen;       /* generations handed out */
	uint32_t direct_k;      /* direct calls launched, */
	uint32_t direct_done_k; /* ... of which known to be done */
	struct sd_reg_tab *reg_tab;     /* pinned [SD_CUDA_MAX_RANKS][SD_REG_SLOTS]: peers mapped here */
	struct sd_reg_tab *reg_tab_dev; /* ... its address on the GPU */
	void **reg_ptr;         /* [SD_CUDA_MAX_RANKS * SD_REG_SLOTS]: the mappings, host side */
	uint32_t reg_seen[SD_CUDA_MAX_RANKS]; /* peers' versions mapped */
	pthread_mutex_t reg_mu; /* the mapping side (host thread and proxy) */
	void *direct_stage;     /* an in-place reduce_scatter's or alltoall's output, */
	size_t direct_stage_len; /* ... before it goes into recvbuf */
	uint64_t direct_calls, direct_maps, direct_waits; /* for the INFO line at the end */
	uint64_t direct_by[SD_FAST_ALLTOALL + 1];         /* ... per collective */
	void **stale;           /* peers' mappings to close once no stream waits */
	int nstale, maxstale;   /* under mu (nstale also read without it) */
	unsigned char uuid[16];
};

/* Lets the streams waiting for tickets up to seq go.  The GPU reads the
 * word over the bus: a plain store, ordered after everything the host side
 * did (its kernels completed before, its host memory written). */
static inline void sd_cuda_release(struct sd_cuda *cu, uint32_t seq)
{
	__atomic_store_n((uint32_t *)cu->word, seq, __ATOMIC_SEQ_CST);
}

/* Host thread: the call in slot s, queued on st, is the last now (its
 * end event recorded, when that could be done); enqueue.c orders a call on
 * another stream after it.  Returns whether the event was recorded. */
static inline int sd_cuda_end_queued(struct sd_cuda *cu, cudaStream_t st, int s)
{
	if (cudaEventRecord(cu->ev_out[s], st) != cudaSuccess) {
		cu->out_used[s] = OUT_BLIND;
		return 0;
	}
	cu->out_used[s] = OUT_RECORDED;
	cu->last_fast = 0;
	cu->last_st = st;
	cu->last_slot = s;
	return 1;
}

/* Host thread, a fast or direct call's kernels launched on st: its
 * description, which the proxy's watch names when a peer fails (fast.c),
 * and its end event, after which a call on another stream goes
 * (sd_cuda_after_last).  A cudaError_t: the event could not be recorded. */
static inline cudaError_t sd_cuda_kernels_launched(const struct smddp_comm *c, struct sd_cuda *cu,
						   cudaStream_t st)
{
	cudaError_t e;

	pthread_mutex_lock(&cu->mu);
	cu->fast_last = c->cur;
	pthread_mutex_unlock(&cu->mu);
	if ((e = cudaEventRecord(cu->fast_ev, st)) != cudaSuccess)
		return e;
	cu->fast_pending = 1;
	cu->last_st = st;
	cu->last_slot = -1;
	cu->last_fast = 1;
	return cudaSuccess;
}

/* The collectives that the kernels of fast.c and direct.c run (each path
 * then takes a call by its size). */
static inline int sd_cuda_kernels_run(int coll)
{
	switch (coll) {
	case SD_COLL_ALLREDUCE:
	case SD_COLL_ALLGATHER:
	case SD_COLL_REDUCE_SCATTER:
	case SD_COLL_BROADCAST:
	case SD_COLL_REDUCE:
	case SD_COLL_ALLTOALL:
		return 1;
	default:
		return 0;
	}
}

static inline size_t dtsize(int dt)
{
	return smddp_dtype_size((enum smddp_dtype)dt);
}

static inline void sd_cuda_ts_after(struct timespec *ts, uint64_t ns)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ns += (uint64_t)ts->tv_nsec;
	ts->tv_sec += (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* A 32-bit tag of what call k is (collective, count, dtype, op, root), which the
 * kernels of fast.c and direct.c compare with their peers': one function,
 * so that a call fast on one rank and direct on another (another count)
 * is told from a match. */
static inline uint32_t sd_cuda_call_tag(const struct sd_cuda_call *k)
{
	uint64_t x = (uint64_t)k->count * 0x9e3779b97f4a7c15ull;

	x ^= (uint64_t)(k->coll * 131 + k->dtype * 17 + k->op) * 0xc2b2ae3d27d4eb4full;
	x ^= (uint64_t)(uint32_t)k->root * 0x165667b19e3779f9ull;
	x ^= x >> 29;
	return (uint32_t)x | 1u;
}

#endif
