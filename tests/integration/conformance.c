/* conformance.c - every collective x dtype x op x count x placement, checked against an independent reference.
 *
 * Run under smddp-run with any number of ranks.  Each rank's input element i
 * is a pure function of (rank, i, dtype, op, collective), so every rank can
 * compute what every other rank sent and derive the expected result on its
 * own: float64 for floating types, exact wrapped arithmetic for integers.  No
 * library code (nor lib/util/sd.h) is used to compute a reference: fp16 and
 * bf16 conversions are written here.
 *
 * Tolerances (documented in the failure lines as well):
 *   integers          exact, two's complement wrapping; AVG = wrapped sum / n,
 *                     truncated toward zero (C division)
 *   float16, bfloat16 within 1 ulp of the float64 reference rounded to
 *                     nearest even; MIN and MAX exact
 *   float32           |got - ref| <= 1e-5 * sum(|x_r|)  (PROD: 1e-5 * |ref|)
 *   float64           |got - ref| <= 1e-12 * sum(|x_r|) (PROD: 1e-12 * |ref|)
 *   MIN, MAX and every data-movement collective: bit exact.
 * Inputs: integers cover the whole range (sums and products overflow and must
 * wrap) with every fourth element small; floats for SUM and AVG mix small
 * integers (exact results) with full-mantissa values in a range where the sum
 * of eight is exact in float; PROD uses values near 1; MIN/MAX use normal
 * values of the type (no NaN, no zero, whose sign would be ambiguous).
 *
 * Every output buffer has guard bytes on both sides, and the not-yet-written
 * part of it is poisoned; out-of-place send buffers must come back unchanged.
 * Buffers are aligned to 32 bytes, or off it by 8, 16 or 24, in turn.
 *
 * --threads runs the matrix on the world and, at the same time from a second
 * thread, on a copy of it made by smddp_comm_split (distinct communicators
 * may be used from distinct threads).
 *
 * --lifecycle instead checks that split/destroy cycles leak no descriptor or
 * mapping, and that smddp_init works again after the world was destroyed.
 *
 * --signals runs it all under a SIGALRM every 200 us (handler without
 * SA_RESTART): interrupted waits must resume, not fail.
 *
 * --reuse N runs N rounds of every collective on 512 KiB per rank, wiping the
 * send buffer the moment each call returns (instead of the matrix).
 *
 * Files: conformance.c main, the options and the matrix; conf-ref.c the
 * inputs, fp16/bf16 and the reference; conf-case.c guarded buffers, case
 * bookkeeping and the checks; conf-colls.c one case of each collective;
 * conf-api.c the API surface and argument errors, sub-communicators,
 * threads, lifecycle, reuse and signals; conformance.h what they share.
 *
 * Usage: conformance [--large N] [--counts a,b,c] [--skip-split] [--threads] [--lifecycle]
 *                    [--signals] [--reuse N] [--verbose]
 * Exit status: 0 all passed, 1 a check failed, 2 usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <smddp/smddp.h>

#include "conformance.h"

const char *const coll_names[] = {"allreduce", "allgather", "reduce_scatter", "broadcast",
				  "reduce",    "alltoall",  "barrier",        "split"};
const char *const dtype_names[] = {"int8",    "uint8",    "int32",   "uint32",  "int64",
				   "uint64",  "float16",  "bfloat16", "float32", "float64"};
const size_t dtype_sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};
static const char *const rc_names[] = {
	"SMDDP_OK",	    "SMDDP_EINVAL",   "SMDDP_ENOMEM",	  "SMDDP_ESYSTEM", "SMDDP_ETIMEDOUT",
	"SMDDP_EPEER",	    "SMDDP_EMISMATCH", "SMDDP_EUNSUPPORTED", "SMDDP_ECUDA",  "SMDDP_ENETWORK",
	"SMDDP_EABORTED",   "SMDDP_ECONFIG",  "SMDDP_EINTERNAL"};

int world_rank = -1;
/* per thread: --threads runs two matrices at once on two communicators */
__thread long n_pass, n_fail, n_skip;
__thread double lib_s; /* seconds spent inside the collectives under test */
int verbose;

const char *rc_name(int rc)
{
	return rc >= 0 && rc <= SMDDP_EINTERNAL ? rc_names[rc] : "unknown result";
}

/* ---- the matrix --------------------------------------------------------------- */

void run_matrix(struct group *g, const struct plan *p)
{
	int c, dt, op, root, ip;

	for (c = 0; c < p->ncounts; c++) {
		size_t count = p->counts[c];
		double t0 = sd_now_s();
		long pass0 = n_pass;

		for (dt = 0; dt < SMDDP_NUM_DTYPES; dt++) {
			if (!(p->dtypes_mask >> dt & 1))
				continue;
			for (op = 0; op < SMDDP_NUM_OPS; op++) {
				if (!(p->ops_mask >> op & 1))
					continue;
				for (ip = 0; ip < 2; ip++)
					t_allreduce(g, dt, op, count, ip);
				for (ip = 0; ip < 3; ip++)
					t_reduce_scatter(g, dt, op, count, ip);
				for (root = 0; root < g->size; root++) {
					if (!p->all_roots && root != 0 && root != g->size - 1)
						continue;
					for (ip = 0; ip < 2; ip++)
						t_reduce(g, dt, op, count, root, ip);
				}
			}
			for (ip = 0; ip < 2; ip++)
				t_allgather(g, dt, count, ip);
			for (root = 0; root < g->size; root++)
				if (p->all_roots || root == 0 || root == g->size - 1)
					t_broadcast(g, dt, count, root);
			for (ip = 0; ip < 4; ip++)
				if (ip != 2)
					t_alltoall(g, dt, count, ip);
		}
		if (g->rank == 0)
			printf("%s: count %zu: %ld cases in %.2f s\n", g->name, count, n_pass - pass0,
			       sd_now_s() - t0);
		fflush(stdout);
	}
	t_barrier(g, g->size - 1);
	t_barrier(g, 0);
}

/* ---- main ------------------------------------------------------------------- */

static int parse_counts(const char *s, struct plan *p)
{
	char *end;

	p->ncounts = 0;
	while (*s) {
		unsigned long long v = strtoull(s, &end, 10);
		if (end == s || p->ncounts == MAX_COUNTS)
			return -1;
		p->counts[p->ncounts++] = (size_t)v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -1;
	}
	return p->ncounts ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct plan p = {{0, 1, 7, 1001, 262147}, 5, 1, (1 << SMDDP_NUM_DTYPES) - 1,
			 (1 << SMDDP_NUM_OPS) - 1};
	struct group *w = calloc(1, sizeof(*w));
	int skip_split = 0, threads = 0, lifecycle = 0, signals = 0, reuse = 0, rc, r, i;
	double t0 = sd_now_s();

	setvbuf(stdout, NULL, _IOLBF, 0);
	multi_host = getenv("CONFORMANCE_PER_HOST") != NULL;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--large") && i + 1 < argc) {
			p.counts[p.ncounts - 1] = strtoull(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--counts") && i + 1 < argc) {
			if (parse_counts(argv[++i], &p)) {
				fprintf(stderr, "conformance: bad --counts\n");
				return 2;
			}
		} else if (!strcmp(argv[i], "--skip-split")) {
			skip_split = 1;
		} else if (!strcmp(argv[i], "--threads")) {
			threads = 1;
		} else if (!strcmp(argv[i], "--lifecycle")) {
			lifecycle = 1;
		} else if (!strcmp(argv[i], "--signals")) {
			signals = 1;
		} else if (!strcmp(argv[i], "--reuse") && i + 1 < argc) {
			reuse = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--verbose")) {
			verbose = 1;
		} else {
			fprintf(stderr,
				"usage: conformance [--large N] [--counts a,b,c] [--skip-split] [--threads] [--lifecycle] [--signals] [--reuse N] [--verbose]\n");
			return 2;
		}
	}

	tables_init();
	small_init();
	self_test();
	if (lifecycle) {
		free(w);
		return t_lifecycle();
	}
	if (signals)
		start_signals();
	t_api_local();
	rc = smddp_init(&w->comm);
	if (rc != SMDDP_OK) {
		printf("FAIL: smddp_init returned %s (%d): %s\n", rc_name(rc), rc,
		       smddp_last_error(NULL));
		return 1;
	}
	w->name = "world";
	w->rank = world_rank = smddp_comm_rank(w->comm);
	w->size = smddp_comm_size(w->comm);
	if (w->size < 1 || w->size > 1024 || w->rank < 0 || w->rank >= w->size) {
		printf("FAIL: rank %d of size %d\n", w->rank, w->size);
		return 1;
	}
	for (r = 0; r < w->size; r++)
		w->ranks[r] = r;
	{
		const char *er = getenv("SMDDP_RANK"), *es = getenv("SMDDP_WORLD_SIZE");
		if (er)
			check_true("world rank vs SMDDP_RANK", atoi(er) == w->rank,
				   "SMDDP_RANK=%s but smddp_comm_rank() is %d", er, w->rank);
		if (es)
			check_true("world size vs SMDDP_WORLD_SIZE", atoi(es) == w->size,
				   "SMDDP_WORLD_SIZE=%s but smddp_comm_size() is %d", es, w->size);
	}
	check_group_identity(w);
	check_group_order(w);
	t_arg_errors(w);
	if (reuse)
		t_reuse(w, reuse);
	else if (threads)
		t_threads(w, &p);
	else
		run_matrix(w, &p);
	if (!skip_split)
		t_split(w, &p);
	{
		int ae = -1;

		rc = smddp_comm_get_async_error(w->comm, &ae);
		check_true("no async error on a healthy world", rc == SMDDP_OK && ae == SMDDP_OK,
			   "smddp_comm_get_async_error returned %s with %s: %s", rc_name(rc),
			   rc_name(ae), smddp_last_error(w->comm));
	}

	rc = smddp_comm_destroy(w->comm);
	check_true("destroy world", rc == SMDDP_OK, "returned %s: %s", rc_name(rc),
		   smddp_last_error(NULL));
	if (signals)
		stop_signals();
	printf("SUMMARY rank %d of %d: %ld passed, %ld failed, %ld skipped in %.1f s (%.1f s in collectives)\n",
	       world_rank, w->size, n_pass, n_fail, n_skip, sd_now_s() - t0, lib_s);
	free(w);
	return n_fail ? 1 : 0;
}
