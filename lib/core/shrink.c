/* shrink.c - smddp_comm_shrink: a communicator of the survivors, made without a new launch.
 *
 * Who coordinates, and how the survivors find each other.  The parent's
 * rendezvous was a star around its rank 0, which may be the rank that
 * died, so a shrink cannot go through it.  Instead every rank of a
 * communicator that may be shrunk (a world, one made by
 * smddp_comm_init_rank, a split or a shrink of those) starts listening on
 * a port of its own when the communicator is made (sd_rejoin_setup), and
 * every rank learns every other's address then, while all are alive.  A
 * shrink is then a new rendezvous of the survivors, with the lowest
 * surviving rank as the coordinator (the new rank 0): it takes its own
 * listening socket as the rendezvous socket, and the others connect to
 * the address they learnt.  After that the new communicator is made as a
 * world is (sd_comm_init): shared segment, fabric endpoints, its own
 * bootstrap channel and its own listener for the next shrink.
 *
 * Admission is the bootstrap's challenge-response, with a key made from
 * the parent's key, the parent's uid and the set of excluded ranks: a
 * survivor that passed a different list (or shrinks another communicator)
 * fails the challenge and both sides say so (SMDDP_EMISMATCH) instead of
 * making a communicator whose ranks disagree on who is in it.  While the
 * coordinator waits, it asks of each missing survivor on its own host
 * whether the process still exists, and the others ask it of the
 * coordinator, so that a second death during the shrink fails it at once,
 * naming the rank; one on another host is seen when its connection closes,
 * or at the deadline (the parent's timeout) if it never connected.
 *
 * The parent is left to be freed by the caller (smddp_comm_abort or
 * smddp_comm_destroy, both local on it then).  Where it was healthy, the
 * shrink breaks it first (SMDDP_EABORTED, told to the peers as any failure
 * is), so that an excluded rank that is still alive and calls on it fails
 * at once instead of waiting for survivors who have left.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/errors.h"
#include "core/comm.h"
#include "core/said.h"
#include "cuda/cuda.h"
#include "hash/sha256.h"
#include "transport/transport.h"

/* ---- the shrink ---------------------------------------------------------- */

struct shrink {
	struct smddp_comm *parent;
	const int *survivors; /* parent rank of new rank i */
	int n;
};

/* sd_boot_params.gone: a survivor on this host whose process has ended.
 * (Hosts are told apart by their identity's hash; one host is one pid
 * namespace, as the shared-memory transport assumes too.) */
static int survivor_gone(void *arg, int rank, char *why, size_t len)
{
	const struct shrink *s = arg;
	const struct smddp_comm *p = s->parent;
	int old;

	if (rank < 0 || rank >= s->n)
		return 0;
	old = s->survivors[rank];
	if (old == p->rank || p->rejoin_at[old].host != p->rejoin_at[p->rank].host)
		return 0;
	if (kill(p->pids[old], 0) == 0 || errno != ESRCH)
		return 0;
	snprintf(why, len, "rank %d (pid %d), a survivor that was to take part, has died meanwhile: "
		 "shrink again without it too", old, (int)p->pids[old]);
	return 1;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* "3", "0,2,5": the sorted list, for messages. */
static void fmt_list(char *buf, size_t len, const int *v, int n)
{
	size_t off = 0;

	buf[0] = 0;
	for (int i = 0; i < n && off + 16 < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%d", i ? "," : "", v[i]);
	if (off + 16 >= len)
		snprintf(buf + len - 4, 4, "...");
}

/* The shrink's key: what the parent's ranks share (its key and uid) and
 * the set of excluded ranks, so that only survivors of this very shrink
 * pass each other's challenge.  Hex, for the bootstrap's string key. */
static void shrink_key(const struct smddp_comm *p, const int *sorted, int n, char *hex)
{
	struct sd_hmac_sha256 m;
	uint8_t mac[SD_SHA256_LEN], w[8];
	const char *tok = sd_rejoin_token(p);

	sd_hmac_sha256_init(&m, tok, strlen(tok));
	sd_hmac_sha256_update(&m, "smddp shrink 1", 14);
	for (int i = 0; i < 8; i++)
		w[i] = (uint8_t)(p->uid >> (8 * i));
	sd_hmac_sha256_update(&m, w, 8);
	for (int i = 0; i < 4; i++)
		w[i] = (uint8_t)((uint32_t)p->size >> (8 * i));
	sd_hmac_sha256_update(&m, w, 4);
	for (int k = 0; k < n; k++) {
		for (int i = 0; i < 4; i++)
			w[i] = (uint8_t)((uint32_t)sorted[k] >> (8 * i));
		sd_hmac_sha256_update(&m, w, 4);
	}
	sd_hmac_sha256_final(&m, mac);
	for (int i = 0; i < SD_SHA256_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", mac[i]);
}

/* This rank's own checks of the arguments: 0, or SMDDP_EINVAL with the
 * sentence in comm. */
static int check_exclude(struct smddp_comm *comm, const int *exclude, int nexclude, int flags,
			 int *sorted)
{
	if (flags & ~SMDDP_SHRINK_ABORT)
		return sd_comm_error(comm, SMDDP_EINVAL,
				     "smddp_comm_shrink: unknown flags 0x%x (SMDDP_SHRINK_DEFAULT or "
				     "SMDDP_SHRINK_ABORT)", (unsigned)flags);
	if (nexclude < 1 || !exclude)
		return sd_comm_error(comm, SMDDP_EINVAL,
				     "smddp_comm_shrink: no rank to exclude (exclude %s, nexclude %d): "
				     "name at least one", exclude ? "given" : "NULL", nexclude);
	if (nexclude >= comm->size)
		return sd_comm_error(comm, SMDDP_EINVAL,
				     "smddp_comm_shrink: %d ranks excluded of %d: at least one must "
				     "remain (and the caller is one)", nexclude, comm->size);
	for (int i = 0; i < nexclude; i++) {
		if (exclude[i] < 0 || exclude[i] >= comm->size)
			return sd_comm_error(comm, SMDDP_EINVAL,
					     "smddp_comm_shrink: exclude[%d] = %d is not a rank of "
					     "0..%d", i, exclude[i], comm->size - 1);
		if (exclude[i] == comm->rank)
			return sd_comm_error(comm, SMDDP_EINVAL,
					     "smddp_comm_shrink: exclude[%d] is rank %d, the caller: "
					     "excluded ranks do not call the shrink (abort the "
					     "communicator instead)", i, comm->rank);
		sorted[i] = exclude[i];
	}
	qsort(sorted, (size_t)nexclude, sizeof(int), cmp_int);
	for (int i = 1; i < nexclude; i++)
		if (sorted[i] == sorted[i - 1])
			return sd_comm_error(comm, SMDDP_EINVAL,
					     "smddp_comm_shrink: rank %d is excluded twice", sorted[i]);
	return SMDDP_OK;
}

/* Make the parent unusable and say why, to this rank's later calls and to
 * the peers (the transport's abort: an excluded rank waiting on this one
 * fails now rather than at its timeout).  Only a healthy parent: a broken
 * one has told its peers already, and keeps its root cause. */
static void revoke_parent(struct smddp_comm *comm, const char *list)
{
	if (comm->failed)
		return;
	comm->failed = SMDDP_EABORTED;
	snprintf(comm->last_error, sizeof(comm->last_error),
		 "rank %d left this communicator for a shrunk one without rank(s) %s "
		 "(smddp_comm_shrink): it takes no more calls", comm->rank, list);
	sd_cuda_abort(comm);
}

SD_EXPORT int smddp_comm_shrink(struct smddp_comm *comm, const int *exclude, int nexclude,
				int flags, struct smddp_comm **out)
{
	struct sd_init_how how;
	struct shrink s = {comm, NULL, 0};
	int *sorted = NULL, *survivors = NULL, coord, me = -1, rc;
	char key[2 * SD_SHA256_LEN + 1], list[200], id_note[64];
	const struct sd_rejoin_at *at;

	if (!comm)
		return sd_err_set(sd_init_err(), SMDDP_EINVAL, "smddp_comm_shrink: comm is NULL");
	sd_api_async_forget(comm);
	if (!out)
		return sd_comm_error(comm, SMDDP_EINVAL, "smddp_comm_shrink: out is NULL");
	*out = NULL;
	if (!comm->rejoin_at)
		return sd_comm_error(comm, SMDDP_EUNSUPPORTED,
				     "smddp_comm_shrink: this communicator of %d rank(s) cannot be "
				     "shrunk (it has no other rank, or could not prepare for a shrink "
				     "when it was made: see the log)", comm->size);
	sorted = calloc((size_t)(nexclude > 0 ? nexclude : 1), sizeof(int));
	survivors = calloc((size_t)comm->size, sizeof(int));
	if (!sorted || !survivors) {
		rc = sd_comm_error(comm, SMDDP_ENOMEM, "smddp_comm_shrink: out of memory");
		goto out;
	}
	rc = check_exclude(comm, exclude, nexclude, flags, sorted);
	if (rc)
		goto out;
	fmt_list(list, sizeof(list), sorted, nexclude);
	for (int r = 0, k = 0; r < comm->size; r++) {
		if (k < nexclude && sorted[k] == r) {
			k++;
			continue;
		}
		if (r == comm->rank)
			me = s.n;
		survivors[s.n++] = r;
	}
	s.survivors = survivors;
	coord = survivors[0];
	at = &comm->rejoin_at[coord];

	/* The parent first: with SMDDP_SHRINK_ABORT a call of another thread
	 * may be inside it, so only the cancel (one atomic store) touches
	 * it, and that call fails, breaking it, within SMDDP_LIVENESS_MS.
	 * Without, no call is in progress (the caller's promise, as for
	 * destroy): device work queued on it runs to its end (a dead peer
	 * fails it at once); it is broken with this shrink as the cause once
	 * the survivors have met: not before, since a survivor may still be
	 * finishing the parent's last collective, which this rank has left,
	 * and must not see it fail under it. */
	if (flags & SMDDP_SHRINK_ABORT)
		smddp_comm_cancel(comm);
	else if (!comm->failed)
		(void)sd_cuda_collect(comm, 1);
	if (!at->port[0]) {
		rc = sd_comm_error(comm, SMDDP_EUNSUPPORTED,
				   "smddp_comm_shrink without rank(s) %s: rank %d, the coordinator (the "
				   "lowest survivor), could not listen for it when the communicator was "
				   "made (its log says why)", list, coord);
		goto out;
	}
	shrink_key(comm, sorted, nexclude, key);
	memset(&how, 0, sizeof(how));
	how.rank = me;
	how.size = s.n;
	how.addr = at->addr;
	how.port = at->port;
	how.token = key;
	how.listen_fd = -1;
	if (me == 0) {
		/* A copy: the rendezvous closes it, and the parent keeps its own
		 * for another try should this one fail. */
		how.listen_fd = sd_rejoin_fd(comm) >= 0 ? dup(sd_rejoin_fd(comm)) : -1;
		if (how.listen_fd < 0) {
			rc = sd_comm_error(comm, SMDDP_ESYSTEM,
					   "smddp_comm_shrink: the coordinator cannot take its listening "
					   "socket: %s", strerror(errno));
			goto out;
		}
	}
	how.parent = comm;
	how.survivors = survivors;
	how.key_differs = "the survivors passed different lists of ranks to exclude to "
			  "smddp_comm_shrink (or shrink different communicators)";
	how.gone = survivor_gone;
	how.gone_arg = &s;
	SD_INFO(SD_SUB_INIT, "shrink without rank(s) %s: %d survivors, coordinator rank %d at %s:%s, "
			     "this rank becomes %d", list, s.n, coord, at->addr, at->port, me);
	rc = sd_comm_init(out, &how);
	if (rc) {
		/* The rendezvous names ranks by their new numbers: say which. */
		snprintf(id_note, sizeof(id_note), "%s", s.n > 1 ? "; new rank i is the i-th survivor" : "");
		rc = sd_comm_error(comm, rc,
				   "smddp_comm_shrink without rank(s) %s (coordinator: rank %d, the "
				   "lowest survivor%s): %s",
				   list, coord, id_note, sd_init_err()->msg);
		goto out;
	}
	comm->shrinks++;
	if (!(flags & SMDDP_SHRINK_ABORT))
		revoke_parent(comm, list);
out:
	free(sorted);
	free(survivors);
	return rc;
}
