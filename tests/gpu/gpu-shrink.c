/* gpu-shrink.c - gpu-conformance shrink: ranks die in the middle of device collectives, the
 * survivors shrink the communicator and pass the matrix on the new one.
 *
 *   gpu-conformance shrink [--large N] [--quick|--small] STAGE...
 *
 * In each STAGE (a world rank, or several joined by '+': "0", "1+3") those
 * ranks SIGKILL themselves from a thread, 50 to 350 ms after the 16th call
 * of a loop of device collectives that takes every path of one node: small
 * calls (the fast path's kernels when it is on), calls of 1003 floats, and
 * calls of N (allreduce, allgather, broadcast and reduce: the direct path's
 * kernels; reduce_scatter and alltoall: the proxy's), each waited for
 * within 20 s (a stream still held then is a failure: no stream may wait
 * for a rank that is gone).  SHRINK_IN=fast|direct|proxy: the victims die
 * just before their 17th or later call of that path instead, so that the
 * survivors' kernels (or proxy) wait for them, and the failure must name
 * that call.  Every survivor must fail with SMDDP_EPEER or SMDDP_EABORTED
 * and a sentence that names a victim as "rank R (pid P)" (its rank in the
 * current communicator, as the examples read it); it shrinks without the
 * victims (SMDDP_SHRINK_ABORT with SHRINK_FLAGS=abort), checks that a
 * device call on the old communicator fails at once with its stream
 * released, frees the old one (smddp_comm_abort) and checks that nothing
 * of the dead ranks stays mapped here (under the fake CUDA: the count of
 * its IPC mappings; on a GPU the free memory before and after is printed:
 * SHRINK-MEM lines).  Then on the new communicator: an allgather of world
 * ranks on device memory (the survivors in their old order), and the
 * matrix (--quick, --small as in matrix mode); the next stage runs on it
 * ("shrink 0 2": 4 -> 3 -> 2).  A STAGE "pR" is a planned shrink: after 24
 * calls the others leave world rank R (and those joined by '+'), which
 * stays alive and makes a device call on the old communicator: it must
 * fail within 10 s with the stream released (SHRINK-OK rank=R excluded).  Each survivor prints "SHRINK-OK rank=W
 * size=S" at the end, or "SHRINK-BAD rank=W: why" and exits 1.  Run under
 * smddp-run --on-failure continue (SIGTERM is ignored here all the same).
 */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include <smddp/smddp.h>

#include "../integration/shrink-stage.h" /* bad(), wrank: victims are named by world rank */
#include "gpu-conformance.h"

#define MAXR 64

/* Under the fake CUDA (tests/gpu/fakecuda.c): how many of world rank
 * owner's allocations this process has mapped. */
int fake_ipc_mapped_of(int owner) __attribute__((weak));

static int members[MAXR], nmembers; /* world rank of each rank of comm */
static double kill_after;
/* SHRINK_IN=fast|direct|proxy: the victims die just before a call of that
 * size instead (the peers' kernels then wait for them); -1: at a time. */
static int die_before = -1;
static int victim_now;
static const char *planned_list = ""; /* the ranks a planned stage leaves ("p1") */
static const char *const died_in[8] = {"", "allgather", "", "reduce_scatter", "allreduce"};

static void *killer(void *arg)
{
	(void)arg;
	usleep((useconds_t)(kill_after * 1e6));
	fflush(stdout);
	raise(SIGKILL);
	return NULL;
}

/* The stream passes everything queued on it within secs, else the test
 * fails: a stream left waiting on a rank that is gone. */
static void stream_passes(double secs, const char *what)
{
	double t0 = sd_now_s();
	cudaError_t e;

	while ((e = cudaStreamQuery(stream)) == cudaErrorNotReady) {
		if (sd_now_s() - t0 > secs)
			bad("%s: the stream still waits after %.0f s", what, secs);
		usleep(1000);
	}
	if (e != cudaSuccess)
		bad("%s: the stream failed: %s (the context is broken)", what, cudaGetErrorString(e));
}

/* Every one of the first n floats of drecv is want, read back through the
 * stream. */
static int all_equal(size_t n, float want)
{
	float *h = (float *)hout;

	CK(cudaMemcpyAsync(h, drecv, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
	stream_passes(20, "the copy of a result");
	for (size_t i = 0; i < n; i++)
		if (h[i] != want)
			return 0;
	return 1;
}

/* The loop every rank runs on comm until a call fails (a peer died);
 * returns that failure.  dsend holds ones.  A result is checked only
 * where no failure was met: a queued call that the death broke returns
 * SMDDP_OK, its failure comes from the next call.  its > 0: stops after
 * that many calls (none may fail). */
static int until_failure(size_t large, double limit_s, unsigned its)
{
	size_t small = 7, mid = 1003;
	double t0 = sd_now_s();
	int rc = SMDDP_OK, err = SMDDP_OK;

	for (unsigned it = 0; !rc && (!its || it < its); it++) {
		int root = (int)(it / 8) % nranks;
		size_t checked = 0;

		if (sd_now_s() - t0 > limit_s && its)
			bad("%u calls took more than %.0f s", its, limit_s);
		if (sd_now_s() - t0 > limit_s)
			bad("no call failed within %.0f s (%u calls) although a rank was to die", limit_s,
			    it);
		/* Past the first calls (each path's setup), in the middle. */
		if (victim_now && die_before >= 0 && it >= 16 && it % 8 == (unsigned)die_before) {
			fflush(stdout);
			raise(SIGKILL);
		}
		if (victim_now && die_before < 0 && it == 16) {
			pthread_t th;

			if (pthread_create(&th, NULL, killer, NULL))
				bad("cannot start the killer thread");
		}
		switch (it % 8) {
		case 0:
			rc = smddp_allreduce(dsend, drecv, mid, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
			checked = mid;
			break;
		case 1: rc = smddp_allgather(dsend, drecv, small, SMDDP_FLOAT32, comm, stream); break;
		case 2:
			rc = smddp_broadcast(drecv, large, SMDDP_FLOAT32, root, comm, stream);
			break;
		case 3:
			rc = smddp_reduce_scatter(dsend, drecv, large, SMDDP_FLOAT32, SMDDP_SUM, comm,
						  stream);
			break;
		case 4:
			rc = smddp_allreduce(dsend, drecv, large, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
			checked = large;
			break;
		case 5: rc = smddp_alltoall(dsend, drecv, small, SMDDP_FLOAT32, comm, stream); break;
		case 6:
			rc = smddp_reduce(dsend, drecv, mid, SMDDP_FLOAT32, SMDDP_SUM, root, comm, stream);
			break;
		default: rc = smddp_barrier(comm); break;
		}
		if (rc)
			break;
		stream_passes(20, "a call before the failure");
		if (smddp_comm_get_async_error(comm, &err) == SMDDP_OK && err) {
			/* The next call returns it, with its sentence. */
			rc = smddp_barrier(comm);
			if (!rc)
				bad("smddp_comm_get_async_error said %s, the next call succeeded",
				    smddp_strerror(err));
			break;
		}
		if (checked && !all_equal(checked, (float)nranks) &&
		    !(smddp_comm_get_async_error(comm, &err) == SMDDP_OK && err))
			bad("allreduce of %zu ones gave a wrong result, and no failure was reported",
			    checked);
	}
	return rc;
}

/* The rank of comm that msg names as gone: the last one named "rank R
 * (pid P ...)" that did not pass the failure on ("rank Q (pid P) gave up
 * after: ..."), as examples/shrink.c reads it; -1 if none. */
static int named_rank(const char *msg)
{
	const char *p = msg, *end;
	int gone = -1;

	for (; (p = strstr(p, "rank ")); p += 5) {
		int r, pid, k = 0;

		if (sscanf(p, "rank %d (pid %d%n", &r, &pid, &k) == 2 && k > 0 &&
		    (end = strchr(p, ')')) && strncmp(end, ") gave up after", 15))
			gone = r;
	}
	return gone;
}

/* Free GPU memory once it stops changing (a dead process's context goes
 * a moment after its death), within 3 s. */
static size_t settled_free(void)
{
	size_t f = 0, prev = 1, total = 0;
	double t0 = sd_now_s();

	while (f != prev && sd_now_s() - t0 < 3) {
		prev = f;
		usleep(100000);
		CK(cudaMemGetInfo(&f, &total));
	}
	return f;
}

static void barrier_or_bad(struct smddp_comm *c, const char *what)
{
	int rc = smddp_barrier(c);

	if (rc)
		bad("%s: barrier on the new communicator: %s: %s", what, smddp_strerror(rc),
		    smddp_last_error(c));
}

/* A planned shrink: the others leave this rank, which is alive and calls
 * on the old communicator: its device call fails within 10 s (not at
 * SMDDP_TIMEOUT), its stream released; it leaves (exit 0). */
static void excluded(const char *what)
{
	double t0;
	int rc, err = SMDDP_OK;

	usleep(300000);
	t0 = sd_now_s();
	rc = smddp_allreduce(dsend, drecv, 7, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	if (rc == SMDDP_OK) {
		/* Queued: its failure comes from the stream's end, or the next call. */
		stream_passes(20, "the excluded rank's call");
		while (!err && sd_now_s() - t0 < 10) {
			if (smddp_comm_get_async_error(comm, &err) != SMDDP_OK)
				bad("smddp_comm_get_async_error failed");
			usleep(5000);
		}
		rc = smddp_barrier(comm);
	}
	if (rc == SMDDP_OK)
		bad("%s: the excluded rank's device call on the old communicator succeeded", what);
	stream_passes(20, "the excluded rank's call");
	if (sd_now_s() - t0 > 10)
		bad("%s: the excluded rank's device call took %.1f s to fail", what, sd_now_s() - t0);
	printf("SHRINK-OK rank=%d excluded: %s in %.2f s: %s\n", wrank, smddp_strerror(rc),
	       sd_now_s() - t0, smddp_last_error(comm));
	fflush(stdout);
	smddp_comm_abort(comm);
	exit(0);
}

static void stage(const int *victims, int nv, int planned, int stage_no, int flags, size_t large,
		  int quick, int small)
{
	struct smddp_comm *nc = NULL;
	int excl[MAXR], ne = 0, m = 0, rc, named, was_mapped[MAXR], me_out = 0;
	double t0;
	char what[64];

	snprintf(what, sizeof(what), "stage %d", stage_no);
	for (int i = 0; i < nv; i++) {
		if (victims[i] == wrank && planned) {
			me_out = 1;
		} else if (victims[i] == wrank) {
			victim_now = 1;
			kill_after = 0.05 + 0.3 * ((wrank * 7919 + stage_no * 104729) % 1000) / 1000.0;
		}
		for (int k = 0; k < nmembers; k++)
			if (members[k] == victims[i])
				excl[ne++] = k;
	}
	if (ne != nv)
		bad("%s: a victim is not in the communicator", what);
	if (planned) {
		rc = until_failure(large, 60, 24);
		if (rc)
			bad("%s: a call before a planned shrink failed: %s: %s", what,
			    smddp_strerror(rc), smddp_last_error(comm));
		stream_passes(20, "the calls before a planned shrink");
		if (me_out)
			excluded(what);
		printf("%s: rank %d (world %d) leaves world rank(s) %s (a planned shrink)\n", what,
		       rank, wrank, planned_list);
		goto shrink;
	}
	rc = until_failure(large, 60, 0);
	/* A victim that saw another one die first dies now. */
	for (int i = 0; i < nv; i++)
		if (victims[i] == wrank) {
			fflush(stdout);
			raise(SIGKILL);
		}
	stream_passes(20, "the failed call");
	named = named_rank(smddp_last_error(comm));
	{
		int ok = 0;

		for (int i = 0; i < ne; i++)
			ok |= excl[i] == named;
		/* ETIMEDOUT: the kernels' own deadline (SHRINK_DEADLINE=1). */
		if ((rc != SMDDP_EPEER && rc != SMDDP_EABORTED && rc != SMDDP_ETIMEDOUT) || !ok)
			bad("%s: the failure (%s) does not name a dead rank as \"rank R (pid P)\": %s",
			    what, smddp_strerror(rc), smddp_last_error(comm));
		/* ... nor the call whose kernels (or proxy) waited for it. */
		if (die_before >= 0 && !strstr(smddp_last_error(comm), died_in[die_before]))
			bad("%s: the failure does not name the %s that waited for the dead rank: %s",
			    what, died_in[die_before], smddp_last_error(comm));
	}
	printf("%s: rank %d (world %d) failed with %s naming rank %d: %s\n", what, rank, wrank,
	       smddp_strerror(rc), named, smddp_last_error(comm));
shrink:
	t0 = sd_now_s();
	rc = smddp_comm_shrink(comm, excl, ne, flags, &nc);
	if (rc)
		bad("%s: smddp_comm_shrink: %s: %s", what, smddp_strerror(rc), smddp_last_error(comm));
	printf("%s: rank %d shrank in %.3f s\n", what, wrank, sd_now_s() - t0);
	/* The old one takes no more device calls, and holds no stream. */
	t0 = sd_now_s();
	rc = smddp_allreduce(dsend, drecv, 7, SMDDP_FLOAT32, SMDDP_SUM, comm, stream);
	if (rc == SMDDP_OK)
		bad("%s: a device allreduce on the shrunk parent succeeded", what);
	stream_passes(20, "a call on the shrunk parent");
	if (sd_now_s() - t0 > 5)
		bad("%s: a device call on the shrunk parent took %.1f s to fail", what, sd_now_s() - t0);

	/* Freeing the old one releases what this rank mapped of the dead. */
	barrier_or_bad(nc, what);
	size_t before = settled_free();

	for (int i = 0; i < nv; i++)
		was_mapped[i] = fake_ipc_mapped_of ? fake_ipc_mapped_of(victims[i]) : -1;
	smddp_comm_abort(comm);
	barrier_or_bad(nc, what);
	size_t after = settled_free();

	printf("SHRINK-MEM rank=%d %s: free GPU memory %.1f MiB before freeing the old "
	       "communicator, %.1f MiB after (+%.1f MiB)\n",
	       wrank, what, before / 1048576.0, after / 1048576.0,
	       ((double)after - (double)before) / 1048576.0);
	for (int i = 0; fake_ipc_mapped_of && i < nv; i++) {
		int left = fake_ipc_mapped_of(victims[i]);

		printf("%s: rank %d had %d allocation(s) of dead rank %d mapped, %d after freeing "
		       "the old communicator\n",
		       what, wrank, was_mapped[i], victims[i], left);
		if (left)
			bad("%s: %d allocation(s) of dead rank %d are still mapped here", what, left,
			    victims[i]);
	}
	barrier_or_bad(nc, what);

	for (int k = 0; k < nmembers; k++) {
		int out = 0;

		for (int i = 0; i < ne; i++)
			out |= excl[i] == k;
		if (!out)
			members[m++] = members[k];
	}
	nmembers = m;
	comm = nc;
	rank = smddp_comm_rank(comm);
	nranks = smddp_comm_size(comm);
	if (nranks != m || members[rank] != wrank)
		bad("%s: this rank is %d of %d in the new communicator, expected %d of %d", what, rank,
		    nranks, members[rank] == wrank ? rank : -1, m);
	/* The survivors in their old order, through device memory. */
	{
		int32_t *h = (int32_t *)hbuf, *g = (int32_t *)hout;

		h[0] = wrank;
		CK(cudaMemcpyAsync(dsend, h, sizeof(int32_t), cudaMemcpyHostToDevice, stream));
		rc = smddp_allgather(dsend, drecv, 1, SMDDP_INT32, comm, stream);
		if (rc)
			bad("%s: allgather on the new communicator: %s: %s", what, smddp_strerror(rc),
			    smddp_last_error(comm));
		CK(cudaMemcpyAsync(g, drecv, (size_t)m * sizeof(int32_t), cudaMemcpyDeviceToHost,
				   stream));
		stream_passes(20, "the allgather on the new communicator");
		for (int k = 0; k < m; k++)
			if (g[k] != members[k])
				bad("%s: allgather [%d] = %d, want world rank %d (survivors in old order)",
				    what, k, g[k], members[k]);
	}
	int f0 = failures, p0 = passed;

	t0 = sd_now_s();
	matrix(large, quick, small);
	printf("%s: rank %d (world %d): the matrix on %d ranks: %d passed, %d failed (%.1f s)\n",
	       what, rank, wrank, nranks, passed - p0, failures - f0, sd_now_s() - t0);
	fflush(stdout);
}

/* until_failure's input (through hbuf, which the matrix uses too). */
static void ones_in_dsend(void)
{
	float *ones = (float *)hbuf;

	for (size_t i = 0; i < cap_bytes / sizeof(float); i++)
		ones[i] = 1.0f;
	CK(cudaMemcpyAsync(dsend, ones, cap_bytes, cudaMemcpyHostToDevice, stream));
	stream_passes(20, "the input");
}

int shrink(int argc, char **argv, size_t large, int quick, int small)
{
	int flags = shrink_flags();
	const char *in = getenv("SHRINK_IN");

	/* until_failure's calls: 1 a small allgather, 4 a large allreduce,
	 * 3 a large reduce_scatter. */
	if (in && *in)
		die_before = !strcmp(in, "fast") ? 1 : !strcmp(in, "direct") ? 4 : !strcmp(in, "proxy") ? 3 : -2;
	if (die_before == -2)
		bad("SHRINK_IN is fast, direct or proxy, not %s", in);
	int stages = 0;

	wrank = rank;
	nmembers = nranks;
	if (nranks > MAXR)
		bad("at most %d ranks", MAXR);
	for (int k = 0; k < nranks; k++)
		members[k] = k;
	ones_in_dsend();
	for (int i = 2; i < argc; i++) {
		int v[MAXR], nv, planned;
		const char *s = argv[i];

		if (!strcmp(s, "--large") || !strcmp(s, "--coll")) {
			i++;
			continue;
		}
		if (s[0] == '-')
			continue;
		if ((planned = s[0] == 'p'))
			planned_list = ++s;
		nv = shrink_stage_ranks(s, v, MAXR);
		stage(v, nv, planned, ++stages, flags, large, quick, small);
		ones_in_dsend(); /* the matrix wrote it */
	}
	if (!stages)
		bad("no STAGE given (shrink 0 2: rank 0 dies, then world rank 2)");
	printf("SHRINK-OK rank=%d size=%d\n", wrank, nranks);
	fflush(stdout);
	return 0;
}
