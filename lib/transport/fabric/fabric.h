/* fabric.h - one libfabric endpoint (FI_EP_RDM, tagged messages) per communicator that spans hosts.
 *
 * The algorithms in lib/coll/net.c post sends and receives of byte ranges to
 * and from ranks of the communicator and drive progress; this layer hides
 * the provider: its choice (SMDDP_FABRIC_PROVIDER, FI_PROVIDER, else efa,
 * verbs, tcp, then any that has FI_EP_RDM and FI_TAGGED), its memory
 * registration mode and its completion queue.  Every error becomes a
 * sentence in the communicator's last_error.
 */
#ifndef SD_FABRIC_H
#define SD_FABRIC_H

#include <stddef.h>
#include <stdint.h>

struct smddp_comm;
struct sd_fab;

#define SD_FAB_NAME_MAX 200

/* One posted send or receive.  Zero it before posting; done becomes 1 (or
 * err nonzero) when its completion has been read.  The provider's context
 * and any registration live in the endpoint, not here, so that after
 * sd_fab_forget the caller may drop this request (a stack array, say)
 * while the provider still holds the operation. */
struct sd_freq {
	void *fc;           /* the endpoint's context for it, while posted */
	struct sd_fab *fab;
	int keep;           /* set before posting: sd_fab_forget leaves it be */
	int peer;
	int is_send;
	uint64_t ignore;    /* set before posting a receive: tag bits that need not match */
	uint64_t tag;       /* a receive's tag as sent, once done */
	volatile int done;
	int err;
	size_t len;
};

/* Open an endpoint bound to the address src_ip (the one this host reaches
 * rank 0 with; NULL or "" lets the provider choose).  Its name (at most
 * SD_FAB_NAME_MAX bytes) goes to every peer through the bootstrap. */
int sd_fab_open(struct smddp_comm *c, const char *src_ip, struct sd_fab **out);
size_t sd_fab_name(struct sd_fab *f, void *buf, size_t len);
/* Provider and domain, for messages: "tcp;ofi_rxm on eth0". */
const char *sd_fab_describe(struct sd_fab *f);
/* What was chosen, to compare with the peers' choices: the provider and
 * the address format must be the same on every rank (the domain, an
 * interface's name for tcp, may differ from host to host). */
struct sd_fab_kind {
	char prov[40];
	char domain[40];
	char format[24];
};
void sd_fab_kind(struct sd_fab *f, struct sd_fab_kind *k);
/* Insert the n peers' names (stride bytes apart, each starting with a
 * uint32_t length) into the address vector: comm rank r is names[r]. */
int sd_fab_insert(struct smddp_comm *c, struct sd_fab *f, const void *names, size_t stride, int n);

/* Post; retried while the provider's queue is full (progressing meanwhile).
 * peer < 0 receives from anyone. */
int sd_fab_send(struct smddp_comm *c, struct sd_fab *f, int peer, uint64_t tag, const void *buf,
		size_t len, struct sd_freq *r);
int sd_fab_recv(struct smddp_comm *c, struct sd_fab *f, int peer, uint64_t tag, void *buf,
		size_t len, struct sd_freq *r);
/* One try to send a short notice, without retries or error messages
 * (for abort notices); 0 if posted. */
int sd_fab_notify(struct sd_fab *f, int peer, uint64_t tag, const void *buf, size_t len,
		  struct sd_freq *r);
/* How long a post may wait for room in the provider's queue (0: the
 * communicator's SMDDP_TIMEOUT); after that it fails with SMDDP_ENETWORK. */
void sd_fab_patience(struct sd_fab *f, uint64_t ns);
/* What a post asks, while it waits for room in the provider's queue,
 * whether the peers are still there (nonzero: fail with that result). */
void sd_fab_on_wait(struct sd_fab *f, int (*news)(struct smddp_comm *c));
/* Cancel a posted receive (at close, for the abort-notice receive). */
void sd_fab_cancel(struct sd_fab *f, struct sd_freq *r);
/* After a failed collective: detach every posted operation (but those with
 * keep) from its sd_freq, cancel the receives, and read completions for at
 * most wait_ms or until none is left.  Completions that come later only
 * release the endpoint's own context, so the callers' requests and
 * buffers may go.  Returns the operations still held by the provider; if
 * any, the endpoint is poisoned: it never progresses again (so those
 * operations never touch their buffers), posts fail, and it is left open at
 * close. */
int sd_fab_forget(struct sd_fab *f, int wait_ms);
/* Did a failed call leave transfers behind?  Then buffers they may use
 * must not be freed. */
int sd_fab_poisoned(struct sd_fab *f);

/* Read completions.  wait_ms > 0 may block that long for one (when the
 * provider has a wait object; else it sleeps briefly).  *got: the number
 * of completions read.  An smddp_result, the error recorded in
 * c->last_error (a failed transfer: SMDDP_ENETWORK naming the peer). */
int sd_fab_progress(struct smddp_comm *c, struct sd_fab *f, int wait_ms, int *got);

/* 1 if it had to be left open (transfers that never end): then the
 * buffers they may use must not be freed either. */
int sd_fab_close(struct sd_fab *f);

/* Tag layout: kind (2 bits) | collective sequence (30) | phase (8) | step (24). */
#define SD_TAG_STEP_BITS 24
#define SD_TAG_PHASE_BITS 8
#define SD_TAG_SEQ_BITS 30
static inline uint64_t sd_fab_tag(unsigned kind, uint64_t seq, unsigned phase, uint64_t step)
{
	return ((uint64_t)kind << 62) |
	       ((seq & ((1ull << SD_TAG_SEQ_BITS) - 1)) << (SD_TAG_STEP_BITS + SD_TAG_PHASE_BITS)) |
	       ((uint64_t)(phase & 0xff) << SD_TAG_STEP_BITS) |
	       (step & ((1ull << SD_TAG_STEP_BITS) - 1));
}
#define SD_TAG_KIND_DATA 0u
#define SD_TAG_KIND_ABORT 1u
#define SD_TAG_KIND_P2P 2u /* sends and receives: sender and key instead (lib/coll/net.c) */

#endif
