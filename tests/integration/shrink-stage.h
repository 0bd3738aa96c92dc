/* shrink-stage.h - what the shrink tests share (tests/integration/shrink.c, tests/gpu/gpu-shrink.c):
 * the failure line the scripts look for, SHRINK_FLAGS, and the ranks of a STAGE.
 *
 * Header only, for one file of each program: the statics are that file's.
 */
#ifndef SD_TESTS_SHRINK_STAGE_H
#define SD_TESTS_SHRINK_STAGE_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <smddp/smddp.h>

/* This process's world rank, which the failure line names (-1: not known yet). */
static int wrank = -1;

/* "SHRINK-BAD rank=R: why", then exit 1. */
static void bad(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void bad(const char *fmt, ...)
{
	va_list ap;

	printf("SHRINK-BAD rank=%d: ", wrank);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(1);
}

/* SHRINK_FLAGS=abort: SMDDP_SHRINK_ABORT, else the default flags. */
static inline int shrink_flags(void)
{
	const char *fl = getenv("SHRINK_FLAGS");

	return fl && !strcmp(fl, "abort") ? SMDDP_SHRINK_ABORT : SMDDP_SHRINK_DEFAULT;
}

/* The world ranks of a STAGE ("0", "1+3") into v[max]; returns how many. */
static inline int shrink_stage_ranks(const char *s, int *v, int max)
{
	int n = 0;

	while (*s && n < max) {
		v[n++] = atoi(s);
		s = strchr(s, '+');
		if (!s)
			break;
		s++;
	}
	return n;
}

#endif
