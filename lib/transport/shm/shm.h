/* shm.h - what shm.c (segment, barrier, single copy) and p2p.c (point to point) share. */
#ifndef SD_SHM_H
#define SD_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/comm-types.h"
#include "transport/transport.h"
#include "util/wait.h"

#define SHM_MAGIC 0x31534d4844444d53ull /* "SMDDMSH1" */
#define DESC_MAX 64

struct shm_hdr {
	uint64_t magic;
	uint64_t total;
	uint64_t half;
	uint32_t nranks;
	uint32_t pad;
};

struct shm_ctl {
	/* The first 128-byte pair of cache lines (the pair the hardware
	 * fetches together): what peers poll, and the data of tiny
	 * collectives, which thus arrives with the arrival itself. */
	_Atomic uint64_t arrive;   /* last barrier epoch this rank reached */
	unsigned char tiny[2][SD_TINY_BYTES];
	_Atomic uint32_t bell;     /* futex word: bumped to wake this rank */
	_Atomic uint32_t sleeping; /* this rank is (about to be) asleep on bell */
	/* The rest. */
	_Atomic uint64_t done;     /* last barrier epoch this rank saw complete (set at abort) */
	_Atomic uint32_t aborted;  /* this rank left: abort_rc says why */
	int32_t pid;
	int32_t abort_rc;          /* SMDDP_EABORTED, or the failure it left after */
	int32_t cma_ok;            /* this rank could read every peer */
	uint64_t probe;            /* a known value peers read to test single copy */
	uintptr_t probe_addr;      /* &probe in this rank's address space */
	uintptr_t addr[2];         /* this collective's buffers, in this rank's space */
	unsigned char hint[2][SD_HINT_BYTES]; /* what one call tells the next */
	unsigned char desc[DESC_MAX];
	char abort_msg[320];       /* its last_error when it left after a failure */
	/* its last error of its own that left the communicator working
	 * (sd_shm_note): read only once its process has ended */
	char note[320];
} __attribute__((aligned(128)));
_Static_assert(offsetof(struct shm_ctl, sleeping) + sizeof(uint32_t) <= 128,
	       "arrive and the tiny data share one 128-byte pair of lines");

struct shm_state {
	char name[64];
	int owner; /* created the segment, so unlinks it */
	void *base;
	size_t len;
	struct shm_hdr *hdr;
	struct shm_ctl *ctl;
	char *data;
	size_t half;
	char *stage;               /* each rank's two staging halves for sends (p2p.c) */
	size_t stage_half;
	uint64_t epoch;
	/* The call of the last barrier and its first barrier: a cancel ends
	 * that one at once, later ones after a grace (shm.c, barrier_health). */
	int call_coll;
	uint64_t call_seq, call_first;
	uint64_t done_epoch; /* last barrier this rank completed (published at abort) */
	int *pidfd;
	uint64_t last_check;
	struct p2p_chan *chan;     /* nranks x nranks channels: [from * nranks + to] */
	char *eager_base;          /* their eager slots: P2P_NDESC x eager each */
	size_t eager;
	struct p2p_local *p2p;     /* this rank's side of each channel */
	struct sd_p2p_op *streaming; /* the send now staged through this rank's halves */
	uint64_t pass;             /* passes of p2p.c over its batches */
	int ptracer;               /* holds sd_shm_ptracer_hold() */
	int abort_claimed;         /* sd_shm_abort published this rank's reason: the
				    * first one stays (the proxy's and the host's threads) */
};

/* ptracer.c: PR_SET_PTRACER_ANY under Yama ptrace_scope 1, reference
 * counted over communicators.  hold returns 1 when the caller now holds a
 * reference (and must release it), 0 when nothing was needed or allowed
 * (allowed: SMDDP_SINGLE_COPY_PTRACER). */
int sd_shm_ptracer_hold(int allowed);
void sd_shm_ptracer_release(void);
int sd_shm_ptracer_holders(void);
extern const char *sd_shm_yama_scope_path; /* tests point it at a file of their own */

#define ST(c) ((struct shm_state *)(c)->tp_state)

/* ---- point to point -------------------------------------------------------
 * One channel per ordered pair of ranks (sender -> receiver).  The sender
 * posts descriptors in a ring of P2P_NDESC, each published by its own seq
 * word: a message of up to P2P_TINY bytes travels inside its descriptor,
 * one of up to `eager` bytes in the descriptor's eager slot (either way
 * the send is done), others carry the sender's address.  The receiver
 * matches a posted descriptor to one of its receives (same key, in order
 * of posting), takes the data (from the descriptor or eager slot; with
 * single copy straight from the sender's buffer; else the sender copies
 * it through its own staging halves once the receiver claims it, a half at a
 * time) and marks it finished.  A descriptor slot is reused only once the
 * message in it is finished.  A small message costs the receiver one
 * cache line of the sender's (seq, header and data together), where a
 * separate posted counter, header and slot cost three in turn. */
#define P2P_NDESC 8
#define P2P_FIN_BAD (1ull << 63) /* fin: refused, the sizes differ */
#define P2P_TINY 32

/* Eager bytes per descriptor: 4 KiB (where Open MPI's shared-memory eager
 * limit is), less as ranks grow so that the n^2 channels' slots stay
 * within 16 MiB, never under 256. */
static inline size_t sd_shm_eager_bytes(int nranks)
{
	size_t e = 4096, pairs = (size_t)nranks * (size_t)nranks;

	while (e > 256 && pairs * P2P_NDESC * e > ((size_t)16 << 20))
		e /= 2;
	return e;
}

/* A staged send goes through its sender's own two halves, apart from the
 * collectives' slots: a collective's last step reads its peers' slots
 * with no barrier after it, so a rank past it may still be read there. */
#define P2P_STAGE_MAX ((size_t)128 << 10)
static inline size_t sd_shm_stage_half(size_t half)
{
	return half < P2P_STAGE_MAX ? half : P2P_STAGE_MAX;
}

/* One cache line. */
struct p2p_desc {
	_Atomic uint64_t seq; /* seq + 1 of the message it holds, written last */
	uint64_t key;
	uint64_t bytes;
	uintptr_t addr; /* in the sender's address space */
	unsigned char tiny[P2P_TINY];
} __attribute__((aligned(64)));

struct p2p_chan {
	/* the sender's line */
	_Atomic uint64_t filled;  /* staged halves written, over all messages */
	char pad0[120];
	/* the receiver's */
	_Atomic uint64_t claim;   /* seq + 1 of the message it takes staged, 0: none */
	_Atomic uint64_t drained; /* staged halves copied out, over all messages */
	_Atomic uint64_t fin[P2P_NDESC]; /* seq + 1 once message seq is taken (| P2P_FIN_BAD) */
	char pad1[128 - 16 - 8 * P2P_NDESC];
	struct p2p_desc d[P2P_NDESC];
} __attribute__((aligned(128)));

/* This rank's side of its channels with rank q. */
struct p2p_local {
	uint64_t next;   /* to q: the next descriptor to post */
	uint64_t free_to; /* to q: descriptors below are known free (fin read once for several) */
	uint64_t base;   /* from q: every message below is matched */
	uint64_t taken;  /* from q: bit i: message base + i is matched */
	int claimed;     /* from q: a staged message is being taken */
	uint64_t held;   /* to q: the pass in which a send found its slot busy */
	uint64_t seen, seen_pass; /* from q: messages below seen are posted, as found in that pass */
};

static inline struct p2p_chan *sd_shm_chan(struct shm_state *s, int nranks, int from, int to)
{
	return &s->chan[(size_t)from * (size_t)nranks + (size_t)to];
}

/* The eager slot of descriptor i of the channel from -> to. */
static inline unsigned char *sd_shm_eager(struct shm_state *s, int nranks, int from, int to,
					  unsigned i)
{
	return (unsigned char *)s->eager_base +
	       (((size_t)from * (size_t)nranks + (size_t)to) * P2P_NDESC + i) * s->eager;
}

/* shm.c */
int sd_shm_peer_gone(struct smddp_comm *c, int r);
int sd_shm_report_left(struct smddp_comm *c, int r);
/* The bootstrap channel's news of a failed rank, as c's failure; 0: none. */
int sd_shm_boot_news(struct smddp_comm *c);
void sd_shm_wake(struct smddp_comm *c, int r);
int sd_shm_peer_read(struct smddp_comm *c, int r, void *dst, uintptr_t src, size_t len);
void sd_shm_sleep(struct smddp_comm *c, uint32_t bell, uint64_t ns);
/* The policy of every shm wait (spin, liveness, deadline); the caller adds
 * its callbacks. */
void sd_shm_wait_init(struct smddp_comm *c, struct sd_wait *w);
/* shm.c: the transport's ops, put in a table by shm-table.c */
int sd_shm_create(struct smddp_comm *c, char *name, size_t namelen);
int sd_shm_attach(struct smddp_comm *c, const char *name, int leader);
void sd_shm_unlink_seg(struct smddp_comm *c);
int sd_shm_barrier(struct smddp_comm *c);
size_t sd_shm_half_bytes(struct smddp_comm *c);
void *sd_shm_slot(struct smddp_comm *c, int r, int h);
void *sd_shm_tiny(struct smddp_comm *c, int r, int h);
void *sd_shm_hint(struct smddp_comm *c, int r, int h);
void sd_shm_put_desc(struct smddp_comm *c, const void *desc, size_t len);
void sd_shm_get_desc(struct smddp_comm *c, int r, void *desc, size_t len);
int sd_shm_finish(struct smddp_comm *c);
void sd_shm_put_addrs(struct smddp_comm *c, const void *a, const void *b);
void sd_shm_get_addrs(struct smddp_comm *c, int r, uintptr_t *a, uintptr_t *b);
int sd_shm_peer_write(struct smddp_comm *c, int r, uintptr_t dst, const void *src, size_t len);
int sd_shm_health(struct smddp_comm *c);
void sd_shm_abort(struct smddp_comm *c);
void sd_shm_note(struct smddp_comm *c, const char *why);
/* " after an error of its own (its last: NOTE)" when rank r left a note
 * (sd_shm_note) before its process ended, else "".  Only for a rank whose
 * process has ended: no one writes it then. */
const char *sd_shm_note_words(struct smddp_comm *c, int r, char *buf, size_t n);
void sd_shm_detach(struct smddp_comm *c);
/* p2p.c */
int sd_shm_p2p(struct smddp_comm *c, struct sd_p2p_op *ops, int n);

#endif
