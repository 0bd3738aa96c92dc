/* check.h - the checks of every unit test (tests/unit/test_*.c), as curl's tests/unit/curlcheck.h.
 *
 * CHECK(cond, fmt, ...): one line "ok" or "FAIL" per check, the failures
 * counted; cond is evaluated once (it may call the code under test) and a
 * failed check names it.  FAIL(fmt, ...): a failure that the test found by
 * its own comparison (a table of cases, a sweep); the first 30 are printed,
 * all with VERBOSE set.  check_done(name): the summary line and the exit
 * status (0, or 1 with failures).  A forked child that checks for itself
 * sets failures to 0 first: the parent's count is not the child's.  The
 * multi-rank bootstrap tests say which rank checked: their CHECK(ctx, ...)
 * (test_bootstrap.h) prints through say() and counts in ctx->bad.
 *
 * count_fds(): this process's open descriptors (-1 if /proc is not there),
 * for the leak checks of every C test, unit or not (tests/integration/,
 * tests/gpu/ include this file for it).
 */
#ifndef SD_TESTS_UNIT_CHECK_H
#define SD_TESTS_UNIT_CHECK_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

/* unused in the tests that include this file only for count_fds() */
static int failures __attribute__((unused));

#define CHECK(cond, ...)                                                                    \
	do {                                                                                \
		int ok_ = !!(cond);                                                         \
		printf("%s ", ok_ ? "ok  " : "FAIL");                                        \
		printf(__VA_ARGS__);                                                        \
		printf("%s\n", ok_ ? "" : "   <-- " #cond);                                   \
		if (!ok_)                                                                   \
			failures++;                                                         \
	} while (0)

#define FAIL(...)                                                                           \
	do {                                                                                \
		if (failures++ < 30 || getenv("VERBOSE")) {                                 \
			printf("FAIL ");                                                    \
			printf(__VA_ARGS__);                                                \
			printf("\n");                                                       \
		}                                                                           \
	} while (0)

static inline int check_done(const char *name)
{
	printf("%s: %s, %d failure(s)\n", name, failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}

static inline int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d);
	closedir(d);
	return n;
}

#endif
