/* conf-colls.c - conformance: one case of each collective (reductions, data movement, barrier),
 * its inputs filled in and its output checked against conf-ref.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <smddp/smddp.h>

#include "conformance.h"

/* ---- reductions ------------------------------------------------------------ */

static void fill_red(void *buf, size_t from, size_t n, int wr, int dt, int op, int coll, int salt)
{
	size_t i;

	for (i = 0; i < n; i++)
		store_bits(buf, i, dt, red_input(wr, from + i, dt, op, coll, salt));
}

/* Elements [0, n) of buf against the reduction reference for input indices first..first+n. */
static void check_red(struct kase *k, struct group *g, const void *buf, size_t first, size_t n,
		      int salt)
{
	size_t i;
	char gs[64], es[64];

	for (i = 0; i < n; i++) {
		uint64_t got = load_bits(buf, i, k->dt);
		struct expect e = red_expect(g->ranks, g->size, first + i, k->dt, k->op, k->coll, salt);
		if (!red_match(got, &e, k->dt, k->op)) {
			fmt_val(gs, sizeof(gs), got, k->dt);
			fmt_val(es, sizeof(es), e.bits, k->dt);
			if (is_float(k->dt) && k->op != SMDDP_MIN && k->op != SMDDP_MAX)
				bad(k, "index %zu: got %s, expected %s (float64 reference %.17g, %s)",
				    first + i, gs, es, e.ref,
				    k->dt <= SMDDP_BFLOAT16 && !multi_host ? "1 ulp allowed"
									  : "tolerance applied");
			else
				bad(k, "index %zu: got %s, expected %s (exact)", first + i, gs, es);
			if (k->nbad > MAX_SHOWN)
				return;
		}
	}
}

/* Send buffer unchanged after an out-of-place reduction. */
static void check_red_input(struct kase *k, struct group *g, const void *buf, size_t n, int salt)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (load_bits(buf, i, k->dt) !=
		    red_input(g->ranks[g->rank], i, k->dt, k->op, k->coll, salt)) {
			bad(k, "send buffer changed at index %zu", i);
			return;
		}
	}
}

void t_allreduce(struct group *g, int dt, int op, size_t count, int inplace)
{
	size_t sz = dtype_sizes[dt], bytes = count * sz;
	struct gbuf sb, rb;
	struct kase k;
	int rc, wr = g->ranks[g->rank];

	case_begin(&k, g->name, C_ALLREDUCE, dt, op, -1, inplace, count);
	gbuf_alloc(&rb, bytes);
	if (inplace) {
		fill_red(gbuf_ptr(&rb), 0, count, wr, dt, op, C_ALLREDUCE, inplace);
		rc = LIBCALL(smddp_allreduce(gbuf_ptr(&rb), gbuf_ptr(&rb), count, dt, op, g->comm, NULL));
	} else {
		gbuf_alloc(&sb, bytes);
		fill_red(gbuf_ptr(&sb), 0, count, wr, dt, op, C_ALLREDUCE, inplace);
		rc = LIBCALL(smddp_allreduce(gbuf_ptr(&sb), gbuf_ptr(&rb), count, dt, op, g->comm, NULL));
	}
	if (rc != SMDDP_OK)
		die_rc(&k, rc, g->comm);
	check_red(&k, g, gbuf_ptr(&rb), 0, count, inplace);
	check_guards(&k, &rb, "recvbuf");
	if (!inplace) {
		check_red_input(&k, g, gbuf_ptr(&sb), count, inplace);
		check_guards(&k, &sb, "sendbuf");
		gbuf_free(&sb);
	}
	gbuf_free(&rb);
	case_end(&k);
}

/* inplace: 0 out of place, 1 sendbuf == recvbuf, 2 recvbuf == sendbuf + rank*count. */
void t_reduce_scatter(struct group *g, int dt, int op, size_t count, int inplace)
{
	size_t sz = dtype_sizes[dt], n = (size_t)g->size;
	struct gbuf sb, rb;
	struct kase k;
	int rc, wr = g->ranks[g->rank];
	void *recv;

	case_begin(&k, g->name, C_REDUCE_SCATTER, dt, op, -1, inplace, count);
	gbuf_alloc(&sb, n * count * sz);
	fill_red(gbuf_ptr(&sb), 0, n * count, wr, dt, op, C_REDUCE_SCATTER, inplace);
	if (inplace) {
		recv = (char *)gbuf_ptr(&sb) + (inplace == 2 ? (size_t)g->rank * count * sz : 0);
		rc = LIBCALL(smddp_reduce_scatter(gbuf_ptr(&sb), recv, count, dt, op, g->comm, NULL));
		if (rc != SMDDP_OK)
			die_rc(&k, rc, g->comm);
		check_red(&k, g, recv, (size_t)g->rank * count, count, inplace);
		check_guards(&k, &sb, "sendbuf=recvbuf");
	} else {
		gbuf_alloc(&rb, count * sz);
		rc = LIBCALL(smddp_reduce_scatter(gbuf_ptr(&sb), gbuf_ptr(&rb), count, dt, op, g->comm,
					  NULL));
		if (rc != SMDDP_OK)
			die_rc(&k, rc, g->comm);
		check_red(&k, g, gbuf_ptr(&rb), (size_t)g->rank * count, count, inplace);
		check_guards(&k, &rb, "recvbuf");
		check_red_input(&k, g, gbuf_ptr(&sb), n * count, inplace);
		check_guards(&k, &sb, "sendbuf");
		gbuf_free(&rb);
	}
	gbuf_free(&sb);
	case_end(&k);
}

void t_reduce(struct group *g, int dt, int op, size_t count, int root, int inplace)
{
	size_t sz = dtype_sizes[dt], bytes = count * sz;
	struct gbuf sb, rb;
	struct kase k;
	int rc, wr = g->ranks[g->rank];
	int salt = 2 * root + inplace + 1; /* fresh inputs every call: stale data cannot pass */

	case_begin(&k, g->name, C_REDUCE, dt, op, root, inplace, count);
	gbuf_alloc(&rb, bytes);
	if (inplace) {
		fill_red(gbuf_ptr(&rb), 0, count, wr, dt, op, C_REDUCE, salt);
		rc = LIBCALL(smddp_reduce(gbuf_ptr(&rb), gbuf_ptr(&rb), count, dt, op, root, g->comm, NULL));
	} else {
		gbuf_alloc(&sb, bytes);
		fill_red(gbuf_ptr(&sb), 0, count, wr, dt, op, C_REDUCE, salt);
		rc = LIBCALL(smddp_reduce(gbuf_ptr(&sb), gbuf_ptr(&rb), count, dt, op, root, g->comm, NULL));
	}
	if (rc != SMDDP_OK)
		die_rc(&k, rc, g->comm);
	if (g->rank == root) {
		check_red(&k, g, gbuf_ptr(&rb), 0, count, salt);
	} else if (inplace) {
		/* the buffer is this rank's input and is not an output here */
		check_red_input(&k, g, gbuf_ptr(&rb), count, salt);
	} else {
		check_poison(&k, &rb, 0, bytes, "non-root recvbuf");
	}
	check_guards(&k, &rb, "recvbuf");
	if (!inplace) {
		check_red_input(&k, g, gbuf_ptr(&sb), count, salt);
		check_guards(&k, &sb, "sendbuf");
		gbuf_free(&sb);
	}
	gbuf_free(&rb);
	case_end(&k);
}

/* ---- data movement ------------------------------------------------------- */

static void fill_move(void *buf, size_t from, size_t n, int wr, int dt, int coll, int salt)
{
	size_t i;

	for (i = 0; i < n; i++)
		store_bits(buf, i, dt, move_input(wr, from + i, dt, coll, salt));
}

/* Elements [0, n) of buf equal rank wr's input at first.. */
static void check_move(struct kase *k, const void *buf, size_t n, int wr, size_t first,
		       int salt, const char *what)
{
	size_t i;
	char gs[64], es[64];

	for (i = 0; i < n; i++) {
		uint64_t got = load_bits(buf, i, k->dt);
		uint64_t exp = move_input(wr, first + i, k->dt, k->coll, salt);
		if (got != exp) {
			fmt_val(gs, sizeof(gs), got, k->dt);
			fmt_val(es, sizeof(es), exp, k->dt);
			bad(k, "%s index %zu: got %s, expected %s (world rank %d's element %zu, bit exact)",
			    what, i, gs, es, wr, first + i);
			if (k->nbad > MAX_SHOWN)
				return;
		}
	}
}

void t_allgather(struct group *g, int dt, size_t count, int inplace)
{
	size_t sz = dtype_sizes[dt], n = (size_t)g->size;
	struct gbuf sb, rb;
	struct kase k;
	int rc, r, wr = g->ranks[g->rank];
	char what[48];

	case_begin(&k, g->name, C_ALLGATHER, dt, -1, -1, inplace, count);
	gbuf_alloc(&rb, n * count * sz);
	if (inplace) {
		char *mine = (char *)gbuf_ptr(&rb) + (size_t)g->rank * count * sz;
		fill_move(mine, 0, count, wr, dt, C_ALLGATHER, inplace);
		rc = LIBCALL(smddp_allgather(mine, gbuf_ptr(&rb), count, dt, g->comm, NULL));
	} else {
		gbuf_alloc(&sb, count * sz);
		fill_move(gbuf_ptr(&sb), 0, count, wr, dt, C_ALLGATHER, inplace);
		rc = LIBCALL(smddp_allgather(gbuf_ptr(&sb), gbuf_ptr(&rb), count, dt, g->comm, NULL));
	}
	if (rc != SMDDP_OK)
		die_rc(&k, rc, g->comm);
	for (r = 0; r < g->size; r++) {
		snprintf(what, sizeof(what), "block %d", r);
		check_move(&k, (char *)gbuf_ptr(&rb) + (size_t)r * count * sz, count, g->ranks[r], 0,
			   inplace, what);
	}
	check_guards(&k, &rb, "recvbuf");
	if (!inplace) {
		check_move(&k, gbuf_ptr(&sb), count, wr, 0, inplace, "sendbuf (must be unchanged)");
		check_guards(&k, &sb, "sendbuf");
		gbuf_free(&sb);
	}
	gbuf_free(&rb);
	case_end(&k);
}

void t_broadcast(struct group *g, int dt, size_t count, int root)
{
	size_t sz = dtype_sizes[dt];
	struct gbuf b;
	struct kase k;
	int rc;

	case_begin(&k, g->name, C_BROADCAST, dt, -1, root, 1, count);
	gbuf_alloc(&b, count * sz);
	if (g->rank == root)
		fill_move(gbuf_ptr(&b), 0, count, g->ranks[root], dt, C_BROADCAST, root);
	rc = LIBCALL(smddp_broadcast(gbuf_ptr(&b), count, dt, root, g->comm, NULL));
	if (rc != SMDDP_OK)
		die_rc(&k, rc, g->comm);
	check_move(&k, gbuf_ptr(&b), count, g->ranks[root], 0, root, "buf");
	check_guards(&k, &b, "buf");
	gbuf_free(&b);
	case_end(&k);
}

/* Rank r sends its elements [d*count, (d+1)*count) to rank d.  inplace: 0
 * out of place, 1 in place, 3 odd ranks in place and even ones not (a
 * rank's in-place block may be read by a peer that is not). */
void t_alltoall(struct group *g, int dt, size_t count, int inplace)
{
	size_t sz = dtype_sizes[dt], n = (size_t)g->size;
	struct gbuf sb, rb;
	struct kase k;
	int rc, r, wr = g->ranks[g->rank];
	int mine = inplace == 3 ? g->rank & 1 : inplace;
	char what[48];

	case_begin(&k, g->name, C_ALLTOALL, dt, -1, -1, inplace, count);
	gbuf_alloc(&rb, n * count * sz);
	if (mine) {
		fill_move(gbuf_ptr(&rb), 0, n * count, wr, dt, C_ALLTOALL, inplace);
		rc = LIBCALL(smddp_alltoall(gbuf_ptr(&rb), gbuf_ptr(&rb), count, dt, g->comm, NULL));
	} else {
		gbuf_alloc(&sb, n * count * sz);
		fill_move(gbuf_ptr(&sb), 0, n * count, wr, dt, C_ALLTOALL, inplace);
		rc = LIBCALL(smddp_alltoall(gbuf_ptr(&sb), gbuf_ptr(&rb), count, dt, g->comm, NULL));
	}
	if (inplace && (rc == SMDDP_EINVAL || rc == SMDDP_EUNSUPPORTED)) {
		/* The header does not promise in-place alltoall; refusing it is fine
		 * (the same on every rank), corrupting it is not. */
		if (g->rank == 0 && count == 1 && dt == 0)
			printf("note: in-place alltoall refused with %s: %s\n", rc_name(rc),
			       smddp_last_error(g->comm));
		n_skip++;
		if (!mine)
			gbuf_free(&sb);
		gbuf_free(&rb);
		return;
	}
	if (rc != SMDDP_OK)
		die_rc(&k, rc, g->comm);
	for (r = 0; r < g->size; r++) {
		snprintf(what, sizeof(what), "block from rank %d", r);
		check_move(&k, (char *)gbuf_ptr(&rb) + (size_t)r * count * sz, count, g->ranks[r],
			   (size_t)g->rank * count, inplace, what);
	}
	check_guards(&k, &rb, "recvbuf");
	if (!mine) {
		check_move(&k, gbuf_ptr(&sb), n * count, wr, 0, inplace, "sendbuf (must be unchanged)");
		check_guards(&k, &sb, "sendbuf");
		gbuf_free(&sb);
	}
	gbuf_free(&rb);
	case_end(&k);
}

/* ---- barrier ---------------------------------------------------------------- */

void t_barrier(struct group *g, int late_rank)
{
	struct kase k;
	double t[2], *all;
	int rc, r;
	double last_in = 0;

	case_begin(&k, g->name, C_BARRIER, -1, -1, late_rank, 0, 0);
	if (g->rank == late_rank)
		usleep(150 * 1000);
	t[0] = sd_now_s();
	rc = smddp_barrier(g->comm);
	t[1] = sd_now_s();
	if (rc != SMDDP_OK)
		die_rc(&k, rc, g->comm);
	all = calloc((size_t)g->size * 2, sizeof(double));
	rc = LIBCALL(smddp_allgather(t, all, 2, SMDDP_FLOAT64, g->comm, NULL));
	if (rc != SMDDP_OK)
		die_rc(&k, rc, g->comm);
	for (r = 0; r < g->size; r++)
		if (all[2 * r] > last_in)
			last_in = all[2 * r];
	for (r = 0; r < g->size; r++)
		if (all[2 * r + 1] < last_in)
			bad(&k, "rank %d left the barrier %.6f s before rank %d entered it", r,
			    last_in - all[2 * r + 1], late_rank);
	free(all);
	case_end(&k);
}
