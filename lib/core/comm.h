/* comm.h - the core's side of a communicator: its creation, and its readiness for a shrink (rejoin.c).
 *
 * The communicator itself, the call descriptor and sd_comm_error() are in
 * lib/base/comm-types.h, which every layer includes; the collective
 * algorithms are declared in lib/coll/coll.h; the entry and exit of every
 * call in core/api.h, what was said of async errors in core/said.h.
 */
#ifndef SD_COMM_H
#define SD_COMM_H

#include <stdint.h>
#include <stddef.h>

#include "base/comm-types.h"

/* How sd_comm_init makes a world communicator when not from the
 * environment (smddp_comm_init_rank). */
struct sd_init_how {
	int rank, size;
	const char *addr, *port, *token; /* rank 0's rendezvous */
	int listen_fd;                   /* rank 0: its listening socket (taken over), else -1 */
	uint64_t timeout_ns;             /* 0: SMDDP_TIMEOUT */
	/* A shrink (lib/core/shrink.c): the parent, whose settings, job id
	 * and key the new communicator takes, survivors[i] the parent's rank
	 * of new rank i; token is then the shrink's own key, and key_differs,
	 * gone and gone_arg go to the rendezvous (sd_boot_params). */
	struct smddp_comm *parent;
	const int *survivors;
	const char *key_differs;
	int (*gone)(void *arg, int rank, char *why, size_t len);
	void *gone_arg;
};
int sd_comm_init(struct smddp_comm **out, const struct sd_init_how *how);

/* ---- lib/core/rejoin.c: ready for a shrink (design: shrink.c) ---- */
typedef int (*sd_comm_gather_fn)(struct smddp_comm *c, const void *mine, void *all, size_t len);
/* Collective over via (c itself, or a split's parent): every member of c
 * starts listening for a later shrink's rendezvous and learns where the
 * others do.  c is NULL on a rank of via that joins nothing; members[i]
 * is via's rank of c's rank i (NULL: the same); token: the key a
 * shrink's own is made from; host: this host's identity, hashed.  A rank
 * that cannot listen says so (an empty address) rather than failing c:
 * only a shrink that needs it as its coordinator fails.  Fails only
 * where the gather does. */
int sd_rejoin_setup(struct smddp_comm *c, struct smddp_comm *via, const int *members,
		    const char *token, uint64_t host, sd_comm_gather_fn gather);
/* The listener of c and the records, closed and freed (comm_free). */
void sd_rejoin_free(struct smddp_comm *c);
/* The key c's rejoin was set up with ("" where none). */
const char *sd_rejoin_token(const struct smddp_comm *c);
/* This rank's listening socket for c's shrinks, -1 where none. */
int sd_rejoin_fd(const struct smddp_comm *c);
/* Warns, once per process, when a library loaded with libfabric has taken
 * the stopping signals (signals.c). */
void sd_check_signals(void);

#endif
