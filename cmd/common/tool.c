/* cmd/common/tool.c - usage, version and number-parsing boilerplate of the tools */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

static const char *progname = "smddp";
static void (*message_sink)(const char *line, size_t len);

void tool_init(const char *name)
{
	progname = name;
}

const char *tool_name(void)
{
	return progname;
}

void tool_set_message_sink(void (*sink)(const char *line, size_t len))
{
	message_sink = sink;
}

void tool_print_version(void)
{
	printf("%s from %s %s\n", progname, PACKAGE_NAME, PACKAGE_VERSION);
}

static void vwarn(int errnum, const char *fmt, va_list ap)
{
	/* One fprintf per line would let another writer of our stderr cut in;
	 * format the line first and write it at once. */
	char line[1024];
	int n = snprintf(line, sizeof line, "%s: ", progname);
	if (n < 0 || (size_t)n >= sizeof line)
		n = 0;
	int m = vsnprintf(line + n, sizeof line - n, fmt, ap);
	if (m > 0)
		n = (size_t)(n + m) >= sizeof line ? (int)sizeof line - 1 : n + m;
	if (errnum)
		n += snprintf(line + n, sizeof line - n, ": %s", strerror(errnum));
	if ((size_t)n >= sizeof line - 1)
		n = sizeof line - 2;
	line[n++] = '\n';
	if (message_sink) {
		message_sink(line, n);
		return;
	}
	fflush(stdout);
	fwrite(line, 1, n, stderr);
	fflush(stderr);
}

void tool_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vwarn(0, fmt, ap);
	va_end(ap);
}

void tool_warn_errno(const char *fmt, ...)
{
	int e = errno;
	va_list ap;
	va_start(ap, fmt);
	vwarn(e, fmt, ap);
	va_end(ap);
}

noreturn void tool_usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vwarn(0, fmt, ap);
	va_end(ap);
	fprintf(stderr, "Try '%s --help'.\n", progname);
	exit(TOOL_EXIT_USAGE);
}

noreturn void tool_getopt_error(int c, int optopt_value, char *const argv[], int optind_value)
{
	tool_getopt_error_long(c, optopt_value, argv, optind_value, NULL);
}

noreturn void tool_getopt_error_long(int c, int optopt_value, char *const argv[],
                                     int optind_value, const struct option *longopts)
{
	const char *arg = optind_value > 0 ? argv[optind_value - 1] : "";
	/* For a short option, optopt holds it; for a long one, the text is in
	 * argv (possibly with "=value" attached). */
	if (c == ':') {
		if (optopt_value > 0 && optopt_value < 256 && strncmp(arg, "--", 2) != 0)
			tool_usage_error("option requires an argument -- '%c'", optopt_value);
		tool_usage_error("option '%s' requires an argument", arg);
	}
	if (optopt_value > 0 && optopt_value < 256 && strncmp(arg, "--", 2) != 0)
		tool_usage_error("invalid option -- '%c'", optopt_value);
	if (strncmp(arg, "--", 2) == 0 && optopt_value != 0) {
		/* a known long option given a value it does not take */
		tool_usage_error("option '%.*s' does not take an argument",
		                 (int)strcspn(arg, "="), arg);
	}
	if (strncmp(arg, "--", 2) == 0 && longopts) {
		size_t len = strcspn(arg + 2, "=");
		char names[256] = "";
		int matches = 0;
		for (const struct option *o = longopts; o->name; o++) {
			if (strncmp(o->name, arg + 2, len) != 0)
				continue;
			size_t used = strlen(names);
			snprintf(names + used, sizeof names - used, "%s--%s", matches ? ", " : "", o->name);
			matches++;
		}
		if (matches > 1)
			tool_usage_error("option '%.*s' is ambiguous: %s", (int)len + 2, arg, names);
	}
	tool_usage_error("unrecognized option '%s'", arg);
}

int tool_parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	if (!s || !*s)
		return -1;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int tool_parse_double(const char *s, double min, double max, double *out)
{
	char *end;
	if (!s || !*s)
		return -1;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end || !isfinite(v) || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int tool_parse_size(const char *s, uint64_t *out)
{
	char *end;
	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -1;
	if (shift && v > (UINT64_MAX >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}
