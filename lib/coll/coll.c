/* coll.c - collective algorithms over a slot transport (one node).
 *
 * Every algorithm is a sequence of steps that keep the protocol of
 * transport.h: write your own half, barrier, read anyone's half.  Vectors
 * longer than a half are cut into pieces, so the working set stays small
 * and the shared segment stays a fixed size whatever the message.
 *
 * AllReduce and Reduce of a piece: every rank copies its input into its half;
 * barrier; rank r reduces partition r of every rank's half (P sources in one
 * pass, so fp16 and bf16 round once) into its own half; barrier; everyone
 * copies the reduced partitions out.  Each byte is reduced by exactly one
 * rank, so every rank gets bitwise the same result.  Small vectors skip the
 * second barrier: every rank reduces the whole vector itself.
 */
#include "config.h"

#include <string.h>

#include "core/comm.h"
#include "transport/transport.h"

#define SMALL_TOTAL (128 * 1024) /* count * size * nranks at or below: latency path */
#define MAX_SRCS 1024

static inline int next_half(struct smddp_comm *c)
{
	return (int)(c->step++ & 1);
}

/* Elements in each rank's partition of n elements: 64-byte multiples. */
static size_t part_elems(size_t n, int nranks, size_t es)
{
	size_t align = es >= 64 ? 1 : 64 / es;
	size_t part = (n + (size_t)nranks - 1) / (size_t)nranks;

	return (part + align - 1) / align * align;
}

static void part_range(size_t n, size_t part, int r, size_t *lo, size_t *hi)
{
	size_t l = part * (size_t)r;

	*lo = l < n ? l : n;
	*hi = l + part < n ? l + part : n;
}

/* Shared body of allreduce (root < 0) and reduce (root >= 0). */
static int reduce_common(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			 enum smddp_dtype dt, enum smddp_op op, int root)
{
	const struct sd_transport_ops *tp = c->tp;
	const void *srcs[MAX_SRCS];
	size_t es = smddp_dtype_size(dt);
	size_t half = tp->half_bytes(c);
	size_t step_elems = half / es;
	int P = c->size, me = c->rank;
	int rc;

	if (P > MAX_SRCS)
		return sd_comm_error(c, SMDDP_EUNSUPPORTED, "more than %d ranks on one node",
				     MAX_SRCS);
	if (count * es * (size_t)P <= SMALL_TOTAL && count <= step_elems) {
		int h = next_half(c);

		memcpy(tp->slot(c, me, h), sbuf, count * es);
		SD_CHECK(tp->barrier(c));
		if (root < 0 || root == me) {
			for (int r = 0; r < P; r++)
				srcs[r] = tp->slot(c, r, h);
			sd_reduce(rbuf, srcs, P, count, dt, op, P);
		}
		return SMDDP_OK;
	}
	for (size_t off = 0; off < count; off += step_elems) {
		size_t n = count - off < step_elems ? count - off : step_elems;
		size_t part = part_elems(n, P, es), lo, hi;
		int h = next_half(c);
		const char *in = (const char *)sbuf + off * es;
		char *mine = tp->slot(c, me, h);

		memcpy(mine, in, n * es);
		SD_CHECK(tp->barrier(c));
		part_range(n, part, me, &lo, &hi);
		if (hi > lo) {
			for (int r = 0; r < P; r++)
				srcs[r] = (const char *)tp->slot(c, r, h) + lo * es;
			sd_reduce(mine + lo * es, srcs, P, hi - lo, dt, op, P);
		}
		rc = tp->barrier(c);
		if (rc)
			return rc;
		if (root >= 0 && root != me)
			continue;
		for (int r = 0; r < P; r++) {
			part_range(n, part, r, &lo, &hi);
			if (hi > lo)
				memcpy((char *)rbuf + (off + lo) * es,
				       (const char *)tp->slot(c, r, h) + lo * es, (hi - lo) * es);
		}
	}
	return SMDDP_OK;
}

int sd_coll_allreduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		      enum smddp_dtype dt, enum smddp_op op)
{
	return reduce_common(c, sbuf, rbuf, count, dt, op, -1);
}

int sd_coll_reduce(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		   enum smddp_dtype dt, enum smddp_op op, int root)
{
	return reduce_common(c, sbuf, rbuf, count, dt, op, root);
}

int sd_coll_allgather(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		      enum smddp_dtype dt)
{
	const struct sd_transport_ops *tp = c->tp;
	size_t m = count * smddp_dtype_size(dt);
	size_t half = tp->half_bytes(c);
	int P = c->size, me = c->rank;
	char *out = rbuf;
	int inplace = (const char *)sbuf == out + (size_t)me * m;

	for (size_t o = 0; o < m; o += half) {
		size_t len = m - o < half ? m - o : half;
		int h = next_half(c);

		memcpy(tp->slot(c, me, h), (const char *)sbuf + o, len);
		SD_CHECK(tp->barrier(c));
		for (int r = 0; r < P; r++) {
			if (r == me) {
				if (!inplace)
					memmove(out + (size_t)r * m + o, (const char *)sbuf + o, len);
			} else {
				memcpy(out + (size_t)r * m + o, tp->slot(c, r, h), len);
			}
		}
	}
	return SMDDP_OK;
}

/* Reduce-scatter and all-to-all share their shape: in each step every rank
 * puts `len` elements for each peer q in its half at q*len, and after the
 * barrier takes what each peer put for it. */
static int exchange(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		    enum smddp_dtype dt, enum smddp_op op, int reduce)
{
	const struct sd_transport_ops *tp = c->tp;
	const void *srcs[MAX_SRCS];
	size_t es = smddp_dtype_size(dt);
	size_t half = tp->half_bytes(c);
	int P = c->size, me = c->rank;
	size_t step_elems = half / (es * (size_t)P);

	if (step_elems == 0 || P > MAX_SRCS)
		return sd_comm_error(c, SMDDP_EUNSUPPORTED,
				     "SMDDP_SHM_CHUNK of %zu bytes is too small for %d ranks of %zu-byte "
				     "elements: raise it",
				     half, P, es);
	for (size_t o = 0; o < count; o += step_elems) {
		size_t len = count - o < step_elems ? count - o : step_elems;
		int h = next_half(c);
		char *mine = tp->slot(c, me, h);

		for (int q = 0; q < P; q++)
			memcpy(mine + (size_t)q * len * es,
			       (const char *)sbuf + ((size_t)q * count + o) * es, len * es);
		SD_CHECK(tp->barrier(c));
		if (reduce) {
			for (int q = 0; q < P; q++)
				srcs[q] = (const char *)tp->slot(c, q, h) + (size_t)me * len * es;
			sd_reduce((char *)rbuf + o * es, srcs, P, len, dt, op, P);
		} else {
			for (int q = 0; q < P; q++)
				memcpy((char *)rbuf + ((size_t)q * count + o) * es,
				       (const char *)tp->slot(c, q, h) + (size_t)me * len * es,
				       len * es);
		}
	}
	return SMDDP_OK;
}

int sd_coll_reduce_scatter(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
			   enum smddp_dtype dt, enum smddp_op op)
{
	return exchange(c, sbuf, rbuf, count, dt, op, 1);
}

int sd_coll_alltoall(struct smddp_comm *c, const void *sbuf, void *rbuf, size_t count,
		     enum smddp_dtype dt)
{
	return exchange(c, sbuf, rbuf, count, dt, SMDDP_SUM, 0);
}

int sd_coll_broadcast(struct smddp_comm *c, void *buf, size_t count, enum smddp_dtype dt,
		      int root)
{
	const struct sd_transport_ops *tp = c->tp;
	size_t m = count * smddp_dtype_size(dt);
	size_t half = tp->half_bytes(c);

	for (size_t o = 0; o < m; o += half) {
		size_t len = m - o < half ? m - o : half;
		int h = next_half(c);

		if (c->rank == root)
			memcpy(tp->slot(c, root, h), (char *)buf + o, len);
		SD_CHECK(tp->barrier(c));
		if (c->rank != root)
			memcpy((char *)buf + o, tp->slot(c, root, h), len);
	}
	return SMDDP_OK;
}
