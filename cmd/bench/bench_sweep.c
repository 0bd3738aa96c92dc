/* cmd/bench/bench_sweep.c - the sweep of sizes, collectives, types and ops through one backend */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <smddp/smddp.h>

#include "bench.h"
#include "clock/clock.h"
#include "sweep.h"
#include "../common/tool.h"

static int coll_reduces(enum bench_coll c)
{
	return c == COLL_ALLREDUCE || c == COLL_REDUCESCATTER || c == COLL_REDUCE;
}

static int coll_rooted(enum bench_coll c)
{
	return c == COLL_BROADCAST || c == COLL_REDUCE;
}

/* alltoallv has no in-place form in libsmddp's API (nor in NCCL's, which
 * has no alltoallv), and the buffers of a group's sends must stay unchanged
 * until its end, so a receive into the buffer being sent (nccl-tests'
 * in-place sendrecv) is outside the contract: it gave wrong data past the
 * inline size.  Their in-place half is N/A for every backend alike. */
static int coll_has_inplace(enum bench_coll c)
{
	return c != COLL_ALLTOALLV && c != COLL_SENDRECV;
}

/* busbw = algbw * factor: the bandwidth a ring would need on its busiest
 * link, independent of the rank count (nccl-tests' PERFORMANCE.md). */
static double bus_factor(enum bench_coll c, int n)
{
	switch (c) {
	case COLL_ALLREDUCE: return 2.0 * (n - 1) / n;
	case COLL_ALLGATHER:
	case COLL_REDUCESCATTER:
	case COLL_ALLTOALL:
	case COLL_ALLTOALLV: return (double)(n - 1) / n;
	default: return 1.0; /* sendrecv too: one send and one receive per rank */
	}
}

/* nccl-tests' getCollByteCount(): count = size / element size, then per
 * collective. */
static void geometry(enum bench_coll c, uint64_t size, size_t es, int ranks, struct bench_geom *g)
{
	size_t count = (size_t)(size / es), n = (size_t)ranks;

	switch (c) {
	case COLL_ALLGATHER:
		g->param = g->send = count / n;
		g->recv = count / n * n;
		break;
	case COLL_REDUCESCATTER:
		g->param = g->recv = count / n;
		g->send = count / n * n;
		break;
	case COLL_ALLTOALL:
	case COLL_ALLTOALLV: /* the same totals, only cut unevenly */
		g->param = count / n;
		g->send = g->recv = count / n * n;
		break;
	default:
		g->param = g->send = g->recv = count;
		break;
	}
	g->bytes = (g->send > g->recv ? g->send : g->recv) * es;
}

/* The size after SIZE (< -e): the sweep always ends exactly at -e, added as
 * its last point where the factor or the step would jump over it (nccl-tests
 * stop at the last size below, so -b 8 -e 64M -f 4 ends at 32M there). */
static uint64_t next_size(uint64_t size)
{
	uint64_t next;

	if (opt.stepfactor > 1)
		next = size ? size * (uint64_t)opt.stepfactor : 1;
	else
		next = size + opt.stepbytes;
	return next > opt.maxbytes ? opt.maxbytes : next;
}

/* ---- the buffers -------------------------------------------------------------- */

static void *sendbuf, *recvbuf;
static void *sendbase, *recvbase; /* their allocations (--offset) */
static double *times, *cputimes;
static size_t *vlayout; /* alltoallv: 4 arrays of nranks counts */

#ifdef HAVE_CUDA
static void *stage; /* --device cuda: host copy of a device buffer */
#endif

static void *alloc_buf(size_t bytes)
{
	void *p = NULL;

	bytes = (bytes + 4095) / 4096 * 4096;
	if (!bytes)
		bytes = 4096;
	if (posix_memalign(&p, 4096, bytes) != 0) {
		tool_warn("rank %d: cannot allocate %zu bytes for the buffers (lower -e?)", rank,
			  bytes);
		smddp_comm_abort(comm);
		exit(TOOL_EXIT_FAILURE);
	}
	memset(p, 0, bytes); /* fault the pages in before anything is timed */
	return p;
}

/* The buffers of the sweep: both on the host, or both on the device and a
 * host copy of one (stage); the arrays of the times and of alltoallv. */
void buffers_alloc(void)
{
	size_t shift = (size_t)opt.offset * (size_t)rank, room = (size_t)opt.maxbytes + shift;

#ifdef HAVE_CUDA
	if (opt.on_gpu) {
		char err[256];

		if (bench_cuda_init(smddp_comm_local_rank(comm), opt.gpu, err, sizeof(err)) ||
		    !(sendbase = bench_cuda_alloc(room, err, sizeof(err))) ||
		    !(recvbase = bench_cuda_alloc(room, err, sizeof(err))))
			gpu_fail(err);
		stream = bench_cuda_stream();
		stage = alloc_buf((size_t)opt.maxbytes);
	}
#endif
	if (!opt.on_gpu) {
		sendbase = alloc_buf(room);
		recvbase = alloc_buf(room);
	}
	sendbuf = (char *)sendbase + shift;
	recvbuf = (char *)recvbase + shift;
	times = calloc((size_t)opt.iters, sizeof(*times));
	cputimes = calloc((size_t)opt.iters, sizeof(*cputimes));
	vlayout = calloc(4 * (size_t)nranks, sizeof(*vlayout));
	if (!times || !cputimes || !vlayout)
		fail("allocation of the timing array", SMDDP_ENOMEM);
}

void buffers_free(void)
{
	free(times);
	free(cputimes);
	free(vlayout);
#ifdef HAVE_CUDA
	if (opt.on_gpu) {
		bench_cuda_free(sendbase);
		bench_cuda_free(recvbase);
		free(stage);
		return;
	}
#endif
	free(sendbase);
	free(recvbase);
}

/* ---- measuring one size --------------------------------------------------- */

/* The fill, poison and check of bench_data.c, on host memory or through the
 * host copy of a device buffer. */
static void buf_fill(void *buf, size_t n, enum smddp_dtype dt, enum smddp_op op)
{
#ifdef HAVE_CUDA
	char err[256];

	if (opt.on_gpu) {
		bench_fill(stage, n, 0, dt, op, rank);
		if (bench_cuda_copy(buf, stage, n * smddp_dtype_size(dt), 0, err, sizeof(err)))
			gpu_fail(err);
		return;
	}
#endif
	bench_fill(buf, n, 0, dt, op, rank);
}

static void buf_poison(void *buf, size_t n, enum smddp_dtype dt)
{
#ifdef HAVE_CUDA
	char err[256];

	if (opt.on_gpu) {
		bench_poison(stage, n, dt);
		if (bench_cuda_copy(buf, stage, n * smddp_dtype_size(dt), 0, err, sizeof(err)))
			gpu_fail(err);
		return;
	}
#endif
	bench_poison(buf, n, dt);
}

static const void *buf_fetch(const void *buf, size_t n, enum smddp_dtype dt)
{
#ifdef HAVE_CUDA
	char err[256];

	if (opt.on_gpu) {
		if (bench_cuda_sync(err, sizeof(err)) ||
		    bench_cuda_copy(stage, buf, n * smddp_dtype_size(dt), 1, err, sizeof(err)))
			gpu_fail(err);
		return stage;
	}
#endif
	(void)n;
	(void)dt;
	return buf;
}

/* After a timed call: a device call is finished once its stream is. */
static void finish_call(void)
{
#ifdef HAVE_CUDA
	char err[256];

	if (opt.on_gpu && bench_cuda_sync(err, sizeof(err)))
		gpu_fail(err);
#endif
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void be_check(const struct bench_backend *be, const char *what, int rc)
{
	if (!rc)
		return;
	if (be == &smddp_backend)
		fail(what, rc);
	tool_warn("rank %d: %s %s failed: %s", rank, be->name, what, be->last_error(rc));
	smddp_comm_abort(comm);
#ifdef HAVE_MPI
	bench_mpi_abort(TOOL_EXIT_FAILURE);
#endif
	exit(TOOL_EXIT_FAILURE);
}

static void be_run(const struct bench_backend *be, const struct bench_call *call)
{
	int rc = be->run(call);

	if (rc) {
		char what[96];
		snprintf(what, sizeof(what), "%s of %zu %s", coll_names[call->coll], call->count,
			 smddp_dtype_name(call->dtype));
		be_check(be, what, rc);
	}
}

void be_barrier(const struct bench_backend *be)
{
	be_check(be, "barrier", be->barrier());
}

/* Each call's time becomes that of its slowest rank; the median of those
 * (T is sorted in place). */
static double slowest_median(double *t)
{
	int rc = smddp_allreduce(t, t, (size_t)opt.iters, SMDDP_FLOAT64, SMDDP_MAX, comm, NULL);

	if (rc)
		fail("allreduce of the times", rc);
	qsort(t, (size_t)opt.iters, sizeof(double), cmp_double);
	return opt.iters % 2 ? t[opt.iters / 2] : (t[opt.iters / 2 - 1] + t[opt.iters / 2]) / 2;
}

static void measure(const struct bench_backend *be, struct bench_call call,
		    const struct bench_geom *g, int inplace, struct meas *m)
{
	size_t es = smddp_dtype_size(call.dtype);
	char *rbase = recvbuf;
	int rc;

	memset(m, 0, sizeof(*m));
	m->wrong = -1;
	if (inplace && !coll_has_inplace(call.coll)) {
		m->none = true;
		return;
	}
	if (call.coll == COLL_ALLTOALLV) {
		size_t n = (size_t)nranks;
		bench_v_layout(rank, nranks, g->param, vlayout, vlayout + n, vlayout + 2 * n,
			       vlayout + 3 * n);
		call.sendcounts = vlayout;
		call.sdispls = vlayout + n;
		call.recvcounts = vlayout + 2 * n;
		call.rdispls = vlayout + 3 * n;
	}
	call.inplace = inplace;
	if (inplace) {
		call.sendbuf = rbase + be->ip_send_off(call.coll, rank, g->param) * es;
		call.recvbuf = rbase + be->ip_recv_off(call.coll, rank, g->param) * es;
	} else {
		call.sendbuf = sendbuf;
		call.recvbuf = recvbuf;
	}

	for (long i = 0; i < opt.warmup; i++)
		be_run(be, &call);
	finish_call();
	be_barrier(be);
	for (long i = 0; i < opt.iters; i++) {
		double t0 = sd_now_s();
		be_run(be, &call);
		cputimes[i] = sd_now_s() - t0;
		finish_call();
		times[i] = sd_now_s() - t0;
	}
	/* Open MPI moves its messages only inside its own calls: a rank whose
	 * last call returned may still owe a peer data, and waiting in ours
	 * (the times' allreduce) would leave that peer stuck in its call. */
	be_barrier(be);
	double sec = slowest_median(times);
	m->time_us = sec * 1e6;
	if (opt.cputime)
		m->cputime_us = slowest_median(cputimes) * 1e6;
	m->algbw = sec > 0 ? (double)g->bytes / sec / 1e9 : 0;
	m->busbw = m->algbw * bus_factor(call.coll, nranks);
	if (!opt.check)
		return;

	/* The checked call: poison everything the rank may receive into, then
	 * write its input where this layout wants it. */
	size_t whole = g->send > g->recv ? g->send : g->recv;
	buf_poison(rbase, inplace ? whole : g->recv, call.dtype);
	if (!(call.coll == COLL_BROADCAST && rank != call.root))
		buf_fill(inplace ? call.sendbuf : sendbuf, g->send, call.dtype, call.op);
	be_run(be, &call);
	uint64_t wrong = bench_check(call.coll, call.dtype, call.op, call.root, rank, nranks,
				     g->param,
				     buf_fetch(call.recvbuf,
					       call.coll == COLL_REDUCESCATTER ? g->param : g->recv,
					       call.dtype));
	rc = smddp_allreduce(&wrong, &wrong, 1, SMDDP_UINT64, SMDDP_SUM, comm, NULL);
	if (rc)
		fail("allreduce of the wrong counts", rc);
	m->wrong = (int64_t)wrong;
}

/* ---- the sweep -------------------------------------------------------------- */

static void add_result(struct sweep *s, const struct result *r)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->res = realloc(s->res, s->cap * sizeof(*s->res));
		if (!s->res) {
			tool_warn("rank %d: out of memory", rank);
			smddp_comm_abort(comm);
			exit(TOOL_EXIT_FAILURE);
		}
	}
	s->res[s->n++] = *r;
}

/* Runs the whole sweep through one backend; with `ours` (the libsmddp sweep,
 * in the same order) each row also gets the ratio of busbws. */
void run_sweep(const struct bench_backend *be, struct sweep *s, const struct sweep *ours)
{
	size_t idx = 0;

	for (int ci = 0; ci < opt.ncolls; ci++) {
		enum bench_coll coll = opt.colls[ci];
		int nops = coll_reduces(coll) ? opt.nops : 1;
		int root_lo = 0, root_hi = 0;

		if (coll_rooted(coll)) {
			root_lo = opt.root < 0 ? 0 : opt.root;
			root_hi = opt.root < 0 ? nranks - 1 : opt.root;
		}
		print_table_header(coll, be->name, ours != NULL);
		for (int di = 0; di < opt.ndtypes; di++) {
			enum smddp_dtype dt = opt.dtypes[di];
			size_t es = smddp_dtype_size(dt);
			for (int oi = 0; oi < nops; oi++) {
				/* Non-reducing collectives carry the SUM pattern. */
				enum smddp_op op = coll_reduces(coll) ? opt.ops[oi] : SMDDP_SUM;
				const char *why = be->unsupported(dt, coll_reduces(coll) ? op : SMDDP_SUM);
				if (why && rank == 0 && !opt.json)
					printf("# %s %s %s: skipped: %s\n", coll_names[coll],
					       smddp_dtype_name(dt),
					       coll_reduces(coll) ? smddp_op_name(op) : "none", why);
				/* The timed calls need sane numbers in both buffers. */
				if (!why) {
					buf_fill(sendbuf, (size_t)(opt.maxbytes / es), dt, op);
					buf_fill(recvbuf, (size_t)(opt.maxbytes / es), dt, op);
				}
				for (int root = root_lo; root <= root_hi; root++) {
					for (uint64_t size = opt.minbytes, more = 1; more;
					     more = size < opt.maxbytes, size = next_size(size)) {
						struct bench_geom g;
						struct result r = {
							.coll = coll, .dtype = dt,
							.op = coll_reduces(coll) ? (int)op : -1,
							.root = coll_rooted(coll) ? root : -1,
						};
						geometry(coll, size, es, nranks, &g);
						r.bytes = g.bytes;
						r.count = g.param;
						const struct result *o =
							ours && idx < ours->n ? &ours->res[idx] : NULL;
						idx++;
						if (why) {
							r.skipped = true;
							add_result(s, &r);
							continue;
						}
						if (rank == 0)
							progress_show(&r, be->name);
						struct bench_call call = {
							.coll = coll, .dtype = dt, .op = op,
							.root = coll_rooted(coll) ? root : 0,
							.count = g.param,
						};
						measure(be, call, &g, 0, &r.m[0]);
						measure(be, call, &g, 1, &r.m[1]);
						for (int k = 0; k < 2; k++) {
							if (r.m[k].none)
								continue;
							if (r.m[k].wrong > 0)
								s->wrong += (uint64_t)r.m[k].wrong;
							s->bw_sum += r.m[k].busbw;
							s->bw_count++;
						}
						add_result(s, &r);
						print_row(&r, be == &smddp_backend ? "smddp"
							       : !strcmp(be->name, "NCCL") ? "nccl"
											      : "mpi",
							  o);
					}
				}
			}
		}
	}
	if (rank == 0) {
		progress_clear();
		fflush(stderr);
	}
}
