/* shrink.c - a libsmddp job that goes on without a rank that died: the
 * survivors shrink the communicator around it and train on.
 *
 *   make && smddp-run -n 4 --on-failure continue ./shrink 2
 *
 * Every step adds each rank's "gradient" into everyone's (an AllReduce).
 * To show a failure, rank VICTIM (the argument; none: nobody) kills itself
 * with SIGKILL at step DEATH_STEP, as a crash or a lost machine would. The
 * survivors' AllReduce of that step fails naming the dead rank; they agree
 * to exclude it, call smddp_comm_shrink() and run the step again on the new
 * communicator. Each prints when it saw the error and when the first
 * collective on the shrunk communicator completed (CLOCK_REALTIME, so that
 * ranks on several hosts of one machine compare: scripts/bench-shrink.sh). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <smddp/smddp.h>

#define COUNT      (256 * 1024)   /* 1 MiB of floats per step */
#define STEPS      10
#define DEATH_STEP 4
#define MAXRANKS   1024

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The rank a failed call names as gone. Its sentence names the dead peer
 * with its pid ("rank 4 (pid 4242) is gone", "rank 4 (pid 4242 on h2) closed
 * its connection"), and may name others: this rank, and ranks that passed
 * the failure on ("rank 5 (host h2) gave up after: ...", on one host
 * "rank 0 (pid 4240) gave up after: ..."), each before the words it passes
 * on. So the last rank named with a pid that did not give up. -1 if none. */
static int dead_rank(const char *why)
{
	int gone = -1;

	for (const char *p = why; (p = strstr(p, "rank ")) != NULL; p += 5) {
		int r, used = 0;
		const char *end;

		if (sscanf(p + 5, "%d (pid%n", &r, &used) == 1 && used > 0 &&
		    (end = strchr(p, ')')) != NULL && strncmp(end, ") gave up after", 15) != 0)
			gone = r;
	}
	return gone;
}

int main(int argc, char **argv)
{
	static float grad[COUNT];
	static int members[MAXRANKS];    /* the first rank of each current rank */
	struct smddp_comm *comm;
	int victim = argc > 1 ? atoi(argv[1]) : -1;
	int rc, wrong = 0;

	rc = smddp_init(&comm);
	if (rc != SMDDP_OK) {
		fprintf(stderr, "smddp_init: %s\n", smddp_last_error(NULL));
		return 1;
	}
	int me = smddp_comm_rank(comm), n = smddp_comm_size(comm);
	if (n > MAXRANKS)
		return 1;
	for (int r = 0; r < n; r++)
		members[r] = r;
	setvbuf(stdout, NULL, _IOLBF, 0);

	for (int step = 0; step < STEPS; step++) {
		if (step == DEATH_STEP && me == victim) {
			printf("rank %d: dies at step %d (died_ns=%lld)\n", me, step, now_ns());
			raise(SIGKILL);
		}
		for (int i = 0; i < COUNT; i++)
			grad[i] = (float)((me + 1) * (step + 1));
		rc = smddp_allreduce(grad, grad, COUNT, SMDDP_FLOAT32, SMDDP_SUM, comm, NULL);
		if (rc == SMDDP_EPEER || rc == SMDDP_ETIMEDOUT || rc == SMDDP_ENETWORK) {
			/* a peer is gone: every survivor learns which one from the error */
			long long err_ns = now_ns();
			int gone = dead_rank(smddp_last_error(comm));
			printf("rank %d: step %d failed: %s\n", me, step, smddp_last_error(comm));
			if (gone < 0 || gone >= smddp_comm_size(comm)) {
				fprintf(stderr, "rank %d: the error names no dead rank\n", me);
				return 1;
			}
			struct smddp_comm *shrunk;
			rc = smddp_comm_shrink(comm, &gone, 1, SMDDP_SHRINK_DEFAULT, &shrunk);
			if (rc != SMDDP_OK) {
				fprintf(stderr, "rank %d: shrink: %s\n", me, smddp_last_error(comm));
				return 1;
			}
			smddp_comm_abort(comm);   /* local: frees the old one */
			comm = shrunk;
			/* the survivors keep their order: drop the dead one's entry */
			memmove(&members[gone], &members[gone + 1], (n - gone - 1) * sizeof *members);
			n--;
			/* the failed step again, on the survivors */
			for (int i = 0; i < COUNT; i++)
				grad[i] = (float)((me + 1) * (step + 1));
			rc = smddp_allreduce(grad, grad, COUNT, SMDDP_FLOAT32, SMDDP_SUM, comm, NULL);
			printf("rank %d: rank %d excluded, now rank %d of %d; first allreduce %.1f ms "
			       "after the error (err_ns=%lld done_ns=%lld)\n", me, gone,
			       smddp_comm_rank(comm), n, (now_ns() - err_ns) / 1e6, err_ns, now_ns());
		}
		if (rc != SMDDP_OK) {
			fprintf(stderr, "rank %d: step %d: %s\n", me, step, smddp_last_error(comm));
			smddp_comm_abort(comm);
			return 1;
		}
		if (step == 0)
			printf("rank %d: first allreduce done (first_ns=%lld)\n", me, now_ns());
		float want = 0;
		for (int k = 0; k < n; k++)
			want += (float)((members[k] + 1) * (step + 1));
		for (int i = 0; i < COUNT; i++)
			wrong += grad[i] != want;
	}
	printf("rank %d: %d steps on %d ranks at the end, %d wrong\n", me, STEPS, n, wrong);
	rc = smddp_comm_destroy(comm);
	return rc != SMDDP_OK || wrong != 0;
}
