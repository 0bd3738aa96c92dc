/* asyncerr-fake.c - failed queued device work, polled and met by a release, without a GPU.
 *
 * Linked with tests/gpu/fakecuda.c and, instead of lib/cuda/enqueue.c,
 * state.c and proxy.c, the entry points below: sd_cuda_async_error() reports what fakecuda_async_rc
 * and fakecuda_async_msg say, as if queued device work had met it, and a
 * drain (sd_cuda_collect) meets fakecuda_drain_rc.  One rank: the poller must never write the
 * communicator's last error, which belongs to the thread inside a call,
 * and smddp_last_error(comm) must give each thread its own sentence;
 * smddp_comm_release() must return what its drain met, and still free
 * everything.  Prints "SUMMARY rank 0 of 1: P passed, F failed".
 */
#include "config.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <smddp/smddp.h>

#include "cuda/state.h"
#include "transport/transport.h"

/* ---- lib/cuda/enqueue.c, state.c and proxy.c, replaced -----------------------------
 * Its entry points as the layers above call them, reporting the error that
 * this test sets as if queued device work had met it: sd_cuda_async_error
 * reports fakecuda_async_rc, a drain (sd_cuda_collect(c, 1)) meets
 * fakecuda_drain_rc.  Defining every one of them keeps the real objects
 * out of the link. */

static int fakecuda_async_rc, fakecuda_drain_rc;
static char fakecuda_async_msg[256];

int sd_cuda_enqueue(struct smddp_comm *c, const struct sd_cuda_call *k)
{
	(void)k;
	return sd_comm_error(c, SMDDP_EUNSUPPORTED, "no device collectives in asyncerr-fake");
}

int sd_cuda_collect(struct smddp_comm *c, int drain)
{
	if (!drain || !fakecuda_drain_rc)
		return 0;
	c->failed = fakecuda_drain_rc;
	snprintf(c->last_error, sizeof(c->last_error), "%s", fakecuda_async_msg);
	return fakecuda_drain_rc;
}

int sd_cuda_async_error(struct smddp_comm *c, struct sd_err *err)
{
	(void)c;
	if (fakecuda_async_rc)
		sd_err_set(err, fakecuda_async_rc, "%s", fakecuda_async_msg);
	return fakecuda_async_rc;
}

int sd_cuda_mode(const struct smddp_comm *c)
{
	(void)c;
	return SMDDP_CUDA_QUEUED;
}

int sd_cuda_settle(struct smddp_comm *c, int rc)
{
	(void)c;
	return rc;
}

int sd_cuda_state(struct smddp_comm *c, int dev, struct sd_cuda **out)
{
	(void)c;
	(void)dev;
	(void)out;
	return SMDDP_EUNSUPPORTED;
}

void sd_cuda_comm_free(struct smddp_comm *c)
{
	(void)c;
}

void sd_cuda_abort(struct smddp_comm *c)
{
	c->tp->abort(c);
}

void sd_cuda_stop(struct smddp_comm *c)
{
	(void)c;
}

#define ROUNDS 20000

static struct smddp_comm *comm;
static int passed, failed;
static pthread_mutex_t count_mu = PTHREAD_MUTEX_INITIALIZER;

static void check(int ok, const char *what, const char *got)
{
	pthread_mutex_lock(&count_mu);
	if (ok) {
		passed++;
	} else {
		failed++;
		printf("FAIL: %s (got \"%s\")\n", what, got);
	}
	pthread_mutex_unlock(&count_mu);
}

/* A call that fails on this thread with a sentence naming dtype. */
static void fail_with(int dtype, const char *what)
{
	char want[32];
	float x = 0;
	int rc = smddp_allreduce(&x, &x, 1, (enum smddp_dtype)dtype, SMDDP_SUM, comm, NULL);

	snprintf(want, sizeof(want), "unknown dtype %d", dtype);
	check(rc == SMDDP_EINVAL && strstr(smddp_last_error(comm), want), what,
	      smddp_last_error(comm));
}

static void poll_once(const char *what)
{
	int e = -1;
	int rc = smddp_comm_get_async_error(comm, &e);

	check(rc == SMDDP_OK && e == SMDDP_EPEER &&
		      !strcmp(smddp_last_error(comm), fakecuda_async_msg),
	      what, smddp_last_error(comm));
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* A communicator whose queued work failed unseen: release returns it. */
static void release_after_failure(void)
{
	struct smddp_comm *sub = NULL;
	int fd0 = count_fds(), rc;

	if (smddp_comm_split(comm, 0, 0, &sub)) {
		check(0, "smddp_comm_split", smddp_last_error(comm));
		return;
	}
	fakecuda_drain_rc = SMDDP_EPEER;
	rc = smddp_comm_release(sub);
	fakecuda_drain_rc = 0;
	check(rc == SMDDP_EPEER, "smddp_comm_release returns what its drain met",
	      smddp_strerror(rc));
	check(!strcmp(smddp_last_error(NULL), fakecuda_async_msg),
	      "with its sentence in smddp_last_error(NULL)", smddp_last_error(NULL));
	check(count_fds() == fd0, "and frees the communicator (no descriptor left open)",
	      smddp_last_error(NULL));
	if (smddp_comm_split(comm, 0, 0, &sub)) {
		check(0, "smddp_comm_split", smddp_last_error(comm));
		return;
	}
	rc = smddp_comm_release(sub);
	check(rc == SMDDP_OK && count_fds() == fd0, "a clean release returns SMDDP_OK",
	      smddp_strerror(rc));
}

static void *poll_one(void *arg)
{
	(void)arg;
	poll_once("the poller reads the async sentence on its own thread");
	return NULL;
}

static void *poll_many(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS; i++)
		poll_once("the poller's sentence while the other thread's calls fail");
	return NULL;
}

int main(void)
{
	pthread_t t;
	int e = -1;

	if (smddp_init(&comm)) {
		printf("FAIL: smddp_init: %s\n", smddp_last_error(NULL));
		return 1;
	}
	fail_with(99, "a failed call leaves its sentence");
	fakecuda_async_rc = SMDDP_EPEER;
	snprintf(fakecuda_async_msg, sizeof(fakecuda_async_msg),
		 "rank 0: allreduce #7: rank 1 died (queued, from fakecuda)");

	/* Another thread polls: this thread's sentence stays its own. */
	pthread_create(&t, NULL, poll_one, NULL);
	pthread_join(t, NULL);
	check(strstr(smddp_last_error(comm), "unknown dtype 99") != NULL,
	      "a poll on another thread leaves this thread's sentence", smddp_last_error(comm));

	/* This thread polls: its sentence is the async one until its next call. */
	poll_once("this thread's poll gives the async sentence");
	fail_with(98, "the next call's own failure replaces the async sentence");

	/* Both at once (ThreadSanitizer sees a race on comm if there is one). */
	pthread_create(&t, NULL, poll_many, NULL);
	for (int i = 0; i < ROUNDS; i++)
		fail_with(90 + i % 8, "this thread's failures while another thread polls");
	pthread_join(t, NULL);

	/* Cleared: the poll says SMDDP_OK and forgets the sentence. */
	poll_once("polled once more");
	fakecuda_async_rc = 0;
	check(smddp_comm_get_async_error(comm, &e) == SMDDP_OK && e == SMDDP_OK,
	      "no async error once cleared", smddp_strerror(e));
	check(strstr(smddp_last_error(comm), "unknown dtype 97") != NULL,
	      "then smddp_last_error gives the last failed call's sentence",
	      smddp_last_error(comm));
	release_after_failure();
	if (smddp_comm_destroy(comm))
		check(0, "smddp_comm_destroy", smddp_last_error(NULL));
	printf("SUMMARY rank 0 of 1: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
