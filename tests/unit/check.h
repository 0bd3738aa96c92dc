/* check.h - CHECK() of the unit tests: one line "ok" or "FAIL" per check, the failures counted.
 *
 * cond is evaluated once (it may call the code under test); a failed
 * check names its condition.  A forked child that checks for itself sets
 * failures to 0 first: the parent's count is not the child's.
 */
#ifndef SD_TESTS_UNIT_CHECK_H
#define SD_TESTS_UNIT_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                                    \
	do {                                                                                \
		int ok_ = !!(cond);                                                         \
		printf("%s ", ok_ ? "ok  " : "FAIL");                                        \
		printf(__VA_ARGS__);                                                        \
		printf("%s\n", ok_ ? "" : "   <-- " #cond);                                   \
		if (!ok_)                                                                   \
			failures++;                                                         \
	} while (0)

#endif
