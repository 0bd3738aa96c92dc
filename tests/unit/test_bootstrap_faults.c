/* test_bootstrap_faults.c - test_bootstrap's scenarios of ranks that die, abort, disagree or stall.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/sd.h"
#include "bootstrap/bootstrap.h"
#include "test_bootstrap.h"

/* World of 4 where rank 3 never comes; rank 1 says hello and dies: the
 * rendezvous fails with EPEER naming it, on rank 0 and on the waiting rank 2. */
void sc_die_in_rendezvous(struct ctx *c)
{
	struct sd_boot_peer peers[3];
	struct sd_boot *b = NULL;
	struct sd_err err = {""};
	uint64_t nonce, t0 = sd_now_ns();
	int rc;

	if (c->idx == 1) {
		char why[300];
		int fd, proved = 0;

		snprintf(c->who, sizeof(c->who), "raw rank 1");
		msleep(200);
		fd = raw_join(c, W_VERSION, 1, 4, "job-secret", why, sizeof(why), &proved);
		if (fd < 0) {
			CHECK(c, 0, "admitted (%s)", why);
			return;
		}
		CHECK(c, proved, "rank 0's CHALLENGE proves that it knows the token");
		msleep(200);
		say(c, "closing without a word");
		close(fd);
		return;
	}
	snprintf(c->who, sizeof(c->who), "rank %d/4", c->idx);
	struct sd_boot_params p = params(c, c->idx, 4, "job-secret", 4000);
	rc = sd_boot_init(&p, &b, peers, &nonce, &err);
	CHECK(c, rc == SMDDP_EPEER && contains(err.msg, "rank 1 ") && contains(err.msg, "rendezvous"),
	      "EPEER naming rank 1 (rc %d): %s", rc, err.msg);
	CHECK(c, sd_now_ns() - t0 < 2 * SEC, "long before the deadline (%.2f s)", (double)(sd_now_ns() - t0) / 1e9);
}

/* A rank killed after the rendezvous; mode 0: others poll, 1: others are in an all-gather. */
static void killed(struct ctx *c, int victim, int in_gather)
{
	int rank = c->idx, size = c->nproc, who = -1, rc;
	struct sd_boot *b = join(c, rank, size, 5000);
	struct sd_err err = {""};
	char want[64];
	uint64_t took;

	if (!b)
		return;
	gather_check(c, b, rank, size, 8, 1, 0); /* everyone is past the rendezvous */
	if (rank == victim) {
		say(c, "killing myself with SIGKILL");
		raise(SIGKILL);
	}
	if (in_gather) {
		uint8_t *all = malloc((size_t)size * BIG), *mine = calloc(1, BIG);
		uint64_t t0 = sd_now_ns();

		rc = sd_boot_allgather(b, mine, all, BIG, sd_now_ns() + 5 * SEC, &err);
		took = sd_now_ns() - t0;
		free(all);
		free(mine);
		who = victim; /* the all-gather names it in err.msg only */
	} else {
		rc = poll_for(b, 3000, &who, &err, &took);
	}
	snprintf(want, sizeof(want), "rank %d (pid ", victim);
	CHECK(c, rc == SMDDP_EPEER && who == victim && contains(err.msg, want),
	      "%s reports EPEER naming rank %d (rc %d, rank %d): %s", in_gather ? "all-gather" : "poll", victim, rc,
	      who, err.msg);
	CHECK(c, took < (rank == 0 || victim == 0 ? 1 : 2) * SEC, "within %d s (%.3f s)",
	      rank == 0 || victim == 0 ? 1 : 2, (double)took / 1e9);
	if (rank == 0)
		CHECK(c, contains(err.msg, "closed its connection to rank 0: it died or was killed"), "the sentence says so");
	/* Sticky. */
	int who2 = -1;
	rc = sd_boot_poll(b, &who2, &err);
	CHECK(c, rc == SMDDP_EPEER && who2 == victim, "poll again: still EPEER naming rank %d", victim);
	sd_boot_close(b, 0);
}

void sc_kill3(struct ctx *c)
{
	killed(c, 3, 0);
}

void sc_kill3_gather(struct ctx *c)
{
	killed(c, 3, 1);
}

void sc_kill0(struct ctx *c)
{
	killed(c, 0, 0);
}

void sc_kill0_gather(struct ctx *c)
{
	killed(c, 0, 1);
}

static void aborted(struct ctx *c, int aborter, int in_gather)
{
	int rank = c->idx, size = c->nproc, who = -1, rc;
	struct sd_boot *b = join(c, rank, size, 5000);
	struct sd_err err = {""};
	char why[64];
	uint64_t took;

	if (!b)
		return;
	snprintf(why, sizeof(why), "test abort from rank %d", aborter);
	gather_check(c, b, rank, size, 8, 1, 0);
	if (rank == aborter) {
		uint64_t t0 = sd_now_ns();

		sd_boot_abort(b, why);
		CHECK(c, sd_now_ns() - t0 < 200 * MS, "sd_boot_abort returns at once");
		rc = sd_boot_poll(b, &who, &err);
		CHECK(c, rc == SMDDP_EABORTED, "and this rank's channel is aborted (rc %d: %s)", rc, err.msg);
		sd_boot_close(b, 0);
		return;
	}
	if (in_gather) {
		uint8_t *all = malloc((size_t)size * BIG), *mine = calloc(1, BIG);
		uint64_t t0 = sd_now_ns();

		rc = sd_boot_allgather(b, mine, all, BIG, sd_now_ns() + 5 * SEC, &err);
		took = sd_now_ns() - t0;
		who = aborter;
		free(all);
		free(mine);
	} else {
		rc = poll_for(b, 3000, &who, &err, &took);
	}
	CHECK(c, rc == SMDDP_EABORTED && who == aborter && contains(err.msg, why),
	      "%s reports EABORTED naming rank %d (rc %d, rank %d): %s", in_gather ? "all-gather" : "poll", aborter,
	      rc, who, err.msg);
	CHECK(c, took < SEC, "within 1 s (%.3f s)", (double)took / 1e9);
	sd_boot_close(b, 0);
}

void sc_abort2(struct ctx *c)
{
	aborted(c, 2, 0);
}

void sc_abort2_gather(struct ctx *c)
{
	aborted(c, 2, 1);
}

void sc_abort0(struct ctx *c)
{
	aborted(c, 0, 0);
}

/* Rank 1 gathers 8 bytes, the others 4: a clear error everywhere, no hang. */
void sc_mismatch(struct ctx *c)
{
	int rank = c->idx, size = c->nproc, rc;
	struct sd_boot *b = join(c, rank, size, 5000);
	struct sd_err err = {""};
	char mine[8] = {0}, all[64];
	uint64_t t0 = sd_now_ns();

	if (!b)
		return;
	rc = sd_boot_allgather(b, mine, all, rank == 1 ? 8 : 4, sd_now_ns() + 5 * SEC, &err);
	CHECK(c, rc != SMDDP_OK && rc != SMDDP_ETIMEDOUT && contains(err.msg, "different collectives"),
	      "mismatched all-gather fails at once (rc %d: %s)", rc, err.msg);
	CHECK(c, sd_now_ns() - t0 < 2 * SEC, "within 2 s");
	sd_boot_close(b, 0);
}

/* Rank 2 never joins the all-gather: the others time out, naming it. */
void sc_gather_timeout(struct ctx *c)
{
	int rank = c->idx, size = c->nproc, rc;
	struct sd_boot *b = join(c, rank, size, 5000);
	struct sd_err err = {""};
	char mine[4] = {0}, all[12];

	if (!b)
		return;
	if (rank == 2) {
		msleep(900);
		sd_boot_close(b, 1);
		return;
	}
	rc = sd_boot_allgather(b, mine, all, 4, sd_now_ns() + 500 * MS, &err);
	if (rank == 0)
		CHECK(c, rc == SMDDP_ETIMEDOUT && contains(err.msg, "rank(s) 2 of 3 did not contribute"), "rc %d: %s", rc,
		      err.msg);
	else
		CHECK(c, rc == SMDDP_ETIMEDOUT && contains(err.msg, "rank(s) 2 of 3 did not contribute"),
		      "rc %d, naming the missing rank as rank 0 saw it: %s", rc, err.msg);
	rc = sd_boot_allgather(b, mine, all, 4, sd_now_ns() + 500 * MS, &err);
	CHECK(c, rc != SMDDP_OK && (contains(err.msg, "out of step") || contains(err.msg, "gave up")),
	      "the next all-gather refuses at once: %s", err.msg);
	msleep(300); /* rank 0 must see its own time-out, not this rank's close */
	sd_boot_close(b, 0);
}
