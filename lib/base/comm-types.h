/* comm-types.h - the communicator, the call descriptor and the sentence of a failure, for every layer.
 *
 * The base of the layers (docs/internals/LAYERS.md): the transports, the
 * algorithms, the device path and the core all work on a struct
 * smddp_comm and report failures through sd_comm_error(), so these live
 * here, below all of them, and not with the API entry points in
 * lib/core/.  Nothing here calls up: the helpers (lib/base/comm-error.c)
 * need only the logging of util and the names of base.
 */
#ifndef SD_BASE_COMM_TYPES_H
#define SD_BASE_COMM_TYPES_H

#include <stdint.h>
#include <sys/types.h>
#include <stddef.h>

#include "util/sd.h"

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
	int32_t refused; /* 1: this rank refused its own arguments (SMDDP_CHECK_COLL
			  * still compares, so that every rank fails the call) */
};

struct sd_transport_ops;
struct sd_net;
struct sd_trace;
struct sd_rejoin;

/* Where rank r of a communicator listens for the rendezvous of a shrink
 * (lib/core/shrink.c), learnt by every rank when it was made. */
struct sd_rejoin_at {
	char addr[64];  /* numeric; "" where the rank could not listen */
	char port[8];
	uint64_t host;  /* its host identity, hashed: equal on one host */
};

struct smddp_comm {
	int rank, size;
	int local_rank, local_size;
	int is_world;
	pid_t *pids;               /* pid of every rank */
	struct sd_boot *boot;      /* world only: the rendezvous channel */
	const struct sd_transport_ops *tp;
	void *tp_state;            /* the transport's own */
	struct sd_net *net;        /* ranks on several hosts (lib/transport/net/net.c) */
	const int *names;          /* the number messages give rank r (NULL: r) */
	uint64_t seq;              /* collectives called so far */
	uint64_t step;             /* pipelined steps so far: half = step & 1 */
	struct sd_coll_desc cur;   /* the collective in progress */
	int failed;                /* sticky result once the comm is broken */
	/* smddp_comm_cancel, from any thread: cancelled is set atomically;
	 * cancel points at the word to read (the communicator's own, or for
	 * the CUDA proxy's copy of it the original's). */
	int cancelled;
	const int *cancel;
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
	uint64_t serial;   /* names it for this process's lifetime (0: an inner one) */
	uint64_t uid;      /* the same on every member, unlike other communicators':
			    * the order in which a group runs its communicators */
	void *cuda;  /* lib/cuda state, NULL until a device call */
	uint64_t wire;     /* fabric tags' sequence: one per call, one more per
			    * chunk of a device call staged across hosts */
	uint64_t p2p_calls; /* sends, receives and groups so far (for messages:
			     * they are not collective, so not in seq) */
	uint32_t dev_calls; /* collectives on device memory so far, those refused
			     * on this rank's own arguments and those of count 0
			     * too: the number the ranks meet by (lib/cuda/move.c) */
	struct sd_trace *trace; /* the flight recorder (lib/core/trace.c), or NULL */
	/* The ranks the current call waited for when it failed (a timeout,
	 * a death), as messages name them: set by the transport's wait, kept
	 * by the flight recorder. */
	int32_t waited_on[8];
	int nwaited_on;
	/* Shrinks (lib/core/shrink.c): this rank's listener and every rank's
	 * address; NULL in communicators that cannot be shrunk (one rank,
	 * a host's part of one that spans hosts). */
	struct sd_rejoin *rejoin;
	struct sd_rejoin_at *rejoin_at;
	int shrinks;       /* shrinks made from it, for the new ones' names */
};

/* The number a message gives rank r: a host's communicator inside one that
 * spans hosts names its ranks as the outer communicator does. */
#define SD_RANK_NAME(c, r) ((c)->names ? (c)->names[r] : (r))

/* ---- lib/base/comm-error.c ------------------------------------------------ */

/* Record a failure: formats last_error as "rank R: <coll #seq (...)>: msg"
 * when a collective is in progress, logs it at WARN and returns rc. */
int sd_comm_error(struct smddp_comm *c, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* SMDDP_OK, or once smddp_comm_cancel was called on c (from any thread),
 * SMDDP_EABORTED with its sentence recorded: every wait's health check
 * and every call's entry ask. */
int sd_comm_cancelled(struct smddp_comm *c);
/* Whether smddp_comm_cancel was called on c, recording nothing. */
static inline int sd_comm_cancel_asked(const struct smddp_comm *c)
{
	return c->cancel && __atomic_load_n(c->cancel, __ATOMIC_ACQUIRE);
}
/* "allreduce #12 (count 1000, float32, sum)" */
void sd_coll_describe(const struct sd_coll_desc *d, char *buf, size_t len);
const char *sd_coll_name(int coll);

#endif
