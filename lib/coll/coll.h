/* coll.h - the collective algorithms and the batches of sends and receives, as the layers above call them.
 *
 * Host memory, arguments checked (lib/core/api.c, p2p_api.c): a
 * communicator that spans hosts is handed on to lib/coll/net-algo.c, one on
 * a node runs over the slots of its transport (lib/coll/coll.c); the
 * choice is lib/coll/dispatch.c's.
 */
#ifndef SD_COLL_COLL_H
#define SD_COLL_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "base/comm-types.h"
#include "transport/transport.h"

/* Elements in each rank's part of n elements of es bytes: a multiple of
 * 64 bytes, so each part starts 64-byte aligned from the buffer's start.
 * The host algorithms (coll.c) and the device path's moves
 * (lib/cuda/move.c) cut a buffer alike. */
static inline size_t sd_coll_part_elems(size_t n, int nranks, size_t es)
{
	size_t align = es >= 64 ? 1 : 64 / es;
	size_t part = (n + (size_t)nranks - 1) / (size_t)nranks;

	return (part + align - 1) / align * align;
}

/* ---- collectives (lib/coll/dispatch.c) ------------------------------------ */
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
/* SMDDP_CHECK_COLL: c->cur against every rank's (through the transport's
 * descriptors and two barriers); SMDDP_EMISMATCH naming them, not sticky. */
int sd_coll_compare(struct smddp_comm *c);

/* ---- point to point (lib/coll/p2p.c) --------------------------------------
 * A batch of struct sd_p2p_op (transport.h: what the transport's p2p runs). */

/* Host buffers: runs ops[0..n) until all are done; the transport's own
 * pairs (a rank to itself) are copied here. */
int sd_coll_p2p(struct smddp_comm *c, struct sd_p2p_op *ops, int n);
/* *op: a send (is_send) or receive of bytes at buf with peer under key. */
void sd_coll_op_set(struct sd_p2p_op *op, int is_send, int peer, uint64_t key, const void *buf,
		    size_t bytes);
/* The messages of one call, as a batch (es: element size; key: its key).
 * *out is few when the batch fits its room of `room` ops, else malloc()ed;
 * *n its length; SMDDP_ENOMEM. */
int sd_coll_alltoallv_ops(struct smddp_comm *c, const void *sbuf, const size_t *scounts,
			  const size_t *sdispls, void *rbuf, const size_t *rcounts,
			  const size_t *rdispls, size_t es, uint64_t key, struct sd_p2p_op *few,
			  int room, struct sd_p2p_op **out, int *n);
int sd_coll_rooted_ops(struct smddp_comm *c, int gather, const void *sbuf, void *rbuf,
		       size_t bytes, int root, uint64_t key, struct sd_p2p_op *few, int room,
		       struct sd_p2p_op **out, int *n);

#endif
