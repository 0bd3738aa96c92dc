/* proxy.h - the state of a communicator's device side, shared by the files of the
 * device path: enqueue.c (a call's way onto its stream), state.c (the state and
 * its mode), proxy.c (the proxy thread and the host's waits for it), fast.c and
 * direct.c (kernels that meet the peers), move.c (one proxy call: meet, map,
 * move), staged.c (between hosts), ipc.c (CUDA IPC handles and mappings),
 * device.c (the driver's entry points, buffer checks, waits).  Calls point one
 * way: enqueue -> state -> proxy -> fast, direct, move, staged -> ipc -> device;
 * p2p.c (device sends and receives) uses the state of state.c, ipc.c and
 * device.c. */
#ifndef SD_CUDA_PROXY_H
#define SD_CUDA_PROXY_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "base/comm-types.h"
#include "cuda/cuda.h"
#include "cuda/internal.h"
#include "cuda/kernels.h"

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
	char reg_name[48];      /* our segment's name until it is unlinked */
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

/* Tickets taken past which the next call first starts them over
 * (enqueue.c); a call may take 2^24 of them.  The fake CUDA of the tests
 * lowers it (FAKECUDA_TICKET_LIMIT) to reach that path. */
extern uint32_t sd_cuda_ticket_limit;

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

/* Host thread, a fast or direct call launched: its description, which
 * the proxy's watch names when a peer fails (fast.c). */
static inline void sd_cuda_fast_launched(const struct smddp_comm *c, struct sd_cuda *cu)
{
	pthread_mutex_lock(&cu->mu);
	cu->fast_last = c->cur;
	pthread_mutex_unlock(&cu->mu);
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

/* ---- state.c ---- */

/* Host thread, comm drained: c's device state, made on GPU dev if c has
 * none yet (an existing one keeps its own GPU). */
int sd_cuda_state(struct smddp_comm *c, int dev, struct sd_cuda **out);
/* SMDDP_CUDA_ASYNC: -1 auto, else 0 or 1. */
int sd_cuda_async_param(void);
/* Is the CUDA MPS daemon serving this user? */
int sd_cuda_mps_active(void);
/* SMDDP_CUDA_ASYNC=auto, once the first call showed where the ranks are:
 * queued (the proxy started) unless others share this GPU without MPS. */
int sd_cuda_decide(struct smddp_comm *c, struct sd_cuda *cu);

/* ---- proxy.c ---- */

/* The proxy thread, started (queued mode), stopped (comm_free). */
int sd_cuda_proxy_start(struct smddp_comm *c, struct sd_cuda *cu);
void sd_cuda_proxy_stop(struct sd_cuda *cu);
/* Host thread: every queued call finished, within SMDDP_TIMEOUT + 30 s
 * per call (else the communicator breaks). */
int sd_cuda_drain(struct smddp_comm *c, struct sd_cuda *cu);
/* Host thread, nothing queued: the wire numbers the runs took into c->wire. */
void sd_cuda_fold_wire(struct smddp_comm *c, struct sd_cuda *cu);
/* One call run (the proxy, or the host thread in the blocking mode), its
 * failure recorded for sd_cuda_collect. */
int sd_cuda_run_call(struct smddp_comm *c, struct sd_cuda *cu, struct op *o);

/* Host thread: a queued call on stream st goes after the last queued
 * call (of either path) when that was on another stream. */
cudaError_t sd_cuda_after_last(struct sd_cuda *cu, cudaStream_t st);

/* ---- fast.c ---- */

/* Host thread, nothing queued, c->size > 1 on one node: the window, the
 * exchange and the decision (two steps of the transport's slots, on every
 * rank at its first device collective).  Sets cu->fast_on and cu->shared;
 * mps: the MPS daemon serves this process. */
int sd_cuda_fast_setup(struct smddp_comm *c, struct sd_cuda *cu, int mps);
/* Does call k take the fast path (the same answer on every rank)? */
int sd_cuda_fast_takes(const struct sd_cuda *cu, const struct sd_cuda_call *k);
/* Host thread, call checked (one that sd_cuda_fast_takes): launches it on
 * its stream and returns. */
int sd_cuda_fast_call(struct smddp_comm *c, struct sd_cuda *cu, const struct sd_cuda_call *k);
/* Host thread: a failure the kernels recorded becomes cu->failed, and
 * the peers are told. */
void sd_cuda_fast_collect(struct smddp_comm *c, struct sd_cuda *cu);
/* Any thread: the kernels' failure in words (buf), 0 when none. */
int sd_cuda_fast_async_error(const struct sd_cuda *cu, char *buf, size_t len);
/* Kernels in flight and later ones give up. */
void sd_cuda_fast_stop(struct sd_cuda *cu);

/* Proxy thread: is a fast call in flight; then the peers' health,
 * smddp_comm_cancel and the kernels' record, every SMDDP_LIVENESS_MS. */
int sd_cuda_fast_busy(struct sd_cuda *cu);
void sd_cuda_fast_watch(struct sd_cuda *cu);
/* comm_free: the window (kept where a peer or a stream may still use it). */
void sd_cuda_fast_free(struct smddp_comm *c, struct sd_cuda *cu, int stuck);

/* The proxy thread, or the host thread, breaks the communicator for a
 * failure the kernels cannot see (rc, msg): the kernels give up, the
 * peers are told. */
void sd_cuda_fast_break(struct sd_cuda *cu, int rc, const char *msg);

/* ---- direct.c ---- */

/* Setup (sd_cuda_fast_setup, host thread): our registrations' segment and
 * the table (name into name[48]; 0 when the path is off here), then the
 * peers' segments (names[q]); frees what it made when on is 0. */
int sd_cuda_direct_make(struct smddp_comm *c, struct sd_cuda *cu, char *name);
int sd_cuda_direct_open(struct smddp_comm *c, struct sd_cuda *cu, const char *const *names);
void sd_cuda_direct_setup_done(struct sd_cuda *cu, int on);
/* Does call k take the direct path (the same answer on every rank)? */
int sd_cuda_direct_takes(const struct sd_cuda *cu, const struct sd_cuda_call *k);
/* Host thread, call checked (b: its buffers): launches it and returns. */
int sd_cuda_direct_call(struct smddp_comm *c, struct sd_cuda *cu, const struct sd_cuda_call *k,
			const struct buf_pub b[2]);
/* Proxy thread, while a direct call is in flight: maps the peers' new
 * registrations. A failure (its sentence in msg) breaks the communicator:
 * the caller hands it to sd_cuda_fast_break, so that direct.c never calls
 * up into fast.c. */
int sd_cuda_direct_poll(struct sd_cuda *cu, char *msg, size_t len);
/* comm_free. */
void sd_cuda_direct_free(struct smddp_comm *c, struct sd_cuda *cu, int stuck);

/* ---- device.c ---- */

/* Bytes of sendbuf and recvbuf that call k touches on rank rank. */
void sd_cuda_extents(const struct sd_cuda_call *k, int n, int rank, size_t *sb, size_t *rb);
/* Checks that p is device memory of device *dev (or sets *dev when it is
 * -1) holding bytes bytes, and fills its allocation's base, offset and id. */
int sd_cuda_buffer_info(struct smddp_comm *c, const void *p, size_t bytes, const char *what,
			int *dev, struct buf_pub *b);
/* cuStreamWaitValue32 (GEQ) through the runtime's entry point; a CUresult. */
int sd_cuda_wait32(cudaStream_t st, CUdeviceptr addr, uint32_t value);
/* cuStreamWriteValue32 (after the stream's earlier work, its writes
 * visible first); a CUresult. */
int sd_cuda_write32(cudaStream_t st, CUdeviceptr addr, uint32_t value);
/* Until *w reaches t (a stream wrote it): SMDDP_OK, SMDDP_ECUDA (the
 * context failed, as st shows: *err), SMDDP_ETIMEDOUT after timeout_ns,
 * SMDDP_EABORTED once *stop is set or smddp_comm_cancel is called on
 * cancel_of (NULL: none). */
int sd_cuda_wait_word(const volatile uint32_t *w, uint32_t t, cudaStream_t st, uint64_t timeout_ns,
		      const int *stop, const struct smddp_comm *cancel_of, cudaError_t *err);

/* ---- ipc.c ---- */

/* Our own allocation's IPC handle into b->h (cached by buffer id). */
int sd_cuda_own_handle(struct sd_cuda *cu, struct buf_pub *b);
/* Rank q's buffer b mapped into this process (cached per rank and id). */
int sd_cuda_peer_ptr(struct sd_cuda *cu, int q, const struct buf_pub *b, char **out);
/* A peer's mapping no longer used: closed later by the host thread
 * (sd_cuda_flush_stale). */
int sd_cuda_ipc_retire(struct sd_cuda *cu, void *ptr);
/* Rank pid's allocation b mapped into this process (counted, shared by
 * every communicator); a cudaError_t. */
cudaError_t sd_cuda_ipc_open(pid_t pid, int dev, const struct buf_pub *b, void **out);
/* Host thread: close the mappings retired while calls were queued. */
void sd_cuda_flush_stale(struct sd_cuda *cu);
void sd_cuda_ipc_close(void *ptr);

/* ---- staged.c (between hosts) ---- */

/* Host thread, call checked, o->seq its first ticket: queues the call's
 * copies, waits and ticket writes on its stream; sets o->last and o->wire
 * (taking the call's numbers on the wire from c->wire).  On failure
 * o->broken says whether tickets were taken all the same. */
int sd_cuda_staged_queue(struct smddp_comm *c, struct sd_cuda *cu, struct op *o);
/* The thread that runs calls: the call's host collectives, chunk by chunk,
 * releasing each chunk's ticket; *one_off as sd_cuda_run_op's. */
int sd_cuda_staged_run(struct sd_cuda *cu, struct op *o, int *one_off);
/* The slots (poisoned: the fabric may still write into them: kept). */
void sd_cuda_stage_free(struct sd_cuda *cu, int poisoned);

/* ---- move.c ---- */

/* Host thread, queue-and-return mode, o->seq its first ticket: queues the
 * call on its stream (the private copy of an in-place alltoall, the input
 * event, a wait for o->seq, a copy of its slot of cu->args to the GPU, the
 * kernels, the up word, a wait for o->last) and sets o->last.  On failure
 * o->broken says whether tickets were taken all the same. */
int sd_cuda_queue_kernels(struct smddp_comm *c, struct sd_cuda *cu, struct op *o);
/* One call, start to end, on the thread that runs calls; *one_off is set
 * for a failure that leaves the communicator usable (EMISMATCH). */
int sd_cuda_run_op(struct sd_cuda *cu, struct op *o, int *one_off);

#endif
