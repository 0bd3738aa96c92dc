/* text/cpulist.c - the kernel's cpu lists: one parser for the library and the tools */
#include "config.h"

#include <stdlib.h>

#include "text/cpulist.h"

int sd_text_cpulist(const char *s, int (*fn)(void *arg, int cpu), void *arg)
{
	while (*s && *s != '\n') {
		char *end;
		long a = strtol(s, &end, 10), b = a;

		if (end == s)
			return -1;
		if (*end == '-') {
			s = end + 1;
			b = strtol(s, &end, 10);
			if (end == s || b < a)
				return -1;
		}
		for (long i = a; i <= b; i++)
			if (fn(arg, (int)i) != 0)
				return -1;
		s = end;
		if (*s == ',')
			s++;
		else if (*s != '\0' && *s != '\n')
			return -1;
	}
	return 0;
}
