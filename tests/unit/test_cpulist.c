/* test_cpulist.c - sd_text_cpulist() on the lists the kernel writes, and on malformed ones. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "text/cpulist.h"
#include "check.h"


struct seen {
	char buf[256];
	int stop_at; /* fn fails at this CPU; -1: never */
};

static int add(void *arg, int cpu)
{
	struct seen *s = arg;
	size_t n = strlen(s->buf);

	if (cpu == s->stop_at)
		return -1;
	snprintf(s->buf + n, sizeof(s->buf) - n, "%s%d", n ? " " : "", cpu);
	return 0;
}

static void check(const char *list, int stop_at, int want_rc, const char *want)
{
	struct seen s = { "", stop_at };
	int rc = sd_text_cpulist(list, add, &s);

	if (rc != want_rc || strcmp(s.buf, want) != 0) {
		FAIL("'%s': %d '%s', expected %d '%s'", list, rc, s.buf, want_rc, want);
	} else {
		printf("ok   '%s': %d '%s'\n", list, rc, s.buf);
	}
}

int main(void)
{
	check("0-3,8,10-11", -1, 0, "0 1 2 3 8 10 11");
	check("0-3\n", -1, 0, "0 1 2 3");
	check("5", -1, 0, "5");
	check("0,", -1, 0, "0");
	check("", -1, 0, "");
	check("\n", -1, 0, "");
	check("3-1", -1, -1, "");
	check("1,x", -1, -1, "1");
	check("1 2", -1, -1, "1");
	check("0-", -1, -1, "");
	check("0-3", 2, -1, "0 1");
	return check_done("test_cpulist");
}
