/* fault.c - a multi-rank program that misbehaves on purpose, for the failure tests (fault-*.sh).
 *
 * Usage (under smddp-run unless noted):
 *   fault kill VICTIM NGOOD     VICTIM does NGOOD allreduces, then raise(SIGKILL)
 *   fault exit VICTIM NGOOD     VICTIM does NGOOD allreduces, then exit(0) without destroy
 *   fault errexit VICTIM NGOOD  VICTIM does NGOOD allreduces, then one with a NULL recvbuf
 *                               (its own SMDDP_EINVAL), then exit(1) as a program that
 *                               gives up on an error does: the others' allreduce fails
 *                               naming VICTIM and its error ("recvbuf is NULL")
 *   fault killmid VICTIM MS     everyone loops over large allreduces; a thread of VICTIM
 *                               SIGKILLs it after MS milliseconds, in the middle of one
 *   fault stopmid VICTIM MS     likewise but SIGSTOP: alive and stuck mid-collective
 *                               (run with SMDDP_TIMEOUT=2: the others time out)
 *   fault subabort VICTIM       VICTIM aborts a copy of the world (split) while the others
 *                               are in an allreduce on it: they get SMDDP_EABORTED there,
 *                               and the world itself must still work for every survivor
 *   fault subkill VICTIM        VICTIM dies; the ranks of the other parity keep using their
 *                               even/odd sub-communicator (VICTIM is not in it), then the
 *                               world, where they must get SMDDP_EPEER
 *   fault noshow VICTIM         VICTIM dies without ever calling smddp_init; the others'
 *                               smddp_init must time out (SMDDP_TIMEOUT=3) naming it
 *   fault killat VICTIM WHERE   VICTIM dies instead of calling WHERE: split, barrier,
 *                               broadcast (VICTIM is the root), reduce_scatter or destroy
 *   fault hang VICTIM SECONDS   VICTIM does 2 allreduces, then sleeps SECONDS
 *   fault late VICTIM SECONDS   as hang, but VICTIM then calls the 3rd allreduce, which the
 *                               others gave up on long ago: it must fail, not succeed
 *   fault abort VICTIM NGOOD    VICTIM does NGOOD allreduces, waits 0.5 s, smddp_comm_abort()
 *   fault cancel DIR            2 ranks: rank 0 enters an allreduce that rank 1 stays away
 *                               from; a thread of rank 0 calls smddp_comm_cancel() 0.3 s in:
 *                               the call ends with SMDDP_EABORTED long before SMDDP_TIMEOUT;
 *                               then rank 0 creates DIR/cancelled and rank 1, which waited
 *                               for it, calls the allreduce: SMDDP_EABORTED naming rank 0
 *   fault splittimeout DIR      2 ranks (SMDDP_TIMEOUT=60): smddp_comm_split_config with
 *                               timeout_ms 2000; rank 1 stays away from an allreduce on the
 *                               new communicator until rank 0 has given up on it (DIR/done):
 *                               rank 0 gets SMDDP_ETIMEDOUT after the split's 2 s, not 60
 *   fault mismatch KIND         rank 1 differs from the others in KIND: count, op, dtype,
 *                               root (broadcast), coll (allgather instead of allreduce),
 *                               null (a NULL recvbuf: its own SMDDP_EINVAL) or zero (count 0)
 *   fault dump                  2 allreduces and a barrier, then smddp_comm_dump(): exit 0 if
 *                               it returned SMDDP_OK (run with SMDDP_TRACE_DIR set)
 *   fault init                  (no launcher needed) smddp_init only; exit status = its result
 *   fault freeport              print a free TCP port of 127.0.0.1
 *
 * Every rank that sees a failure checks it against what the mode expects
 * (result code, time to fail, the ranks and the collective named by
 * smddp_last_error()), that the broken communicator then fails fast, and that
 * smddp_comm_destroy() still returns; then prints one line
 *   FAULT-OK rank=R ...      and exits 42, or
 *   FAULT-BAD rank=R: why    and exits 1.
 * A rank for which nothing is expected exits 0 (or dies, as asked).
 * SIGTERM is ignored: run it with smddp-run --grace long enough to finish.
 * Witnesses linger FAULT_LINGER seconds (default 1) before they exit.
 */
#define _GNU_SOURCE /* strcasestr */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <smddp/smddp.h>

#include "clock.h" /* lib/clock/: the one clock */

#define COUNT 4099 /* distinctive, so that the messages can be checked for it */
#define EXIT_SAW_IT 42

static const char *const rc_names[] = {
	"SMDDP_OK",	    "SMDDP_EINVAL",   "SMDDP_ENOMEM",	  "SMDDP_ESYSTEM", "SMDDP_ETIMEDOUT",
	"SMDDP_EPEER",	    "SMDDP_EMISMATCH", "SMDDP_EUNSUPPORTED", "SMDDP_ECUDA",  "SMDDP_ENETWORK",
	"SMDDP_EABORTED",   "SMDDP_ECONFIG",  "SMDDP_EINTERNAL"};

static int rank = -1, size;
static char bad_why[2048];

static const char *rc_name(int rc)
{
	return rc >= 0 && rc <= SMDDP_EINTERNAL ? rc_names[rc] : "unknown result";
}

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};

	while (nanosleep(&ts, &ts) != 0)
		;
}

static void note_bad(const char *fmt, ...)
{
	size_t len = strlen(bad_why);
	va_list ap;

	if (len + 4 >= sizeof(bad_why))
		return;
	if (len)
		strcat(bad_why, "; ");
	va_start(ap, fmt);
	vsnprintf(bad_why + strlen(bad_why), sizeof(bad_why) - strlen(bad_why), fmt, ap);
	va_end(ap);
}

/* Does msg name rank r as a rank ("rank 3", "ranks 1, 3", "rank(s) 1 and 3",
 * "ranks [1,3]")? */
static int mentions_rank(const char *msg, int r)
{
	char pat[256];
	regex_t re;
	int hit;

	snprintf(pat, sizeof(pat),
		 "ranks?(\\(s\\))?:? *\\[?([0-9]+ *(,|and|&|or|/) *)*%d([^0-9]|$)", r);
	if (regcomp(&re, pat, REG_EXTENDED | REG_ICASE | REG_NOSUB) != 0)
		return 0;
	hit = regexec(&re, msg, 0, NULL, 0) == 0;
	regfree(&re);
	return hit;
}

static int mentions(const char *msg, const char *word)
{
	return strcasestr(msg, word) != NULL;
}

/* One allreduce of COUNT float32 (sum) with a check of the result. */
static int good_allreduce(struct smddp_comm *c, float *s, float *r, int n_call)
{
	int rc, i;

	for (i = 0; i < COUNT; i++)
		s[i] = (float)(rank + 1 + i % 3);
	rc = smddp_allreduce(s, r, COUNT, SMDDP_FLOAT32, SMDDP_SUM, c, NULL);
	if (rc != SMDDP_OK)
		return rc;
	for (i = 0; i < COUNT; i++) {
		float want = (float)(size * (size + 1) / 2 + size * (i % 3));
		if (r[i] != want) {
			printf("FAULT-BAD rank=%d: allreduce #%d before the fault gave %g at %d, expected %g\n",
			       rank, n_call, r[i], i, want);
			exit(1);
		}
	}
	return SMDDP_OK;
}

struct expectation {
	int rc;            /* the result every witness must get */
	double min_s, max_s; /* how long the failing call may take */
	int culprit;       /* the rank smddp_last_error() must name */
	const char *words[4]; /* and words it must contain (case-insensitive) */
};

/* A witness stays alive a while (FAULT_LINGER seconds, default 1) after its
 * verdict, so that the other witnesses judge the fault under test, not the
 * exit of a witness that gave up a moment earlier (fault-cascade.sh sets it
 * to 0 to look at exactly that). */
static void linger(void)
{
	const char *v = getenv("FAULT_LINGER");

	sleep_s(v ? atof(v) : 1.0);
}

/* The failing call returned rc after elapsed seconds: judge it, then check
 * that the communicator fails fast and can be destroyed, print the verdict
 * and exit. */
static void witness(struct smddp_comm *c, int rc, double elapsed, int at_call,
		    const struct expectation *e)
{
	const char *msg = smddp_last_error(c);
	double t0;
	float x = 1, y = 0;
	int rc2, i;

	printf("FAULT rank=%d call=%d rc=%s elapsed=%.3f msg=%s\n", rank, at_call, rc_name(rc),
	       elapsed, msg ? msg : "(null)");
	if (rc == SMDDP_OK)
		note_bad("returned SMDDP_OK");
	else if (rc != e->rc)
		note_bad("returned %s, expected %s", rc_name(rc), rc_name(e->rc));
	if (elapsed < e->min_s || elapsed > e->max_s)
		note_bad("took %.3f s, expected %.1f to %.1f s", elapsed, e->min_s, e->max_s);
	if (!msg || !*msg) {
		note_bad("smddp_last_error() is empty");
		msg = "";
	}
	if (e->culprit >= 0 && !mentions_rank(msg, e->culprit))
		note_bad("smddp_last_error() does not name rank %d", e->culprit);
	for (i = 0; i < 4 && e->words[i]; i++)
		if (!mentions(msg, e->words[i]))
			note_bad("smddp_last_error() does not mention \"%s\"", e->words[i]);

	/* After EMISMATCH (and a refused argument) the communicator stays
	 * usable (smddp(3)): every rank makes the same call next, which must
	 * then work; after anything else it is broken, and the next call must
	 * fail, and fast. */
	t0 = sd_now_s();
	rc2 = smddp_allreduce(&x, &y, 1, SMDDP_FLOAT32, SMDDP_SUM, c, NULL);
	printf("FAULT rank=%d next-call rc=%s elapsed=%.3f msg=%s\n", rank, rc_name(rc2),
	       sd_now_s() - t0, smddp_last_error(c));
	if (e->rc == SMDDP_EMISMATCH || e->rc == SMDDP_EINVAL) {
		if (rc2 != SMDDP_OK)
			note_bad("the matched allreduce after the mismatch returned %s",
				 rc_name(rc2));
		else if (y != (float)size)
			note_bad("the allreduce after the mismatch gave %g, expected %d", y, size);
	} else {
		int async_err = -1, rc3;

		if (rc2 == SMDDP_OK)
			note_bad("an allreduce after the failure returned SMDDP_OK");
		if (sd_now_s() - t0 > 2.0)
			note_bad("an allreduce after the failure took %.3f s to fail", sd_now_s() - t0);
		/* A broken communicator says so without a call, too. */
		rc3 = smddp_comm_get_async_error(c, &async_err);
		if (rc3 != SMDDP_OK || async_err == SMDDP_OK)
			note_bad("smddp_comm_get_async_error returned %s with %s on a broken "
				 "communicator", rc_name(rc3), rc_name(async_err));
		if (smddp_comm_get_async_error(c, NULL) != SMDDP_EINVAL ||
		    smddp_comm_get_async_error(NULL, &async_err) != SMDDP_EINVAL)
			note_bad("smddp_comm_get_async_error accepted a NULL argument");
	}

	/* and destroy still frees it, without hanging */
	t0 = sd_now_s();
	rc2 = smddp_comm_destroy(c);
	printf("FAULT rank=%d destroy rc=%s elapsed=%.3f\n", rank, rc_name(rc2), sd_now_s() - t0);
	if (sd_now_s() - t0 > 10.0)
		note_bad("smddp_comm_destroy took %.3f s", sd_now_s() - t0);

	if (bad_why[0]) {
		printf("FAULT-BAD rank=%d: %s\n", rank, bad_why);
		fflush(stdout);
		exit(1);
	}
	printf("FAULT-OK rank=%d rc=%s\n", rank, rc_name(rc));
	fflush(stdout);
	linger();
	exit(EXIT_SAW_IT);
}

static int mode_init(void)
{
	struct smddp_comm *c = NULL;
	int rc = smddp_init(&c);

	printf("INIT rc=%s (%d) msg=%s\n", rc_name(rc), rc, smddp_last_error(NULL));
	fflush(stdout);
	if (rc == SMDDP_OK) {
		printf("INIT rank=%d size=%d local_rank=%d local_size=%d\n", smddp_comm_rank(c),
		       smddp_comm_size(c), smddp_comm_local_rank(c), smddp_comm_local_size(c));
		{ /* and the communicator works */
			int one = 1, sum = 0;
			rc = smddp_allreduce(&one, &sum, 1, SMDDP_INT32, SMDDP_SUM, c, NULL);
			printf("INIT allreduce rc=%s sum=%d\n", rc_name(rc), sum);
		}
		rc = smddp_comm_destroy(c);
		if (rc != SMDDP_OK)
			printf("INIT destroy rc=%s\n", rc_name(rc));
		return 0;
	}
	if (c != NULL)
		printf("INIT note: *comm is not NULL after a failed smddp_init\n");
	return rc;
}

static int mode_freeport(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
		perror("fault freeport");
		return 1;
	}
	printf("%d\n", ntohs(a.sin_port));
	close(fd);
	return 0;
}

/* The mismatched call of mode mismatch. */
static int mismatched_call(struct smddp_comm *c, const char *kind, void *s, void *r)
{
	int odd = rank == 1;

	if (!strcmp(kind, "count"))
		return smddp_allreduce(s, r, odd ? 1001 : 1000, SMDDP_INT32, SMDDP_SUM, c, NULL);
	if (!strcmp(kind, "op"))
		return smddp_allreduce(s, r, 1000, SMDDP_INT32, odd ? SMDDP_MAX : SMDDP_SUM, c, NULL);
	if (!strcmp(kind, "dtype")) /* same element size: only the check can tell */
		return smddp_allreduce(s, r, 1000, odd ? SMDDP_FLOAT32 : SMDDP_INT32, SMDDP_SUM, c,
				       NULL);
	if (!strcmp(kind, "root"))
		return smddp_broadcast(r, 1000, SMDDP_INT32, odd ? 1 : 0, c, NULL);
	if (!strcmp(kind, "coll"))
		return odd ? smddp_allgather(s, r, 1000, SMDDP_INT32, c, NULL)
			   : smddp_allreduce(s, r, 1000, SMDDP_INT32, SMDDP_SUM, c, NULL);
	/* rank 1 refuses its own arguments (the others must not go ahead) */
	if (!strcmp(kind, "null"))
		return smddp_allreduce(s, odd ? NULL : r, 1000, SMDDP_INT32, SMDDP_SUM, c, NULL);
	/* count 0 against 1000: the rank with nothing to do still compares */
	if (!strcmp(kind, "zero"))
		return smddp_allreduce(s, r, odd ? 0 : 1000, SMDDP_INT32, SMDDP_SUM, c, NULL);
	fprintf(stderr, "fault: unknown mismatch kind %s\n", kind);
	exit(2);
}

static const char *mismatch_word(const char *kind)
{
	if (!strcmp(kind, "count"))
		return rank == 1 ? "1000" : "1001";
	if (!strcmp(kind, "op"))
		return rank == 1 ? "sum" : "max";
	if (!strcmp(kind, "dtype"))
		return rank == 1 ? "int32" : "float32";
	if (!strcmp(kind, "root"))
		return "root";
	if (!strcmp(kind, "null"))
		return rank == 1 ? "NULL" : "refused";
	if (!strcmp(kind, "zero"))
		return rank == 1 ? "1000" : "count 0";
	return rank == 1 ? "allreduce" : "allgather";
}

static void usage(void);

static double killer_ms;
static int killer_sig;

static void *killer(void *arg)
{
	(void)arg;
	sleep_s(killer_ms / 1000.0);
	raise(killer_sig);
	return NULL;
}

/* Large allreduces until one fails; VICTIM gets sig during one of them. */
static void mode_killmid(struct smddp_comm *c, int victim, double ms, int sig)
{
	struct expectation e = {SMDDP_EPEER, 0, 10.0, victim, {"allreduce", NULL}};
	size_t n = 1u << 20, j;
	float *s = malloc(n * sizeof(float)), *r = malloc(n * sizeof(float));
	pthread_t th;
	double t0;
	int i, rc;

	for (j = 0; j < n; j++)
		s[j] = 1.0f;
	if (sig == SIGSTOP) { /* with SMDDP_TIMEOUT=2 */
		e.rc = SMDDP_ETIMEDOUT;
		e.min_s = 1.5;
		e.max_s = 6.0;
	}
	killer_ms = ms;
	killer_sig = sig;
	if (rank == victim && pthread_create(&th, NULL, killer, NULL) != 0) {
		printf("FAULT-BAD rank=%d: pthread_create failed\n", rank);
		exit(1);
	}
	for (i = 1; i <= 100000; i++) {
		t0 = sd_now_s();
		rc = smddp_allreduce(s, r, n, SMDDP_FLOAT32, SMDDP_SUM, c, NULL);
		if (rc != SMDDP_OK && rank == victim) {
			/* stopped, then continued by the launcher's SIGCONT: whatever it
			 * sees now is not the point of the test */
			printf("FAULT rank=%d (the victim) rc=%s msg=%s\n", rank, rc_name(rc),
			       smddp_last_error(c));
			exit(0);
		}
		if (rc != SMDDP_OK)
			witness(c, rc, sd_now_s() - t0, i, &e);
		if (r[0] != (float)size || r[n - 1] != (float)size) {
			printf("FAULT-BAD rank=%d: allreduce #%d gave %g, %g before the fault\n", rank,
			       i, r[0], r[n - 1]);
			exit(1);
		}
	}
	printf("FAULT-BAD rank=%d: no failure in %d allreduces\n", rank, i - 1);
	exit(1);
}

/* Waits (30 s at most) for the file another rank creates when it is done. */
static void await_flag(const char *flag)
{
	for (double t0 = sd_now_s(); access(flag, F_OK) != 0; sleep_s(0.01))
		if (sd_now_s() - t0 > 30) {
			printf("FAULT-BAD rank=%d: %s never appeared\n", rank, flag);
			exit(1);
		}
}

static struct smddp_comm *cancel_comm;

static void *canceller(void *arg)
{
	(void)arg;
	sleep_s(0.3);
	if (smddp_comm_cancel(cancel_comm) != SMDDP_OK)
		printf("FAULT-BAD rank=%d: smddp_comm_cancel failed\n", rank);
	return NULL;
}

/* smddp_comm_cancel from another thread ends the call in progress, and the
 * peers hear of it (fault cancel DIR). */
static void mode_cancel(struct smddp_comm *c, const char *dir, float *s, float *r)
{
	struct expectation e = {SMDDP_EABORTED, 0, 5.0, 0, {"allreduce", NULL}};
	char flag[4096];
	pthread_t th;
	double t0;
	int rc;

	snprintf(flag, sizeof(flag), "%s/cancelled", dir);
	if (size != 2 || (rc = good_allreduce(c, s, r, 1)) != SMDDP_OK) {
		printf("FAULT-BAD rank=%d: needs 2 ranks and a good allreduce first\n", rank);
		exit(1);
	}
	if (rank == 1) {
		/* stays away from the call until rank 0 has given it up */
		await_flag(flag);
		t0 = sd_now_s();
		rc = good_allreduce(c, s, r, 2);
		if (rc == SMDDP_OK) {
			/* Between hosts rank 0 sent its part before it was
			 * cancelled: this rank's call had all it needed (and
			 * good_allreduce checked the sum).  The next one fails. */
			printf("FAULT rank=1 note: allreduce #2 completed with rank 0's part\n");
			t0 = sd_now_s();
			rc = good_allreduce(c, s, r, 3);
			witness(c, rc, sd_now_s() - t0, 3, &e);
		}
		witness(c, rc, sd_now_s() - t0, 2, &e);
	}
	cancel_comm = c;
	if (pthread_create(&th, NULL, canceller, NULL) != 0) {
		printf("FAULT-BAD rank=0: pthread_create failed\n");
		exit(1);
	}
	t0 = sd_now_s();
	rc = good_allreduce(c, s, r, 2);
	double took = sd_now_s() - t0;

	pthread_join(th, NULL);
	e.words[1] = "smddp_comm_cancel";
	if (rc == SMDDP_OK)
		note_bad("the allreduce that rank 1 stayed away from returned SMDDP_OK");
	FILE *f = fopen(flag, "w");

	if (!f) {
		printf("FAULT-BAD rank=0: cannot create %s\n", flag);
		exit(1);
	}
	fclose(f);
	witness(c, rc, took, 2, &e);
}

/* The split's own deadline, not the parent's (fault splittimeout DIR). */
static void mode_splittimeout(struct smddp_comm *c, const char *dir, float *s, float *r)
{
	struct expectation e = {SMDDP_ETIMEDOUT, 1.5, 8.0, 1, {"allreduce", "timeout_ms", NULL}};
	struct smddp_config bad = {sizeof(bad), -1}, cfg = {sizeof(cfg), 2000};
	struct smddp_comm *sub = NULL;
	char flag[4096];
	double t0;
	int rc;

	snprintf(flag, sizeof(flag), "%s/done", dir);
	if (size != 2) {
		printf("FAULT-BAD rank=%d: needs 2 ranks\n", rank);
		exit(1);
	}
	/* refused on each rank before the split, which then does not happen */
	rc = smddp_comm_split_config(c, 0, rank, &bad, &sub);
	if (rc != SMDDP_EINVAL || !mentions(smddp_last_error(c), "negative")) {
		printf("FAULT-BAD rank=%d: a negative timeout_ms gave %s: %s\n", rank, rc_name(rc),
		       smddp_last_error(c));
		exit(1);
	}
	rc = smddp_comm_split_config(c, 0, rank, &cfg, &sub);
	if (rc != SMDDP_OK || !sub || (rc = good_allreduce(sub, s, r, 1)) != SMDDP_OK) {
		printf("FAULT-BAD rank=%d: the split or its first allreduce: %s: %s\n", rank,
		       rc_name(rc), smddp_last_error(sub ? sub : c));
		exit(1);
	}
	if (rank == 1) {
		await_flag(flag);
		printf("FAULT rank=1 stayed away\n");
		exit(0);
	}
	t0 = sd_now_s();
	rc = good_allreduce(sub, s, r, 2);
	double took = sd_now_s() - t0;
	FILE *f = fopen(flag, "w");

	if (f)
		fclose(f);
	witness(sub, rc, took, 2, &e);
}

/* VICTIM dies (after one good allreduce) instead of calling where; the
 * others call it and must get SMDDP_EPEER naming VICTIM and the call
 * (destroy: it must return, whatever it says). */
static void mode_killat(struct smddp_comm *c, int victim, const char *where)
{
	struct expectation e = {SMDDP_EPEER, 0, 10.0, victim, {where, NULL}};
	struct smddp_comm *sub = NULL;
	float *s = calloc((size_t)COUNT * (size + 1), sizeof(float));
	float *r = calloc((size_t)COUNT * (size + 1), sizeof(float));
	double t0;
	int rc;

	rc = good_allreduce(c, s, r, 1);
	if (rc != SMDDP_OK) {
		printf("FAULT-BAD rank=%d: the good allreduce returned %s\n", rank, rc_name(rc));
		exit(1);
	}
	if (rank == victim)
		raise(SIGKILL);
	t0 = sd_now_s();
	if (!strcmp(where, "split")) {
		rc = smddp_comm_split(c, 0, rank, &sub);
	} else if (!strcmp(where, "barrier")) {
		rc = smddp_barrier(c);
	} else if (!strcmp(where, "broadcast")) {
		rc = smddp_broadcast(r, COUNT, SMDDP_FLOAT32, victim, c, NULL);
	} else if (!strcmp(where, "reduce_scatter")) {
		rc = smddp_reduce_scatter(s, r, COUNT, SMDDP_FLOAT32, SMDDP_SUM, c, NULL);
	} else if (!strcmp(where, "destroy")) {
		rc = smddp_comm_destroy(c);
		printf("FAULT rank=%d destroy without rank %d: rc=%s elapsed=%.3f\n", rank, victim,
		       rc_name(rc), sd_now_s() - t0);
		if (sd_now_s() - t0 > 10.0) {
			printf("FAULT-BAD rank=%d: smddp_comm_destroy took %.3f s\n", rank,
			       sd_now_s() - t0);
			exit(1);
		}
		printf("FAULT-OK rank=%d rc=%s\n", rank, rc_name(rc));
		exit(EXIT_SAW_IT);
	} else {
		usage();
	}
	if (rc == SMDDP_OK) {
		printf("FAULT-BAD rank=%d: %s without rank %d returned SMDDP_OK\n", rank, where,
		       victim);
		exit(1);
	}
	witness(c, rc, sd_now_s() - t0, 2, &e);
}

/* An abort (or a death) of a rank concerns the communicators it is in. */
static void mode_sub(struct smddp_comm *c, int victim, int kill_it)
{
	struct smddp_comm *sub = NULL;
	float *s = calloc((size_t)COUNT * (size + 1), sizeof(float));
	float *r = calloc((size_t)COUNT * (size + 1), sizeof(float));
	int color = kill_it ? rank % 2 : 0, rc, i;
	double t0;

	rc = smddp_comm_split(c, color, rank, &sub);
	if (rc != SMDDP_OK) {
		printf("FAULT-BAD rank=%d: split returned %s: %s\n", rank, rc_name(rc),
		       smddp_last_error(c));
		exit(1);
	}
	rc = good_allreduce(c, s, r, 1);
	if (rc != SMDDP_OK) {
		printf("FAULT-BAD rank=%d: the good allreduce returned %s\n", rank, rc_name(rc));
		exit(1);
	}
	if (!kill_it) {
		struct expectation e = {SMDDP_EABORTED, 0, 10.0, victim, {"allreduce", NULL}};

		if (rank == victim) {
			sleep_s(0.5);
			rc = smddp_comm_abort(sub);
			printf("FAULT rank=%d abort of the copy rc=%s\n", rank, rc_name(rc));
		} else {
			t0 = sd_now_s();
			rc = smddp_allreduce(s, r, COUNT, SMDDP_FLOAT32, SMDDP_SUM, sub, NULL);
			printf("FAULT rank=%d copy: rc=%s elapsed=%.3f msg=%s\n", rank, rc_name(rc),
			       sd_now_s() - t0, smddp_last_error(sub));
			if (rc != e.rc)
				note_bad("allreduce on the aborted copy returned %s, expected %s",
					 rc_name(rc), rc_name(e.rc));
			else if (!mentions_rank(smddp_last_error(sub), victim))
				note_bad("the message does not name rank %d", victim);
			rc = smddp_comm_destroy(sub);
			printf("FAULT rank=%d copy destroy rc=%s\n", rank, rc_name(rc));
		}
		/* the world is not the copy: it must still work, for everyone */
		for (i = 2; i <= 4; i++) {
			rc = good_allreduce(c, s, r, i);
			if (rc != SMDDP_OK) {
				note_bad("world allreduce #%d after the copy's abort returned %s: %s", i,
					 rc_name(rc), smddp_last_error(c));
				break;
			}
		}
		rc = smddp_comm_destroy(c);
		if (rc != SMDDP_OK)
			note_bad("world destroy returned %s: %s", rc_name(rc), smddp_last_error(NULL));
	} else {
		struct expectation e = {SMDDP_EPEER, 0, 10.0, victim, {"allreduce", NULL}};

		if (rank == victim)
			raise(SIGKILL);
		if (rank % 2 != victim % 2) {
			/* the victim is not in this sub-communicator */
			sleep_s(0.3);
			for (i = 1; i <= 3; i++) {
				int one = 1, sum = 0, n = (size - (rank % 2) + 1) / 2;
				rc = smddp_allreduce(&one, &sum, 1, SMDDP_INT32, SMDDP_SUM, sub, NULL);
				printf("FAULT rank=%d sub allreduce #%d without rank %d's group: rc=%s%s%s\n",
				       rank, i, victim, rc_name(rc), rc ? " msg=" : "",
				       rc ? smddp_last_error(sub) : "");
				if (rc != SMDDP_OK) {
					note_bad("an allreduce on a sub-communicator without rank %d "
						 "returned %s", victim, rc_name(rc));
					break;
				}
				if (sum != n)
					note_bad("sub allreduce gave %d, expected %d", sum, n);
			}
			smddp_comm_destroy(sub);
		}
		t0 = sd_now_s();
		rc = good_allreduce(c, s, r, 2);
		if (rc == SMDDP_OK) {
			printf("FAULT-BAD rank=%d: world allreduce without rank %d returned SMDDP_OK\n",
			       rank, victim);
			exit(1);
		}
		witness(c, rc, sd_now_s() - t0, 2, &e);
	}
	if (bad_why[0]) {
		printf("FAULT-BAD rank=%d: %s\n", rank, bad_why);
		exit(1);
	}
	printf("FAULT-OK rank=%d (the world still works)\n", rank);
	if (rank == victim)
		sleep_s(1.0);
	exit(EXIT_SAW_IT);
}

static void usage(void)
{
	fprintf(stderr, "usage: fault kill|exit|errexit|abort VICTIM NGOOD | hang|late VICTIM SECONDS | "
			"killmid|stopmid VICTIM MS | subabort|subkill|noshow VICTIM | killat VICTIM split|barrier|broadcast|reduce_scatter|destroy | "
			"mismatch count|op|dtype|root|coll|null|zero | dump | init | freeport\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct smddp_comm *c;
	struct expectation e = {0, 0, 10.0, -1, {NULL}};
	const char *mode;
	float *s, *r;
	int rc, victim = -1, ngood = 0, i;
	double arg = 0, t0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* smddp-run stops the other ranks (SIGTERM, then SIGKILL after --grace)
	 * as soon as one fails: the witnesses must live on to see what the
	 * library reports. */
	signal(SIGTERM, SIG_IGN);
	if (argc < 2)
		usage();
	mode = argv[1];
	if (!strcmp(mode, "init"))
		return mode_init();
	if (!strcmp(mode, "freeport"))
		return mode_freeport();
	if (!strcmp(mode, "dump")) {
		if (argc != 2)
			usage();
	} else if (!strcmp(mode, "mismatch") || !strcmp(mode, "cancel") ||
		   !strcmp(mode, "splittimeout")) {
		if (argc != 3)
			usage();
	} else if (!strcmp(mode, "subabort") || !strcmp(mode, "subkill") ||
		   !strcmp(mode, "noshow")) {
		if (argc != 3)
			usage();
		victim = atoi(argv[2]);
	} else if (!strcmp(mode, "kill") || !strcmp(mode, "exit") || !strcmp(mode, "errexit") ||
		   !strcmp(mode, "abort") ||
		   !strcmp(mode, "hang") || !strcmp(mode, "late") || !strcmp(mode, "killmid") ||
		   !strcmp(mode, "stopmid") || !strcmp(mode, "killat")) {
		if (argc != 4)
			usage();
		victim = atoi(argv[2]);
		arg = atof(argv[3]);
		ngood = (int)arg;
	} else {
		usage();
	}

	if (!strcmp(mode, "noshow")) {
		const char *er = getenv("SMDDP_RANK");
		const char *msg;

		rank = er ? atoi(er) : -1;
		if (rank == victim) {
			sleep_s(0.3);
			raise(SIGKILL);
		}
		t0 = sd_now_s();
		rc = smddp_init(&c);
		msg = smddp_last_error(NULL);
		printf("FAULT rank=%d init rc=%s elapsed=%.3f msg=%s\n", rank, rc_name(rc),
		       sd_now_s() - t0, msg);
		if (rc != SMDDP_ETIMEDOUT)
			note_bad("smddp_init returned %s, expected SMDDP_ETIMEDOUT", rc_name(rc));
		if (sd_now_s() - t0 < 2.0 || sd_now_s() - t0 > 8.0)
			note_bad("smddp_init took %.3f s, expected 2 to 8", sd_now_s() - t0);
		if (!mentions_rank(msg, victim))
			note_bad("the message does not name rank %d", victim);
		if (bad_why[0]) {
			printf("FAULT-BAD rank=%d: %s\n", rank, bad_why);
			return 1;
		}
		printf("FAULT-OK rank=%d rc=%s\n", rank, rc_name(rc));
		return EXIT_SAW_IT;
	}
	rc = smddp_init(&c);
	if (rc != SMDDP_OK) {
		printf("FAULT-BAD rank=?: smddp_init returned %s: %s\n", rc_name(rc),
		       smddp_last_error(NULL));
		return 1;
	}
	rank = smddp_comm_rank(c);
	size = smddp_comm_size(c);
	s = calloc((size_t)COUNT * (size + 1), sizeof(float));
	r = calloc((size_t)COUNT * (size + 1), sizeof(float));
	if (victim >= size) {
		fprintf(stderr, "fault: victim %d out of range\n", victim);
		return 2;
	}

	if (!strcmp(mode, "dump")) {
		for (i = 1; i <= 2; i++)
			if ((rc = good_allreduce(c, s, r, i)) != SMDDP_OK)
				break;
		if (!rc)
			rc = smddp_barrier(c);
		if (!rc)
			rc = smddp_comm_dump(c);
		printf("DUMP rank=%d rc=%s%s%s\n", rank, rc_name(rc), rc ? " msg=" : "",
		       rc ? smddp_last_error(c) : "");
		smddp_comm_destroy(c);
		return rc ? 1 : 0;
	}
	if (!strcmp(mode, "killmid"))
		mode_killmid(c, victim, arg, SIGKILL);
	if (!strcmp(mode, "stopmid"))
		mode_killmid(c, victim, arg, SIGSTOP);
	if (!strcmp(mode, "killat"))
		mode_killat(c, victim, argv[3]);
	if (!strcmp(mode, "cancel"))
		mode_cancel(c, argv[2], s, r);
	if (!strcmp(mode, "splittimeout"))
		mode_splittimeout(c, argv[2], s, r);
	if (!strcmp(mode, "subabort"))
		mode_sub(c, victim, 0);
	if (!strcmp(mode, "subkill"))
		mode_sub(c, victim, 1);
	if (!strcmp(mode, "mismatch")) {
		rc = good_allreduce(c, s, r, 1);
		if (rc != SMDDP_OK) {
			printf("FAULT-BAD rank=%d: the good allreduce returned %s: %s\n", rank,
			       rc_name(rc), smddp_last_error(c));
			return 1;
		}
		/* rank 1's own bad argument is SMDDP_EINVAL for it */
		e.rc = !strcmp(argv[2], "null") && rank == 1 ? SMDDP_EINVAL : SMDDP_EMISMATCH;
		e.culprit = 1;
		e.words[0] = mismatch_word(argv[2]);
		t0 = sd_now_s();
		rc = mismatched_call(c, argv[2], s, r);
		witness(c, rc, sd_now_s() - t0, 2, &e);
	}

	if (!strcmp(mode, "hang") || !strcmp(mode, "late"))
		ngood = 2;
	/* what a witness must see: the victim will not arrive at call ngood + 1 */
	e.culprit = victim;
	e.words[0] = "allreduce";
	if (!strcmp(mode, "kill") || !strcmp(mode, "exit")) {
		e.rc = SMDDP_EPEER;
	} else if (!strcmp(mode, "errexit")) {
		e.rc = SMDDP_EPEER;
		e.words[1] = "after an error of its own";
		e.words[2] = "recvbuf is NULL";
	} else if (!strcmp(mode, "abort")) {
		e.rc = SMDDP_EABORTED;
	} else { /* hang and late, with SMDDP_TIMEOUT=2 */
		e.rc = SMDDP_ETIMEDOUT;
		e.min_s = 1.5;
		e.max_s = 6.0;
		e.words[1] = "4099";
		e.words[2] = "sum";
		e.words[3] = "#";
	}
	for (i = 1; i <= ngood; i++) {
		t0 = sd_now_s();
		rc = good_allreduce(c, s, r, i);
		if (rc != SMDDP_OK) {
			/* A witness may see the death while finishing the victim's last
			 * call; tolerated, but said. */
			if (rank != victim && i == ngood &&
			    (!strcmp(mode, "kill") || !strcmp(mode, "exit") ||
			     !strcmp(mode, "errexit"))) {
				printf("FAULT rank=%d note: failed in allreduce #%d, which rank %d "
				       "completed before dying\n", rank, i, victim);
				witness(c, rc, sd_now_s() - t0, i, &e);
			}
			printf("FAULT-BAD rank=%d: allreduce #%d before the fault returned %s: %s\n",
			       rank, i, rc_name(rc), smddp_last_error(c));
			return 1;
		}
	}
	if (rank == victim) {
		if (!strcmp(mode, "kill")) {
			raise(SIGKILL);
		} else if (!strcmp(mode, "exit")) {
			exit(0);
		} else if (!strcmp(mode, "errexit")) {
			rc = smddp_allreduce(s, NULL, COUNT, SMDDP_FLOAT32, SMDDP_SUM, c, NULL);
			printf("FAULT rank=%d own call rc=%s msg=%s\n", rank, rc_name(rc),
			       smddp_last_error(c));
			fflush(stdout);
			exit(rc == SMDDP_EINVAL ? 1 : 3);
		} else if (!strcmp(mode, "hang")) {
			/* stuck for good: only the launcher's SIGKILL (after --grace)
			 * ends it, so that no witness sees it die before its own
			 * timeout, which would rightly be SMDDP_EPEER */
			printf("FAULT rank=%d asleep\n", rank);
			fflush(stdout);
			sleep_s(arg);
			printf("FAULT rank=%d woke up after %.0f s\n", rank, arg);
			return 0;
		} else if (!strcmp(mode, "late")) {
			/* arrives after the others gave up and left: must not succeed */
			sleep_s(arg);
			t0 = sd_now_s();
			rc = good_allreduce(c, s, r, ngood + 1);
			e.rc = rc == SMDDP_OK ? SMDDP_EPEER : rc; /* any error will do */
			e.culprit = -1;
			e.words[0] = NULL;
			e.min_s = 0;
			e.max_s = 10.0;
			witness(c, rc, sd_now_s() - t0, ngood + 1, &e);
		} else { /* abort: it frees the communicator (smddp(3)), so c is gone */
			sleep_s(0.5);
			t0 = sd_now_s();
			rc = smddp_comm_abort(c);
			printf("FAULT rank=%d abort rc=%s elapsed=%.3f\n", rank, rc_name(rc),
			       sd_now_s() - t0);
			if (sd_now_s() - t0 > 1.0)
				note_bad("smddp_comm_abort took %.3f s", sd_now_s() - t0);
			if (rc != SMDDP_OK)
				note_bad("smddp_comm_abort returned %s", rc_name(rc));
			if (bad_why[0]) {
				printf("FAULT-BAD rank=%d: %s\n", rank, bad_why);
				return 1;
			}
			printf("FAULT-OK rank=%d rc=%s\n", rank, rc_name(rc));
			/* stay alive a while: the others must see the abort, not a death */
			sleep_s(2.0);
			return EXIT_SAW_IT;
		}
	}

	t0 = sd_now_s();
	rc = good_allreduce(c, s, r, i);
	if (rc == SMDDP_OK) {
		printf("FAULT-BAD rank=%d: allreduce #%d returned SMDDP_OK without rank %d\n", rank,
		       i, victim);
		return 1;
	}
	witness(c, rc, sd_now_s() - t0, i, &e);
	return 1;
}
