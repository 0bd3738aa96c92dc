/* gpu-conformance.c - the device collectives checked against an independent reference, on one or more GPUs.
 *
 * Run under smddp-run (any number of ranks; several may share a GPU: each
 * rank takes GPU local_rank % count).  Each rank's input
 * element j is a pure function of (case, rank, j), so every rank computes
 * what every other rank sent and derives the expected output by itself:
 * exact wrapped arithmetic for integers (inputs over the whole range, so
 * sums and products wrap), float64 for floats (inputs small integers and
 * quarters, so sums are exact; AVG and fp16/bf16 within the rounding of the
 * type).  Nothing of the library computes a reference.
 *
 * Everything goes through the stream: poison the output, copy the input in,
 * the call, copy the output out, one synchronize; a result that is right is
 * also proof that the call waited for the work before it and that the work
 * after it waited for the call.  Every allreduce result is hashed and the
 * hashes compared across ranks (bitwise equal everywhere).
 *
 * Modes:
 *   gpu-conformance [--large N] [--quick] [--small]
 *                                           the matrix: every collective x dtype x
 *                                           op x in/out of place x counts 1, 7, 1003, N
 *                                           (--quick: N for float32 and bfloat16 only;
 *                                           --small: no N, int32, float16, float32 only,
 *                                           for compute-sanitizer)
 *   gpu-conformance order                   stream ordering with a stream held back
 *                                           300 ms by a host function (the call
 *                                           waits for it; with SMDDP_CUDA_ASYNC=1 it
 *                                           returns at once)
 *   gpu-conformance abortq                  rank 0 queues a call rank 1 has not made and
 *                                           aborts: it returns in seconds, rank 1's call
 *                                           fails naming rank 0 (FAULT-OK lines)
 *   gpu-conformance twostreams              calls on two streams, the first held 300 ms:
 *                                           both right (the second waited for the first)
 *   gpu-conformance overlap                 the call returns within 10 % of the GPU
 *                                           work queued before it (queued mode; in
 *                                           blocking mode after it); right results
 *   gpu-conformance mismatch                rank 1 passes another count: every rank
 *                                           gets SMDDP_EMISMATCH naming a rank, from
 *                                           the call or (queued) within 2 s from
 *                                           smddp_comm_get_async_error; streams
 *                                           released (FAULT-OK lines)
 *   gpu-conformance p2p [--large N] [--perf]
 *                                           a ring of sends and receives in a group,
 *                                           alltoallv, gather and scatter from every
 *                                           root, bytes checked exactly; every dtype;
 *                                           an all-to-all group that deadlocks one
 *                                           call at a time; an exchange in place; a
 *                                           receive from anyone; size mismatches
 *                                           naming both ranks (--perf: P2P-PERF lines,
 *                                           a timed ring, 8 B to 64 MiB)
 *   gpu-conformance p2pdead VICTIM          VICTIM is SIGKILLed before a ring of
 *                                           device sends and receives: the others get
 *                                           SMDDP_EPEER naming it (FAULT-OK lines)
 *   gpu-conformance errors                  bad calls get the documented errors;
 *                                           reallocated buffers; a split communicator
 *                                           on the same buffers
 *   gpu-conformance badbuf VICTIM           (between hosts) VICTIM passes a short
 *                                           buffer: it gets SMDDP_EINVAL, the others
 *                                           an error naming it, in seconds
 *   gpu-conformance mixed                   (between hosts, SMDDP_CHECK_COLL=1) rank 0
 *                                           on device memory, the others on host
 *                                           memory: SMDDP_EMISMATCH everywhere
 *   gpu-conformance dead VICTIM             VICTIM is SIGKILLed; the others get an
 *                                           error from the next call, and their
 *                                           streams are released (FAULT-OK lines)
 * Exit: 0 passed, 1 failed, 2 usage, 77 no GPU here.
 */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include <smddp/smddp.h>

static int rank, nranks, failures, passed;
static struct smddp_comm *comm;
static cudaStream_t stream;

#define CK(call)                                                                            \
	do {                                                                                \
		cudaError_t e_ = (call);                                                    \
		if (e_ != cudaSuccess) {                                                    \
			fprintf(stderr, "rank %d: %s:%d: %s: %s\n", rank, __FILE__, __LINE__, \
				#call, cudaGetErrorString(e_));                             \
			exit(1);                                                            \
		}                                                                           \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- element types, written here so as not to trust the library ---------- */

static const size_t es_of[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
static int is_float(int dt)
{
	return dt >= SMDDP_FLOAT16;
}
static int is_signed_int(int dt)
{
	return dt == SMDDP_INT8 || dt == SMDDP_INT32 || dt == SMDDP_INT64;
}

static uint16_t f32_to_f16(float f)
{
	uint32_t x, sign, man;
	int e;

	memcpy(&x, &f, 4);
	sign = (x >> 16) & 0x8000;
	man = x & 0x7fffff;
	e = (int)((x >> 23) & 0xff) - 127 + 15;
	if (((x >> 23) & 0xff) == 0xff)
		return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00);
	if (e <= 0) {
		if (e < -10)
			return (uint16_t)sign;
		man |= 0x800000;
		unsigned sh = (unsigned)(14 - e);
		uint32_t h = man >> sh, rem = man & ((1u << sh) - 1), half = 1u << (sh - 1);
		if (rem > half || (rem == half && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++;
	return (uint16_t)(sign | h);
}

static float f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, x;
	float f;

	if (exp == 0) {
		f = ldexpf((float)man, -24);
		return sign ? -f : f;
	}
	x = exp == 31 ? sign | 0x7f800000 | (man << 13) : sign | ((exp + 112) << 23) | (man << 13);
	memcpy(&f, &x, 4);
	return f;
}

static uint16_t f32_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, 4);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

static float bf16_to_f32(uint16_t b)
{
	uint32_t x = (uint32_t)b << 16;
	float f;

	memcpy(&f, &x, 4);
	return f;
}

static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Rank r's element j of case cs: integers as raw bits (any value), floats
 * as a double every type holds exactly. */
static uint64_t gen_int(uint64_t cs, int r, size_t j)
{
	uint64_t v = mix(cs * 1000003u ^ ((uint64_t)r << 40) ^ j);

	return (j & 3) ? v : v % 7; /* every fourth element small */
}

static double gen_float(uint64_t cs, int r, size_t j, int op)
{
	uint64_t v = mix(cs * 1000003u ^ ((uint64_t)r << 40) ^ j);

	if (op == SMDDP_PROD) {
		static const double pv[6] = {1, -1, 2, -2, 0.5, -0.5};
		return pv[v % 6];
	}
	return (double)((int64_t)(v % 129) - 64) / 4.0; /* -16 .. 16 in quarters */
}

static void store(void *buf, size_t i, int dt, uint64_t bits, double f)
{
	switch (dt) {
	case SMDDP_INT8:
	case SMDDP_UINT8: ((uint8_t *)buf)[i] = (uint8_t)bits; break;
	case SMDDP_INT32:
	case SMDDP_UINT32: ((uint32_t *)buf)[i] = (uint32_t)bits; break;
	case SMDDP_INT64:
	case SMDDP_UINT64: ((uint64_t *)buf)[i] = bits; break;
	case SMDDP_FLOAT16: ((uint16_t *)buf)[i] = f32_to_f16((float)f); break;
	case SMDDP_BFLOAT16: ((uint16_t *)buf)[i] = f32_to_bf16((float)f); break;
	case SMDDP_FLOAT32: ((float *)buf)[i] = (float)f; break;
	default: ((double *)buf)[i] = f; break;
	}
}

static uint64_t load_int(const void *buf, size_t i, int dt)
{
	switch (dt) {
	case SMDDP_INT8: return (uint64_t)(int64_t)((const int8_t *)buf)[i];
	case SMDDP_UINT8: return ((const uint8_t *)buf)[i];
	case SMDDP_INT32: return (uint64_t)(int64_t)((const int32_t *)buf)[i];
	case SMDDP_UINT32: return ((const uint32_t *)buf)[i];
	default: return ((const uint64_t *)buf)[i];
	}
}

static double load_float(const void *buf, size_t i, int dt)
{
	switch (dt) {
	case SMDDP_FLOAT16: return f16_to_f32(((const uint16_t *)buf)[i]);
	case SMDDP_BFLOAT16: return bf16_to_f32(((const uint16_t *)buf)[i]);
	case SMDDP_FLOAT32: return ((const float *)buf)[i];
	default: return ((const double *)buf)[i];
	}
}

/* Sign- or zero-extends the low bits of the type. */
static uint64_t norm(int dt, uint64_t v)
{
	switch (dt) {
	case SMDDP_INT8: return (uint64_t)(int64_t)(int8_t)v;
	case SMDDP_UINT8: return (uint8_t)v;
	case SMDDP_INT32: return (uint64_t)(int64_t)(int32_t)v;
	case SMDDP_UINT32: return (uint32_t)v;
	default: return v;
	}
}

/* ---- the expected value of one element ------------------------------------ */

struct val {
	uint64_t i;
	double f;
};

static struct val input(uint64_t cs, int dt, int op, int r, size_t j)
{
	struct val v = {0, 0};

	if (is_float(dt))
		v.f = gen_float(cs, r, j, op);
	else
		v.i = norm(dt, gen_int(cs, r, j));
	return v;
}

static struct val reduced(uint64_t cs, int dt, int op, size_t j)
{
	struct val acc = input(cs, dt, op, 0, j);

	for (int r = 1; r < nranks; r++) {
		struct val x = input(cs, dt, op, r, j);

		if (is_float(dt)) {
			switch (op) {
			case SMDDP_PROD: acc.f *= x.f; break;
			case SMDDP_MIN: acc.f = x.f < acc.f ? x.f : acc.f; break;
			case SMDDP_MAX: acc.f = x.f > acc.f ? x.f : acc.f; break;
			default: acc.f += x.f; break;
			}
		} else {
			int sg = is_signed_int(dt);
			switch (op) {
			case SMDDP_PROD: acc.i = norm(dt, acc.i * x.i); break;
			case SMDDP_MIN:
				if (sg ? (int64_t)x.i < (int64_t)acc.i : x.i < acc.i)
					acc.i = x.i;
				break;
			case SMDDP_MAX:
				if (sg ? (int64_t)x.i > (int64_t)acc.i : x.i > acc.i)
					acc.i = x.i;
				break;
			default: acc.i = norm(dt, acc.i + x.i); break;
			}
		}
	}
	if (op == SMDDP_AVG) {
		if (is_float(dt))
			acc.f /= nranks;
		else if (is_signed_int(dt))
			acc.i = norm(dt, (uint64_t)((int64_t)acc.i / nranks));
		else
			acc.i = norm(dt, acc.i / (uint64_t)nranks);
	}
	return acc;
}

static int matches(int dt, int op, const void *out, size_t i, struct val want, double *got_f,
		   uint64_t *got_i)
{
	if (!is_float(dt)) {
		*got_i = norm(dt, load_int(out, i, dt));
		return *got_i == want.i;
	}
	double g = load_float(out, i, dt), tol;

	*got_f = g;
	if (op != SMDDP_AVG) {
		/* Sums of quarters and products of +-2^k are exact in float64 and
		 * in the float accumulation; the result is that rounded once to
		 * the type (bf16 holds 8 bits: 72.75 is 73). */
		char tmp[8];

		store(tmp, 0, dt, 0, want.f);
		return g == load_float(tmp, 0, dt);
	}
	tol = dt == SMDDP_FLOAT16 ? 1.0 / 1024 : dt == SMDDP_BFLOAT16 ? 1.0 / 128
		: dt == SMDDP_FLOAT32 ? 1e-7 : 1e-15;
	return fabs(g - want.f) <= tol * fabs(want.f) + 1e-300;
}

/* ---- the matrix ------------------------------------------------------------ */

static const char *const coll_names[] = {"allreduce", "allgather", "reduce_scatter",
					 "broadcast", "reduce",    "alltoall"};
enum { ALLREDUCE, ALLGATHER, REDUCE_SCATTER, BROADCAST, REDUCE, ALLTOALL, NCOLL };

static char *dsend, *drecv, *hbuf, *hout;
static size_t cap_bytes;
static int nshown;

static void report(const char *what, size_t i, int dt, struct val want, double gf, uint64_t gi)
{
	if (nshown++ >= 20)
		return;
	if (is_float(dt))
		printf("FAIL rank %d: %s: element %zu is %.9g, expected %.9g\n", rank, what, i, gf,
		       want.f);
	else
		printf("FAIL rank %d: %s: element %zu is %#llx, expected %#llx\n", rank, what, i,
		       (unsigned long long)gi, (unsigned long long)want.i);
}

static uint64_t fnv(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

/* One call; variant picks the in-place layout (0: out of place) and, for
 * reduce_scatter in place, NCCL's (1) or MPI's (2) layout. */
static void run_case(uint64_t cs, int coll, int dt, int op, size_t count, int variant, int root,
		     int use_null_stream)
{
	size_t es = es_of[dt], n = (size_t)nranks, m = count * es;
	size_t sc = count, rc = count;
	char what[160];
	cudaStream_t st = use_null_stream ? 0 : stream;
	int rcode = 0;

	switch (coll) {
	case ALLGATHER: rc = n * count; break;
	case REDUCE_SCATTER: sc = n * count; break;
	case ALLTOALL: sc = rc = n * count; break;
	default: break;
	}
	snprintf(what, sizeof(what), "%s %s %s count %zu %s root %d%s", coll_names[coll],
		 smddp_dtype_name(dt), smddp_op_name(op), count,
		 variant == 0 ? "out of place" : variant == 1 ? "in place" : "in place (mpi)", root,
		 use_null_stream ? " stream NULL" : "");
	/* Where input and output live, in device memory. */
	char *sbuf = dsend, *rbuf = drecv, *inp;
	size_t out_off = 0; /* output within rbuf, in bytes */

	if (variant) {
		sbuf = rbuf = drecv;
		if (coll == ALLGATHER)
			sbuf = drecv + (size_t)rank * m;
		if (coll == REDUCE_SCATTER && variant == 1)
			rbuf = drecv + (size_t)rank * m, out_off = 0;
	}
	inp = sbuf;
	/* Build the input on the host, poison the whole receive area. */
	size_t in_elems = coll == BROADCAST ? count : sc;
	for (size_t j = 0; j < in_elems; j++) {
		struct val v = input(cs, dt, op, rank, j);
		store(hbuf, j, dt, v.i, v.f);
	}
	size_t span = (coll == ALLTOALL || coll == REDUCE_SCATTER || coll == ALLGATHER ? n : 1) * m;
	CK(cudaMemsetAsync(drecv, 0xa5, span + 64, st));
	if (coll == BROADCAST) {
		inp = rbuf;
		if (rank == root)
			CK(cudaMemcpyAsync(inp, hbuf, m, cudaMemcpyHostToDevice, st));
	} else {
		CK(cudaMemcpyAsync(inp, hbuf, in_elems * es, cudaMemcpyHostToDevice, st));
	}
	switch (coll) {
	case ALLREDUCE: rcode = smddp_allreduce(sbuf, rbuf, count, dt, op, comm, st); break;
	case ALLGATHER: rcode = smddp_allgather(sbuf, rbuf, count, dt, comm, st); break;
	case REDUCE_SCATTER:
		rcode = smddp_reduce_scatter(sbuf, rbuf, count, dt, op, comm, st);
		break;
	case BROADCAST: rcode = smddp_broadcast(rbuf, count, dt, root, comm, st); break;
	case REDUCE: rcode = smddp_reduce(sbuf, rbuf, count, dt, op, root, comm, st); break;
	case ALLTOALL: rcode = smddp_alltoall(sbuf, rbuf, count, dt, comm, st); break;
	}
	if (rcode) {
		printf("FAIL rank %d: %s: returned %s: %s\n", rank, what, smddp_strerror(rcode),
		       smddp_last_error(comm));
		failures++;
		return;
	}
	CK(cudaMemcpyAsync(hout, rbuf + out_off, rc * es, cudaMemcpyDeviceToHost, st));
	CK(cudaStreamSynchronize(st));

	int bad = 0;
	double gf = 0;
	uint64_t gi = 0;

	if (coll == REDUCE && rank != root) {
		passed++;
		return;
	}
	for (size_t i = 0; i < rc; i++) {
		struct val want;
		int wop = op;

		switch (coll) {
		case ALLREDUCE:
		case REDUCE: want = reduced(cs, dt, op, i); break;
		case REDUCE_SCATTER: want = reduced(cs, dt, op, (size_t)rank * count + i); break;
		case ALLGATHER: want = input(cs, dt, op, (int)(i / count), i % count); wop = -1; break;
		case BROADCAST: want = input(cs, dt, op, root, i); wop = -1; break;
		default: /* ALLTOALL */
			want = input(cs, dt, op, (int)(i / count), (size_t)rank * count + i % count);
			wop = -1;
			break;
		}
		if (wop < 0 && is_float(dt)) {
			/* A copy: the value the sender stored. */
			char tmp[8];
			store(tmp, 0, dt, 0, want.f);
			want.f = load_float(tmp, 0, dt);
		}
		if (!matches(dt, wop < 0 ? SMDDP_SUM : wop, hout, i, want, &gf, &gi)) {
			if (!bad)
				report(what, i, dt, want, gf, gi);
			bad++;
		}
	}
	if (coll == ALLREDUCE) {
		uint64_t h = fnv(hout, rc * es), *all = calloc(n, sizeof(*all));
		int r2 = smddp_allgather(&h, all, 1, SMDDP_UINT64, comm, NULL);

		if (r2) {
			printf("FAIL rank %d: allgather of hashes: %s\n", rank, smddp_last_error(comm));
			exit(1);
		}
		for (int q = 0; q < nranks; q++)
			if (all[q] != h && !bad) {
				printf("FAIL rank %d: %s: rank %d's result differs in its bits\n", rank,
				       what, q);
				bad++;
				break;
			}
		free(all);
	}
	if (bad) {
		failures++;
		if (nshown <= 20)
			printf("FAIL rank %d: %s: %d wrong elements\n", rank, what, bad);
	} else {
		passed++;
	}
}

static void matrix(size_t large, int quick, int small)
{
	size_t counts[] = {1, 7, 1003, large};
	int ncounts = small ? 3 : 4;
	uint64_t cs = 1;
	double t0 = now_s();

	for (int coll = 0; coll < NCOLL; coll++) {
		int reducing = coll == ALLREDUCE || coll == REDUCE_SCATTER || coll == REDUCE;
		for (int dt = 0; dt < SMDDP_NUM_DTYPES; dt++) {
			for (int op = 0; op < (reducing ? SMDDP_NUM_OPS : 1); op++) {
				for (int ci = 0; ci < ncounts; ci++) {
					size_t count = counts[ci];
					int nvar = coll == BROADCAST ? 1 : coll == REDUCE_SCATTER ? 3 : 2;

					if (quick && ci == 3 && !(dt == SMDDP_FLOAT32 || dt == SMDDP_BFLOAT16))
						continue;
					if (small && !(dt == SMDDP_INT32 || dt == SMDDP_FLOAT16 ||
						       dt == SMDDP_FLOAT32))
						continue;
					for (int v = 0; v < nvar; v++) {
						int root = (int)(cs % (uint64_t)nranks);
						int null_stream = cs % 5 == 0;

						run_case(cs++, coll, dt, op, count, v, root, null_stream);
					}
				}
			}
		}
		if (rank == 0)
			printf("# %s done (%.1f s)\n", coll_names[coll], now_s() - t0);
		fflush(stdout);
	}
}

/* ---- stream ordering --------------------------------------------------------- */

/* Does a device call return once queued?  smddp(7)'s rule for
 * SMDDP_CUDA_ASYNC, applied independently: auto means yes between hosts
 * unless compute-sanitizer is loaded; on one node, yes unless other ranks
 * share this GPU (here: more ranks on the node than GPUs, as ranks take GPU
 * local_rank % count) and the MPS daemon's control socket is absent. */
static int queued_mode(void)
{
	const char *av = getenv("SMDDP_CUDA_ASYNC"), *pd = getenv("CUDA_MPS_PIPE_DIRECTORY");
	char path[4096];
	struct stat st;
	int ndev = 0;

	const char *inj = getenv("CUDA_INJECTION64_PATH");

	if (av && *av && strcmp(av, "auto"))
		return !strcmp(av, "1") || !strcmp(av, "true") || !strcmp(av, "yes") ||
		       !strcmp(av, "on");
	if (inj && strstr(inj, "sanitizer"))
		return 0;
	if (smddp_comm_local_size(comm) != smddp_comm_size(comm))
		return 1;
	cudaGetDeviceCount(&ndev);
	if (smddp_comm_local_size(comm) <= ndev)
		return 1;
	snprintf(path, sizeof(path), "%s/control", pd && *pd ? pd : "/tmp/nvidia-mps");
	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

static void CUDART_CB hold(void *arg)
{
	struct timespec ts = {0, 300 * 1000000L};

	(void)arg;
	nanosleep(&ts, NULL);
}

static void order(void)
{
	size_t count = 1 << 20, m = count * 4;
	int async = queued_mode();
	float *hin, *hres;
	char *after;

	CK(cudaMallocHost((void **)&hin, m));
	CK(cudaMallocHost((void **)&hres, m));
	CK(cudaMalloc((void **)&after, m));
	/* The first call sets the communicator's GPU side up: not timed. */
	if (smddp_allreduce(dsend, drecv, 16, SMDDP_FLOAT32, SMDDP_SUM, comm, stream) != SMDDP_OK) {
		printf("FAIL rank %d: order: first allreduce: %s\n", rank, smddp_last_error(comm));
		failures++;
		return;
	}
	for (int round = 0; round < 3; round++) {
		for (size_t j = 0; j < count; j++)
			hin[j] = (float)(rank + 1) * (float)(j % 100 + round);
		CK(cudaMemsetAsync(dsend, 0, m, stream));
		CK(cudaMemsetAsync(drecv, 0xff, m, stream));
		/* Held back 300 ms, then the input arrives: a call that read
		 * early would sum zeros. */
		CK(cudaLaunchHostFunc(stream, hold, NULL));
		CK(cudaMemcpyAsync(dsend, hin, m, cudaMemcpyHostToDevice, stream));
		double t0 = now_s();
		int rc = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
		double dt = now_s() - t0;
		/* The copy after: reads the output the moment the stream allows. */
		CK(cudaMemcpyAsync(after, drecv, m, cudaMemcpyDeviceToDevice, stream));
		CK(cudaMemcpyAsync(hres, after, m, cudaMemcpyDeviceToHost, stream));
		if (rc) {
			printf("FAIL rank %d: order: allreduce returned %s: %s\n", rank,
			       smddp_strerror(rc), smddp_last_error(comm));
			failures++;
			return;
		}
		if (async && dt > 0.1) {
			printf("FAIL rank %d: order: the call blocked %.3f s while its stream was "
			       "held: in the queue-and-return mode it must only queue\n", rank, dt);
			failures++;
		}
		if (!async && dt < 0.25) {
			printf("FAIL rank %d: order: the call returned after %.3f s, before its "
			       "stream (held 300 ms) could have reached it\n", rank, dt);
			failures++;
		}
		CK(cudaStreamSynchronize(stream));
		float tri = (float)(nranks * (nranks + 1) / 2);
		int bad = 0;
		for (size_t j = 0; j < count && bad < 3; j++) {
			float want = tri * (float)(j % 100 + round);
			if (hres[j] != want) {
				printf("FAIL rank %d: order round %d: element %zu is %g, expected %g\n",
				       rank, round, j, hres[j], want);
				bad++;
			}
		}
		if (bad)
			failures++;
		else
			passed++;
		if (rank == 0)
			printf("# order round %d (%s): the call returned after %.1f us, its stream "
			       "held 300 ms\n", round, async ? "async" : "sync", dt * 1e6);
	}
	cudaFree(after);
	cudaFreeHost(hin);
	cudaFreeHost(hres);
}

/* Calls of one communicator on two streams, the first held 300 ms by a
 * host function: the second stream's call must still come after it (the
 * staged path shares its slots between calls), and both be right. */
static void twostreams(void)
{
	size_t count = 1 << 20, m = count * 4;
	cudaStream_t s2;
	float *hin, *hres;
	char *in2, *out2;

	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaMallocHost((void **)&hin, 2 * m));
	CK(cudaMallocHost((void **)&hres, 2 * m));
	CK(cudaMalloc((void **)&in2, m));
	CK(cudaMalloc((void **)&out2, m));
	for (int round = 0; round < 3; round++) {
		for (size_t j = 0; j < count; j++) {
			hin[j] = (float)(rank + 1) * (float)(j % 100 + round);
			hin[count + j] = (float)(rank + 1) * (float)(j % 7 + 2 * round);
		}
		CK(cudaLaunchHostFunc(stream, hold, NULL));
		CK(cudaMemcpyAsync(dsend, hin, m, cudaMemcpyHostToDevice, stream));
		int rc = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
		CK(cudaMemcpyAsync(in2, hin + count, m, cudaMemcpyHostToDevice, s2));
		if (!rc)
			rc = smddp_allreduce(in2, out2, count, SMDDP_FLOAT32, SMDDP_SUM, comm, s2);
		CK(cudaMemcpyAsync(hres, drecv, m, cudaMemcpyDeviceToHost, stream));
		CK(cudaMemcpyAsync(hres + count, out2, m, cudaMemcpyDeviceToHost, s2));
		CK(cudaStreamSynchronize(stream));
		CK(cudaStreamSynchronize(s2));
		if (rc) {
			printf("FAIL rank %d: twostreams: allreduce returned %s: %s\n", rank,
			       smddp_strerror(rc), smddp_last_error(comm));
			failures++;
			break;
		}
		float tri = (float)(nranks * (nranks + 1) / 2);
		int bad = 0;
		for (size_t j = 0; j < count && bad < 3; j++) {
			float w1 = tri * (float)(j % 100 + round), w2 = tri * (float)(j % 7 + 2 * round);
			if (hres[j] != w1 || hres[count + j] != w2) {
				printf("FAIL rank %d: twostreams round %d: element %zu is %g and %g, "
				       "expected %g and %g\n", rank, round, j, hres[j], hres[count + j],
				       w1, w2);
				bad++;
			}
		}
		if (bad)
			failures++;
		else
			passed++;
	}
	cudaFree(in2);
	cudaFree(out2);
	cudaFreeHost(hin);
	cudaFreeHost(hres);
	cudaStreamDestroy(s2);
}

/* The call returns while long GPU work queued before it still runs
 * (queue-and-return mode), or after it (blocking mode); the work ends by
 * writing the input, so a call that read early sums the wrong values. */
static void overlap(void)
{
	size_t big = (size_t)1 << 30, count = 1 << 18, m = count * 4;
	int async = queued_mode(), reps = 200;
	cudaEvent_t e0, e1;
	float *hres, ms = 0;
	char *work;

	CK(cudaMalloc((void **)&work, big));
	CK(cudaMallocHost((void **)&hres, m));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	/* The first call sets the GPU side up (and decides the mode). */
	if (smddp_allreduce(dsend, drecv, 16, SMDDP_FLOAT32, SMDDP_SUM, comm, stream) != SMDDP_OK) {
		printf("FAIL rank %d: overlap: first allreduce: %s\n", rank, smddp_last_error(comm));
		failures++;
		return;
	}
	CK(cudaStreamSynchronize(stream));
	for (int round = 0; round < 3; round++) {
		CK(cudaMemsetAsync(drecv, 0, m, stream));
		CK(cudaEventRecord(e0, stream));
		for (int i = 0; i < reps; i++)
			CK(cudaMemsetAsync(work, i, big, stream));
		/* bytes of 1 + round + rank: float bits, summed exactly */
		CK(cudaMemsetAsync(dsend, 0x3f, m, stream));
		CK(cudaEventRecord(e1, stream));
		double t0 = now_s();
		int rc = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
		double dt = now_s() - t0;

		CK(cudaMemcpyAsync(hres, drecv, m, cudaMemcpyDeviceToHost, stream));
		CK(cudaStreamSynchronize(stream));
		CK(cudaEventElapsedTime(&ms, e0, e1));
		if (rc) {
			printf("FAIL rank %d: overlap: allreduce returned %s: %s\n", rank,
			       smddp_strerror(rc), smddp_last_error(comm));
			failures++;
			break;
		}
		float one;
		uint32_t bits = 0x3f3f3f3fu;
		memcpy(&one, &bits, 4);
		int bad = 0;
		for (size_t j = 0; j < count && !bad; j++)
			if (hres[j] != one * (float)nranks) {
				printf("FAIL rank %d: overlap round %d: element %zu is %g, expected "
				       "%g\n", rank, round, j, hres[j], one * (float)nranks);
				bad = 1;
			}
		double work_s = ms / 1e3;
		if (async && dt > 0.1 * work_s) {
			printf("FAIL rank %d: overlap: the call took %.1f ms to return, %.0f %% of "
			       "the %.1f ms of work queued before it (at most 10 %%)\n", rank,
			       dt * 1e3, 100 * dt / work_s, work_s * 1e3);
			bad = 1;
		}
		if (!async && dt < 0.5 * work_s) {
			printf("FAIL rank %d: overlap: the call returned after %.1f ms, before the "
			       "%.1f ms of work queued before it could have ended\n", rank, dt * 1e3,
			       work_s * 1e3);
			bad = 1;
		}
		if (bad)
			failures++;
		else
			passed++;
		printf("# overlap rank %d round %d (%s): the call returned after %.3f ms, %.1f %% "
		       "of the %.1f ms of GPU work queued before it\n", rank, round,
		       async ? "queued" : "blocking", dt * 1e3, 100 * dt / work_s, work_s * 1e3);
	}
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	cudaFree(work);
	cudaFreeHost(hres);
}

/* ---- errors ------------------------------------------------------------------ */

static void expect(const char *what, int got, int want)
{
	if (got == want) {
		passed++;
		if (rank == 0)
			printf("ok: %s -> %s: %s\n", what, smddp_strerror(got), smddp_last_error(comm));
		return;
	}
	printf("FAIL rank %d: %s returned %s, expected %s: %s\n", rank, what, smddp_strerror(got),
	       smddp_strerror(want), smddp_last_error(comm));
	failures++;
}

static void errors(void)
{
	static float host[64];
	char *small;

	/* Every call below fails on every rank before any rank waits. */
	expect("device sendbuf, host recvbuf",
	       smddp_allreduce(dsend, host, 16, SMDDP_FLOAT32, SMDDP_SUM, comm, stream), SMDDP_EINVAL);
	expect("host sendbuf, device recvbuf",
	       smddp_allgather(host, drecv, 4, SMDDP_FLOAT32, comm, stream), SMDDP_EINVAL);
	expect("host memory with a stream",
	       smddp_allreduce(host, host, 16, SMDDP_FLOAT32, SMDDP_SUM, comm, stream),
	       SMDDP_EUNSUPPORTED);
	CK(cudaMalloc((void **)&small, 256));
	expect("recvbuf shorter than count",
	       smddp_allreduce(dsend, small, 1024, SMDDP_FLOAT32, SMDDP_SUM, comm, stream),
	       SMDDP_EINVAL);
	expect("sendbuf and recvbuf overlapping, not in place",
	       smddp_allreduce(drecv, drecv + 4, 1024, SMDDP_FLOAT32, SMDDP_SUM, comm, stream),
	       SMDDP_EINVAL);
	expect("NULL sendbuf", smddp_allreduce(NULL, drecv, 16, SMDDP_FLOAT32, SMDDP_SUM, comm,
					       stream), SMDDP_EINVAL);
	/* The communicator still works, on a stream and on stream NULL. */
	CK(cudaMemsetAsync(dsend, 0, 4096, stream));
	expect("allreduce after the errors",
	       smddp_allreduce(dsend, drecv, 1024, SMDDP_FLOAT32, SMDDP_SUM, comm, stream), SMDDP_OK);
	expect("allreduce on stream NULL",
	       smddp_allreduce(dsend, drecv, 1024, SMDDP_FLOAT32, SMDDP_SUM, comm, NULL), SMDDP_OK);
	CK(cudaDeviceSynchronize());
	/* cudaFree of a buffer another rank has mapped, then a new one at
	 * (perhaps) the same address: mapped afresh, right results. */
	for (int round = 0; round < 3; round++) {
		float *b, h[256];
		CK(cudaMalloc((void **)&b, 1024));
		for (int i = 0; i < 256; i++)
			h[i] = (float)(rank + round);
		CK(cudaMemcpy(b, h, 1024, cudaMemcpyHostToDevice));
		expect("allreduce on a fresh buffer",
		       smddp_allreduce(b, b, 256, SMDDP_FLOAT32, SMDDP_SUM, comm, stream), SMDDP_OK);
		CK(cudaMemcpyAsync(h, b, 1024, cudaMemcpyDeviceToHost, stream));
		CK(cudaStreamSynchronize(stream));
		float want = (float)(nranks * (nranks - 1) / 2 + nranks * round);
		if (h[0] != want || h[255] != want) {
			printf("FAIL rank %d: reallocated buffer round %d: %g, expected %g\n", rank,
			       round, h[0], want);
			failures++;
		}
		/* Everybody is done with b before it goes. */
		if (smddp_barrier(comm))
			exit(1);
		CK(cudaFree(b));
	}
	cudaFree(small);

	/* A second communicator over the same ranks and buffers: CUDA IPC
	 * opens a peer's allocation once per process, so both must share the
	 * mapping (and keep it until the last of them lets go). */
	struct smddp_comm *dup = NULL;
	float h[1024], want = (float)(nranks * (nranks + 1) / 2);
	int rc = smddp_comm_split(comm, 0, rank, &dup);

	expect("split of the world", rc, SMDDP_OK);
	if (rc)
		return;
	for (int i = 0; i < 1024; i++)
		h[i] = (float)(rank + 1);
	CK(cudaMemcpyAsync(dsend, h, sizeof(h), cudaMemcpyHostToDevice, stream));
	expect("allreduce on the world",
	       smddp_allreduce(dsend, drecv, 1024, SMDDP_FLOAT32, SMDDP_SUM, comm, stream), SMDDP_OK);
	expect("allreduce on the split, same buffers",
	       smddp_allreduce(dsend, drecv + 8192, 1024, SMDDP_FLOAT32, SMDDP_SUM, dup, stream),
	       SMDDP_OK);
	expect("destroy of the split", smddp_comm_destroy(dup), SMDDP_OK);
	expect("allreduce on the world after", smddp_allreduce(dsend, drecv + 16384, 1024,
							       SMDDP_FLOAT32, SMDDP_SUM, comm,
							       stream), SMDDP_OK);
	for (int k = 0; k < 3; k++) {
		CK(cudaMemcpyAsync(h, drecv + 8192 * k, sizeof(h), cudaMemcpyDeviceToHost, stream));
		CK(cudaStreamSynchronize(stream));
		if (h[0] != want || h[1023] != want) {
			printf("FAIL rank %d: split round %d: %g, expected %g\n", rank, k, h[0], want);
			failures++;
		}
	}
}

/* ---- a peer passes a bad buffer (between hosts), a peer dies ------------------------ */

/* One FAULT-OK or FAULT-BAD line, which the scripts grep for. */
static void verdict(int ok, int rc, double took, const char *msg)
{
	printf("FAULT-%s rank=%d %s%s after %.2f s: %s\n", ok ? "OK" : "BAD", rank, ok ? "" : "got ",
	       smddp_strerror(rc), took, msg);
}

static int await_async_error(double t0, double secs);

/* VICTIM passes a recvbuf shorter than the call: it gets SMDDP_EINVAL, and
 * the others, already in the call, an error naming it and its reason within seconds
 * (not after SMDDP_TIMEOUT).  FAULT-OK / FAULT-BAD lines, as dead. */
static int badbuf(int victim)
{
	size_t count = 1 << 16;
	char *small = NULL, want[32];
	double t0 = now_s();
	int rc;

	CK(cudaMalloc((void **)&small, 256));
	rc = smddp_allreduce(dsend, rank == victim ? small : drecv, count, SMDDP_FLOAT32,
			     SMDDP_SUM, comm, stream);
	/* Queued on the peers: the failure comes after the call. */
	if (rank != victim && rc == SMDDP_OK && queued_mode())
		rc = await_async_error(t0, 20);
	double took = now_s() - t0;
	const char *msg = smddp_last_error(comm);

	snprintf(want, sizeof(want), "rank %d", victim);
	/* The peers get the victim's code with its reason, naming it. */
	verdict(rank == victim ? rc == SMDDP_EINVAL
			       : rc != SMDDP_OK && strstr(msg, want) && strstr(msg, "recvbuf") &&
					 took < 20,
		rc, took, msg);
	CK(cudaStreamSynchronize(stream));
	cudaFree(small);
	smddp_comm_abort(comm);
	return 0;
}

/* abortq: rank 0 queues a call that rank 1 has not made yet, then calls
 * smddp_comm_abort: it returns within seconds (its proxy is inside the
 * call), and rank 1's call fails naming rank 0.  FAULT-OK / FAULT-BAD
 * lines, as dead. */
static int abortq(void)
{
	size_t count = 1 << 16;
	struct timespec half = {0, 500 * 1000000L};
	double t0;
	int rc;

	if (rank == 0) {
		rc = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
		nanosleep(&half, NULL);
		t0 = now_s();
		int ab = smddp_comm_abort(comm);
		double took = now_s() - t0;

		CK(cudaStreamSynchronize(stream));
		verdict(ab == SMDDP_OK && took < 5, rc, took, "smddp_comm_abort returned");
		return 0;
	}
	nanosleep(&half, NULL);
	nanosleep(&half, NULL);
	t0 = now_s();
	rc = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	if (!rc)
		rc = await_async_error(t0, 20);
	if (!rc)
		rc = smddp_barrier(comm);
	double took = now_s() - t0;
	const char *msg = smddp_last_error(comm);

	verdict(rc != SMDDP_OK && strstr(msg, "rank 0") && strstr(msg, "abort") && took < 20, rc,
		took, msg);
	CK(cudaStreamSynchronize(stream));
	smddp_comm_abort(comm);
	return 0;
}

/* ---- ranks disagree on the kind of memory (between hosts) -------------------------- */

/* Rank 0 on device memory, the others on host memory, SMDDP_CHECK_COLL=1:
 * every rank gets SMDDP_EMISMATCH saying so, in seconds. */
static int mixed(void)
{
	static float host[1 << 17];
	size_t count = 1 << 17; /* 512 KiB: two chunks on the device rank */
	double t0 = now_s();
	int rc = rank == 0 ? smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm,
					     stream)
			   : smddp_allreduce(host, host, count, SMDDP_FLOAT32, SMDDP_SUM, comm,
					     NULL);
	if (rank == 0 && rc == SMDDP_OK && queued_mode())
		rc = await_async_error(t0, 20);
	double took = now_s() - t0;
	const char *msg = smddp_last_error(comm);

	verdict(rc == SMDDP_EMISMATCH && strstr(msg, "device memory") && took < 20, rc, took, msg);
	CK(cudaStreamSynchronize(stream));
	smddp_comm_abort(comm);
	return 0;
}

/* ---- a peer dies ------------------------------------------------------------------ */

static int dead(int victim)
{
	size_t count = 1 << 16;
	int rc = 0;
	double t0;

	for (int i = 0; i < 5; i++) {
		rc = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
		if (rc) {
			printf("FAULT-BAD rank=%d good call %d failed: %s\n", rank, i,
			       smddp_last_error(comm));
			return 1;
		}
	}
	CK(cudaStreamSynchronize(stream));
	if (rank == victim) {
		fflush(stdout);
		raise(SIGKILL);
	}
	t0 = now_s();
	/* Queued: succeeds (or already knows); the stream must be released. */
	rc = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	double limit = 20;
	if (!rc && queued_mode()) {
		/* Told without another call, within 2 s. */
		rc = await_async_error(t0, 10);
		limit = 2;
	}
	if (!rc)
		CK(cudaStreamSynchronize(stream));
	if (!rc)
		rc = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	if (!rc)
		rc = smddp_barrier(comm);
	double took = now_s() - t0;
	const char *msg = smddp_last_error(comm);
	char want[32];

	snprintf(want, sizeof(want), "rank %d", victim);
	verdict((rc == SMDDP_EPEER || rc == SMDDP_EABORTED) && strstr(msg, want) && took < limit,
		rc, took, msg);
	CK(cudaStreamSynchronize(stream));
	/* The next call returns the failure too. */
	int again = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	if (again == SMDDP_OK)
		printf("FAULT-BAD rank=%d a call after the failure returned SMDDP_OK\n", rank);
	CK(cudaStreamSynchronize(stream));
	smddp_comm_abort(comm);
	return 0;
}

/* p2pdead VICTIM: a ring of device sends and receives (one group per
 * call); VICTIM is SIGKILLed before the third.  Its neighbours wait for it
 * in the host rounds of lib/cuda/p2p.c, the others in the barrier after:
 * every one gets SMDDP_EPEER (or SMDDP_EABORTED) naming it within 20 s.
 * FAULT-OK / FAULT-BAD lines, as dead. */
static int p2pdead(int victim)
{
	int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks, rc = 0;
	size_t n = 100003;
	char want[32];
	double t0 = 0;

	for (int i = 0; i < 3; i++) {
		if (i == 2) {
			CK(cudaStreamSynchronize(stream));
			if (rank == victim) {
				fflush(stdout);
				raise(SIGKILL);
			}
			t0 = now_s();
		}
		smddp_group_start();
		smddp_send(dsend, n, SMDDP_UINT8, to, 3, comm, stream);
		smddp_recv(drecv, n, SMDDP_UINT8, from, 3, NULL, comm, stream);
		rc = smddp_group_end();
		if (rc && i < 2) {
			printf("FAULT-BAD rank=%d good call %d failed: %s\n", rank, i,
			       smddp_last_error(comm));
			return 1;
		}
	}
	if (!rc)
		rc = smddp_barrier(comm);
	snprintf(want, sizeof(want), "rank %d", victim);
	verdict((rc == SMDDP_EPEER || rc == SMDDP_EABORTED) && strstr(smddp_last_error(comm), want) &&
			now_s() - t0 < 20,
		rc, now_s() - t0, smddp_last_error(comm));
	smddp_comm_abort(comm);
	return 0;
}

/* cudafail VICTIM CALL, with FAKECUDA_FAIL failing one of VICTIM's CUDA
 * calls (tests/gpu/fakecuda.c) inside its device call number CALL, which
 * may be queued halfway then (its tickets taken, its stream waiting).
 * VICTIM gets SMDDP_ECUDA saying which step failed; every other rank, in
 * that same call (the ones before it complete), an error naming VICTIM and
 * that step within 20 s (queued: through smddp_comm_get_async_error), not
 * at SMDDP_TIMEOUT; a later call fails at once on every rank; every stream
 * goes on (cudaStreamSynchronize returns) and the communicator is
 * destroyed.  FAULT-OK / FAULT-BAD lines, as dead. */
static int cudafail(int victim, int call)
{
	size_t count = 1 << 16;
	double t0 = now_s();
	int rc = 0;
	char want[32], in_call[48];

	for (int i = 0; i < 4 && !rc; i++)
		rc = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	if (!rc && queued_mode())
		rc = await_async_error(t0, 20);
	if (!rc)
		rc = smddp_barrier(comm);
	double took = now_s() - t0;
	const char *msg = smddp_last_error(comm);

	snprintf(want, sizeof(want), "rank %d", victim);
	snprintf(in_call, sizeof(in_call), "rank %d: allreduce #%d ", rank, call);
	verdict(!strncmp(msg, in_call, strlen(in_call)) && strstr(msg, "cannot") &&
			(rank == victim ? rc == SMDDP_ECUDA
					: rc != SMDDP_OK && strstr(msg, want) && took < 20),
		rc, took, msg);
	CK(cudaStreamSynchronize(stream));
	if (smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream) ==
	    SMDDP_OK)
		printf("FAULT-BAD rank=%d a call after the failure returned SMDDP_OK\n", rank);
	CK(cudaStreamSynchronize(stream));
	smddp_comm_destroy(comm);
	return 0;
}

/* Polls smddp_comm_get_async_error until it reports a failure or secs pass
 * since t0; returns the failure (its sentence in smddp_last_error). */
static int await_async_error(double t0, double secs)
{
	int err = SMDDP_OK;

	while (now_s() - t0 < secs) {
		int rc = smddp_comm_get_async_error(comm, &err);

		if (rc) {
			printf("FAULT-BAD rank=%d smddp_comm_get_async_error returned %s\n", rank,
			       smddp_strerror(rc));
			return rc;
		}
		if (err)
			return err;
		struct timespec ts = {0, 5 * 1000000L};
		nanosleep(&ts, NULL);
	}
	return SMDDP_OK;
}

/* Rank 1 passes another count than the others: without SMDDP_CHECK_COLL a
 * wrong count would read past the peers' buffers, so every rank refuses
 * the call (SMDDP_EMISMATCH naming a rank), at once or, queued, through
 * smddp_comm_get_async_error within 2 s; the streams go on. */
static int mismatch(void)
{
	size_t count = rank == 1 ? 1000 : 1024;
	int rc, err = -1;

	rc = smddp_allreduce(dsend, drecv, 16, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	if (!rc)
		CK(cudaStreamSynchronize(stream));
	if (!rc)
		rc = smddp_comm_get_async_error(comm, &err);
	if (rc || err) {
		printf("FAULT-BAD rank=%d a good call failed: %s (async error %d): %s\n", rank,
		       smddp_strerror(rc), err, smddp_last_error(comm));
		return 1;
	}
	double t0 = now_s();
	rc = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	if (!rc)
		rc = await_async_error(t0, 10);
	double took = now_s() - t0;
	const char *msg = smddp_last_error(comm);

	verdict((rc == SMDDP_EMISMATCH || rc == SMDDP_EABORTED) && strstr(msg, "rank ") && took < 2,
		rc, took, msg);
	CK(cudaStreamSynchronize(stream));
	int again = smddp_allreduce(dsend, drecv, 16, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	if (again == SMDDP_OK)
		printf("FAULT-BAD rank=%d a call after the mismatch returned SMDDP_OK\n", rank);
	CK(cudaStreamSynchronize(stream));
	smddp_comm_abort(comm);
	return 0;
}

/* ---- main ---------------------------------------------------------------------- */

/* ---- p2p: sends, receives, alltoallv, gather, scatter on device memory ---- */

static unsigned char pval(int s, int r, int t, size_t j)
{
	return (unsigned char)(s * 131 + r * 31 + t * 7 + j * 13 + (j >> 8) * 5 + 1);
}

/* Byte j of the message from s to r with tag t at host offset off. */
static void pfill(unsigned char *h, size_t n, int s, int r, int t)
{
	for (size_t j = 0; j < n; j++)
		h[j] = pval(s, r, t, j);
}

static void pcheck(const char *what, const unsigned char *h, size_t n, int s, int r, int t)
{
	for (size_t j = 0; j < n; j++)
		if (h[j] != pval(s, r, t, j)) {
			printf("FAIL rank %d: %s: byte %zu of %zu from rank %d is %u, expected %u\n",
			       rank, what, j, n, s, h[j], pval(s, r, t, j));
			failures++;
			return;
		}
	passed++;
}

static void pcall(const char *what, int rc)
{
	if (rc) {
		printf("FAIL rank %d: %s: %s: %s\n", rank, what, smddp_strerror(rc),
		       smddp_last_error(comm));
		failures++;
	}
}

/* Bytes from rank s to rank r, message j of the all-to-all group: odd,
 * different for every pair, 0 for some. */
static size_t a2a_bytes(int s, int r, int j)
{
	size_t b = (size_t)(s * 7 + r * 13 + j * 101) % 5003;

	return (s + r + j) % 5 == 4 ? 0 : b | 1;
}

static int both_ranks_named(int other)
{
	char me[32], him[32];
	const char *m = smddp_last_error(comm);

	snprintf(me, sizeof(me), "rank %d", rank);
	snprintf(him, sizeof(him), "rank %d", other);
	return strstr(m, me) && strstr(m, him);
}

/* More of p2p: every dtype, a group that deadlocks if run one call at a
 * time, an exchange in place, a receive from anyone, a size mismatch in a
 * group whose other message must still arrive. */
static void p2p_more(void)
{
	unsigned char *hs = (unsigned char *)hbuf, *hr = (unsigned char *)hout;
	int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;

	/* Stream order: the stream is held back 300 ms by a host function,
	 * then the send buffer is written and the receive buffer poisoned; a
	 * send that read early, or a copy into the receive buffer queued
	 * before the poison, gives wrong bytes. */
	{
		size_t n = 65537;

		pfill(hs, n, rank, to, 9);
		CK(cudaMemsetAsync(dsend, 0, n, stream));
		CK(cudaLaunchHostFunc(stream, hold, NULL));
		CK(cudaMemcpyAsync(dsend, hs, n, cudaMemcpyHostToDevice, stream));
		CK(cudaMemsetAsync(drecv, 0xA5, n, stream));
		pcall("held: group_start", smddp_group_start());
		pcall("held: send", smddp_send(dsend, n, SMDDP_UINT8, to, 9, comm, stream));
		pcall("held: recv", smddp_recv(drecv, n, SMDDP_UINT8, from, 9, NULL, comm, stream));
		pcall("held: group_end", smddp_group_end());
		CK(cudaMemcpyAsync(hr, drecv, n, cudaMemcpyDeviceToHost, stream));
		CK(cudaStreamSynchronize(stream));
		pcheck("held back", hr, n, from, rank, 9);
	}

	/* every dtype, an odd count of elements, a ring in a group */
	for (int dt = 0; dt < SMDDP_NUM_DTYPES; dt++) {
		size_t count = 1003 + (size_t)dt * 2, n = count * es_of[dt];
		char what[48];

		snprintf(what, sizeof(what), "ring of %s", smddp_dtype_name((enum smddp_dtype)dt));
		pfill(hs, n, rank, to, 10 + dt);
		CK(cudaMemcpyAsync(dsend, hs, n, cudaMemcpyHostToDevice, stream));
		CK(cudaMemsetAsync(drecv, 0xA5, n, stream));
		pcall("group_start", smddp_group_start());
		pcall(what, smddp_send(dsend, count, (enum smddp_dtype)dt, to, 10 + dt, comm, stream));
		pcall(what, smddp_recv(drecv, count, (enum smddp_dtype)dt, from, 10 + dt, NULL, comm,
				       stream));
		pcall("group_end", smddp_group_end());
		CK(cudaMemcpyAsync(hr, drecv, n, cudaMemcpyDeviceToHost, stream));
		CK(cudaStreamSynchronize(stream));
		pcheck(what, hr, n, from, rank, 10 + dt);
	}

	/* All to all in one group, this rank included: every rank sends three
	 * messages to each (two with tag 20, in order, one with tag 21) before
	 * it receives any, and receives tag 21 first: one call at a time,
	 * every rank would wait in its first send. */
	{
		size_t soff[64][3], roff[64][3], so = 0, ro = 0;
		int srcs[64][3];

		for (int q = 0; q < nranks && nranks <= 64; q++)
			for (int j = 0; j < 3; j++) {
				soff[q][j] = so;
				roff[q][j] = ro;
				pfill(hs + so, a2a_bytes(rank, q, j), rank, q, 30 + j);
				so += a2a_bytes(rank, q, j);
				ro += a2a_bytes(q, rank, j);
			}
		if (nranks <= 64 && so <= cap_bytes && ro <= cap_bytes) {
			CK(cudaMemcpyAsync(dsend, hs, so, cudaMemcpyHostToDevice, stream));
			CK(cudaMemsetAsync(drecv, 0xA5, ro, stream));
			pcall("a2a group_start", smddp_group_start());
			for (int q = 0; q < nranks; q++)
				for (int j = 0; j < 3; j++)
					pcall("a2a send", smddp_send(dsend + soff[q][j], a2a_bytes(rank, q, j),
								     SMDDP_UINT8, q, j == 2 ? 21 : 20, comm,
								     stream));
			for (int j = 2; j >= 0; j--)
				for (int i = 0; i < nranks; i++) {
					int q = (rank + nranks - i) % nranks, jj = j == 2 ? 2 : 1 - j;

					srcs[q][jj] = -1;
					pcall("a2a recv", smddp_recv(drecv + roff[q][jj], a2a_bytes(q, rank, jj),
								     SMDDP_UINT8, q, jj == 2 ? 21 : 20,
								     &srcs[q][jj], comm, stream));
				}
			pcall("a2a group_end", smddp_group_end());
			CK(cudaMemcpyAsync(hr, drecv, ro, cudaMemcpyDeviceToHost, stream));
			CK(cudaStreamSynchronize(stream));
			for (int q = 0; q < nranks; q++)
				for (int j = 0; j < 3; j++) {
					pcheck("a2a group", hr + roff[q][j], a2a_bytes(q, rank, j), q, rank,
					       30 + j);
					if (srcs[q][j] != q) {
						printf("FAIL rank %d: a2a group: source %d, expected %d\n",
						       rank, srcs[q][j], q);
						failures++;
					}
				}
		}
	}

	/* An exchange in place (nccl-tests' in-place sendrecv): the buffer a
	 * rank sends is the one its receive overwrites. */
	{
		size_t n = 100003;

		pfill(hs, n, rank, to, 50);
		CK(cudaMemcpyAsync(drecv, hs, n, cudaMemcpyHostToDevice, stream));
		pcall("in place: group_start", smddp_group_start());
		pcall("in place: send", smddp_send(drecv, n, SMDDP_UINT8, to, 50, comm, stream));
		pcall("in place: recv", smddp_recv(drecv, n, SMDDP_UINT8, from, 50, NULL, comm, stream));
		pcall("in place: group_end", smddp_group_end());
		CK(cudaMemcpyAsync(hr, drecv, n, cudaMemcpyDeviceToHost, stream));
		CK(cudaStreamSynchronize(stream));
		pcheck("in place", hr, n, from, rank, 50);
	}

	/* Rank 0 receives from anyone, one call at a time; each other rank
	 * sends it one message (a plain blocking send). */
	if (nranks >= 2) {
		size_t n = 777;

		if (rank == 0) {
			int seen[64] = {0};

			for (int i = 1; i < nranks; i++) {
				int src = -1;

				CK(cudaMemsetAsync(drecv, 0xA5, n, stream));
				pcall("any: recv", smddp_recv(drecv, n, SMDDP_UINT8, SMDDP_ANY_SOURCE, 40,
							      &src, comm, stream));
				CK(cudaMemcpyAsync(hr, drecv, n, cudaMemcpyDeviceToHost, stream));
				CK(cudaStreamSynchronize(stream));
				if (src <= 0 || src >= nranks || src >= 64 || seen[src]++) {
					printf("FAIL rank 0: any: source %d\n", src);
					failures++;
					continue;
				}
				pcheck("any", hr, n, src, 0, 40);
			}
		} else {
			pfill(hs, n, rank, 0, 40);
			CK(cudaMemcpyAsync(dsend, hs, n, cudaMemcpyHostToDevice, stream));
			pcall("any: send", smddp_send(dsend, n, SMDDP_UINT8, 0, 40, comm, stream));
		}
	}

	/* A size mismatch in a group: tag 6 has another size on the receiver
	 * (an error naming both ranks), tag 7 still arrives. */
	if (nranks >= 2 && rank <= 1) {
		int got;

		pfill(hs, 500, rank, 1 - rank, 7);
		CK(cudaMemcpyAsync(dsend + 4096, hs, 500, cudaMemcpyHostToDevice, stream));
		CK(cudaMemsetAsync(drecv + 4096, 0xA5, 500, stream));
		smddp_group_start();
		if (rank == 0) {
			smddp_send(dsend, 1000, SMDDP_UINT8, 1, 6, comm, stream);
			smddp_send(dsend + 4096, 500, SMDDP_UINT8, 1, 7, comm, stream);
		} else {
			smddp_recv(drecv, 1200, SMDDP_UINT8, 0, 6, NULL, comm, stream);
			smddp_recv(drecv + 4096, 500, SMDDP_UINT8, 0, 7, NULL, comm, stream);
		}
		got = smddp_group_end();
		if ((got == SMDDP_EMISMATCH && both_ranks_named(1 - rank)) ||
		    (got == SMDDP_OK && rank == 0))
			passed++;
		else
			pcall("mismatch in a group (expected SMDDP_EMISMATCH naming both ranks)",
			      got ? got : SMDDP_EINTERNAL);
		if (rank == 1) {
			CK(cudaMemcpyAsync(hr, drecv + 4096, 500, cudaMemcpyDeviceToHost, stream));
			CK(cudaStreamSynchronize(stream));
			pcheck("the good message beside the mismatch", hr, 500, 0, 1, 7);
		}
	}
	pcall("barrier after the group's mismatch", smddp_barrier(comm));
}

/* p2p --perf: a ring of sendrecv (one group per call) on rank 0's clock,
 * printed as P2P-PERF lines (no floor: the numbers are for the log). */
static void p2p_perf(void)
{
	size_t sizes[] = {8, 4096, 1 << 20, 64 << 20};
	int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
	char *s = NULL, *r = NULL;

	CK(cudaMalloc((void **)&s, 64 << 20));
	CK(cudaMalloc((void **)&r, 64 << 20));
	CK(cudaMemsetAsync(s, 1, 64 << 20, stream));
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int iters = sizes[i] >= (1 << 20) ? 20 : 200;
		double t0 = 0;

		for (int it = -3; it < iters; it++) {
			if (it == 0) {
				pcall("perf barrier", smddp_barrier(comm));
				t0 = now_s();
			}
			smddp_group_start();
			smddp_send(s, sizes[i], SMDDP_UINT8, to, 60, comm, stream);
			smddp_recv(r, sizes[i], SMDDP_UINT8, from, 60, NULL, comm, stream);
			if (smddp_group_end()) {
				pcall("perf sendrecv", SMDDP_EINTERNAL);
				goto out;
			}
		}
		double us = (now_s() - t0) / iters * 1e6;

		if (rank == 0)
			printf("P2P-PERF ranks=%d bytes=%zu time_us=%.1f algbw_gbps=%.2f\n", nranks,
			       sizes[i], us, (double)sizes[i] / us / 1e3);
	}
out:
	CK(cudaStreamSynchronize(stream));
	cudaFree(s);
	cudaFree(r);
}

/* The input is written on the stream just before each call and read back
 * on it just after: the calls must keep stream order both ways. */
static void p2p(size_t large)
{
	size_t counts[] = {0, 1, 7, 1001, large};
	unsigned char *hs = (unsigned char *)hbuf, *hr = (unsigned char *)hout;
	int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;

	for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
		size_t n = counts[ci];
		int src = -1;

		if (n * (size_t)nranks > cap_bytes)
			continue;
		/* ring, in a group */
		pfill(hs, n, rank, to, 1);
		CK(cudaMemcpyAsync(dsend, hs, n, cudaMemcpyHostToDevice, stream));
		CK(cudaMemsetAsync(drecv, 0xA5, n, stream));
		pcall("group_start", smddp_group_start());
		pcall("send", smddp_send(dsend, n, SMDDP_UINT8, to, 1, comm, stream));
		pcall("recv", smddp_recv(drecv, n, SMDDP_UINT8, from, 1, &src, comm, stream));
		pcall("group_end", smddp_group_end());
		CK(cudaMemcpyAsync(hr, drecv, n, cudaMemcpyDeviceToHost, stream));
		CK(cudaStreamSynchronize(stream));
		pcheck("ring", hr, n, from, rank, 1);
		if (src != from) {
			printf("FAIL rank %d: ring: source %d, expected %d\n", rank, src, from);
			failures++;
		}
		/* alltoallv: rank s sends (s + q) % 3 * n / 2 bytes to q */
		size_t sc[64], sd[64], rc[64], rd[64], so = 0, ro = 0;

		for (int q = 0; q < nranks && nranks <= 64; q++) {
			sc[q] = (size_t)((rank + q) % 3) * n / 2;
			rc[q] = (size_t)((q + rank) % 3) * n / 2;
			sd[q] = so;
			rd[q] = ro;
			so += sc[q];
			ro += rc[q];
			pfill(hs + sd[q], sc[q], rank, q, 2);
		}
		CK(cudaMemcpyAsync(dsend, hs, so, cudaMemcpyHostToDevice, stream));
		pcall("alltoallv",
		      smddp_alltoallv(dsend, sc, sd, drecv, rc, rd, SMDDP_UINT8, comm, stream));
		CK(cudaMemcpyAsync(hr, drecv, ro, cudaMemcpyDeviceToHost, stream));
		CK(cudaStreamSynchronize(stream));
		for (int q = 0; q < nranks; q++)
			pcheck("alltoallv", hr + rd[q], rc[q], q, rank, 2);
		/* gather and scatter from every root */
		for (int root = 0; root < nranks; root++) {
			pfill(hs, n, rank, root, 3);
			CK(cudaMemcpyAsync(dsend, hs, n, cudaMemcpyHostToDevice, stream));
			pcall("gather", smddp_gather(dsend, drecv, n, SMDDP_UINT8, root, comm, stream));
			CK(cudaMemcpyAsync(hr, drecv, n * (size_t)nranks, cudaMemcpyDeviceToHost,
					   stream));
			CK(cudaStreamSynchronize(stream));
			if (rank == root)
				for (int q = 0; q < nranks; q++)
					pcheck("gather", hr + (size_t)q * n, n, q, root, 3);
			if (rank == root)
				for (int q = 0; q < nranks; q++)
					pfill(hs + (size_t)q * n, n, root, q, 4);
			CK(cudaMemcpyAsync(dsend, hs, n * (size_t)nranks, cudaMemcpyHostToDevice,
					   stream));
			pcall("scatter", smddp_scatter(dsend, drecv, n, SMDDP_UINT8, root, comm, stream));
			CK(cudaMemcpyAsync(hr, drecv, n, cudaMemcpyDeviceToHost, stream));
			CK(cudaStreamSynchronize(stream));
			pcheck("scatter", hr, n, root, rank, 4);
		}
	}
	/* Memory that CUDA IPC cannot share (a cudaMallocAsync pool) goes
	 * staged through the host: the same ring. */
	{
		size_t n = 100003;
		char *ps = NULL, *pr = NULL;

		CK(cudaMallocAsync((void **)&ps, n, stream));
		CK(cudaMallocAsync((void **)&pr, n, stream));
		pfill(hs, n, rank, to, 5);
		CK(cudaMemcpyAsync(ps, hs, n, cudaMemcpyHostToDevice, stream));
		pcall("pool: group_start", smddp_group_start());
		pcall("pool: send", smddp_send(ps, n, SMDDP_UINT8, to, 5, comm, stream));
		pcall("pool: recv", smddp_recv(pr, n, SMDDP_UINT8, from, 5, NULL, comm, stream));
		pcall("pool: group_end", smddp_group_end());
		CK(cudaMemcpyAsync(hr, pr, n, cudaMemcpyDeviceToHost, stream));
		CK(cudaStreamSynchronize(stream));
		pcheck("pool ring", hr, n, from, rank, 5);
		CK(cudaFreeAsync(ps, stream));
		CK(cudaFreeAsync(pr, stream));
		CK(cudaStreamSynchronize(stream));
	}
	/* Sizes that differ: rank 0 sends 1000 bytes, rank 1 takes 1200:
	 * SMDDP_EMISMATCH naming the other rank (on the sender too inside a
	 * node; between hosts its send may just complete), and the
	 * communicator goes on. */
	if (nranks >= 2 && rank <= 1) {
		int got = rank == 0 ? smddp_send(dsend, 1000, SMDDP_UINT8, 1, 6, comm, stream)
				    : smddp_recv(drecv, 1200, SMDDP_UINT8, 0, 6, NULL, comm, stream);

		if ((got == SMDDP_EMISMATCH &&
		     strstr(smddp_last_error(comm), rank ? "rank 0" : "rank 1")) ||
		    (got == SMDDP_OK && rank == 0))
			passed++;
		else
			pcall("mismatch (expected SMDDP_EMISMATCH naming the other rank)",
			      got ? got : SMDDP_EINTERNAL);
	}
	pcall("barrier after the mismatch", smddp_barrier(comm));
	p2p_more();
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 && argv[1][0] != '-' ? argv[1] : "matrix";
	size_t large = 262147;
	int quick = 0, small = 0, perf = 0, ndev = 0, dev, rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--large") && i + 1 < argc)
			large = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--quick"))
			quick = 1;
		else if (!strcmp(argv[i], "--small"))
			small = 1;
		else if (!strcmp(argv[i], "--perf"))
			perf = 1;
	}
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
		printf("SKIP: no CUDA GPU here\n");
		return 77;
	}
	rc = smddp_init(&comm);
	if (rc) {
		fprintf(stderr, "smddp_init: %s: %s\n", smddp_strerror(rc), smddp_last_error(NULL));
		return 1;
	}
	rank = smddp_comm_rank(comm);
	nranks = smddp_comm_size(comm);
	dev = smddp_comm_local_rank(comm) % ndev;
	CK(cudaSetDevice(dev));
	CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	cap_bytes = (size_t)nranks * (large + 64) * 8 + 4096;
	CK(cudaMalloc((void **)&dsend, cap_bytes));
	CK(cudaMalloc((void **)&drecv, cap_bytes));
	CK(cudaMallocHost((void **)&hbuf, cap_bytes));
	CK(cudaMallocHost((void **)&hout, cap_bytes));
	if (rank == 0)
		printf("# gpu-conformance %s: %d ranks, GPU %d of %d\n", mode, nranks, dev, ndev);

	if (!strcmp(mode, "matrix")) {
		matrix(large, quick, small);
	} else if (!strcmp(mode, "order")) {
		order();
	} else if (!strcmp(mode, "abortq")) {
		return abortq();
	} else if (!strcmp(mode, "twostreams")) {
		twostreams();
	} else if (!strcmp(mode, "overlap")) {
		overlap();
	} else if (!strcmp(mode, "mismatch")) {
		return mismatch();
	} else if (!strcmp(mode, "p2p")) {
		p2p(large);
		if (perf && nranks >= 2)
			p2p_perf();
	} else if (!strcmp(mode, "errors")) {
		errors();
	} else if (!strcmp(mode, "mixed")) {
		return mixed();
	} else if (!strcmp(mode, "cudafail") && argc > 3) {
		return cudafail(atoi(argv[2]), atoi(argv[3]));
	} else if (!strcmp(mode, "badbuf") && argc > 2) {
		return badbuf(atoi(argv[2]));
	} else if (!strcmp(mode, "p2pdead") && argc > 2) {
		signal(SIGTERM, SIG_IGN); /* as dead below */
		return p2pdead(atoi(argv[2]));
	} else if (!strcmp(mode, "dead") && argc > 2) {
		/* smddp-run stops the others (SIGTERM) when the victim dies:
		 * run under --grace long enough for them to report. */
		signal(SIGTERM, SIG_IGN);
		return dead(atoi(argv[2]));
	} else {
		fprintf(stderr, "usage: gpu-conformance [matrix [--large N] [--quick] [--small] | order | twostreams | abortq | overlap | "
				"p2p [--perf] | p2pdead VICTIM | mismatch | errors | dead VICTIM | badbuf VICTIM | cudafail VICTIM CALL | mixed]\n");
		return 2;
	}
	printf("SUMMARY rank %d of %d: %d passed, %d failed\n", rank, nranks, passed, failures);
	rc = smddp_comm_destroy(comm);
	if (rc) {
		printf("FAIL rank %d: smddp_comm_destroy: %s: %s\n", rank, smddp_strerror(rc),
		       smddp_last_error(NULL));
		failures++;
	}
	cudaFree(dsend);
	cudaFree(drecv);
	cudaFreeHost(hbuf);
	cudaFreeHost(hout);
	cudaStreamDestroy(stream);
	return failures ? 1 : 0;
}
