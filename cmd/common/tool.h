/* cmd/common/tool.h - helpers shared by the smddp command-line tools (not installed) */
#ifndef SMDDP_CMD_TOOL_H
#define SMDDP_CMD_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdnoreturn.h>

/* Exit codes every tool shares; each man page lists them under EXIT STATUS. */
enum {
	TOOL_EXIT_OK = 0,
	TOOL_EXIT_FAILURE = 1,  /* runtime failure */
	TOOL_EXIT_USAGE = 2,    /* bad command line */
	TOOL_EXIT_CHECK = 3,    /* a check failed (wrong data, below a floor...) */
};

#if defined(__GNUC__)
#define TOOL_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TOOL_PRINTF(f, a)
#endif

/* Sets the name used in messages ("smddp-run"), independent of argv[0]. */
void tool_init(const char *name);
const char *tool_name(void);

/* "NAME from libsmddp X.Y.Z" on stdout. */
void tool_print_version(void);

/* "NAME: message" on stderr; the _errno form appends ": strerror(errno)".
 * A tool that multiplexes its stderr (smddp-run) can take the formatted
 * line ('\n'-terminated) instead, to keep it whole and in order. */
void tool_set_message_sink(void (*sink)(const char *line, size_t len));
void tool_warn(const char *fmt, ...) TOOL_PRINTF(1, 2);
void tool_warn_errno(const char *fmt, ...) TOOL_PRINTF(1, 2);

/* "NAME: message" and "Try 'NAME --help'." on stderr, then exit 2. */
noreturn void tool_usage_error(const char *fmt, ...) TOOL_PRINTF(1, 2);

/* Reports a getopt_long() failure ('?' or ':' returned with opterr = 0 and
 * an optstring starting with "+:" or ":") as a usage error. The _long form
 * also names the candidates of an ambiguous abbreviation ("--ma"). */
struct option;
noreturn void tool_getopt_error(int c, int optopt_value, char *const argv[], int optind_value);
noreturn void tool_getopt_error_long(int c, int optopt_value, char *const argv[],
                                     int optind_value, const struct option *longopts);

/* Strict number parsing: the whole string, within [min, max]. 0 or -1. */
int tool_parse_long(const char *s, long min, long max, long *out);
int tool_parse_double(const char *s, double min, double max, double *out);

/* Byte sizes like nccl-tests: "8", "64K", "64M", "1G" (binary multiples,
 * optional trailing "B"). 0 or -1 on syntax error or overflow. */
int tool_parse_size(const char *s, uint64_t *out);

#endif /* SMDDP_CMD_TOOL_H */
