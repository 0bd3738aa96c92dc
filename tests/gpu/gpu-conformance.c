/* gpu-conformance.c - the device collectives checked against an independent reference, on one or more GPUs.
 *
 * Run under smddp-run (any number of ranks; several may share a GPU: each
 * rank takes GPU local_rank % count).  Each rank's input
 * element j is a pure function of (case, rank, j), so every rank computes
 * what every other rank sent and derives the expected output by itself:
 * exact wrapped arithmetic for integers (inputs over the whole range, so
 * sums and products wrap), float64 for floats (inputs small integers and
 * quarters, so sums are exact; AVG and fp16/bf16 within the rounding of the
 * type, between hosts that of every hop).  Nothing of the library computes a
 * reference.
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
 *   gpu-conformance cancelq                 both ranks hold their stream 3 s and queue a
 *                                           call; rank 0 cancels: its error within 2 s
 *                                           (FAULT-OK lines)
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
 *   gpu-conformance refused short|zero|gather
 *                                           rank 1 alone refuses a call (a short
 *                                           recvbuf, count 0, an allgather with
 *                                           sendbuf == recvbuf): every rank fails
 *                                           the call that meets its next one with
 *                                           SMDDP_EMISMATCH (FAULT-OK lines)
 *   gpu-conformance refusedcc zero|null     (SMDDP_CHECK_COLL=1, between hosts) rank 1
 *                                           passes count 0 or a NULL recvbuf: it gets
 *                                           SMDDP_EMISMATCH (SMDDP_EINVAL), the others
 *                                           SMDDP_EMISMATCH naming it, in seconds; the
 *                                           next matched call works (FAULT-OK lines)
 *   ... abortq, cancelq, dead and mismatch take [--coll NAME]: their calls are
 *                                           that collective (allreduce by default;
 *                                           broadcast's and reduce's root the last rank)
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
 *   gpu-conformance badmix VICTIM           (SMDDP_CHECK_COLL=1) after a queued call of
 *                                           FAULT_COUNT elements, VICTIM passes host
 *                                           memory with a stream: it gets
 *                                           SMDDP_EUNSUPPORTED, the others
 *                                           SMDDP_EMISMATCH naming it, in seconds
 *   gpu-conformance badmixnext VICTIM       the same, the others a second late and
 *                                           VICTIM's next device call at once: every
 *                                           rank fails in seconds (VICTIM's next call)
 *   gpu-conformance dead VICTIM             VICTIM is SIGKILLed; the others get an
 *                                           error from the next call, and their
 *                                           streams are released (FAULT-OK lines)
 *   gpu-conformance cudafail VICTIM CALL    (with the fake CUDA's FAKECUDA_FAIL) a CUDA
 *                                           call of VICTIM fails inside its call CALL:
 *                                           every rank fails in that call, told why
 *                                           (FAULT-OK lines)
 *   gpu-conformance shrink [--large N] [--quick|--small] STAGE...
 *                                           in each STAGE (world ranks joined by
 *                                           '+') ranks die in the middle of device
 *                                           collectives of every path; the
 *                                           survivors get an error naming one,
 *                                           shrink, and pass the matrix on the new
 *                                           communicator (SHRINK-OK lines)
 *   gpu-conformance threads [--rounds N] [--jitter US] [--stagger] [--large N] [--stop R:K:N]
 *                           [--bounded] [--fresh] [--every N] [--leave K:N [--slow MS]]
 *                                           three communicators, a thread each,
 *                                           at once; with --stop, rank R's thread
 *                                           K stops after N rounds and its peers
 *                                           fail in time; with --leave, every
 *                                           rank's thread K destroys its
 *                                           communicator after N rounds and the
 *                                           others go on (THREADS-OK lines)
 * The matrix is here; the other modes are in gpu-order.c, gpu-faults.c,
 * gpu-p2p.c, gpu-shrink.c and gpu-threads.c.
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

#include "fnv.h" /* lib/hash/: FNV-1a, libc only */
#include "gpu-conformance.h"

int rank, nranks, failures, passed;
struct smddp_comm *comm;
cudaStream_t stream;
char *dsend, *drecv, *hbuf, *hout;
size_t cap_bytes;

/* ---- element types, written here so as not to trust the library ---------- */

const size_t es_of[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
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
	double mag; /* of a float sum: its operands' magnitudes summed (before AVG's division) */
};

/* Ranks on several hosts (CONFORMANCE_PER_HOST, as tests/net/fakehost.sh
 * reads it): float results are then not rounded once, see matches(). */
static int across_hosts;

static struct val input(uint64_t cs, int dt, int op, int r, size_t j)
{
	struct val v = {0, 0, 0};

	if (is_float(dt))
		v.f = gen_float(cs, r, j, op);
	else
		v.i = norm(dt, gen_int(cs, r, j));
	return v;
}

static struct val reduced(uint64_t cs, int dt, int op, size_t j)
{
	struct val acc = input(cs, dt, op, 0, j);

	acc.mag = fabs(acc.f);
	for (int r = 1; r < nranks; r++) {
		struct val x = input(cs, dt, op, r, j);

		if (is_float(dt)) {
			acc.mag += fabs(x.f);
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
	double g = load_float(out, i, dt), tol, hops = 0;

	*got_f = g;
	/* Between hosts the partial results of a 16-bit float sum cross the
	 * network in the type itself (as with NCCL), so each of the n - 1
	 * additions of a ring, chain or recursive doubling is rounded: each
	 * by at most an ulp of a partial result, which is no larger than the
	 * sum of magnitudes (bf16 is exact only up to 64 in quarters, so
	 * five ranks or more can differ from once-rounded by an ulp or more,
	 * by reduction order). */
	if (across_hosts && want.mag > 0 && (op == SMDDP_SUM || op == SMDDP_AVG) &&
	    (dt == SMDDP_FLOAT16 || dt == SMDDP_BFLOAT16))
		hops = (nranks - 1) * ldexp(1.0, ilogb(want.mag) - (dt == SMDDP_FLOAT16 ? 10 : 7)) /
		       (op == SMDDP_AVG ? nranks : 1);
	if (op != SMDDP_AVG) {
		/* Sums of quarters and products of +-2^k are exact in float64 and
		 * in the float accumulation; the result is that rounded once to
		 * the type (bf16 holds 8 bits: 72.75 is 73). */
		char tmp[8];

		store(tmp, 0, dt, 0, want.f);
		return g == load_float(tmp, 0, dt) || fabs(g - want.f) <= hops;
	}
	tol = dt == SMDDP_FLOAT16 ? 1.0 / 1024 : dt == SMDDP_BFLOAT16 ? 1.0 / 128
		: dt == SMDDP_FLOAT32 ? 1e-7 : 1e-15;
	return fabs(g - want.f) <= tol * fabs(want.f) + hops + 1e-300;
}

/* ---- the matrix ------------------------------------------------------------ */

const char *const coll_names[] = {"allreduce", "allgather", "reduce_scatter",
				  "broadcast", "reduce",    "alltoall"};
enum {
	ALLREDUCE = COLL_ALLREDUCE,
	ALLGATHER = COLL_ALLGATHER,
	REDUCE_SCATTER = COLL_REDUCE_SCATTER,
	BROADCAST = COLL_BROADCAST,
	REDUCE = COLL_REDUCE,
	ALLTOALL = COLL_ALLTOALL,
};

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
		uint64_t h = sd_fnv1a(SD_FNV1A_BASIS, hout, rc * es);
		uint64_t *all = calloc(n, sizeof(*all));
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

void matrix(size_t large, int quick, int small)
{
	size_t counts[] = {1, 7, 1003, large};
	int ncounts = small ? 3 : 4;
	uint64_t cs = 1;
	double t0 = sd_now_s();

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
			printf("# %s done (%.1f s)\n", coll_names[coll], sd_now_s() - t0);
		fflush(stdout);
	}
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
		else if (!strcmp(argv[i], "--coll") && i + 1 < argc) {
			const char *name = argv[++i];

			for (fault_coll = 0; fault_coll < NCOLL; fault_coll++)
				if (!strcmp(coll_names[fault_coll], name))
					break;
			if (fault_coll == NCOLL) {
				fprintf(stderr, "gpu-conformance: --coll: no collective %s\n", name);
				return 2;
			}
		}
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
	across_hosts = getenv("CONFORMANCE_PER_HOST") != NULL;
	dev = smddp_comm_local_rank(comm) % ndev;
	CK(cudaSetDevice(dev));
	CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
	cap_bytes = (size_t)nranks * (large + 64) * 8 + 4096;
	if (cap_bytes < ((size_t)4 << 20) + 4096) /* order's 4 MiB, on one rank too */
		cap_bytes = ((size_t)4 << 20) + 4096;
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
	} else if (!strcmp(mode, "cancelq")) {
		return cancelq();
	} else if (!strcmp(mode, "twostreams")) {
		twostreams();
	} else if (!strcmp(mode, "overlap")) {
		overlap();
	} else if (!strcmp(mode, "regs")) {
		regs();
	} else if (!strcmp(mode, "ddp")) {
		ddp();
	} else if (!strcmp(mode, "lateload")) {
		lateload();
	} else if (!strcmp(mode, "mismatch")) {
		return mismatch();
	} else if (!strcmp(mode, "refused") && argc > 2) {
		return refused(argv[2]);
	} else if (!strcmp(mode, "refusedcc") && argc > 2) {
		return refusedcc(argv[2]);
	} else if (!strcmp(mode, "p2p")) {
		p2p(large);
		if (perf && nranks >= 2)
			p2p_perf();
	} else if (!strcmp(mode, "threads")) {
		if (threads(argc, argv))
			return 1;
	} else if (!strcmp(mode, "errors")) {
		errors();
	} else if (!strcmp(mode, "mixed")) {
		return mixed();
	} else if (!strcmp(mode, "cudafail") && argc > 3) {
		return cudafail(atoi(argv[2]), atoi(argv[3]));
	} else if (!strcmp(mode, "badbuf") && argc > 2) {
		return badbuf(atoi(argv[2]));
	} else if (!strcmp(mode, "badmix") && argc > 2) {
		return badmix(atoi(argv[2]));
	} else if (!strcmp(mode, "badmixnext") && argc > 2) {
		return badmix_next(atoi(argv[2]));
	} else if (!strcmp(mode, "p2pdead") && argc > 2) {
		signal(SIGTERM, SIG_IGN); /* as dead below */
		return p2pdead(atoi(argv[2]));
	} else if (!strcmp(mode, "shrink")) {
		/* Under smddp-run --on-failure continue; without, it stops
		 * the others (SIGTERM) when a victim dies. */
		signal(SIGTERM, SIG_IGN);
		if (shrink(argc, argv, large, quick, small))
			return 1;
	} else if (!strcmp(mode, "dead") && argc > 2) {
		/* smddp-run stops the others (SIGTERM) when the victim dies:
		 * run under --grace long enough for them to report. */
		signal(SIGTERM, SIG_IGN);
		return dead(atoi(argv[2]));
	} else {
		fprintf(stderr, "usage: gpu-conformance [matrix [--large N] [--quick] [--small] | order | twostreams | abortq | cancelq | overlap | regs | ddp | lateload | "
				"p2p [--perf] | p2pdead VICTIM | mismatch | refused HOW | refusedcc HOW | errors | dead VICTIM | badbuf VICTIM | badmix VICTIM | badmixnext VICTIM | cudafail VICTIM CALL | mixed | "
				"shrink [--large N] [--quick|--small] STAGE... | "
				"threads [--rounds N] [--jitter US] [--stagger] [--large N] [--stop R:K:N] [--bounded] "
				"[--fresh] [--every N] [--leave K:N [--slow MS]]]\n"
				"  (abortq, cancelq, dead and mismatch: [--coll allreduce|allgather|reduce_scatter|broadcast|reduce|alltoall])\n");
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
