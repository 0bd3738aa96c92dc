/* conformance.h - what the parts of conformance share: the names of things, the tallies, the
 * records of a case, a buffer and a group, and each part's functions (see conformance.c). */
#ifndef CONFORMANCE_H
#define CONFORMANCE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <smddp/smddp.h>

#include "clock.h" /* lib/clock/: the one clock */

#define MAX_SHOWN 5      /* wrong elements printed per failing case */
#define MAX_COUNTS 16

enum coll {
	C_ALLREDUCE,
	C_ALLGATHER,
	C_REDUCE_SCATTER,
	C_BROADCAST,
	C_REDUCE,
	C_ALLTOALL,
	C_BARRIER,
	C_SPLIT
};
/* Names and sizes written here, so as not to trust the library's. */
extern const char *const coll_names[];
extern const char *const dtype_names[];
extern const size_t dtype_sizes[];
extern const char *const op_names[];

extern int world_rank;
/* per thread: --threads runs two matrices at once on two communicators */
extern __thread long n_pass, n_fail, n_skip;
extern __thread double lib_s; /* seconds spent inside the collectives under test */
extern int verbose;
/* CONFORMANCE_PER_HOST is set: the ranks are on several hosts. */
extern int multi_host;

#define LIBCALL(call)                                                               \
	({                                                                          \
		double t_ = sd_now_s();                                                \
		int r_ = (call);                                                    \
		lib_s += sd_now_s() - t_;                                              \
		r_;                                                                 \
	})

const char *rc_name(int rc);

struct expect {
	uint64_t bits; /* exact expected bits (integers, MIN, MAX) or correctly rounded */
	double ref;    /* float64 reference */
	double tol;    /* absolute tolerance for float32 and float64 */
};

struct gbuf {
	unsigned char *base; /* front guard bytes, then len bytes, then GUARD bytes */
	size_t len, front;
};

struct kase {
	const char *comm_name;
	int coll, dt, op, root, inplace;
	size_t count;
	int nbad;
};

/* The communicator under test. */
struct group {
	struct smddp_comm *comm;
	const char *name;
	int rank, size;
	int ranks[1024]; /* world rank of each rank of comm: inputs are keyed by world rank */
};

/* What run_matrix runs: the counts, the roots, the dtypes and ops. */
struct plan {
	size_t counts[MAX_COUNTS];
	int ncounts;
	int all_roots; /* every root, else 0 and size-1 */
	int dtypes_mask, ops_mask;
};

/* ---- conformance.c: the matrix ---- */
void run_matrix(struct group *g, const struct plan *p);

/* ---- conf-ref.c: inputs, fp16/bf16, element access, the reference ---- */
void tables_init(void);
void small_init(void);
void self_test(void);
int is_float(int dt);
uint64_t load_bits(const void *buf, size_t i, int dt);
void store_bits(void *buf, size_t i, int dt, uint64_t v);
uint64_t red_input(int r, size_t i, int dt, int op, int coll, int salt);
uint64_t move_input(int r, size_t i, int dt, int coll, int salt);
struct expect red_expect(const int *ranks, int n, size_t i, int dt, int op, int coll, int salt);
int red_match(uint64_t got, const struct expect *e, int dt, int op);
void fmt_val(char *s, size_t n, uint64_t bits, int dt);

/* ---- conf-case.c: guarded buffers, case bookkeeping, the checks ---- */
void gbuf_alloc(struct gbuf *b, size_t len);
void *gbuf_ptr(struct gbuf *b);
void gbuf_free(struct gbuf *b);
void case_begin(struct kase *k, const char *comm_name, int coll, int dt, int op, int root,
		int inplace, size_t count);
void bad(struct kase *k, const char *fmt, ...);
void case_end(struct kase *k);
void die_rc(struct kase *k, int rc, struct smddp_comm *comm);
void check_guards(struct kase *k, struct gbuf *b, const char *which);
void check_poison(struct kase *k, struct gbuf *b, size_t from, size_t to, const char *which);
void check_true(const char *what, int ok, const char *fmt, ...);

/* ---- conf-colls.c: one case of each collective ---- */
void t_allreduce(struct group *g, int dt, int op, size_t count, int inplace);
void t_reduce_scatter(struct group *g, int dt, int op, size_t count, int inplace);
void t_reduce(struct group *g, int dt, int op, size_t count, int root, int inplace);
void t_allgather(struct group *g, int dt, size_t count, int inplace);
void t_broadcast(struct group *g, int dt, size_t count, int root);
void t_alltoall(struct group *g, int dt, size_t count, int inplace);
void t_barrier(struct group *g, int late_rank);

/* ---- conf-api.c: API surface, sub-communicators, threads, lifecycle, reuse, signals ---- */
void t_api_local(void);
void t_arg_errors(struct group *g);
void check_group_identity(struct group *g);
void check_group_order(struct group *g);
void t_split(struct group *w, const struct plan *full);
void t_threads(struct group *w, const struct plan *p);
int t_lifecycle(void);
void t_reuse(struct group *g, int iters);
void start_signals(void);
void stop_signals(void);

#endif
