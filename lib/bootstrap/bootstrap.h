/* bootstrap.h - rendezvous over TCP and the out-of-band channel of the world communicator.
 *
 * Rank 0 listens at MASTER_ADDR:MASTER_PORT; every other rank connects to it
 * (retrying until the deadline, since rank 0 may start later) and proves
 * that it knows the job token by challenge-response (the token never
 * travels; rank 0 proves it back).  Rank 0 is the hub of a star: out-of-band all-gathers go
 * through it.  The connections stay open for the communicator's life, so
 * that a rank that dies is seen at once (its socket closes) and rank 0
 * relays the news to everyone (a rank that loses rank 0 knows directly).
 */
#ifndef SD_BOOTSTRAP_H
#define SD_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "util/sd.h"

#define SD_HOSTID_MAX 128

struct sd_boot;

/* A host identity as messages name it: "name/boot-id" (how hosts are told
 * apart) reads as "name".  Thread-local result, valid until the next call. */
const char *sd_host_name(const char *hostid);

struct sd_boot_peer {
	char hostid[SD_HOSTID_MAX]; /* host identity: SMDDP_HOSTID, else hostname + boot id */
	int32_t pid;
};

struct sd_boot_params {
	int rank, size;
	const char *addr;   /* rank 0's address (name or numeric, IPv4 or IPv6) */
	const char *port;   /* decimal port */
	const char *token;  /* job token (HMAC key of the admission); "" means none,
			     * and then rank 0 admits only loopback connections
			     * unless allow_no_token */
	int allow_no_token; /* rank 0: admit tokenless ranks from anywhere */
	const char *hostid; /* this rank's host identity */
	uint64_t deadline_ns; /* sd_now_ns() value after which rendezvous gives up */
	int listen_fd;      /* rank 0: a socket from sd_boot_listen() (taken over
			     * and closed), or -1 to listen at addr:port */
	/* What a key that differs between ranks means, for the sentences of
	 * a failed challenge; NULL: the job token (SMDDP_JOB_TOKEN) differs.
	 * A shrink's key is made of the excluded ranks (lib/core/shrink.c). */
	const char *key_differs;
	/* Optional, for a rendezvous among ranks that already know each
	 * other (a shrink): gone(gone_arg, r, why, len) returns 1, with a
	 * sentence, once rank r is known dead.  Rank 0 asks it of the ranks
	 * it still waits for, the others of rank 0, every poll_ns, so that a
	 * death fails the rendezvous at once instead of at the deadline. */
	int (*gone)(void *arg, int rank, char *why, size_t len);
	void *gone_arg;
};

/* A listening socket on every interface, on a port the kernel picks (for
 * an id made before the rendezvous, see smddp_get_unique_id): *fd, and
 * *port its number.  SMDDP_ESYSTEM with a sentence in err. */
int sd_boot_listen(int *fd, int *port, struct sd_err *err);

/* An address of this host that other hosts can reach: SMDDP_BOOT_ADDR
 * if set, else the first IPv4 address of an interface that is up and not
 * loopback, else 127.0.0.1. */
void sd_boot_local_addr(char *buf, size_t len);

/* Rendezvous.  On success *out is the channel, peers[0..size-1] the identity
 * of every rank and *nonce a random 64-bit number chosen by rank 0 (the same
 * on every rank).  Errors (err gets a sentence naming addresses and ranks):
 * SMDDP_ETIMEDOUT  rank 0: rank(s) X,Y never connected; others: rank 0 never answered
 * SMDDP_ECONFIG    this rank was refused by rank 0 (wrong job token, no token
 *                  and not on loopback, rank out of range, size mismatch,
 *                  duplicate rank), rank 0 did not prove that it has this
 *                  rank's token, or bad address
 * SMDDP_ESYSTEM    socket/bind failures (e.g. port in use on rank 0)
 * SMDDP_EPEER      a peer closed its connection during rendezvous
 * Rank 0 rejects a peer with a wrong token (or malformed hello, or one that
 * says nothing for a few seconds) by logging a WARN line naming the peer's
 * address (at most 10 lines per 10 s, then a count), telling it why,
 * closing it and waiting on for the right ranks. */
int sd_boot_init(const struct sd_boot_params *p, struct sd_boot **out,
		 struct sd_boot_peer *peers, uint64_t *nonce, struct sd_err *err);

/* All-gather of len bytes from every rank through rank 0: all[r*len...] gets
 * rank r's bytes.  Collective over the world.  SMDDP_ETIMEDOUT at the
 * deadline (naming the ranks that did not contribute), SMDDP_EPEER when a
 * peer's connection closed or an abort notice arrived (naming the rank). */
int sd_boot_allgather(struct sd_boot *b, const void *mine, void *all, size_t len,
		      uint64_t deadline_ns, struct sd_err *err);

/* Non-blocking: look at the sockets.  SMDDP_OK when nothing happened; else
 * SMDDP_EPEER (*rank = the rank whose connection closed, or who died as
 * relayed by rank 0) or SMDDP_EABORTED (*rank = the rank that called
 * sd_boot_abort), with a sentence in err.  Once failed, stays failed and
 * keeps returning the same.  Rank 0 relays deaths and aborts to every other
 * rank as soon as it sees them, here or in any other sd_boot_ call. */
int sd_boot_poll(struct sd_boot *b, int *rank, struct sd_err *err);

/* The numeric address of this host that the channel's connections use
 * (a non-loopback one where there is one), for peers to reach this rank
 * again later; "" when there is none (a single rank). */
void sd_boot_own_addr(struct sd_boot *b, char *buf, size_t len);

/* File descriptors worth waiting on (readable = something to poll); returns
 * their number, at most max. */
int sd_boot_fds(struct sd_boot *b, int *fds, int max);

/* Tell every rank (through rank 0) that this rank aborts.  Never blocks for
 * long (non-blocking sends, best effort). */
void sd_boot_abort(struct sd_boot *b, const char *why);

/* Leave why (this rank's last error of its own, one that did not end its
 * communicator: a refused argument, a mismatch) with rank 0, which passes
 * it on with the news of this rank's death (rank 0's own goes to every
 * rank), so that should this rank's process end, the others name it as
 * the cause rather than a bare death ("rank 3 ... left after an error of
 * its own (its last: WHY)").  One frame, best effort, never blocks; by
 * the thread that owns the channel. */
void sd_boot_note(struct sd_boot *b, const char *why);

/* Close the channel.  SD_BOOT_CLEAN after a successful final barrier,
 * SD_BOOT_WITNESS when this rank leaves because another failed (a dead
 * peer, an abort, a broken link): either way peers do not take the close
 * as a death (so that rank 0 reports the dead rank, not a survivor that
 * left first); SD_BOOT_FAILED after a failure of its own.  Frees b. */
enum { SD_BOOT_FAILED = 0, SD_BOOT_CLEAN = 1, SD_BOOT_WITNESS = 2 };
void sd_boot_close(struct sd_boot *b, int how);
/* How a communicator that failed with rc (0: did not) closes the channel. */
int sd_boot_how(int clean, int rc);

#endif
