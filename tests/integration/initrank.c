/* initrank.c - smddp_get_unique_id, smddp_comm_init_rank and smddp_comm_release (initrank.sh).
 *
 * Usage:
 *   initrank basic DIR    (under smddp-run) two communicators made from ids passed
 *                         through files in DIR, one with rank 0 as its rank 0, one
 *                         with the ranks reversed; allreduce on both; released in
 *                         opposite orders on odd and even ranks, without waiting
 *   initrank errors       (alone) bad ids, ranks and configs; an id used twice
 *   initrank timeout      (alone) rank 0 of 2 with timeout_ms 1500: SMDDP_ETIMEDOUT
 *                         naming rank 1, within seconds
 * Prints "INITRANK-OK rank=R" and exits 0, or "INITRANK-BAD rank=R: why" and exits 1.
 * The launcher's variables only tell this program its rank: the communicators
 * read nothing from the environment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <smddp/smddp.h>

#include "clock.h" /* lib/clock/: the one clock */
#include "../unit/check.h" /* count_fds() */

static int rank = 0;

static void bad(const char *fmt, const char *a, int rc)
{
	printf("INITRANK-BAD rank=%d: ", rank);
	printf(fmt, a);
	printf(" (%s)\n", smddp_strerror(rc));
	exit(1);
}

static void put_id(const char *dir, const char *name, const struct smddp_unique_id *id)
{
	char tmp[4096], path[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, name);
	snprintf(path, sizeof(path), "%s/%s.id", dir, name);
	f = fopen(tmp, "wb");
	if (!f || fwrite(id, sizeof(*id), 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0)
		bad("cannot write %s", path, 0);
}

static void get_id(const char *dir, const char *name, struct smddp_unique_id *id)
{
	char path[4096];
	double t0 = sd_now_s();

	snprintf(path, sizeof(path), "%s/%s.id", dir, name);
	while (sd_now_s() - t0 < 60) {
		FILE *f = fopen(path, "rb");

		if (f) {
			size_t n = fread(id, sizeof(*id), 1, f);

			fclose(f);
			if (n == 1)
				return;
		}
		usleep(10000);
	}
	bad("%s never appeared", path, 0);
}

static struct smddp_comm *make(const char *dir, const char *name, int me, int n, int maker)
{
	struct smddp_unique_id id;
	struct smddp_config cfg = {sizeof(cfg), 30000};
	struct smddp_comm *c = NULL;
	int rc;

	if (me == 0) {
		rc = smddp_get_unique_id(&id);
		if (rc)
			bad("smddp_get_unique_id: %s", smddp_last_error(NULL), rc);
		put_id(dir, name, &id);
	} else {
		get_id(dir, name, &id);
	}
	(void)maker;
	rc = smddp_comm_init_rank(&c, n, &id, me, &cfg);
	if (rc)
		bad("smddp_comm_init_rank: %s", smddp_last_error(NULL), rc);
	if (smddp_comm_rank(c) != me || smddp_comm_size(c) != n)
		bad("%s: wrong rank or size", name, 0);
	return c;
}

static void check_sum(struct smddp_comm *c, int n, const char *name)
{
	enum { COUNT = 100003 };
	static double buf[COUNT];
	int me = smddp_comm_rank(c), rc;

	for (int i = 0; i < COUNT; i++)
		buf[i] = me * 1000.0 + i;
	rc = smddp_allreduce(buf, buf, COUNT, SMDDP_FLOAT64, SMDDP_SUM, c, NULL);
	if (rc)
		bad("allreduce: %s", smddp_last_error(c), rc);
	for (int i = 0; i < COUNT; i++)
		if (buf[i] != 1000.0 * n * (n - 1) / 2 + (double)n * i)
			bad("%s: allreduce gave a wrong sum", name, 0);
}

static int basic(const char *dir, int n)
{
	struct smddp_comm *a = make(dir, "a", rank, n, 0);
	struct smddp_comm *b = make(dir, "b", n - 1 - rank, n, n - 1);
	double t0;
	int rc1, rc2;

	for (int k = 0; k < 3; k++) {
		check_sum(a, n, "a");
		check_sum(b, n, "b");
	}
	/* Opposite orders on odd and even ranks: a collective destroy would
	 * wait here until the deadline. */
	t0 = sd_now_s();
	if (rank % 2) {
		rc1 = smddp_comm_release(b);
		rc2 = smddp_comm_release(a);
	} else {
		rc1 = smddp_comm_release(a);
		rc2 = smddp_comm_release(b);
	}
	if (rc1 || rc2)
		bad("smddp_comm_release: %s", smddp_strerror(rc1 ? rc1 : rc2), rc1 ? rc1 : rc2);
	if (sd_now_s() - t0 > 5)
		bad("release took %s", "more than 5 s", 0);
	printf("INITRANK-OK rank=%d basic, released in %.3f s\n", rank, sd_now_s() - t0);
	return 0;
}

static void expect(int rc, int want, const char *what, const char *words)
{
	if (rc != want)
		bad("%s: wrong result", what, rc);
	if (!strstr(smddp_last_error(NULL), words))
		bad("%s: the message does not explain", smddp_last_error(NULL), rc);
	printf("ok: %s: %s\n", what, smddp_last_error(NULL));
}

static int errors(void)
{
	struct smddp_unique_id id, bent;
	struct smddp_config small = {1, 0}, neg = {sizeof(small), -5};
	struct smddp_comm *c = NULL;
	float x = 2;
	int rc;

	rc = smddp_get_unique_id(&id);
	if (rc)
		bad("smddp_get_unique_id: %s", smddp_last_error(NULL), rc);
	memset(&bent, 'x', sizeof(bent));
	expect(smddp_comm_init_rank(&c, 2, &bent, 1, NULL), SMDDP_EINVAL, "garbage id",
	       "not made by smddp_get_unique_id");
	expect(smddp_comm_init_rank(&c, 2, &id, 2, NULL), SMDDP_EINVAL, "rank 2 of 2",
	       "below the number of ranks");
	expect(smddp_comm_init_rank(&c, 1, &id, 0, &small), SMDDP_EINVAL, "config size 1",
	       "sizeof(struct smddp_config)");
	expect(smddp_comm_init_rank(&c, 1, &id, 0, &neg), SMDDP_EINVAL, "negative timeout",
	       "negative");
	expect(smddp_comm_init_rank(NULL, 1, &id, 0, NULL), SMDDP_EINVAL, "NULL comm", "NULL");
	rc = smddp_comm_init_rank(&c, 1, &id, 0, NULL);
	if (rc || !c)
		bad("one rank: %s", smddp_last_error(NULL), rc);
	rc = smddp_allreduce(&x, &x, 1, SMDDP_FLOAT32, SMDDP_SUM, c, NULL);
	if (rc || x != 2)
		bad("one rank allreduce: %s", smddp_last_error(c), rc);
	if (smddp_comm_release(c))
		bad("%s", "release of one rank failed", 0);
	expect(smddp_comm_init_rank(&c, 1, &id, 0, NULL), SMDDP_EINVAL, "an id used twice",
	       "one communicator only");
	/* one-rank communicators from ids, over and over: no descriptor kept */
	int fd0 = count_fds();

	for (int i = 0; i < 50; i++) {
		if ((rc = smddp_get_unique_id(&id)) || (rc = smddp_comm_init_rank(&c, 1, &id, 0, NULL)) ||
		    (rc = smddp_comm_release(c)))
			bad("cycle: %s", smddp_last_error(NULL), rc);
	}
	if (count_fds() != fd0)
		bad("%s", "50 one-rank communicators from ids left file descriptors open", 0);
	if (smddp_comm_release(NULL) != SMDDP_EINVAL)
		bad("%s", "smddp_comm_release(NULL) is not SMDDP_EINVAL", 0);
	printf("INITRANK-OK rank=0 errors\n");
	return 0;
}

static int timeout(void)
{
	struct smddp_unique_id id;
	struct smddp_config cfg = {sizeof(cfg), 1500};
	struct smddp_comm *c = NULL;
	double t0;
	int rc;

	if ((rc = smddp_get_unique_id(&id)))
		bad("smddp_get_unique_id: %s", smddp_last_error(NULL), rc);
	t0 = sd_now_s();
	rc = smddp_comm_init_rank(&c, 2, &id, 0, &cfg);
	if (rc != SMDDP_ETIMEDOUT || c)
		bad("alone of 2: %s", smddp_last_error(NULL), rc);
	if (sd_now_s() - t0 > 10 || sd_now_s() - t0 < 1.4)
		bad("%s", "the timeout was not timeout_ms", rc);
	if (!strstr(smddp_last_error(NULL), "rank(s) 1"))
		bad("the message does not name rank 1: %s", smddp_last_error(NULL), rc);
	printf("INITRANK-OK rank=0 timeout after %.1f s: %s\n", sd_now_s() - t0, smddp_last_error(NULL));
	return 0;
}

int main(int argc, char **argv)
{
	const char *r = getenv("SMDDP_RANK"), *n = getenv("SMDDP_WORLD_SIZE");

	setvbuf(stdout, NULL, _IOLBF, 0);
	rank = r ? atoi(r) : 0;
	if (argc == 3 && !strcmp(argv[1], "basic"))
		return basic(argv[2], n ? atoi(n) : 1);
	if (argc == 2 && !strcmp(argv[1], "errors"))
		return errors();
	if (argc == 2 && !strcmp(argv[1], "timeout"))
		return timeout();
	fprintf(stderr, "usage: initrank basic DIR | errors | timeout\n");
	return 2;
}
