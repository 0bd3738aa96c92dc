/* comm.h - the communicator and the collective descriptor shared by core, coll and transports. */
#ifndef SD_COMM_H
#define SD_COMM_H

#include <stdint.h>
#include <sys/types.h>
#include <stddef.h>

#include "core/sd.h"

enum sd_coll {
	SD_COLL_ALLREDUCE = 0,
	SD_COLL_ALLGATHER,
	SD_COLL_REDUCE_SCATTER,
	SD_COLL_BROADCAST,
	SD_COLL_REDUCE,
	SD_COLL_ALLTOALL,
	SD_COLL_BARRIER,
	SD_COLL_SPLIT,
	SD_COLL_DESTROY,
	SD_COLL_INIT,
	SD_COLL_GATHER,
	SD_COLL_SCATTER,
	SD_COLL_ALLTOALLV,
	SD_COLL_SEND,     /* root: the peer, op: the tag */
	SD_COLL_RECV,
	SD_COLL_GROUP,    /* count: the calls of the group */
	SD_NUM_COLLS
};

/* What a rank was asked to do; compared across ranks by SMDDP_CHECK_COLL
 * and quoted in every error message. */
struct sd_coll_desc {
	uint64_t seq;   /* 1 for the communicator's first call */
	int32_t coll;   /* enum sd_coll */
	int32_t dtype;
	int32_t op;
	int32_t root;
	uint64_t count;
	int32_t mem;    /* 1: CUDA device memory (a mix between hosts would hang) */
	int32_t pad;
};

struct sd_transport_ops;
struct sd_net;
struct sd_trace;

struct smddp_comm {
	int rank, size;
	int local_rank, local_size;
	int is_world;
	pid_t *pids;               /* pid of every rank */
	struct sd_boot *boot;      /* world only: the rendezvous channel */
	const struct sd_transport_ops *tp;
	void *tp_state;            /* the transport's own */
	struct sd_net *net;        /* ranks on several hosts (lib/coll/net.c) */
	const int *names;          /* the number messages give rank r (NULL: r) */
	uint64_t seq;              /* collectives called so far */
	uint64_t step;             /* pipelined steps so far: half = step & 1 */
	struct sd_coll_desc cur;   /* the collective in progress */
	int failed;                /* sticky result once the comm is broken */
	/* tunables, read once at creation */
	uint64_t timeout_ns;
	const char *timeout_from;  /* what set it, for messages: "SMDDP_TIMEOUT" */
	int check_coll;
	int spin;
	unsigned yield_mask;       /* poll count & mask == 0: sched_yield instead */
	uint64_t liveness_ns;
	size_t chunk;              /* bytes of one pipelined step per rank */
	int single_copy;           /* peers' buffers can be read directly */
	int single_copy_ptracer;   /* SMDDP_SINGLE_COPY_PTRACER: may widen ptrace for it */
	size_t single_copy_min;    /* bytes per rank from which they are */
	void *scratch;             /* single copy: blocks read from peers */
	char jobid[64];
	char last_error[1024];
	void *cuda;  /* lib/cuda state, NULL until a device call */
	void *cuda_stage; /* lib/cuda/staged.c: device calls across hosts */
	uint64_t wire;     /* fabric tags' sequence: one per call, one more per
			    * chunk of a device call staged across hosts */
	uint64_t p2p_calls; /* sends, receives and groups so far (for messages:
			     * they are not collective, so not in seq) */
	struct sd_trace *trace; /* the flight recorder (lib/core/trace.c), or NULL */
	/* The ranks the current call waited for when it failed (a timeout,
	 * a death), as messages name them: set by the transport's wait, kept
	 * by the flight recorder. */
	int32_t waited_on[8];
	int nwaited_on;
};

/* How sd_comm_init makes a world communicator when not from the
 * environment (smddp_comm_init_rank). */
struct sd_init_how {
	int rank, size;
	const char *addr, *port, *token; /* rank 0's rendezvous */
	int listen_fd;                   /* rank 0: its listening socket (taken over), else -1 */
	uint64_t timeout_ns;             /* 0: SMDDP_TIMEOUT */
};
int sd_comm_init(struct smddp_comm **out, const struct sd_init_how *how);

/* The number a message gives rank r: a host's communicator inside one that
 * spans hosts names its ranks as the outer communicator does. */
#define SD_RANK_NAME(c, r) ((c)->names ? (c)->names[r] : (r))

/* Record a failure: formats last_error as "rank R: <coll #seq (...)>: msg"
 * when a collective is in progress, logs it at WARN and returns rc. */
int sd_comm_error(struct smddp_comm *c, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* "allreduce #12 (count 1000, float32, sum)" */
void sd_coll_describe(const struct sd_coll_desc *d, char *buf, size_t len);
const char *sd_coll_name(int coll);

/* Entry of every collective call: checks the communicator and the arguments
 * that do not depend on buffers, counts the call, and with SMDDP_CHECK_COLL
 * compares it across ranks.  count 0 still counts the call. */
int sd_api_enter(struct smddp_comm *c, int coll, size_t count, int dtype, int op, int root,
		 void *stream);

/* Exit of every call: a failure that leaves ranks at different places in
 * the protocol marks c failed and tells the peers; returns rc. */
int sd_api_leave(struct smddp_comm *c, int rc);
/* 1 if p is CUDA device memory (the driver is loaded and says so). */
int sd_api_device_ptr(const void *p);

/* Collective algorithms (lib/coll/coll.c), host memory, arguments checked. */
int sd_coll_allreduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		      enum smddp_dtype dt, enum smddp_op op);
int sd_coll_allgather(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		      enum smddp_dtype dt);
int sd_coll_reduce_scatter(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			   enum smddp_dtype dt, enum smddp_op op);
int sd_coll_broadcast(struct smddp_comm *c, void *buf, size_t count, enum smddp_dtype dt,
		      int root);
int sd_coll_reduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		   enum smddp_dtype dt, enum smddp_op op, int root);
int sd_coll_alltoall(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		     enum smddp_dtype dt);

/* ---- point to point (lib/coll/p2p.c) --------------------------------------
 * One send or receive of a batch that the transport runs to completion
 * together (a group, or the messages of alltoallv, gather, scatter).  key
 * matches a send with a receive, in order per (sender, receiver, key):
 * user tags are below SD_P2P_KEY_COLL; the exchanges of one collective call
 * use SD_P2P_KEY_COLL | its wire number. */
#define SD_P2P_KEY_COLL (1ull << 34)
#define SD_P2P_KEY_MASK ((1ull << 35) - 1)
struct sd_p2p_op {
	int is_send;
	int peer;          /* rank of the communicator; receive: -1 for anyone */
	uint64_t key;
	void *buf;
	size_t bytes;
	int source;        /* receive: who sent it, once done */
	int done;
	/* the transport's own progress, zeroed by sd_coll_p2p */
	int state;
	uint64_t seq;
	uint64_t off, aux;
	void *tp;
};
/* Host buffers: runs ops[0..n) until all are done; the transport's own
 * pairs (a rank to itself) are copied here. */
int sd_coll_p2p(struct smddp_comm *c, struct sd_p2p_op *ops, int n);
/* The messages of one call, as a batch (es: element size; key: its key).
 * *out is malloc()ed, *n its length; SMDDP_ENOMEM. */
int sd_coll_alltoallv_ops(struct smddp_comm *c, const void *sbuf, const size_t *scounts,
			  const size_t *sdispls, void *rbuf, const size_t *rcounts,
			  const size_t *rdispls, size_t es, uint64_t key, struct sd_p2p_op **out,
			  int *n);
int sd_coll_rooted_ops(struct smddp_comm *c, int gather, const void *sbuf, void *rbuf,
		       size_t bytes, int root, uint64_t key, struct sd_p2p_op **out, int *n);

#endif
