/* gpu-threads.c - three communicators driven by three threads of each rank at once
 * (tests/gpu/torch_threads.py's pattern, in C): the world and two splits, a thread and a
 * stream each, first calls at one moment (a barrier), then rounds of a small allreduce
 * and broadcast (the fast path) with a larger allreduce every 8th round (the direct
 * path), every result checked.  --stop R:K:N: rank R's thread K stops calling after N
 * rounds; the peers' calls on communicator K must fail within SMDDP_TIMEOUT naming rank
 * R, and the other two communicators must finish their rounds.  --bounded: a call may
 * fail, if within SMDDP_TIMEOUT naming a rank (one hardware queue per process, below).
 * --fresh: each large allreduce on a buffer allocated for it, which the peers map anew
 * (and close at the end, or once more than SD_REG_SLOTS are in use); --every N: the
 * large allreduce every N rounds (default 8).  --leave K:N: every rank's thread K
 * destroys its communicator after N rounds while the other two go on (a process group
 * torn down mid-training: its mappings closed while the others map theirs); --slow MS:
 * its closes may take MS ms (threads-fake.sh makes them: FAKECUDA_IPC_CLOSE_US), and
 * no round of the other threads may take half that long: one communicator's close must
 * not hold the others back (lib/cuda/ipc.c).  Each thread waits for its stream under a
 * deadline of its own, so a hang is reported (THREADS-HUNG), never waited out. */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "gpu-conformance.h"

#define NT 3

struct thr {
	int k, stop_after, rounds_done, rc, bad, hung, stopped;
	struct smddp_comm *c;
	cudaStream_t s;
	float *d, *hin, *hout;
	double failed_in; /* seconds from the failed round's start to its failure */
	char msg[600];
	int finished;
	int leave_after, left, leave_rc; /* --leave: destroyed after leave_after rounds */
	double leave_s;                  /* ... in this long */
	double longest;                  /* seconds, the longest round */
	float *old[64];                  /* --fresh: the buffers of the earlier rounds */
	int nold;
};

static pthread_barrier_t start_bar;
static int thr_rounds = 200, thr_jitter_us, thr_stagger, thr_bounded, thr_fresh, thr_slow_ms;
static size_t thr_large = 1 << 16; /* floats per rank: beyond the fast path's limit */
static int thr_every = 8;          /* ... every thr_every-th round */
static double thr_wait_s = 60;

/* Waits for t's stream, reading the communicator's async error meanwhile: 0, an
 * smddp_result, or -1 when thr_wait_s passed with neither. */
static int thr_wait(struct thr *t)
{
	double t0 = sd_now_s();

	for (;;) {
		int err = 0;

		if (smddp_comm_get_async_error(t->c, &err) == SMDDP_OK && err)
			return err;
		if (cudaStreamQuery(t->s) == cudaSuccess) {
			smddp_comm_get_async_error(t->c, &err);
			return err;
		}
		if (sd_now_s() - t0 > thr_wait_s)
			return -1;
		struct timespec ts = {0, 200 * 1000L};
		nanosleep(&ts, NULL);
	}
}

static void fill(float *h, size_t n, float v)
{
	for (size_t j = 0; j < n; j++)
		h[j] = v;
}

static int one_round(struct thr *t, int i)
{
	size_t n = i % thr_every == thr_every - 1 ? thr_large : 17, off = thr_large;
	float want_ar = (float)(nranks * (nranks + 1) / 2 + nranks * i);
	int root = i % nranks, rc;

	/* Kept until the end: a peer may map it until its communicator goes. */
	if (thr_fresh && n == thr_large && t->nold < (int)(sizeof(t->old) / sizeof(t->old[0]))) {
		t->old[t->nold++] = t->d;
		CK(cudaMalloc((void **)&t->d, (2 * thr_large + 64) * sizeof(float)));
	}
	fill(t->hin, n, (float)(rank + 1 + i));
	fill(t->hin + off, 17, (float)(rank * 1000 + i));
	CK(cudaMemcpyAsync(t->d, t->hin, n * 4, cudaMemcpyHostToDevice, t->s));
	CK(cudaMemcpyAsync(t->d + off, t->hin + off, 17 * 4, cudaMemcpyHostToDevice, t->s));
	rc = smddp_allreduce(t->d, t->d, n, SMDDP_FLOAT32, SMDDP_SUM, t->c, t->s);
	if (!rc)
		rc = smddp_broadcast(t->d + off, 17, SMDDP_FLOAT32, root, t->c, t->s);
	if (rc)
		return rc;
	CK(cudaMemcpyAsync(t->hout, t->d, n * 4, cudaMemcpyDeviceToHost, t->s));
	CK(cudaMemcpyAsync(t->hout + off, t->d + off, 17 * 4, cudaMemcpyDeviceToHost, t->s));
	rc = thr_wait(t);
	if (rc)
		return rc;
	for (size_t j = 0; j < n; j++)
		t->bad += t->hout[j] != want_ar;
	for (size_t j = 0; j < 17; j++)
		t->bad += t->hout[off + j] != (float)(root * 1000 + i);
	return 0;
}

static void *thr_main(void *arg)
{
	struct thr *t = arg;
	unsigned seed = (unsigned)(rank * 7919 + t->k * 104729 + 1);
	double t0;

	pthread_barrier_wait(&start_bar);
	if (thr_stagger) /* each rank issues the threads' first calls in another order */
		usleep((useconds_t)(((rank + t->k) % NT) * 30000));
	for (int i = 0; i < thr_rounds; i++) {
		if (i == t->stop_after) {
			t->stopped = 1;
			break;
		}
		if (i == t->leave_after) {
			t0 = sd_now_s();
			t->leave_rc = smddp_comm_destroy(t->c);
			t->leave_s = sd_now_s() - t0;
			if (t->leave_rc)
				snprintf(t->msg, sizeof(t->msg), "smddp_comm_destroy: %s",
					 smddp_last_error(NULL));
			t->left = 1;
			break;
		}
		if (thr_jitter_us)
			usleep((useconds_t)(rand_r(&seed) % (unsigned)thr_jitter_us));
		t0 = sd_now_s();
		t->rc = one_round(t, i);
		if (sd_now_s() - t0 > t->longest)
			t->longest = sd_now_s() - t0;
		if (t->rc) {
			t->failed_in = sd_now_s() - t0;
			if (t->rc == -1)
				snprintf(t->msg, sizeof(t->msg), "its stream was still busy after %.0f s",
					 thr_wait_s);
			else
				snprintf(t->msg, sizeof(t->msg), "%s: %s", smddp_strerror(t->rc),
					 smddp_last_error(t->c));
			break;
		}
		t->rounds_done = i + 1;
	}
	__atomic_store_n(&t->finished, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* gpu-conformance threads [--rounds N] [--jitter US] [--stagger] [--large N]
 * [--stop R:K:N] [--bounded] [--fresh] [--every N] [--leave K:N [--slow MS]]: 0 when
 * every check passed, 1 otherwise. */
int threads(int argc, char **argv)
{
	struct thr t[NT];
	pthread_t tid[NT];
	int stop_rank = -1, stop_k = -1, stop_n = -1, leave_k = -1, leave_n = -1, ok = 1;
	double t0, limit, timeout_s = 60;
	const char *to = getenv("SMDDP_TIMEOUT");

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			thr_rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--jitter") && i + 1 < argc)
			thr_jitter_us = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--stagger"))
			thr_stagger = 1;
		else if (!strcmp(argv[i], "--bounded"))
			thr_bounded = 1;
		else if (!strcmp(argv[i], "--fresh"))
			thr_fresh = 1;
		else if (!strcmp(argv[i], "--every") && i + 1 < argc)
			thr_every = atoi(argv[++i]) < 1 ? 1 : atoi(argv[i]);
		else if (!strcmp(argv[i], "--slow") && i + 1 < argc)
			thr_slow_ms = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--leave") && i + 1 < argc &&
			 (sscanf(argv[++i], "%d:%d", &leave_k, &leave_n) != 2 || leave_k < 1 ||
			  leave_k >= NT)) {
			fprintf(stderr, "gpu-conformance threads: --leave K:N, K a split (1 or 2)\n");
			return 2;
		}
		else if (!strcmp(argv[i], "--large") && i + 1 < argc)
			thr_large = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--stop") && i + 1 < argc &&
			 sscanf(argv[++i], "%d:%d:%d", &stop_rank, &stop_k, &stop_n) != 3) {
			fprintf(stderr, "gpu-conformance threads: --stop R:K:N\n");
			return 2;
		}
	}
	if (to && atof(to) > 0)
		timeout_s = atof(to);
	/* A stream wait longer than any deadline of the library's is a hang. */
	thr_wait_s = 2 * timeout_s + 10;
	memset(t, 0, sizeof(t));
	t[0].c = comm;
	for (int k = 1; k < NT; k++) {
		int rc = smddp_comm_split(comm, k, rank, &t[k].c);

		if (rc) {
			printf("FAIL rank %d: smddp_comm_split %d: %s\n", rank, k,
			       smddp_last_error(NULL));
			return 1;
		}
	}
	pthread_barrier_init(&start_bar, NULL, NT);
	for (int k = 0; k < NT; k++) {
		size_t cap = (2 * thr_large + 64) * sizeof(float);

		t[k].k = k;
		t[k].stop_after = rank == stop_rank && k == stop_k ? stop_n : -1;
		t[k].leave_after = k == leave_k ? leave_n : -1;
		CK(cudaStreamCreateWithFlags(&t[k].s, cudaStreamNonBlocking));
		CK(cudaMalloc((void **)&t[k].d, cap));
		CK(cudaMallocHost((void **)&t[k].hin, cap));
		CK(cudaMallocHost((void **)&t[k].hout, cap));
	}
	t0 = sd_now_s();
	for (int k = 0; k < NT; k++)
		pthread_create(&tid[k], NULL, thr_main, &t[k]);
	/* Every thread ends by itself within its rounds and thr_wait_s; past that the
	 * process is stuck in a library call, which is the failure this test is for. */
	limit = thr_wait_s + 60;
	for (;;) {
		int n = 0;

		for (int k = 0; k < NT; k++)
			n += __atomic_load_n(&t[k].finished, __ATOMIC_ACQUIRE);
		if (n == NT)
			break;
		if (sd_now_s() - t0 > limit) {
			printf("THREADS-HUNG rank=%d after %.0f s: threads", rank, sd_now_s() - t0);
			for (int k = 0; k < NT; k++)
				if (!__atomic_load_n(&t[k].finished, __ATOMIC_ACQUIRE))
					printf(" %d (round %d)", k, t[k].rounds_done);
			printf("\n");
			fflush(stdout);
			_exit(1);
		}
		usleep(20000);
	}
	for (int k = 0; k < NT; k++)
		pthread_join(tid[k], NULL);
	for (int k = 0; k < NT; k++) {
		struct thr *x = &t[k];
		char want[32], want2[32];
		int good;

		/* The library names it "rank R (pid ...)" or "rank(s) R of N". */
		snprintf(want, sizeof(want), "rank %d ", stop_rank);
		snprintf(want2, sizeof(want2), "rank(s) %d ", stop_rank);
		if (k == leave_k) {
			good = x->left && !x->leave_rc && !x->rc && x->rounds_done == leave_n && !x->bad;
			printf("%s rank=%d thread %d: %d rounds, then destroyed its communicator in "
			       "%.1f s%s%s\n",
			       good ? "ok" : "FAIL", rank, k, x->rounds_done, x->leave_s,
			       x->msg[0] ? ": " : "", x->msg);
		} else if (k == stop_k && rank == stop_rank) {
			good = x->stopped && x->rounds_done == stop_n;
			printf("%s rank=%d thread %d: stopped after %d of %d rounds%s%s\n",
			       good ? "ok" : "FAIL", rank, k, x->rounds_done, stop_n,
			       x->rc ? ": " : "", x->msg);
		} else if (k == stop_k) {
			/* The peers of the stopped thread: its round stop_n fails, naming it,
			 * within the deadline (and a little for the load). */
			good = x->rc > 0 && x->rounds_done == stop_n &&
			       (strstr(x->msg, want) || strstr(x->msg, want2)) &&
			       x->failed_in < timeout_s + 10;
			printf("%s rank=%d thread %d: failed in round %d after %.1f s: %s\n",
			       good ? "ok" : "FAIL", rank, k, x->rounds_done, x->failed_in, x->msg);
		} else {
			good = !x->rc && x->rounds_done == thr_rounds && !x->bad &&
			       (!thr_slow_ms || x->longest < thr_slow_ms / 2000.0);
			/* --bounded: a call may fail, but in time and saying why. */
			if (thr_bounded && x->rc > 0 && !x->bad)
				good = x->failed_in < timeout_s + 10 &&
				       (x->rc == SMDDP_ETIMEDOUT || x->rc == SMDDP_EABORTED ||
					x->rc == SMDDP_EPEER) &&
				       strstr(x->msg, "rank");
			printf("%s rank=%d thread %d: %d of %d rounds, %d wrong elements, the longest "
			       "%.2f s%s%s\n",
			       good ? "ok" : "FAIL", rank, k, x->rounds_done, thr_rounds, x->bad,
			       x->longest, x->rc ? ": " : "", x->msg);
		}
		if (good)
			passed++;
		else
			failures++;
		ok &= good;
	}
	printf("THREADS-%s rank=%d %d threads, %d rounds, %.1f s\n", ok ? "OK" : "BAD", rank, NT,
	       thr_rounds, sd_now_s() - t0);
	fflush(stdout);
	if (t[0].rc > 0) { /* --bounded: the world failed, main cannot destroy it */
		smddp_comm_abort(comm);
		_exit(ok ? 0 : 1);
	}
	for (int k = 1; k < NT; k++) {
		if (t[k].left)
			continue;
		if (k == stop_k || t[k].rc) {
			smddp_comm_abort(t[k].c);
			continue;
		}
		int rc = smddp_comm_destroy(t[k].c);

		if (rc) {
			printf("FAIL rank %d: smddp_comm_destroy of split %d: %s\n", rank, k,
			       smddp_last_error(NULL));
			failures++;
		}
	}
	for (int k = 0; k < NT; k++) {
		if (k == stop_k || t[k].rc)
			continue; /* a stream may still hold the failed call's work */
		cudaFree(t[k].d);
		for (int j = 0; j < t[k].nold; j++)
			cudaFree(t[k].old[j]);
		cudaFreeHost(t[k].hin);
		cudaFreeHost(t[k].hout);
		cudaStreamDestroy(t[k].s);
	}
	return 0;
}
