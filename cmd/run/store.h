/* cmd/run/store.h - a store for torch's ranks that lives in smddp-run, not in a rank */
#ifndef SMDDP_RUN_STORE_H
#define SMDDP_RUN_STORE_H

/*
 * torch's env:// rendezvous puts its TCPStore in rank 0, so rank 0's death
 * takes the store with it and the survivors cannot make a new group (a
 * shrink clones the store). With --on-failure continue, smddp-run serves
 * the store itself, as torchrun's agent does: it speaks TCPStore's wire
 * protocol on MASTER_PORT, and the ranks, told TORCHELASTIC_USE_AGENT_STORE,
 * are all its clients. See docs/internals/shrink.md ("The store").
 */
struct store;

/* Listens on every address (IPv6 and IPv4) at PORT (0: one the kernel
 * picks). 0 with *OUT and *BOUND (the port) set, else -1 with errno. The
 * socket is made here, in the caller's thread, so that a failure can be
 * reported; nothing is served before store_start(). */
int store_open(long port, struct store **out, long *bound);

/* Serves in a thread of its own, with every signal blocked, until
 * store_stop(). 0, or -1 with errno. */
int store_start(struct store *s);

/* Stops serving, closes every connection and frees S (NULL: nothing). */
void store_stop(struct store *s);

#endif /* SMDDP_RUN_STORE_H */
