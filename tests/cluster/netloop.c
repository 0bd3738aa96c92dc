/* tests/cluster/netloop.c - allreduces in a loop until one fails, for the fault tests between hosts
 *
 * netloop [COUNT [SECONDS [HANG]]]
 *   Every rank allreduces COUNT float32 (default 1048576: 4 MiB, many chunks
 *   on the wire) in a loop and checks each result, for at most SECONDS
 *   (default 120), while the test breaks something (kills a rank, takes a
 *   link down).  A watchdog thread ends the rank if one call (the failing
 *   one, the next, or destroy) lasts HANG seconds (default 40): the library
 *   must never hang, whatever the network does.
 *
 * Lines on stdout (line-buffered; AT is the wall clock, seconds since the epoch):
 *   NETLOOP rank=R pid=P host=H job=ID ready          after the 3rd good allreduce
 *                                                     (ID: SMDDP_JOB_ID, which names
 *                                                     the job's /dev/shm segments)
 *   NETLOOP rank=R call=I rc=NAME elapsed=S at=AT msg=M
 *                                                     the first failure: its result,
 *                                                     seconds inside the failing call
 *                                                     and smddp_last_error()
 *   NETLOOP rank=R next rc=NAME elapsed=S msg=M        the next call (must fail, fast)
 *   NETLOOP rank=R destroy rc=NAME elapsed=S
 *   NETLOOP rank=R hang: call I (WHAT) still running after S s
 *   NETLOOP rank=R bad: WHY                           a wrong result
 *   NETLOOP rank=R no failure in I calls
 * SIGTERM is ignored: when a rank dies, mpirun stops the others with SIGTERM,
 * then SIGKILL after odls_base_sigkill_timeout, and the survivors must live
 * until they have reported what the library told them.
 * Exit: 1 after a failure was seen and reported (what the fault tests
 * expect), 0 when nothing failed, 3 on a wrong result or a hang.
 * Public API only.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <smddp/smddp.h>

#include "clock.h" /* lib/clock/: the one clock */

static const char *const rc_names[] = {
	"SMDDP_OK",	    "SMDDP_EINVAL",   "SMDDP_ENOMEM",	  "SMDDP_ESYSTEM", "SMDDP_ETIMEDOUT",
	"SMDDP_EPEER",	    "SMDDP_EMISMATCH", "SMDDP_EUNSUPPORTED", "SMDDP_ECUDA",  "SMDDP_ENETWORK",
	"SMDDP_EABORTED",   "SMDDP_ECONFIG",  "SMDDP_EINTERNAL"};

static int rank = -1;
static double hang_s = 40;
/* what the main thread is inside, for the watchdog: start time (0: none) */
static _Atomic double call_t0;
static _Atomic long call_no;
static const char *_Atomic call_what = "init";

static const char *rc_name(int rc)
{
	return rc >= 0 && rc <= SMDDP_EINTERNAL ? rc_names[rc] : "unknown result";
}

static double wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void enter(const char *what, long i)
{
	call_what = what;
	call_no = i;
	call_t0 = sd_now_s();
}

static double leave_call(void)
{
	double t = sd_now_s() - call_t0;

	call_t0 = 0;
	return t;
}

static void *watchdog(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec ts = {0, 100 * 1000 * 1000};
		double t0 = call_t0;

		nanosleep(&ts, NULL);
		if (t0 > 0 && sd_now_s() - t0 > hang_s) {
			printf("NETLOOP rank=%d hang: call %ld (%s) still running after %.1f s\n", rank,
			       (long)call_no, call_what, sd_now_s() - t0);
			fflush(stdout);
			_exit(3);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct smddp_comm *c = NULL;
	size_t count = argc > 1 ? strtoul(argv[1], NULL, 10) : 1u << 20, j;
	double max_s = argc > 2 ? atof(argv[2]) : 120, t_end, el;
	float *s, *r, x = 1, y = 0;
	char host[256] = "?";
	pthread_t th;
	int size, rc;
	long i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGTERM, SIG_IGN);
	if (argc > 3)
		hang_s = atof(argv[3]);
	if (argc > 4 || count == 0 || max_s <= 0 || hang_s <= 0) {
		fprintf(stderr, "usage: netloop [COUNT [SECONDS [HANG]]]\n");
		return 2;
	}
	gethostname(host, sizeof(host) - 1);
	if (pthread_create(&th, NULL, watchdog, NULL) != 0) {
		perror("netloop: pthread_create");
		return 3;
	}
	enter("smddp_init", 0);
	rc = smddp_init(&c);
	leave_call();
	if (rc != SMDDP_OK) {
		printf("NETLOOP rank=? bad: smddp_init returned %s: %s\n", rc_name(rc),
		       smddp_last_error(NULL));
		return 3;
	}
	rank = smddp_comm_rank(c);
	size = smddp_comm_size(c);
	s = malloc(count * sizeof(float));
	r = malloc(count * sizeof(float));
	if (!s || !r) {
		printf("NETLOOP rank=%d bad: out of memory\n", rank);
		return 3;
	}
	t_end = sd_now_s() + max_s;
	for (i = 1; sd_now_s() < t_end; i++) {
		/* small integers: the sum is exact, and differs from call to call */
		for (j = 0; j < count; j++)
			s[j] = (float)(rank + 1 + (j + (size_t)i) % 5);
		enter("allreduce", i);
		rc = smddp_allreduce(s, r, count, SMDDP_FLOAT32, SMDDP_SUM, c, NULL);
		el = leave_call();
		if (rc != SMDDP_OK) {
			printf("NETLOOP rank=%d call=%ld rc=%s elapsed=%.3f at=%.3f msg=%s\n", rank, i,
			       rc_name(rc), el, wall_s(), smddp_last_error(c));
			/* the communicator is broken now: the next call fails, and fast */
			enter("allreduce after the failure", i + 1);
			rc = smddp_allreduce(&x, &y, 1, SMDDP_FLOAT32, SMDDP_SUM, c, NULL);
			el = leave_call();
			printf("NETLOOP rank=%d next rc=%s elapsed=%.3f msg=%s\n", rank, rc_name(rc), el,
			       smddp_last_error(c));
			enter("smddp_comm_destroy", i + 2);
			rc = smddp_comm_destroy(c);
			el = leave_call();
			printf("NETLOOP rank=%d destroy rc=%s elapsed=%.3f\n", rank, rc_name(rc), el);
			return 1;
		}
		for (j = 0; j < count; j++) {
			float want = (float)(size * (size + 1) / 2 + size * (int)((j + (size_t)i) % 5));

			if (r[j] != want) {
				printf("NETLOOP rank=%d bad: allreduce #%ld gave %g at %zu, expected %g\n",
				       rank, i, r[j], j, want);
				return 3;
			}
		}
		if (i == 3)
			printf("NETLOOP rank=%d pid=%ld host=%s job=%s ready\n", rank, (long)getpid(),
			       host, getenv("SMDDP_JOB_ID") ? getenv("SMDDP_JOB_ID") : "-");
	}
	printf("NETLOOP rank=%d no failure in %ld calls\n", rank, i - 1);
	enter("smddp_comm_destroy", i);
	smddp_comm_destroy(c);
	leave_call();
	return 0;
}
