/* gpu-faults.c - gpu-conformance: bad calls and failing peers (errors, badbuf, abortq, mixed,
 * badmix, dead, p2pdead, cudafail, mismatch); the fault modes print FAULT-OK / FAULT-BAD lines.
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

#include "gpu-conformance.h"

int fault_coll; /* --coll: the collective of abortq, cancelq, dead and mismatch */

/* Those modes' call: fault_coll of count elements per peer, float32 (sum;
 * broadcast's and reduce's root the last rank), from dsend into drecv. */
static int fault_call(size_t count)
{
	int last = nranks - 1;

	switch (fault_coll) {
	case COLL_ALLGATHER: return smddp_allgather(dsend, drecv, count, SMDDP_FLOAT32, comm, stream);
	case COLL_REDUCE_SCATTER:
		return smddp_reduce_scatter(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	case COLL_BROADCAST: return smddp_broadcast(drecv, count, SMDDP_FLOAT32, last, comm, stream);
	case COLL_REDUCE:
		return smddp_reduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, last, comm, stream);
	case COLL_ALLTOALL: return smddp_alltoall(dsend, drecv, count, SMDDP_FLOAT32, comm, stream);
	default: return smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	}
}

/* The count of the fault cases' calls: 64 Ki elements, or FAULT_COUNT
 * (a staged call of several chunks, queued in parts). */
static size_t fault_count(void)
{
	const char *v = getenv("FAULT_COUNT");
	size_t n = v && *v ? strtoul(v, NULL, 0) : 0;

	return n && n * 4 <= ((size_t)4 << 20) ? n : (size_t)1 << 16;
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

void errors(void)
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
	expect("NULL buffers with a stream",
	       smddp_allreduce(NULL, NULL, 16, SMDDP_FLOAT32, SMDDP_SUM, comm, stream), SMDDP_EINVAL);
	/* A stream of another GPU than the buffers': refused before anything
	 * is queued on it (seen without a GPU: FAKECUDA_DEVICES=2). */
	int ndev = 0, dev = 0, drv = 0;
	CK(cudaGetDeviceCount(&ndev));
	CK(cudaGetDevice(&dev));
	CK(cudaDriverGetVersion(&drv));
	if (ndev > 1 && drv >= 12080) { /* cuStreamGetDevice */
		cudaStream_t other;

		CK(cudaSetDevice((dev + 1) % ndev));
		CK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
		CK(cudaSetDevice(dev));
		expect("a stream of another GPU",
		       smddp_allreduce(dsend, drecv, 16, SMDDP_FLOAT32, SMDDP_SUM, comm, other),
		       SMDDP_EINVAL);
		CK(cudaSetDevice((dev + 1) % ndev));
		CK(cudaStreamDestroy(other));
		CK(cudaSetDevice(dev));
	} else if (rank == 0) {
		printf("not run: a stream of another GPU (%s)\n",
		       ndev > 1 ? "a driver older than CUDA 12.8" : "one GPU");
	}
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

void verdict(int ok, int rc, double took, const char *msg)
{
	printf("FAULT-%s rank=%d %s%s after %.2f s: %s\n", ok ? "OK" : "BAD", rank, ok ? "" : "got ",
	       smddp_strerror(rc), took, msg);
}

/* VICTIM passes a recvbuf shorter than the call: it gets SMDDP_EINVAL, and
 * the others, already in the call, an error naming it and its reason within seconds
 * (not after SMDDP_TIMEOUT).  FAULT-OK / FAULT-BAD lines, as dead. */
int badbuf(int victim)
{
	size_t count = 1 << 16;
	char *small = NULL, want[32];
	double t0 = sd_now_s();
	int rc;

	CK(cudaMalloc((void **)&small, 256));
	rc = smddp_allreduce(dsend, rank == victim ? small : drecv, count, SMDDP_FLOAT32,
			     SMDDP_SUM, comm, stream);
	/* Queued on the peers: the failure comes after the call. */
	if (rank != victim && rc == SMDDP_OK && queued_mode())
		rc = await_async_error(t0, 20);
	double took = sd_now_s() - t0;
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

static int good_first_call(void);

/* abortq: after a good first call (the first device collective meets the
 * peers on the host: it sets up the kernels' path, lib/cuda/fast.c), rank
 * 0 queues a call that rank 1 has not made yet, then calls
 * smddp_comm_abort: it returns within seconds (its proxy or its kernel is
 * inside the call), and rank 1's call fails naming rank 0.  FAULT-OK /
 * FAULT-BAD lines, as dead. */
int abortq(void)
{
	size_t count = fault_count();
	struct timespec half = {0, 500 * 1000000L};
	double t0;
	int rc;

	if (good_first_call())
		return 1;

	if (rank == 0) {
		rc = fault_call(count);
		nanosleep(&half, NULL);
		t0 = sd_now_s();
		int ab = smddp_comm_abort(comm);
		double took = sd_now_s() - t0;

		CK(cudaStreamSynchronize(stream));
		verdict(ab == SMDDP_OK && took < 5, rc, took, "smddp_comm_abort returned");
		return 0;
	}
	nanosleep(&half, NULL);
	nanosleep(&half, NULL);
	t0 = sd_now_s();
	rc = fault_call(count);
	if (!rc)
		rc = await_async_error(t0, 20);
	if (!rc)
		rc = smddp_barrier(comm);
	double took = sd_now_s() - t0;
	const char *msg = smddp_last_error(comm);

	verdict(rc != SMDDP_OK && strstr(msg, "rank 0") && strstr(msg, "abort") && took < 20, rc,
		took, msg);
	CK(cudaStreamSynchronize(stream));
	smddp_comm_abort(comm);
	return 0;
}

/* cancelq: both ranks hold their stream 3 s, then queue an allreduce;
 * rank 0 calls smddp_comm_cancel 0.2 s later.  Its proxy, waiting for the
 * stream to reach the call, gives up at once: smddp_comm_get_async_error
 * says "cancelled" within 2 s, not after the hold.  Rank 1 fails naming
 * rank 0 once its proxy meets it; both streams are released.  FAULT-OK /
 * FAULT-BAD lines, as dead. */
int cancelq(void)
{
	static int ms = 3000;
	size_t count = 1 << 16;
	struct timespec fifth = {0, 200 * 1000000L};
	double t0;
	int rc;

	/* Under auto the first call on one node is done blocking (it shows
	 * where the peers are): the cancel is for a queued one. */
	rc = fault_call(count);
	CK(cudaStreamSynchronize(stream));
	if (rc || !queued_mode()) {
		verdict(rc == SMDDP_OK, rc, 0.0,
			"skipped: the blocking mode has no queued call to cancel "
			"(SMDDP_CUDA_ASYNC=1, or auto under MPS)");
		smddp_comm_abort(comm);
		return 0;
	}
	t0 = sd_now_s();
	CK(cudaLaunchHostFunc(stream, hold, &ms));
	rc = fault_call(count);
	if (rank == 0 && !rc) {
		nanosleep(&fifth, NULL);
		rc = smddp_comm_cancel(comm);
	}
	if (!rc)
		rc = await_async_error(t0, 20);
	double took = sd_now_s() - t0;
	const char *msg = smddp_last_error(comm);

	verdict(rank == 0 ? rc == SMDDP_EABORTED && strstr(msg, "cancelled") && took < 2
			  : rc != SMDDP_OK && strstr(msg, "rank 0") && took < 20,
		rc, took, msg);
	CK(cudaStreamSynchronize(stream));
	printf("STREAM-OK rank=%d released after %.2f s\n", rank, sd_now_s() - t0);
	smddp_comm_abort(comm);
	return 0;
}

/* ---- ranks disagree on the kind of memory (between hosts) -------------------------- */

/* Rank 0 on device memory, the others on host memory, SMDDP_CHECK_COLL=1:
 * every rank gets SMDDP_EMISMATCH saying so, in seconds. */
int mixed(void)
{
	static float host[1 << 17];
	size_t count = 1 << 17; /* 512 KiB: two chunks on the device rank */
	double t0 = sd_now_s();
	int rc = rank == 0 ? smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm,
					     stream)
			   : smddp_allreduce(host, host, count, SMDDP_FLOAT32, SMDDP_SUM, comm,
					     NULL);
	if (rank == 0 && rc == SMDDP_OK && queued_mode())
		rc = await_async_error(t0, 20);
	double took = sd_now_s() - t0;
	const char *msg = smddp_last_error(comm);

	verdict(rc == SMDDP_EMISMATCH && strstr(msg, "device memory") && took < 20, rc, took, msg);
	CK(cudaStreamSynchronize(stream));
	smddp_comm_abort(comm);
	return 0;
}

/* Under SMDDP_CHECK_COLL, after a call of several staged chunks is queued
 * (its chunks take wire numbers of their own as they run), VICTIM passes
 * host memory with a stream while the others make the device call: VICTIM
 * gets SMDDP_EUNSUPPORTED, the others SMDDP_EMISMATCH naming it (queued:
 * from smddp_comm_get_async_error), within seconds, not SMDDP_TIMEOUT.
 * The call that VICTIM refuses is compared on its own thread: after the
 * calls queued before it, with their numbers; on one node, where the
 * others' kernels meet no host barrier, it is announced to those kernels
 * instead.  FAULT-OK lines. */
static int names_rank(const char *msg, int q);

int badmix(int victim)
{
	static float host[1024];
	size_t big = fault_count();
	int rc = fault_call(big);

	if (rc) {
		printf("FAULT-BAD rank=%d the first call failed: %s\n", rank, smddp_last_error(comm));
		return 1;
	}
	double t0 = sd_now_s();
	if (rank == victim) {
		rc = smddp_allreduce(host, host, 1024, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	} else {
		rc = smddp_allreduce(dsend, drecv, 1024, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
		if (!rc && queued_mode())
			rc = await_async_error(t0, 20);
	}
	double took = sd_now_s() - t0;
	const char *msg = smddp_last_error(comm);

	verdict((rank == victim ? rc == SMDDP_EUNSUPPORTED
				: (rc == SMDDP_EMISMATCH || rc == SMDDP_EABORTED) &&
					  names_rank(msg, victim)) &&
			took < 10,
		rc, took, msg);
	CK(cudaStreamSynchronize(stream));
	smddp_comm_abort(comm);
	return 0;
}

/* badmixnext VICTIM, under SMDDP_CHECK_COLL=1, queued on one node: as
 * badmix, but the others come to the call a second late, and VICTIM makes
 * its next device call at once: its kernel announces that call's number
 * over the refusal before the others' kernels have read it.  They must
 * still fail in seconds, naming VICTIM (a call ahead, on the same parity:
 * a refused call takes no fast call's), not wait until SMDDP_TIMEOUT; and
 * VICTIM's next call fails (the refusal broke the others' communicator).
 * FAULT-OK lines. */
int badmix_next(int victim)
{
	static float host[1024];
	size_t big = fault_count();
	int rc = fault_call(big), rc2 = SMDDP_OK;

	if (rc) {
		printf("FAULT-BAD rank=%d the first call failed: %s\n", rank, smddp_last_error(comm));
		return 1;
	}
	double t0 = sd_now_s();
	if (rank == victim) {
		rc = smddp_allreduce(host, host, 1024, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
		rc2 = smddp_allreduce(dsend, drecv, 1024, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
		if (!rc2 && queued_mode())
			rc2 = await_async_error(t0, 20);
	} else {
		usleep(1000000);
		rc = smddp_allreduce(dsend, drecv, 1024, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
		if (!rc && queued_mode())
			rc = await_async_error(t0, 20);
	}
	double took = sd_now_s() - t0;
	const char *msg = smddp_last_error(comm);

	verdict((rank == victim ? rc == SMDDP_EUNSUPPORTED && rc2 != SMDDP_OK
				: (rc == SMDDP_EMISMATCH || rc == SMDDP_EABORTED) &&
					  names_rank(msg, victim)) &&
			took < 10,
		rank == victim ? rc2 : rc, took, msg);
	CK(cudaStreamSynchronize(stream));
	smddp_comm_abort(comm);
	return 0;
}

/* refusedcc HOW, under SMDDP_CHECK_COLL=1 (between hosts, where nothing
 * else compares the calls): rank 1 makes a device call of count 0 (zero)
 * or with a NULL recvbuf (null), the others the same call of 1024
 * elements: rank 1 gets SMDDP_EMISMATCH naming rank 0 (zero) or its own
 * SMDDP_EINVAL (null), the others SMDDP_EMISMATCH naming rank 1, in
 * seconds.  Blocking, every rank then makes the same call, which must
 * work (a mismatch leaves the communicator usable; queued, one met by a
 * queued call breaks it).  FAULT-OK lines. */
int refusedcc(const char *how)
{
	size_t count = 1024;
	int zero = !strcmp(how, "zero"), rc, err = -1;

	if (!zero && strcmp(how, "null")) {
		fprintf(stderr, "gpu-conformance refusedcc: zero or null, not %s\n", how);
		return 2;
	}
	if (good_first_call())
		return 1;
	double t0 = sd_now_s();
	if (rank == 1)
		rc = smddp_allreduce(dsend, zero ? drecv : NULL, zero ? 0 : count, SMDDP_FLOAT32,
				     SMDDP_SUM, comm, stream);
	else
		rc = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	if (!rc)
		rc = await_async_error(t0, 20);
	double took = sd_now_s() - t0;
	const char *msg = smddp_last_error(comm);
	int want = rank == 1 && !zero ? SMDDP_EINVAL : SMDDP_EMISMATCH;

	verdict(rc == want && took < 10 &&
			(rank == 1 ? zero ? names_rank(msg, 0) && strstr(msg, "count 0") : 1
				   : names_rank(msg, 1)),
		rc, took, msg);
	CK(cudaStreamSynchronize(stream));
	if (queued_mode()) {
		smddp_comm_abort(comm);
		return 0;
	}
	/* in step again: the same call everywhere works */
	rc = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	if (!rc)
		CK(cudaStreamSynchronize(stream));
	if (!rc)
		rc = smddp_comm_get_async_error(comm, &err);
	if (rc || err)
		printf("FAULT-BAD rank=%d the matched call after the mismatch failed: %s (async "
		       "error %d): %s\n",
		       rank, smddp_strerror(rc), err, smddp_last_error(comm));
	smddp_comm_abort(comm);
	return 0;
}

/* ---- a peer dies ------------------------------------------------------------------ */

int dead(int victim)
{
	size_t count = fault_count();
	int rc = 0;
	double t0;

	for (int i = 0; i < 5; i++) {
		rc = fault_call(count);
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
	t0 = sd_now_s();
	/* Queued: succeeds (or already knows); the stream must be released. */
	rc = fault_call(count);
	double limit = 20;
	if (!rc && queued_mode()) {
		/* Told without another call, within 2 s. */
		rc = await_async_error(t0, 10);
		limit = 2;
	}
	if (!rc)
		CK(cudaStreamSynchronize(stream));
	if (!rc)
		rc = fault_call(count);
	if (!rc)
		rc = smddp_barrier(comm);
	double took = sd_now_s() - t0;
	const char *msg = smddp_last_error(comm);
	char want[32];

	snprintf(want, sizeof(want), "rank %d", victim);
	verdict((rc == SMDDP_EPEER || rc == SMDDP_EABORTED) && strstr(msg, want) && took < limit,
		rc, took, msg);
	CK(cudaStreamSynchronize(stream));
	/* The next call returns the failure too. */
	int again = fault_call(count);
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
int p2pdead(int victim)
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
			t0 = sd_now_s();
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
			sd_now_s() - t0 < 20,
		rc, sd_now_s() - t0, smddp_last_error(comm));
	smddp_comm_abort(comm);
	return 0;
}

/* The rank that a failure message names first as having left ("rank N
 * (pid ...)" or "(host ...)"), -1 if none: the root cause, not a relay. */
static int first_named(const char *msg)
{
	for (const char *p = strstr(msg, "rank "); p; p = strstr(p + 1, "rank ")) {
		int r, n = 0;

		if (sscanf(p, "rank %d (%n", &r, &n) == 1 && n > 0)
			return r;
	}
	return -1;
}

/* cudafail VICTIM CALL, with FAKECUDA_FAIL failing one of VICTIM's CUDA
 * calls (tests/gpu/fakecuda.c) inside its device call number CALL (> 1),
 * which may be queued halfway then (its tickets taken, its stream
 * waiting).  VICTIM gets SMDDP_ECUDA saying which step failed; every other
 * rank, in that same call, an error naming VICTIM first (not a rank that
 * passed it on) and that step within 20 s (queued: through
 * smddp_comm_get_async_error), not at SMDDP_TIMEOUT.  The calls before it
 * complete, with the right sums, on every rank; a later call fails at once;
 * every stream goes on (cudaStreamSynchronize returns) and the
 * communicator is destroyed.  FAULT-OK / FAULT-BAD lines, as dead. */
int cudafail(int victim, int call)
{
	size_t count = 1 << 16;
	float *first = (float *)hout;
	double t0 = sd_now_s();
	int rc = 0, wrong = 0;
	char in_call[48];

	for (size_t i = 0; i < count; i++)
		first[i] = 1.0f;
	CK(cudaMemcpy(dsend, first, count * sizeof(float), cudaMemcpyHostToDevice));
	/* The calls before CALL write the first count floats, the later ones
	 * the next: a failed call's output is undefined. */
	for (int i = 1; i <= 4 && !rc; i++)
		rc = smddp_allreduce(dsend, drecv + (i < call ? 0 : count * sizeof(float)), count,
				     SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	if (!rc && queued_mode())
		rc = await_async_error(t0, 20);
	if (!rc)
		rc = smddp_barrier(comm);
	double took = sd_now_s() - t0;
	const char *msg = smddp_last_error(comm);

	snprintf(in_call, sizeof(in_call), "rank %d: allreduce #%d ", rank, call);
	verdict(!strncmp(msg, in_call, strlen(in_call)) && strstr(msg, "cannot") &&
			(rank == victim ? rc == SMDDP_ECUDA
					: rc != SMDDP_OK && first_named(msg) == victim && took < 20),
		rc, took, msg);
	CK(cudaStreamSynchronize(stream));
	CK(cudaMemcpy(first, drecv, count * sizeof(float), cudaMemcpyDeviceToHost));
	for (size_t i = 0; i < count; i++)
		wrong += first[i] != (float)nranks;
	if (wrong)
		printf("FAULT-BAD rank=%d the calls before call %d: %d of %zu sums wrong\n", rank,
		       call, wrong, count);
	t0 = sd_now_s();
	rc = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	if (rc == SMDDP_OK || sd_now_s() - t0 > 2)
		printf("FAULT-BAD rank=%d a call after the failure returned %s after %.2f s\n", rank,
		       smddp_strerror(rc), sd_now_s() - t0);
	CK(cudaStreamSynchronize(stream));
	smddp_comm_destroy(comm);
	return 0;
}

/* Polls smddp_comm_get_async_error until it reports a failure or secs pass
 * since t0; returns the failure (its sentence in smddp_last_error). */
int await_async_error(double t0, double secs)
{
	int err = SMDDP_OK;

	while (sd_now_s() - t0 < secs) {
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

/* A call every rank makes alike, waited for: 0, or a FAULT-BAD line and 1. */
static int good_first_call(void)
{
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
	return 0;
}

/* Rank 1 passes another count than the others: without SMDDP_CHECK_COLL a
 * wrong count would read past the peers' buffers, so every rank refuses
 * the call (SMDDP_EMISMATCH naming a rank), at once or, queued, through
 * smddp_comm_get_async_error within 2 s; the streams go on. */
int mismatch(void)
{
	size_t count = rank == 1 ? 1000 : 1024;
	int rc;

	if (good_first_call())
		return 1;
	double t0 = sd_now_s();
	rc = fault_call(count);
	if (!rc)
		rc = await_async_error(t0, 10);
	double took = sd_now_s() - t0;
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

/* Does msg name rank q ("rank 2", not "rank 23")? */
static int names_rank(const char *msg, int q)
{
	char want[32];
	size_t len = (size_t)snprintf(want, sizeof(want), "rank %d", q);

	for (const char *p = msg; (p = strstr(p, want)); p += len)
		if (p[len] < '0' || p[len] > '9')
			return 1;
	return 0;
}

/* Rank 1 alone refuses a call on its own arguments (HOW: "short", a
 * recvbuf shorter than the call; "zero", count 0; "gather", an allgather
 * with sendbuf == recvbuf, in place on rank 0 only), which the others make.
 * The refused call takes its number on rank 1 too, so the others' call
 * meets rank 1's next one by number and every rank fails with
 * SMDDP_EMISMATCH naming a peer (the others rank 1; rank 1 any peer), at
 * once or (queued) from smddp_comm_get_async_error; no rank moves rank
 * 1's next call's data as this one's.  FAULT-OK lines; streams released. */
int refused(const char *how)
{
	size_t count = 1024;
	int rc, bad = -1, zero = !strcmp(how, "zero"), gather = !strcmp(how, "gather");
	char *small = NULL;

	if (!zero && !gather && strcmp(how, "short")) {
		fprintf(stderr, "gpu-conformance refused: short, zero or gather, not %s\n", how);
		return 2;
	}
	if (good_first_call())
		return 1;
	CK(cudaMalloc((void **)&small, 256));
	double t0 = sd_now_s();
	if (rank == 1) {
		if (gather)
			bad = smddp_allgather(drecv, drecv, count, SMDDP_FLOAT32, comm, stream);
		else
			bad = smddp_allreduce(dsend, zero ? drecv : small, zero ? 0 : count,
					      SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
		if (bad != (zero ? SMDDP_OK : SMDDP_EINVAL)) {
			printf("FAULT-BAD rank=1 the %s call returned %s: %s\n", how,
			       smddp_strerror(bad), smddp_last_error(comm));
			return 1;
		}
	}
	/* The others' call, and rank 1's next, alike in all but their number:
	 * without it they would pair. */
	if (gather)
		rc = smddp_allgather(drecv + (size_t)rank * count * sizeof(float), drecv, count,
				     SMDDP_FLOAT32, comm, stream);
	else
		rc = smddp_allreduce(dsend, drecv, count, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	if (!rc)
		rc = await_async_error(t0, 10);
	double took = sd_now_s() - t0;
	const char *msg = smddp_last_error(comm);

	/* The others name rank 1.  Rank 1 names whichever peer's failure
	 * reached it first: a peer's kernel that gave up (the lowest), or a
	 * peer's own words through the transport (the first to abort), which
	 * may be any of them. */
	int named = 0;

	for (int q = 0; q < nranks && !named; q++)
		if (q != rank && (rank == 1 || q == 1))
			named = names_rank(msg, q);
	verdict((rc == SMDDP_EMISMATCH || rc == SMDDP_EABORTED) && named && took < 5, rc, took,
		msg);
	CK(cudaStreamSynchronize(stream));
	cudaFree(small);
	smddp_comm_abort(comm);
	return 0;
}
