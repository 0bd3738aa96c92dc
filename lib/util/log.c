/* log.c - leveled, per-subsystem logging to stderr or SMDDP_DEBUG_FILE.
 *
 * Logging must work before anything else does (the config file is read
 * later, by sd_params_load()), so it reads SMDDP_DEBUG, SMDDP_DEBUG_SUBSYS
 * and SMDDP_DEBUG_FILE straight from the environment, once (pthread_once).
 * Values from the config file arrive later through sd_log_reconfigure().
 *
 * sd_log_level starts at TRACE so that the first SD_WARN/SD_INFO/SD_TRACE
 * anywhere reaches sd_log(), which initialises and then filters; after that
 * the macros skip disabled levels with one load.  Every line is formatted
 * into one buffer and written with one write(), so that lines of concurrent
 * threads (and of processes sharing an O_APPEND file) never interleave.
 * WARN lines are shown whatever SMDDP_DEBUG_SUBSYS says: the subsystem
 * filter is there to cut INFO and TRACE noise, not to hide problems.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/sd.h"

int sd_log_level = SD_LOG_TRACE; /* until sd_log_init() has run */

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t reconf_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned subsys_mask = SD_SUB_ALL;
static int log_fd = STDERR_FILENO;
static int log_rank = -1;
static char host[64] = "?";

static const struct {
	const char *name;
	unsigned bit;
} subsystems[] = {
	{"INIT", SD_SUB_INIT}, {"BOOT", SD_SUB_BOOT},	  {"SHM", SD_SUB_SHM}, {"COLL", SD_SUB_COLL},
	{"CONFIG", SD_SUB_CONFIG}, {"ENV", SD_SUB_ENV}, {"NET", SD_SUB_NET}, {"ALL", SD_SUB_ALL},
};

static const char *const level_names[] = {"NONE", "WARN", "INFO", "TRACE"};

int sd_log_parse_level(const char *s)
{
	if (s == NULL)
		return -1;
	if (strcasecmp(s, "OFF") == 0)
		return SD_LOG_NONE;
	for (int i = SD_LOG_NONE; i <= SD_LOG_TRACE; i++)
		if (strcasecmp(s, level_names[i]) == 0)
			return i;
	return -1;
}

/* "INIT,BOOT" enables those; "^SHM,COLL" enables all but those.  Unknown
 * names are skipped; the first one goes into bad and -1 is returned. */
int sd_log_parse_subsys(const char *s, unsigned *mask, char *bad, size_t badlen)
{
	unsigned m = 0;
	int exclude = 0, rc = 0;
	const char *p = s;

	if (bad != NULL && badlen > 0)
		bad[0] = '\0';
	if (*p == '^') {
		exclude = 1;
		p++;
	}
	while (*p != '\0') {
		size_t len = strcspn(p, ",");
		const char *tok = p;
		size_t tlen = len;
		int found = 0;

		while (tlen > 0 && (*tok == ' ' || *tok == '\t')) {
			tok++;
			tlen--;
		}
		while (tlen > 0 && (tok[tlen - 1] == ' ' || tok[tlen - 1] == '\t'))
			tlen--;
		if (tlen > 0) {
			for (size_t i = 0; i < sizeof(subsystems) / sizeof(subsystems[0]); i++) {
				if (strlen(subsystems[i].name) == tlen &&
				    strncasecmp(subsystems[i].name, tok, tlen) == 0) {
					m |= subsystems[i].bit;
					found = 1;
					break;
				}
			}
			if (!found && rc == 0) {
				rc = -1;
				if (bad != NULL && badlen > 0)
					snprintf(bad, badlen, "%.*s", (int)tlen, tok);
			}
		}
		p += len;
		if (*p == ',')
			p++;
	}
	*mask = exclude ? (SD_SUB_ALL & ~m) : m;
	return rc;
}

static const char *subsys_name(unsigned sub)
{
	if ((sub & SD_SUB_ALL) == SD_SUB_ALL)
		return "ALL";
	for (size_t i = 0; i < sizeof(subsystems) / sizeof(subsystems[0]); i++)
		if (sub & subsystems[i].bit)
			return subsystems[i].name;
	return "ALL";
}

static void write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* nowhere left to complain to */
		buf += n;
		len -= (size_t)n;
	}
}

/* Formats and writes one line; no initialisation, no filtering. */
static void emit(int level, unsigned sub, const char *file, int line, const char *fmt, va_list ap)
{
	char buf[4096];
	char rank[16] = "-";
	int r = __atomic_load_n(&log_rank, __ATOMIC_RELAXED);
	size_t n, cap = sizeof(buf) - 1; /* room for the newline */
	int k;

	if (r >= 0)
		snprintf(rank, sizeof(rank), "%d", r);
	k = snprintf(buf, cap, "%s:%d:%s [SMDDP %s %s] ", host, (int)getpid(), rank,
		     level_names[level], subsys_name(sub));
	n = k < 0 ? 0 : ((size_t)k < cap ? (size_t)k : cap - 1);
	if (level >= SD_LOG_TRACE && file != NULL) {
		const char *base = strrchr(file, '/');

		k = snprintf(buf + n, cap - n, "%s:%d ", base ? base + 1 : file, line);
		if (k > 0)
			n = (size_t)k < cap - n ? n + (size_t)k : cap - 1;
	}
	k = vsnprintf(buf + n, cap - n, fmt, ap);
	if (k > 0)
		n = (size_t)k < cap - n ? n + (size_t)k : cap - 1;
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n++] = '\n';
	write_all(__atomic_load_n(&log_fd, __ATOMIC_ACQUIRE), buf, n);
}

static void emit_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit_warn(const char *fmt, ...)
{
	va_list ap;

	if (sd_log_level < SD_LOG_WARN)
		return;
	va_start(ap, fmt);
	emit(SD_LOG_WARN, SD_SUB_INIT, __FILE__, __LINE__, fmt, ap);
	va_end(ap);
}

/* Expands %h (host), %p (pid) and %% in a SMDDP_DEBUG_FILE pattern. */
static void expand_path(const char *pat, char *out, size_t outlen)
{
	size_t n = 0;

	for (const char *p = pat; *p != '\0' && n + 1 < outlen; p++) {
		int k = 0;

		if (p[0] == '%' && p[1] == 'h') {
			k = snprintf(out + n, outlen - n, "%s", host);
			p++;
		} else if (p[0] == '%' && p[1] == 'p') {
			k = snprintf(out + n, outlen - n, "%d", (int)getpid());
			p++;
		} else if (p[0] == '%' && p[1] == '%') {
			out[n] = '%';
			k = 1;
			p++;
		} else {
			out[n] = *p;
			k = 1;
		}
		if (k < 0)
			break;
		n = n + (size_t)k < outlen ? n + (size_t)k : outlen - 1;
	}
	out[n] = '\0';
}

/* Points logging at the file named by pattern; warns and keeps the current
 * destination when it cannot be opened.  A new file is private (0600): a
 * log names hosts, pids and addresses.  The last component must not be a
 * symbolic link (O_NOFOLLOW): a link planted in a shared directory such as
 * /tmp would otherwise turn a root rank's log into a write to any file.  The old descriptor stays open: a
 * thread may be writing to it right now, and this happens at most a couple
 * of times per process. */
static void open_log_file(const char *pattern, const char *what)
{
	char path[PATH_MAX];
	int fd;

	expand_path(pattern, path, sizeof(path));
	fd = SD_RETRY_EINTR(open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
	if (fd < 0) {
		int e = errno;

		if (e == ELOOP) {
			emit_warn("%s: \"%s\" is a symbolic link, which a log file may not be (a link in a "
				  "shared directory could send the log anywhere): name the file itself, or "
				  "remove the link; logging to stderr instead",
				  what, path);
			return;
		}
		emit_warn("%s: cannot open \"%s\": %s; logging to stderr instead", what, path,
			  strerror(e));
		return;
	}
	__atomic_store_n(&log_fd, fd, __ATOMIC_RELEASE);
}

static void log_init_once(void)
{
	const char *lv = getenv("SMDDP_DEBUG");
	const char *ss = getenv("SMDDP_DEBUG_SUBSYS");
	const char *fp = getenv("SMDDP_DEBUG_FILE");
	int level = SD_LOG_WARN, bad_level = 0;
	char bad_sub[64] = "";
	unsigned mask = SD_SUB_ALL;

	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "?");
	host[sizeof(host) - 1] = '\0';
	host[strcspn(host, ".")] = '\0'; /* short name, like NCCL */

	if (lv != NULL && *lv != '\0') {
		int l = sd_log_parse_level(lv);

		if (l < 0)
			bad_level = 1;
		else
			level = l;
	}
	if (ss != NULL && *ss != '\0')
		sd_log_parse_subsys(ss, &mask, bad_sub, sizeof(bad_sub));
	__atomic_store_n(&subsys_mask, mask, __ATOMIC_RELAXED);
	__atomic_store_n(&sd_log_level, level, __ATOMIC_RELAXED);

	/* The file first, so that the warnings below land in it. */
	if (fp != NULL && *fp != '\0')
		open_log_file(fp, "SMDDP_DEBUG_FILE");
	if (bad_level)
		emit_warn("SMDDP_DEBUG=\"%s\" is not one of NONE, WARN, INFO, TRACE; using WARN",
			  lv);
	if (bad_sub[0] != '\0')
		emit_warn("SMDDP_DEBUG_SUBSYS=\"%s\": unknown subsystem \"%s\" ignored "
			  "(known: INIT, BOOT, SHM, COLL, CONFIG, ENV, NET, ALL)",
			  ss, bad_sub);
}

void sd_log_init(void)
{
	pthread_once(&log_once, log_init_once);
}

void sd_log_set_rank(int rank)
{
	__atomic_store_n(&log_rank, rank, __ATOMIC_RELAXED);
}

void sd_log(int level, unsigned subsys, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	sd_log_init();
	if (level <= SD_LOG_NONE || level > SD_LOG_TRACE ||
	    level > __atomic_load_n(&sd_log_level, __ATOMIC_RELAXED))
		return;
	if (level > SD_LOG_WARN &&
	    (subsys & __atomic_load_n(&subsys_mask, __ATOMIC_RELAXED)) == 0)
		return;
	va_start(ap, fmt);
	emit(level, subsys, file, line, fmt, ap);
	va_end(ap);
}

void sd_log_reconfigure(const char *level, const char *subsys, const char *file)
{
	sd_log_init();
	pthread_mutex_lock(&reconf_lock);
	if (file != NULL && *file != '\0')
		open_log_file(file, "debug_file");
	if (level != NULL) {
		int l = sd_log_parse_level(level);

		if (l >= 0)
			__atomic_store_n(&sd_log_level, l, __ATOMIC_RELAXED);
	}
	if (subsys != NULL && *subsys != '\0') {
		unsigned m;

		sd_log_parse_subsys(subsys, &m, NULL, 0);
		__atomic_store_n(&subsys_mask, m, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&reconf_lock);
}
