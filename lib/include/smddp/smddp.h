/* smddp.h - public API of libsmddp, collective communication for distributed training.
 *
 * Every call returns 0 (SMDDP_OK) or a positive enum smddp_result.  After a
 * failure, smddp_last_error() on the communicator gives a sentence saying what
 * failed, on which rank, with which peer and what to try.  The library never
 * prints to stdout, never exits and never kills its host process.
 *
 * Memory: host memory with stream == NULL: the call returns when done.
 * CUDA device memory (cudaMalloc) in builds configured --with-cuda, with
 * stream a cudaStream_t (NULL: CUDA's legacy default stream): the call is
 * ordered on the stream, after the work queued on it before and before the
 * work queued after it (see smddp(3) for when it returns and how a failure
 * of a queued call is reported).  Every buffer of a call is host or device
 * memory, not both (SMDDP_EINVAL); host memory with a stream, or device
 * memory in a build without CUDA, is SMDDP_EUNSUPPORTED.
 *
 * In place: sendbuf == recvbuf; for allgather sendbuf == recvbuf + rank*count
 * (in bytes of the dtype); for reduce_scatter sendbuf == recvbuf or
 * recvbuf == sendbuf + rank*recvcount.  count is in elements: per rank for
 * allgather's input and reduce_scatter's output, per peer for alltoall.
 *
 * Thread safety: one thread at a time per communicator; distinct
 * communicators may be used from distinct threads.  The exception is
 * smddp_comm_get_async_error(), which any thread may call at any time.
 */
#ifndef SMDDP_SMDDP_H
#define SMDDP_SMDDP_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SMDDP_VERSION_MAJOR 0
#define SMDDP_VERSION_MINOR 1
#define SMDDP_VERSION_PATCH 0

/* Result codes.  The values are pinned and never reused. */
enum smddp_result {
	SMDDP_OK = 0,
	SMDDP_EINVAL = 1,       /* bad argument */
	SMDDP_ENOMEM = 2,       /* out of memory */
	SMDDP_ESYSTEM = 3,      /* a system call failed */
	SMDDP_ETIMEDOUT = 4,    /* a wait passed SMDDP_TIMEOUT */
	SMDDP_EPEER = 5,        /* a peer rank died or misbehaved */
	SMDDP_EMISMATCH = 6,    /* ranks called different collectives or arguments */
	SMDDP_EUNSUPPORTED = 7, /* not supported by this build or this memory */
	SMDDP_ECUDA = 8,        /* a CUDA call failed */
	SMDDP_ENETWORK = 9,     /* the network failed */
	SMDDP_EABORTED = 10,    /* the communicator was aborted */
	SMDDP_ECONFIG = 11,     /* bad configuration file or environment */
	SMDDP_EINTERNAL = 12    /* a bug in libsmddp: please report it */
};

enum smddp_dtype {
	SMDDP_INT8 = 0,
	SMDDP_UINT8 = 1,
	SMDDP_INT32 = 2,
	SMDDP_UINT32 = 3,
	SMDDP_INT64 = 4,
	SMDDP_UINT64 = 5,
	SMDDP_FLOAT16 = 6,
	SMDDP_BFLOAT16 = 7,
	SMDDP_FLOAT32 = 8,
	SMDDP_FLOAT64 = 9
};
#define SMDDP_NUM_DTYPES 10

/* AVG divides after the sum: floats exactly so (fp16 and bf16 in float, then
 * rounded to nearest even); integers take the wrapped sum and divide it by the
 * number of ranks, truncating toward zero. */
enum smddp_op {
	SMDDP_SUM = 0,
	SMDDP_PROD = 1,
	SMDDP_MIN = 2,
	SMDDP_MAX = 3,
	SMDDP_AVG = 4
};
#define SMDDP_NUM_OPS 5

struct smddp_comm; /* opaque */

/* Create the world communicator from the environment (see smddp(7)). */
int smddp_init(struct smddp_comm **comm);
/* Collective over comm: ranks with the same color form a new communicator,
 * ordered by key then by rank.  A negative color gives *out = NULL. */
int smddp_comm_split(struct smddp_comm *comm, int color, int key, struct smddp_comm **out);
/* Collective: wait for every rank, then free everything. */
int smddp_comm_destroy(struct smddp_comm *comm);
/* Local: never blocks; peers waiting on this rank fail with SMDDP_EABORTED.
 * Frees comm, like smddp_comm_destroy: do not use it afterwards. */
int smddp_comm_abort(struct smddp_comm *comm);
/* Local, never blocks, callable at any time from any thread, even while
 * another thread is inside a call on comm (what a framework's abort needs
 * before it can join its communication thread): the call in progress
 * ends with SMDDP_EABORTED within about SMDDP_LIVENESS_MS of sleep (or
 * once its spin ends; past the first step of a collective inside a node,
 * once the peers that may write into its buffers arrive, for at most 10 s
 * more), and so does every later call; the communicator is
 * then broken, and its peers are told when that call fails.  It does not
 * free comm: once no call on it is in progress, free it with
 * smddp_comm_abort.  Not to be called during or after smddp_comm_abort,
 * smddp_comm_destroy or smddp_comm_release of comm.  Device work already
 * queued on a stream ends as an aborted call would (smddp(3)).
 * SMDDP_EINVAL: comm is NULL. */
int smddp_comm_cancel(struct smddp_comm *comm);
/* Local, never blocks, callable at any time from any thread, even while
 * another thread is inside a call on comm (NCCL's ncclCommGetAsyncError):
 * *async_error is the failure of work queued on comm that no call has
 * returned yet, or that broke the communicator (a dead peer, a timeout, a
 * mismatch met by a device call that had returned already), else
 * SMDDP_OK.  It never writes comm: the sentence of a failure of queued
 * work is kept for the calling thread, and smddp_last_error(comm) on this
 * thread gives it until this thread's next call on comm (any function
 * that takes comm, smddp_comm_get_async_error included); other threads
 * still see the sentence of comm's last failed call.  A communicator
 * broken by a call on the host gives that call's sentence, as before.
 * Returns SMDDP_EINVAL when comm or async_error is NULL, else SMDDP_OK. */
int smddp_comm_get_async_error(struct smddp_comm *comm, int *async_error);
/* How a collective on device memory returns on comm (smddp(3): Device
 * memory), for a caller that hands calls to a thread only where they may
 * block (a framework's backend, as NCCL's are issued from the training
 * thread): *mode is SMDDP_CUDA_QUEUED when smddp_allreduce, _allgather,
 * _reduce_scatter, _broadcast, _reduce and _alltoall on device memory return
 * once queued on their stream (a failure on the GPU is then reported by
 * smddp_comm_get_async_error() and the next call), SMDDP_CUDA_BLOCKING when
 * they return once done, SMDDP_CUDA_UNDECIDED while SMDDP_CUDA_ASYNC=auto
 * has not decided yet (before the first device collective on comm, which
 * returns once done and decides).  A decided mode never changes.  Sends,
 * receives, smddp_alltoallv, smddp_gather and smddp_scatter on device memory
 * return once done in every mode.  Builds without CUDA: SMDDP_CUDA_BLOCKING.
 * Local, never blocks; one thread at a time, like the calls.  SMDDP_EINVAL:
 * comm or mode is NULL. */
#define SMDDP_CUDA_UNDECIDED (-1)
#define SMDDP_CUDA_BLOCKING 0
#define SMDDP_CUDA_QUEUED 1
int smddp_comm_get_cuda_mode(const struct smddp_comm *comm, int *mode);
/* ---- explicit initialisation (man 3 smddp: INITIALISATION) ----------------
 * For programs that know their rank and size and have their own way to pass
 * a few bytes to every rank (a key-value store, MPI_Bcast, a file), as with
 * NCCL's ncclGetUniqueId: one rank calls smddp_get_unique_id(), every rank
 * gets a copy of the id, and every rank calls smddp_comm_init_rank() with it.
 * Nothing is read from rank variables or MASTER_ADDR/MASTER_PORT, and the
 * process environment is never written.  The rank that made the id must be
 * rank 0 of the new communicator: the id holds the address and port of a
 * socket it already listens on (ephemeral port, every interface), an address
 * of this host for the others to reach it (SMDDP_BOOT_ADDR, else the first
 * non-loopback IPv4 interface that is up, else loopback) and a random token
 * that keeps strangers out.  An id serves one communicator; one never used
 * keeps its socket until the process exits. */
#define SMDDP_UNIQUE_ID_BYTES 128
struct smddp_unique_id {
	char internal[SMDDP_UNIQUE_ID_BYTES];
};

/* Options of smddp_comm_init_rank(); NULL for the defaults.  Set size to
 * sizeof(struct smddp_config) (fields may be added at the end), others 0. */
struct smddp_config {
	size_t size;
	int timeout_ms; /* deadline of every wait, rendezvous included; 0: SMDDP_TIMEOUT */
};

int smddp_get_unique_id(struct smddp_unique_id *id);
/* Collective over the nranks ranks given the same id: rank is this
 * process's rank in the new communicator (0 on the process that made the
 * id).  Errors as smddp_init(); the sentence is in smddp_last_error(NULL). */
int smddp_comm_init_rank(struct smddp_comm **comm, int nranks, const struct smddp_unique_id *id,
			 int rank, const struct smddp_config *config);
/* smddp_comm_split with options for the new communicator, as NCCL's
 * ncclCommSplit takes a config: config->timeout_ms, when positive, is the
 * deadline of its waits instead of the parent's (0 or a NULL config: the
 * parent's).  The split itself waits with the parent's.  The config is
 * checked on each rank before the split (SMDDP_EINVAL: a negative
 * timeout_ms, a size below sizeof(size_t)), so pass the same on every
 * rank. */
int smddp_comm_split_config(struct smddp_comm *comm, int color, int key,
			    const struct smddp_config *config, struct smddp_comm **out);
/* Local: frees comm at once, without waiting for the other ranks, who take
 * this rank's leaving as normal (not as a death, unlike smddp_comm_abort).
 * For callers that tear communicators down in no agreed order; call it
 * only once this rank's calls on comm have all returned.  It first waits
 * for the device work queued on comm: if that met a failure that no call
 * has returned yet, comm is aborted and freed all the same, and the
 * failure is returned, its sentence in smddp_last_error(NULL).  A comm
 * that an earlier call broke is aborted, and SMDDP_OK returned (that call
 * returned the failure); one cancelled (smddp_comm_cancel) and not broken
 * by a call since is aborted, and SMDDP_EABORTED returned.  SMDDP_EINVAL:
 * comm is NULL. */
int smddp_comm_release(struct smddp_comm *comm);

/* ---- shrinking around dead ranks (man 3 smddp: Shrinking) -----------------
 * Every surviving rank of comm calls smddp_comm_shrink() with the same set
 * of ranks to exclude (in any order); the excluded ranks do not call it.
 * *out is a new communicator of the survivors, ranked in their order in
 * comm, with comm's settings and deadline.  No new launch is needed and
 * nothing of comm's rank 0 is: the lowest survivor coordinates, at an
 * address every rank learnt when comm was made.  It works on a communicator
 * broken by a dead peer and on a healthy one; comm takes no calls after it
 * and is freed with smddp_comm_abort() (or smddp_comm_destroy(), local then).
 * flags: SMDDP_SHRINK_DEFAULT: no other thread is inside a call on comm;
 * device work queued on comm runs first (failing at once where a peer is
 * dead), then comm is broken (SMDDP_EABORTED) and the peers told, so that
 * an excluded rank still alive fails its calls on comm at once.
 * SMDDP_SHRINK_ABORT: a call of another thread may be in progress on comm:
 * it is cancelled first (smddp_comm_cancel) and fails within about
 * SMDDP_LIVENESS_MS.  Errors: SMDDP_EINVAL (bad flags, no rank, a rank out
 * of range or twice, the caller's own rank, every rank), SMDDP_EMISMATCH
 * (survivors passed different sets), SMDDP_EPEER (a survivor died during
 * the shrink: call it again without that rank too), SMDDP_ETIMEDOUT (a
 * survivor never came, within comm's deadline), SMDDP_EUNSUPPORTED (comm
 * has one rank, or the coordinator could not listen); the sentence is in
 * smddp_last_error(comm).  A failed shrink may be called again on comm. */
#define SMDDP_SHRINK_DEFAULT 0
#define SMDDP_SHRINK_ABORT 1
int smddp_comm_shrink(struct smddp_comm *comm, const int *exclude, int nexclude, int flags,
		      struct smddp_comm **out);

int smddp_comm_rank(const struct smddp_comm *comm);
int smddp_comm_size(const struct smddp_comm *comm);
int smddp_comm_local_rank(const struct smddp_comm *comm);
int smddp_comm_local_size(const struct smddp_comm *comm);

int smddp_allreduce(const void *sendbuf, void *recvbuf, size_t count, enum smddp_dtype dtype,
		    enum smddp_op op, struct smddp_comm *comm, void *stream);
int smddp_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, enum smddp_dtype dtype,
		    struct smddp_comm *comm, void *stream);
int smddp_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
			 enum smddp_dtype dtype, enum smddp_op op, struct smddp_comm *comm,
			 void *stream);
int smddp_broadcast(void *buf, size_t count, enum smddp_dtype dtype, int root,
		    struct smddp_comm *comm, void *stream);
int smddp_reduce(const void *sendbuf, void *recvbuf, size_t count, enum smddp_dtype dtype,
		 enum smddp_op op, int root, struct smddp_comm *comm, void *stream);
int smddp_alltoall(const void *sendbuf, void *recvbuf, size_t count, enum smddp_dtype dtype,
		   struct smddp_comm *comm, void *stream);
int smddp_barrier(struct smddp_comm *comm);

/* ---- point to point, uneven and rooted exchanges (man 3 smddp) -----------
 * smddp_send() blocks until the matching smddp_recv() on peer has taken the
 * data, or for a short message (up to 4 KiB inside a node, 64 KiB between
 * hosts) until it is handed over; either way the buffer is then free
 * (NCCL's contract: a rank that sends to and receives from the same peers
 * at once must put the calls in a group).  Messages from one sender
 * to one receiver with the same tag (0 .. SMDDP_TAG_MAX) match in the order
 * they were sent, whatever other tags do; a receive whose count differs
 * from the send's is SMDDP_EMISMATCH naming both ranks, on the receiver
 * (and, inside one node, on a sender of more than 4 KiB, which waits for
 * the receiver).  A send to this rank itself is allowed only in a group
 * that holds the matching receive.  Device buffers take the stream as
 * every call does. */
#define SMDDP_TAG_MAX 0x7fffffff
#define SMDDP_ANY_SOURCE (-1)
int smddp_send(const void *buf, size_t count, enum smddp_dtype dtype, int peer, int tag,
	       struct smddp_comm *comm, void *stream);
/* peer SMDDP_ANY_SOURCE takes the first message with this tag from anyone;
 * *source (may be NULL) gets the sender's rank.  With a group, *source is
 * written at smddp_group_end(). */
int smddp_recv(void *buf, size_t count, enum smddp_dtype dtype, int peer, int tag, int *source,
	       struct smddp_comm *comm, void *stream);
/* Groups, per thread, nestable: sends and receives called between the
 * outermost start and its end are only recorded (their buffers must stay
 * valid), then run together by smddp_group_end(), which returns when all
 * are done (or the first error; the others of that communicator then fail
 * too).  That is what lets a rank exchange with several peers at once
 * without deadlock.  Each communicator's calls run as one batch, the
 * communicators one after another in an order all ranks agree on, so a
 * group may span communicators as NCCL's do (rank 0 receives on A and
 * sends on B, rank 1 the opposite) as long as every rank groups the same
 * calls together.  A receive may write a send's buffer of the same group
 * (an exchange in place): that send goes from a copy.  Other calls inside
 * a group run when called. */
int smddp_group_start(void);
int smddp_group_end(void);

/* All-to-all of uneven blocks: rank r sends sendcounts[q] elements at
 * sendbuf + sdispls[q] (in elements) to rank q, and receives recvcounts[q]
 * at recvbuf + rdispls[q] from rank q; recvcounts[q] on r must equal
 * sendcounts[r] on q (else SMDDP_EMISMATCH).  Not in place. */
int smddp_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
		    void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
		    enum smddp_dtype dtype, struct smddp_comm *comm, void *stream);
/* Gather: root receives count elements from every rank q at recvbuf +
 * q*count (recvbuf is ignored elsewhere).  Scatter: rank q receives the
 * count elements at the root's sendbuf + q*count (sendbuf is ignored
 * elsewhere).  In place on the root: sendbuf == recvbuf + root*count
 * (gather), recvbuf == sendbuf + root*count (scatter). */
int smddp_gather(const void *sendbuf, void *recvbuf, size_t count, enum smddp_dtype dtype,
		 int root, struct smddp_comm *comm, void *stream);
int smddp_scatter(const void *sendbuf, void *recvbuf, size_t count, enum smddp_dtype dtype,
		  int root, struct smddp_comm *comm, void *stream);

/* ---- flight recorder (man 3 smddp: FLIGHT RECORDER) ------------------------
 * Every communicator remembers its last SMDDP_TRACE_ENTRIES calls (sequence
 * number, collective, count, dtype, op, root, state, start and end time, the
 * ranks a failed call waited for).  With SMDDP_TRACE_DIR set, each process
 * writes them there as JSON lines (smddp-trace.<job>.<rank>.jsonl, every
 * communicator of the process in one file, replaced at each dump) when a
 * call fails, on SIGUSR1 with SMDDP_TRACE_SIGNAL=1, and when this is called;
 * smddp-trace(1) reads the files of all ranks.  Local: never blocks on other
 * ranks.  SMDDP_ECONFIG: no SMDDP_TRACE_DIR, or the recorder is off;
 * SMDDP_ESYSTEM: the file could not be written. */
int smddp_comm_dump(struct smddp_comm *comm);

/* "Invalid argument" and so on; never NULL. */
const char *smddp_strerror(int result);
/* The detail of the last failure on comm (or, when comm is NULL, of this
 * thread's last failure that no communicator holds: of smddp_init or
 * smddp_comm_init_rank, of a call given no comm, of smddp_comm_release,
 * whose comm is gone); "" when there was none.  On a thread
 * whose smddp_comm_get_async_error(comm) last reported a failure of queued
 * work, and that has made no call on comm since, that failure's sentence. */
const char *smddp_last_error(const struct smddp_comm *comm);
/* "0.1.0" */
const char *smddp_version(void);

/* Size in bytes of one element of dtype, 0 for an unknown dtype. */
size_t smddp_dtype_size(enum smddp_dtype dtype);
/* "float32", "sum" ...; NULL when out of range.  Names are those of the
 * tools' -d and -o flags. */
const char *smddp_dtype_name(enum smddp_dtype dtype);
const char *smddp_op_name(enum smddp_op op);

/* ---- node topology (man 3 smddp_topo, man 5 smddp-topo.json) -------------
 * What this node has: CPU sockets, cores and NUMA nodes, GPUs (PCI bus id,
 * memory, NUMA node, NVLinks), NICs (PCI address, NUMA node, speed, EFA,
 * libfabric providers) and how close each GPU is to each GPU and NIC, in the
 * words of nvidia-smi topo -m: NV<n> (n NVLinks), PIX, PXB, PHB, NODE, SYS.
 * A topology is a read-only value, safe to share between threads.  Calls
 * that fail return an enum smddp_result and leave a sentence for
 * smddp_topo_error(). */
struct smddp_topo; /* opaque */

/* Discovers the node seen under sysroot (NULL or "/": this machine, using
 * hwloc, NVML and libfabric where present; any other directory: its sys/
 * and proc/ trees only, as captured for tests).  SMDDP_EINVAL: no sysroot. */
int smddp_topo_discover(const char *sysroot, struct smddp_topo **out);
/* Reads a topology written by smddp_topo_json() (or by hand) from a file or
 * a string.  Bad JSON, a schema other than 1, an unknown key or a value of
 * the wrong type: SMDDP_ECONFIG, smddp_topo_error() naming the field. */
int smddp_topo_load(const char *path, struct smddp_topo **out);
int smddp_topo_parse(const char *json, struct smddp_topo **out);
/* What the library itself uses: the file SMDDP_TOPO_FILE names (environment
 * or config key "topo_file"), else discovery of this machine. */
int smddp_topo_get(struct smddp_topo **out);
void smddp_topo_free(struct smddp_topo *topo);

/* The topology as JSON, schema 1, ending in a newline; free() it. */
int smddp_topo_json(const struct smddp_topo *topo, char **json);
/* Compares topo with an expected layout (a partial topology file, see
 * smddp-topo.json(5)): *ndiff differences, one line each in *report (free()
 * it, "" when none).  A bad expect file: SMDDP_ECONFIG. */
int smddp_topo_compare(const struct smddp_topo *topo, const char *expect_path, char **report,
		       int *ndiff);
/* The reason of this thread's last failed smddp_topo_* call. */
const char *smddp_topo_error(void);

int smddp_topo_num_gpus(const struct smddp_topo *topo);
int smddp_topo_num_nics(const struct smddp_topo *topo);
int smddp_topo_num_numa(const struct smddp_topo *topo);
/* GPUs are numbered as in the JSON (NVML's order, else PCI order); NULL or
 * -1 for an unknown value or an index out of range. */
const char *smddp_topo_gpu_bus_id(const struct smddp_topo *topo, int gpu);
int smddp_topo_gpu_numa(const struct smddp_topo *topo, int gpu);
const char *smddp_topo_nic_name(const struct smddp_topo *topo, int nic);
int smddp_topo_nic_numa(const struct smddp_topo *topo, int nic);
int smddp_topo_nic_is_efa(const struct smddp_topo *topo, int nic);
/* The NIC that gpu should send through: the closest one, among the RDMA
 * NICs (EFA, InfiniBand, RoCE: those with an "ib_device") where the node has
 * some; GPUs with the same closest NICs take turns over them.  -1 when the
 * node has no NIC or gpu is out of range. */
int smddp_topo_gpu_nic(const struct smddp_topo *topo, int gpu);

/* ---- parameters (man 7 smddp) -----------------------------------------------
 * Every SMDDP_* variable the library reads, i from 0 to smddp_param_count()-1:
 * its name, default ("" for none), current value ("" when unset), where that
 * came from ("default", "env" or "config") and one line of help.  The
 * strings live as long as the process.  Any pointer may be NULL.  A bad
 * value in the environment or the config file: SMDDP_ECONFIG, with the
 * sentence in smddp_last_error(NULL); SMDDP_EINVAL: i out of range. */
size_t smddp_param_count(void);
int smddp_param_info(size_t i, const char **name, const char **def, const char **value,
		     const char **source, const char **help);

#ifdef __cplusplus
}
#endif
#endif
