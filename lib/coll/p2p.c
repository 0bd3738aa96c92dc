/* p2p.c - batches of sends and receives: groups, alltoallv, gather and scatter.
 *
 * Whatever the call, the work is a batch of sends and receives that the
 * transport (shm inside a node, the fabric between hosts) runs together to
 * completion.  alltoallv, gather and scatter are written here as such
 * batches, as NCCL writes them over its point-to-point primitives: with
 * single copy the receiver reads each block straight from the sender's
 * buffer, which is as good as a dedicated algorithm for an exchange whose
 * every byte goes to one place.  A rank's messages to itself never reach
 * the transport: they are paired and copied here.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "transport/transport.h"

/* Pair this rank's sends to itself with its receives from itself, in
 * order of key.  A pair that fails (sizes differ, or a half without its
 * other) is done with its error, kept in *err, and the rest of the batch
 * still runs: its peers wait for their part of it. */
static void pair_self(struct smddp_comm *c, struct sd_p2p_op *ops, int n, int *err)
{
	for (int i = 0; i < n; i++) {
		struct sd_p2p_op *r = &ops[i], *s = NULL;
		int rc = SMDDP_OK;

		if (r->is_send || r->peer != c->rank)
			continue;
		for (int j = 0; j < n && !s; j++)
			if (ops[j].is_send && ops[j].peer == c->rank && !ops[j].done &&
			    ops[j].key == r->key)
				s = &ops[j];
		if (!s)
			rc = sd_comm_error(c, SMDDP_EINVAL,
					   "a receive from this rank itself needs its send in the "
					   "same group (smddp_group_start/end)");
		else if (s->bytes != r->bytes)
			rc = sd_comm_error(c, SMDDP_EMISMATCH,
					   "this rank sent itself %zu bytes but receives %zu: the "
					   "count or dtype differs",
					   s->bytes, r->bytes);
		else if (r->bytes && r->buf != s->buf)
			memmove(r->buf, s->buf, r->bytes);
		r->source = c->rank;
		r->done = 1;
		if (s)
			s->done = 1;
		if (rc && !*err)
			*err = rc;
	}
	for (int i = 0; i < n; i++)
		if (!ops[i].done && ops[i].is_send && ops[i].peer == c->rank) {
			int rc = sd_comm_error(c, SMDDP_EINVAL,
					       "a send to this rank itself needs its receive in the "
					       "same group (smddp_group_start/end)");

			ops[i].done = 1;
			if (!*err)
				*err = rc;
		}
}

static int overlap(const struct sd_p2p_op *a, const struct sd_p2p_op *b)
{
	const char *x = a->buf, *y = b->buf;

	return a->bytes && b->bytes && x < y + b->bytes && y < x + a->bytes;
}

/* A send whose buffer a receive of the same batch writes (an exchange in
 * place, as nccl-tests' in-place sendrecv does) would be read by its peer
 * while that receive overwrites it: such a send goes from a copy taken
 * first.  orig[i]: op i's own buffer while it sends from a copy. */
static int copy_overlapping(struct smddp_comm *c, struct sd_p2p_op *ops, int n, void ***orig)
{
	*orig = NULL;
	for (int i = 0; i < n; i++) {
		if (!ops[i].is_send || ops[i].done)
			continue;
		for (int j = 0; j < n; j++) {
			void *dup;

			if (ops[j].is_send || ops[j].done || !overlap(&ops[i], &ops[j]))
				continue;
			if (!*orig && !(*orig = calloc((size_t)n, sizeof(void *))))
				return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
			if (!(dup = malloc(ops[i].bytes)))
				return sd_comm_error(c, SMDDP_ENOMEM, "out of memory for %zu bytes",
						     ops[i].bytes);
			memcpy(dup, ops[i].buf, ops[i].bytes);
			(*orig)[i] = ops[i].buf;
			ops[i].buf = dup;
			break;
		}
	}
	return SMDDP_OK;
}

int sd_coll_p2p(struct smddp_comm *c, struct sd_p2p_op *ops, int n)
{
	void **orig = NULL;
	int self_rc = SMDDP_OK, rc, all_done = 1, self = 0, sends = 0;

	for (int i = 0; i < n; i++) {
		ops[i].done = 0;
		ops[i].state = 0;
		ops[i].seq = ops[i].off = ops[i].aux = 0;
		ops[i].tp = NULL;
		ops[i].source = ops[i].peer;
		self |= ops[i].peer == c->rank;
		sends += ops[i].is_send;
	}
	/* Only sends or only receives, none with this rank itself (a rooted
	 * call of a few bytes): nothing to pair or copy first. */
	if (!self && (sends == 0 || sends == n))
		return n ? c->tp->p2p(c, ops, n) : SMDDP_OK;
	/* Copies first: a receive from this rank itself writes too. */
	rc = copy_overlapping(c, ops, n, &orig);
	if (!rc) {
		int left = 0;

		pair_self(c, ops, n, &self_rc);
		for (int i = 0; i < n; i++)
			left += !ops[i].done;
		if (left)
			rc = c->tp->p2p(c, ops, n);
	}
	/* A copy stays while a transfer may still read it: after a failure
	 * that left an operation unfinished, a peer may still read it (single
	 * copy) or the fabric hold it, as its own buffers stay. */
	for (int i = 0; i < n; i++)
		all_done &= ops[i].done;
	for (int i = 0; orig && i < n; i++) {
		if (!orig[i])
			continue;
		if (all_done)
			free(ops[i].buf);
		ops[i].buf = orig[i];
	}
	free(orig);
	return rc ? rc : self_rc;
}

void sd_coll_op_set(struct sd_p2p_op *op, int is_send, int peer, uint64_t key, const void *buf,
		    size_t bytes)
{
	memset(op, 0, sizeof(*op));
	op->is_send = is_send;
	op->peer = peer;
	op->key = key;
	op->buf = (void *)buf;
	op->bytes = bytes;
}

/* Room for want ops: the caller's few (a malloc per call showed in small
 * alltoallv's time), else the heap. */
static struct sd_p2p_op *ops_room(size_t want, struct sd_p2p_op *few, int room)
{
	return want <= (size_t)room ? few : calloc(want, sizeof(*few));
}

int sd_coll_alltoallv_ops(struct smddp_comm *c, const void *sbuf, const size_t *scounts,
			  const size_t *sdispls, void *rbuf, const size_t *rcounts,
			  const size_t *rdispls, size_t es, uint64_t key, struct sd_p2p_op *few,
			  int room, struct sd_p2p_op **out, int *n)
{
	int p = c->size, me = c->rank, k = 0;
	struct sd_p2p_op *ops = ops_room(2 * (size_t)p, few, room);

	if (!ops)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	/* Rank me + i first: not every rank starts with rank 0. */
	for (int i = 0; i < p; i++) {
		int to = (me + i) % p, from = (me - i + p) % p;

		sd_coll_op_set(&ops[k++], 0, from, key, (char *)rbuf + rdispls[from] * es,
		       rcounts[from] * es);
		sd_coll_op_set(&ops[k++], 1, to, key, (const char *)sbuf + sdispls[to] * es,
		       scounts[to] * es);
	}
	*out = ops;
	*n = k;
	return SMDDP_OK;
}

int sd_coll_rooted_ops(struct smddp_comm *c, int gather, const void *sbuf, void *rbuf,
		       size_t bytes, int root, uint64_t key, struct sd_p2p_op *few, int room,
		       struct sd_p2p_op **out, int *n)
{
	int p = c->size, me = c->rank, k = 0;
	struct sd_p2p_op *ops = ops_room(me == root ? 2 * (size_t)p : 1, few, room);

	if (!ops)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	if (me != root) {
		if (gather)
			sd_coll_op_set(&ops[k++], 1, root, key, sbuf, bytes);
		else
			sd_coll_op_set(&ops[k++], 0, root, key, rbuf, bytes);
	} else {
		for (int i = 0; i < p; i++) {
			int q = (me + i) % p;

			if (gather) {
				char *slot = (char *)rbuf + (size_t)q * bytes;

				if (q == me && slot == sbuf)
					continue; /* in place */
				sd_coll_op_set(&ops[k++], 0, q, key, slot, bytes);
				if (q == me)
					sd_coll_op_set(&ops[k++], 1, q, key, sbuf, bytes);
			} else {
				const char *slot = (const char *)sbuf + (size_t)q * bytes;

				if (q == me && slot == rbuf)
					continue;
				sd_coll_op_set(&ops[k++], 1, q, key, slot, bytes);
				if (q == me)
					sd_coll_op_set(&ops[k++], 0, q, key, rbuf, bytes);
			}
		}
	}
	*out = ops;
	*n = k;
	return SMDDP_OK;
}
