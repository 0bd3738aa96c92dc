/* conf-api.c - conformance: what the matrix does not cover: the API surface and argument
 * errors, sub-communicators, two threads, lifecycle, buffer reuse and signals.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <smddp/smddp.h>

#include "conformance.h"
#include "../unit/check.h" /* count_fds() */

/* ---- API surface: names, versions, argument errors ---------------------------- */

static void expect_rc(const char *what, int got, int want, struct smddp_comm *comm)
{
	check_true(what, got == want, "returned %s (%d), expected %s; last error: %s",
		   rc_name(got), got, rc_name(want), smddp_last_error(comm));
	if (got == want && want != SMDDP_OK && comm) {
		const char *e = smddp_last_error(comm);
		check_true(what, e && *e, "smddp_last_error() is empty after %s", rc_name(want));
	}
}

void t_api_local(void)
{
	char buf[32];
	int rc, j;
	const char *v = smddp_version();

	check_true("smddp_version", v && *v, "empty or NULL");
	snprintf(buf, sizeof(buf), "%d.%d.%d", SMDDP_VERSION_MAJOR, SMDDP_VERSION_MINOR,
		 SMDDP_VERSION_PATCH);
	check_true("smddp_version", v && strcmp(v, buf) == 0, "\"%s\" but the header says %s",
		   v ? v : "(null)", buf);
	for (rc = 0; rc <= SMDDP_EINTERNAL; rc++) {
		const char *s = smddp_strerror(rc);
		check_true("smddp_strerror", s && *s, "empty or NULL for %s", rc_name(rc));
		for (j = 0; j < rc && s; j++)
			check_true("smddp_strerror", strcmp(s, smddp_strerror(j)) != 0,
				   "%s and %s share the text \"%s\"", rc_name(rc), rc_name(j), s);
	}
	check_true("smddp_strerror", smddp_strerror(99) != NULL, "NULL for 99");
	check_true("smddp_strerror", smddp_strerror(-1) != NULL, "NULL for -1");
	for (j = 0; j < SMDDP_NUM_DTYPES; j++) {
		check_true("smddp_dtype_size", smddp_dtype_size(j) == dtype_sizes[j],
			   "%zu for %s", smddp_dtype_size(j), dtype_names[j]);
		check_true("smddp_dtype_name",
			   smddp_dtype_name(j) && !strcmp(smddp_dtype_name(j), dtype_names[j]),
			   "wrong name for %s", dtype_names[j]);
	}
	check_true("smddp_dtype_size", smddp_dtype_size(99) == 0, "nonzero for 99");
	check_true("smddp_dtype_name", smddp_dtype_name(99) == NULL, "non-NULL for 99");
	for (j = 0; j < SMDDP_NUM_OPS; j++)
		check_true("smddp_op_name", smddp_op_name(j) && !strcmp(smddp_op_name(j), op_names[j]),
			   "wrong name for %s", op_names[j]);
	check_true("smddp_op_name", smddp_op_name(99) == NULL, "non-NULL for 99");
}

/* Every call below fails the same way on every rank, so nothing may hang. */
void t_arg_errors(struct group *g)
{
	struct smddp_comm *c = g->comm;
	int n = g->size, x[64] = {0}, y[64 * 8] = {0}, rc;
	void *stream = (void *)&x; /* any non-NULL pointer: not a CUDA stream */

	expect_rc("allreduce NULL comm", smddp_allreduce(x, y, 4, SMDDP_INT32, SMDDP_SUM, NULL, NULL),
		  SMDDP_EINVAL, NULL);
	expect_rc("allgather NULL comm", smddp_allgather(x, y, 4, SMDDP_INT32, NULL, NULL),
		  SMDDP_EINVAL, NULL);
	expect_rc("reduce_scatter NULL comm",
		  smddp_reduce_scatter(x, y, 4, SMDDP_INT32, SMDDP_SUM, NULL, NULL), SMDDP_EINVAL, NULL);
	expect_rc("broadcast NULL comm", smddp_broadcast(x, 4, SMDDP_INT32, 0, NULL, NULL),
		  SMDDP_EINVAL, NULL);
	expect_rc("reduce NULL comm", smddp_reduce(x, y, 4, SMDDP_INT32, SMDDP_SUM, 0, NULL, NULL),
		  SMDDP_EINVAL, NULL);
	expect_rc("alltoall NULL comm", smddp_alltoall(x, y, 4, SMDDP_INT32, NULL, NULL),
		  SMDDP_EINVAL, NULL);
	expect_rc("barrier NULL comm", smddp_barrier(NULL), SMDDP_EINVAL, NULL);
	expect_rc("split NULL comm", smddp_comm_split(NULL, 0, 0, &c), SMDDP_EINVAL, NULL);
	expect_rc("destroy NULL comm", smddp_comm_destroy(NULL), SMDDP_EINVAL, NULL);
	c = g->comm;
	{
		/* No device collective has run: one of the three modes. */
		int mode = -2;

		expect_rc("cuda_mode NULL comm", smddp_comm_get_cuda_mode(NULL, &mode), SMDDP_EINVAL,
			  NULL);
		expect_rc("cuda_mode NULL mode", smddp_comm_get_cuda_mode(c, NULL), SMDDP_EINVAL, NULL);
		rc = smddp_comm_get_cuda_mode(c, &mode);
		check_true("smddp_comm_get_cuda_mode",
			   rc == SMDDP_OK && mode >= SMDDP_CUDA_UNDECIDED && mode <= SMDDP_CUDA_QUEUED,
			   "returned %s with mode %d", rc_name(rc), mode);
	}

	expect_rc("allreduce dtype 99", smddp_allreduce(x, y, 4, 99, SMDDP_SUM, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("allreduce op 99", smddp_allreduce(x, y, 4, SMDDP_INT32, 99, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("allreduce dtype -1", smddp_allreduce(x, y, 4, -1, SMDDP_SUM, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("allgather dtype 99", smddp_allgather(x, y, 4, 99, c, NULL), SMDDP_EINVAL, c);
	expect_rc("reduce_scatter dtype 99",
		  smddp_reduce_scatter(y, x, 4, 99, SMDDP_SUM, c, NULL), SMDDP_EINVAL, c);
	expect_rc("reduce_scatter op 99",
		  smddp_reduce_scatter(y, x, 4, SMDDP_INT32, 99, c, NULL), SMDDP_EINVAL, c);
	expect_rc("broadcast dtype 99", smddp_broadcast(x, 4, 99, 0, c, NULL), SMDDP_EINVAL, c);
	expect_rc("reduce dtype 99", smddp_reduce(x, y, 4, 99, SMDDP_SUM, 0, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("reduce op 99", smddp_reduce(x, y, 4, SMDDP_INT32, 99, 0, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("alltoall dtype 99", smddp_alltoall(y, y + 32, 4, 99, c, NULL), SMDDP_EINVAL, c);

	expect_rc("broadcast root = size", smddp_broadcast(x, 4, SMDDP_INT32, n, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("broadcast root -1", smddp_broadcast(x, 4, SMDDP_INT32, -1, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("reduce root = size", smddp_reduce(x, y, 4, SMDDP_INT32, SMDDP_SUM, n, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("reduce root -1", smddp_reduce(x, y, 4, SMDDP_INT32, SMDDP_SUM, -1, c, NULL),
		  SMDDP_EINVAL, c);

	expect_rc("allreduce NULL sendbuf",
		  smddp_allreduce(NULL, y, 4, SMDDP_INT32, SMDDP_SUM, c, NULL), SMDDP_EINVAL, c);
	expect_rc("allreduce NULL recvbuf",
		  smddp_allreduce(x, NULL, 4, SMDDP_INT32, SMDDP_SUM, c, NULL), SMDDP_EINVAL, c);
	expect_rc("allgather NULL sendbuf", smddp_allgather(NULL, y, 4, SMDDP_INT32, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("allgather NULL recvbuf", smddp_allgather(x, NULL, 4, SMDDP_INT32, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("reduce_scatter NULL sendbuf",
		  smddp_reduce_scatter(NULL, x, 4, SMDDP_INT32, SMDDP_SUM, c, NULL), SMDDP_EINVAL, c);
	expect_rc("reduce_scatter NULL recvbuf",
		  smddp_reduce_scatter(y, NULL, 4, SMDDP_INT32, SMDDP_SUM, c, NULL), SMDDP_EINVAL, c);
	expect_rc("broadcast NULL buf", smddp_broadcast(NULL, 4, SMDDP_INT32, 0, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("reduce NULL sendbuf",
		  smddp_reduce(NULL, y, 4, SMDDP_INT32, SMDDP_SUM, 0, c, NULL), SMDDP_EINVAL, c);
	expect_rc("alltoall NULL sendbuf", smddp_alltoall(NULL, y, 4, SMDDP_INT32, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("alltoall NULL recvbuf", smddp_alltoall(y, NULL, 4, SMDDP_INT32, c, NULL),
		  SMDDP_EINVAL, c);
	expect_rc("split NULL out", smddp_comm_split(c, 0, 0, NULL), SMDDP_EINVAL, c);

	expect_rc("allreduce stream", smddp_allreduce(x, y, 4, SMDDP_INT32, SMDDP_SUM, c, stream),
		  SMDDP_EUNSUPPORTED, c);
	expect_rc("allgather stream", smddp_allgather(x, y, 4, SMDDP_INT32, c, stream),
		  SMDDP_EUNSUPPORTED, c);
	expect_rc("reduce_scatter stream",
		  smddp_reduce_scatter(y, x, 4, SMDDP_INT32, SMDDP_SUM, c, stream),
		  SMDDP_EUNSUPPORTED, c);
	expect_rc("broadcast stream", smddp_broadcast(x, 4, SMDDP_INT32, 0, c, stream),
		  SMDDP_EUNSUPPORTED, c);
	expect_rc("reduce stream", smddp_reduce(x, y, 4, SMDDP_INT32, SMDDP_SUM, 0, c, stream),
		  SMDDP_EUNSUPPORTED, c);
	expect_rc("alltoall stream", smddp_alltoall(y, y + 32, 4, SMDDP_INT32, c, stream),
		  SMDDP_EUNSUPPORTED, c);

	/* What is allowed: NULL buffers with count 0 (an empty tensor's data
	 * pointer), a NULL recvbuf on the ranks that are not reduce's root, and
	 * a NULL communicator for the rank and size queries (-1). */
	expect_rc("allreduce NULL count 0", smddp_allreduce(NULL, NULL, 0, SMDDP_FLOAT32, SMDDP_SUM, c,
							  NULL), SMDDP_OK, c);
	expect_rc("allgather NULL count 0", smddp_allgather(NULL, NULL, 0, SMDDP_FLOAT32, c, NULL),
		  SMDDP_OK, c);
	expect_rc("reduce_scatter NULL count 0",
		  smddp_reduce_scatter(NULL, NULL, 0, SMDDP_FLOAT32, SMDDP_SUM, c, NULL), SMDDP_OK, c);
	expect_rc("broadcast NULL count 0", smddp_broadcast(NULL, 0, SMDDP_FLOAT32, 0, c, NULL),
		  SMDDP_OK, c);
	expect_rc("reduce NULL count 0", smddp_reduce(NULL, NULL, 0, SMDDP_FLOAT32, SMDDP_SUM, 0, c,
						      NULL), SMDDP_OK, c);
	expect_rc("alltoall NULL count 0", smddp_alltoall(NULL, NULL, 0, SMDDP_FLOAT32, c, NULL),
		  SMDDP_OK, c);
	x[0] = g->rank + 1;
	y[0] = -1;
	rc = smddp_reduce(x, g->rank == n - 1 ? y : NULL, 1, SMDDP_INT32, SMDDP_SUM, n - 1, c, NULL);
	expect_rc("reduce with a NULL recvbuf off the root", rc, SMDDP_OK, c);
	if (g->rank == n - 1)
		check_true("reduce with a NULL recvbuf off the root", rc != SMDDP_OK ||
			   y[0] == n * (n + 1) / 2, "got %d, expected %d", y[0], n * (n + 1) / 2);
	check_true("smddp_comm_rank(NULL)", smddp_comm_rank(NULL) == -1, "%d", smddp_comm_rank(NULL));
	check_true("smddp_comm_size(NULL)", smddp_comm_size(NULL) == -1, "%d", smddp_comm_size(NULL));
	check_true("smddp_comm_local_rank(NULL)", smddp_comm_local_rank(NULL) == -1, "%d",
		   smddp_comm_local_rank(NULL));
	check_true("smddp_comm_local_size(NULL)", smddp_comm_local_size(NULL) == -1, "%d",
		   smddp_comm_local_size(NULL));

	/* None of the above may have broken the communicator. */
	x[0] = g->rank + 1;
	rc = smddp_allreduce(x, y, 1, SMDDP_INT32, SMDDP_SUM, c, NULL);
	expect_rc("allreduce after argument errors", rc, SMDDP_OK, c);
	check_true("allreduce after argument errors", rc != SMDDP_OK || y[0] == n * (n + 1) / 2,
		   "got %d, expected %d", y[0], n * (n + 1) / 2);
	if (rc != SMDDP_OK) {
		printf("SUMMARY rank %d: stopped: communicator unusable after argument errors\n",
		       world_rank);
		exit(1);
	}
}

/* ---- sub-communicators ------------------------------------------------------ */

void check_group_identity(struct group *g)
{
	char what[96];

	snprintf(what, sizeof(what), "%s rank/size", g->name);
	check_true(what, smddp_comm_rank(g->comm) == g->rank, "rank %d, expected %d",
		   smddp_comm_rank(g->comm), g->rank);
	check_true(what, smddp_comm_size(g->comm) == g->size, "size %d, expected %d",
		   smddp_comm_size(g->comm), g->size);
	/* One host, unless CONFORMANCE_PER_HOST says that world rank w runs
	 * on host w / CONFORMANCE_PER_HOST (tests of several hosts). */
	const char *ph = getenv("CONFORMANCE_PER_HOST");
	int per = ph && atoi(ph) > 0 ? atoi(ph) : 1 << 30, lrank = 0, lsize = 0;
	int host = g->ranks[g->rank] / per;

	for (int i = 0; i < g->size; i++) {
		if (g->ranks[i] / per != host)
			continue;
		lrank += i < g->rank;
		lsize++;
	}
	check_true(what, smddp_comm_local_rank(g->comm) == lrank, "local rank %d, expected %d",
		   smddp_comm_local_rank(g->comm), lrank);
	check_true(what, smddp_comm_local_size(g->comm) == lsize, "local size %d, expected %d",
		   smddp_comm_local_size(g->comm), lsize);
}

/* The order of a group: allgather of world ranks must list g->ranks. */
void check_group_order(struct group *g)
{
	int32_t mine = world_rank, *all = calloc((size_t)g->size, 4);
	int rc, r;
	char what[96];

	snprintf(what, sizeof(what), "%s order (allgather of world ranks)", g->name);
	rc = LIBCALL(smddp_allgather(&mine, all, 1, SMDDP_INT32, g->comm, NULL));
	check_true(what, rc == SMDDP_OK, "returned %s: %s", rc_name(rc), smddp_last_error(g->comm));
	if (rc != SMDDP_OK)
		exit(1);
	for (r = 0; r < g->size; r++)
		check_true(what, all[r] == g->ranks[r], "position %d holds world rank %d, expected %d",
			   r, all[r], g->ranks[r]);
	free(all);
}

static void sub_matrix(struct group *g, const struct plan *full)
{
	struct plan p = *full;

	p.ncounts = 2;
	p.counts[0] = 7;
	p.counts[1] = 1001;
	p.all_roots = 1;
	p.ops_mask = 1 << SMDDP_SUM | 1 << SMDDP_MAX | 1 << SMDDP_AVG;
	check_group_identity(g);
	check_group_order(g);
	run_matrix(g, &p);
}

void t_split(struct group *w, const struct plan *full)
{
	struct group *s = calloc(1, sizeof(*s));
	struct smddp_comm *out = (struct smddp_comm *)&out;
	int rc, r, n;
	struct kase k;

	/* even/odd, key reversing the order */
	case_begin(&k, "world", C_SPLIT, -1, -1, -1, 0, 0);
	rc = smddp_comm_split(w->comm, world_rank % 2, -world_rank, &s->comm);
	if (rc != SMDDP_OK)
		die_rc(&k, rc, w->comm);
	s->name = world_rank % 2 ? "split-odd-reversed" : "split-even-reversed";
	for (r = w->size - 1, n = 0; r >= 0; r--)
		if (r % 2 == world_rank % 2) {
			if (r == world_rank)
				s->rank = n;
			s->ranks[n++] = r;
		}
	s->size = n;
	sub_matrix(s, full);
	/* the world still works beside its child */
	t_allreduce(w, SMDDP_FLOAT32, SMDDP_SUM, 1001, 0);
	t_allreduce(s, SMDDP_INT64, SMDDP_SUM, 7, 1);
	rc = smddp_comm_destroy(s->comm);
	check_true("destroy split-even/odd", rc == SMDDP_OK, "returned %s: %s", rc_name(rc),
		   smddp_last_error(NULL));

	/* rank 0 out (color -1): NULL for it, everyone else in rank order */
	rc = smddp_comm_split(w->comm, world_rank == 0 ? -1 : 3, 0, &out);
	if (rc != SMDDP_OK)
		die_rc(&k, rc, w->comm);
	if (world_rank == 0) {
		check_true("split color -1", out == NULL, "*out is %p, expected NULL", (void *)out);
	} else {
		memset(s, 0, sizeof(*s));
		s->comm = out;
		s->name = "split-without-rank-0";
		s->size = w->size - 1;
		s->rank = world_rank - 1;
		for (r = 1; r < w->size; r++)
			s->ranks[r - 1] = r;
		check_true("split color -1 (others)", out != NULL, "*out is NULL");
		if (out) {
			check_group_identity(s);
			check_group_order(s);
			t_allreduce(s, SMDDP_INT8, SMDDP_SUM, 1001, 0);
			t_allreduce(s, SMDDP_BFLOAT16, SMDDP_AVG, 7, 1);
			t_broadcast(s, SMDDP_UINT64, 7, s->size - 1);
			rc = smddp_comm_destroy(out);
			check_true("destroy split-without-rank-0", rc == SMDDP_OK, "returned %s: %s",
				   rc_name(rc), smddp_last_error(NULL));
		}
	}

	/* one color, same key: a copy of the world */
	rc = smddp_comm_split(w->comm, 0, 0, &out);
	if (rc != SMDDP_OK)
		die_rc(&k, rc, w->comm);
	memset(s, 0, sizeof(*s));
	s->comm = out;
	s->name = "split-copy";
	s->size = w->size;
	s->rank = world_rank;
	for (r = 0; r < w->size; r++)
		s->ranks[r] = r;
	check_group_identity(s);
	check_group_order(s);
	t_reduce(s, SMDDP_FLOAT16, SMDDP_SUM, 1001, s->size - 1, 0);
	rc = smddp_comm_destroy(out);
	check_true("destroy split-copy", rc == SMDDP_OK, "returned %s: %s", rc_name(rc),
		   smddp_last_error(NULL));
	free(s);
}

/* ---- two communicators from two threads -------------------------------------- */

struct thread_run {
	struct group *g;
	const struct plan *p;
	long pass, fail, skip;
	double lib;
};

static void *thread_main(void *arg)
{
	struct thread_run *t = arg;

	run_matrix(t->g, t->p);
	t->pass = n_pass;
	t->fail = n_fail;
	t->skip = n_skip;
	t->lib = lib_s;
	return NULL;
}

void t_threads(struct group *w, const struct plan *p)
{
	struct group *c = calloc(1, sizeof(*c));
	struct thread_run t = {c, p, 0, 0, 0, 0};
	struct kase k;
	pthread_t th;
	int rc, r;

	case_begin(&k, "world", C_SPLIT, -1, -1, -1, 0, 0);
	rc = smddp_comm_split(w->comm, 0, 0, &c->comm);
	if (rc != SMDDP_OK)
		die_rc(&k, rc, w->comm);
	c->name = "copy-in-thread";
	c->size = w->size;
	c->rank = w->rank;
	for (r = 0; r < w->size; r++)
		c->ranks[r] = r;
	if (pthread_create(&th, NULL, thread_main, &t) != 0) {
		printf("FAIL rank %d: pthread_create failed\n", world_rank);
		exit(1);
	}
	run_matrix(w, p);
	pthread_join(th, NULL);
	n_pass += t.pass;
	n_fail += t.fail;
	n_skip += t.skip;
	lib_s += t.lib;
	rc = smddp_comm_destroy(c->comm);
	check_true("destroy copy-in-thread", rc == SMDDP_OK, "returned %s: %s", rc_name(rc),
		   smddp_last_error(NULL));
	free(c);
}

/* ---- lifecycle: no leak across communicators, init again after destroy ------- */

static int count_shm_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[1024];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "/dev/shm/"))
			n++;
	fclose(f);
	return n;
}

static struct group *world_group(struct smddp_comm *c, const char *name)
{
	struct group *g = calloc(1, sizeof(*g));
	int r;

	g->comm = c;
	g->name = name;
	g->rank = smddp_comm_rank(c);
	g->size = smddp_comm_size(c);
	for (r = 0; r < g->size; r++)
		g->ranks[r] = r;
	return g;
}

/* 30 split/use/destroy cycles leave the descriptors and mappings as they
 * were; after destroying the world, smddp_init works again in the same
 * process, and the second world works. */
int t_lifecycle(void)
{
	struct smddp_comm *c;
	struct group *w, *s;
	int fds0 = count_fds(), fds1, maps1, rc, i, size;
	char what[64];

	rc = smddp_init(&c);
	if (rc != SMDDP_OK) {
		printf("FAIL: smddp_init returned %s: %s\n", rc_name(rc), smddp_last_error(NULL));
		return 1;
	}
	w = world_group(c, "world");
	world_rank = w->rank;
	size = w->size;
	t_allreduce(w, SMDDP_FLOAT32, SMDDP_SUM, 1001, 0);
	fds1 = count_fds();
	maps1 = count_shm_maps();
	for (i = 0; i < 30; i++) {
		struct smddp_comm *sc = NULL;
		struct kase k;

		case_begin(&k, "world", C_SPLIT, -1, -1, -1, 0, 0);
		rc = smddp_comm_split(c, i % 3 == 2 ? 0 : world_rank % 2, world_rank, &sc);
		if (rc != SMDDP_OK)
			die_rc(&k, rc, c);
		s = calloc(1, sizeof(*s));
		s->comm = sc;
		s->name = "cycle";
		s->rank = smddp_comm_rank(sc);
		s->size = smddp_comm_size(sc);
		if (i % 3 == 2) {
			for (rc = 0; rc < s->size; rc++)
				s->ranks[rc] = rc;
		} else {
			int r, n = 0;
			for (r = 0; r < w->size; r++)
				if (r % 2 == world_rank % 2)
					s->ranks[n++] = r;
		}
		t_allreduce(s, SMDDP_INT32, SMDDP_SUM, 65537, i % 2);
		t_allgather(s, SMDDP_UINT8, 1001, 0);
		rc = smddp_comm_destroy(sc);
		snprintf(what, sizeof(what), "destroy cycle %d", i);
		check_true(what, rc == SMDDP_OK, "returned %s", rc_name(rc));
		free(s);
	}
	t_allreduce(w, SMDDP_FLOAT32, SMDDP_SUM, 1001, 1);
	check_true("descriptors after 30 split/destroy cycles", count_fds() == fds1,
		   "%d open, %d before", count_fds(), fds1);
	check_true("/dev/shm mappings after 30 split/destroy cycles", count_shm_maps() == maps1,
		   "%d mapped, %d before", count_shm_maps(), maps1);
	rc = smddp_comm_destroy(c);
	check_true("destroy world", rc == SMDDP_OK, "returned %s", rc_name(rc));
	check_true("descriptors after destroying the world", count_fds() == fds0,
		   "%d open, %d before smddp_init", count_fds(), fds0);
	check_true("/dev/shm mappings after destroying the world", count_shm_maps() == 0,
		   "%d still mapped", count_shm_maps());
	free(w);

	rc = smddp_init(&c);
	check_true("smddp_init after destroying the world", rc == SMDDP_OK, "returned %s: %s",
		   rc_name(rc), smddp_last_error(NULL));
	if (rc == SMDDP_OK) {
		w = world_group(c, "second-world");
		check_group_identity(w);
		t_allreduce(w, SMDDP_BFLOAT16, SMDDP_SUM, 1001, 0);
		t_broadcast(w, SMDDP_INT64, 4099, w->size - 1);
		rc = smddp_comm_destroy(c);
		check_true("destroy the second world", rc == SMDDP_OK, "returned %s", rc_name(rc));
		free(w);
	}
	printf("SUMMARY rank %d of %d: %ld passed, %ld failed, %ld skipped (lifecycle)\n",
	       world_rank, size, n_pass, n_fail, n_skip);
	return n_fail ? 1 : 0;
}

/* ---- buffer reuse: a call's buffers are the caller's again once it returns ------ */

/* Each call's send buffer (and in place, its whole buffer) is overwritten
 * with NaNs the moment the call returns, as a training loop reuses its
 * gradient buckets: no peer may still be reading it.  Sizes take the
 * single-copy path (peers read each other's buffers directly). */
void t_reuse(struct group *g, int iters)
{
	size_t n = (size_t)g->size, count = 131072 + 3, j;
	float *s = malloc(n * count * sizeof(float)), *r = malloc(n * count * sizeof(float));
	struct kase k;
	int it, c, rc = 0;

	for (it = 0; it < iters; it++) {
		for (c = 0; c < 6; c++) {
			float mine = (float)(g->rank + 1 + it % 7), want = 0;
			int root = it % g->size;

			case_begin(&k, g->name, c == 0 ? C_ALLREDUCE : c == 1 ? C_ALLGATHER :
					 c == 2 ? C_REDUCE_SCATTER : c == 3 ? C_BROADCAST :
					 c == 4 ? C_REDUCE : C_ALLTOALL,
				   SMDDP_FLOAT32, -1, root, 0, count);
			for (j = 0; j < n * count; j++) {
				s[j] = mine + (float)(j / count); /* block b holds mine + b */
				r[j] = -1;
			}
			switch (c) {
			case 0: rc = LIBCALL(smddp_allreduce(s, r, count, SMDDP_FLOAT32, SMDDP_SUM, g->comm, NULL)); break;
			case 1: rc = LIBCALL(smddp_allgather(s, r, count, SMDDP_FLOAT32, g->comm, NULL)); break;
			case 2: rc = LIBCALL(smddp_reduce_scatter(s, r, count, SMDDP_FLOAT32, SMDDP_SUM, g->comm, NULL)); break;
			case 3: rc = LIBCALL(smddp_broadcast(g->rank == root ? s : r, count, SMDDP_FLOAT32, root, g->comm, NULL)); break;
			case 4: rc = LIBCALL(smddp_reduce(s, r, count, SMDDP_FLOAT32, SMDDP_SUM, root, g->comm, NULL)); break;
			default: rc = LIBCALL(smddp_alltoall(s, r, count, SMDDP_FLOAT32, g->comm, NULL)); break;
			}
			memset(s, 0xff, n * count * sizeof(float)); /* NaN, at once */
			if (c == 3 && g->rank == root)
				memset(r, 0, n * count * sizeof(float));
			if (rc != SMDDP_OK)
				die_rc(&k, rc, g->comm);
			for (j = 0; j < count * (c == 1 || c == 5 ? n : 1); j++) {
				size_t b = j / count;
				float sum_ranks = (float)(g->size * (g->size + 1) / 2 + g->size * (it % 7));
				if (c == 3 && g->rank == root)
					break;
				if (c == 4 && g->rank != root)
					break;
				switch (c) {
				case 0: case 4: want = sum_ranks; break;
				case 1: want = (float)(b + 1 + it % 7); break;
				case 2: want = sum_ranks + (float)(g->size * g->rank); break;
				case 3: want = (float)(root + 1 + it % 7); break;
				default: want = (float)(b + 1 + it % 7) + (float)g->rank; break;
				}
				if (r[j] != want) {
					bad(&k, "iteration %d index %zu: got %g, expected %g (was the send buffer "
					    "still read after the call returned?)", it, j, r[j], want);
					break;
				}
			}
			case_end(&k);
		}
	}
	free(s);
	free(r);
}

/* ---- signals: waits interrupted all the time must still complete -------------- */

static volatile sig_atomic_t n_signals;

static void on_alarm(int sig)
{
	(void)sig;
	n_signals++;
}

/* SIGALRM every 200 us, without SA_RESTART, as a profiler or an interpreter's
 * signal handling would: every blocking system call sees EINTR. */
void start_signals(void)
{
	struct sigaction sa;
	struct itimerval it = {{0, 200}, {0, 200}};

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
}

void stop_signals(void)
{
	struct itimerval it = {{0, 0}, {0, 0}};

	setitimer(ITIMER_REAL, &it, NULL);
	check_true("signals delivered during the run", n_signals > 100, "only %d",
		   (int)n_signals);
}
