/* sd.h - the bottom of libsmddp's internals: logging, the error sink, SD_CHECK.
 *
 * Names: smddp_ is public, sd_<module>_ is library-internal (hidden by the
 * version script and -fvisibility=hidden), statics carry no prefix.
 */
#ifndef SD_SD_H
#define SD_SD_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <smddp/smddp.h>

#define SD_EXPORT __attribute__((visibility("default")))

/* ---- logging (lib/util/log.c) ------------------------------------------
 * SMDDP_DEBUG=WARN|INFO|TRACE (default: WARN), SMDDP_DEBUG_SUBSYS=INIT,BOOT,...
 * (ALL by default; a leading ^ excludes), SMDDP_DEBUG_FILE with %h (host) and
 * %p (pid); otherwise stderr.  Lines look like
 *   host:pid:rank [SMDDP WARN BOOT] message
 */
enum sd_log_level { SD_LOG_NONE = 0, SD_LOG_WARN = 1, SD_LOG_INFO = 2, SD_LOG_TRACE = 3 };
enum sd_subsys {
	SD_SUB_INIT = 1 << 0,
	SD_SUB_BOOT = 1 << 1,
	SD_SUB_SHM = 1 << 2,
	SD_SUB_COLL = 1 << 3,
	SD_SUB_CONFIG = 1 << 4,
	SD_SUB_ENV = 1 << 5,
	SD_SUB_NET = 1 << 6,
	SD_SUB_ALL = 0xffff
};
extern int sd_log_level; /* current level: atomic (relaxed) loads and stores only */
void sd_log_init(void);  /* idempotent, thread-safe */
void sd_log_set_rank(int rank);
void sd_log(int level, unsigned subsys, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
#define SD_LOG_(lvl, sub, ...)                                                      \
	do {                                                                        \
		if (__atomic_load_n(&sd_log_level, __ATOMIC_RELAXED) >= (lvl))     \
			sd_log((lvl), (sub), __FILE__, __LINE__, __VA_ARGS__);      \
	} while (0)
#define SD_WARN(sub, ...) SD_LOG_(SD_LOG_WARN, sub, __VA_ARGS__)
#define SD_INFO(sub, ...) SD_LOG_(SD_LOG_INFO, sub, __VA_ARGS__)
#define SD_TRACE(sub, ...) SD_LOG_(SD_LOG_TRACE, sub, __VA_ARGS__)
/* Parsers of the settings above, for the parameter registry's checks. */
int sd_log_parse_level(const char *s); /* -1 when invalid */
int sd_log_parse_subsys(const char *s, unsigned *mask, char *bad, size_t badlen);
/* Late configuration from the config file; NULL leaves that setting as it is. */
void sd_log_reconfigure(const char *level, const char *subsys, const char *file);

/* ---- errors (lib/util/err.c) ---------------------------------------------
 * The one error idiom (docs/internals/errors.md): a function that can fail
 * returns an enum smddp_result, 0 or positive, and leaves its sentence in the
 * struct sd_err its caller handed it (a communicator's failures go to
 * sd_comm_error() instead).  sd_err_set() formats into e (which may be NULL:
 * the sentence is then dropped; the format may name e->msg itself) and
 * returns rc, so a failure reads return sd_err_set(err, SMDDP_EINVAL, ...).
 */
#define SD_ERR_LEN 1024
struct sd_err {
	char msg[SD_ERR_LEN]; /* "" until a failure */
};
int sd_err_set(struct sd_err *e, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int sd_err_vset(struct sd_err *e, int rc, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));
static inline void sd_err_clear(struct sd_err *e)
{
	if (e)
		e->msg[0] = '\0';
}

/* Breadcrumbs on the way up (NCCL's NCCLCHECK). */
#define SD_CHECK(call)                                                              \
	do {                                                                        \
		int sd_rc_ = (call);                                                \
		if (sd_rc_ != SMDDP_OK) {                                           \
			SD_TRACE(SD_SUB_ALL, "%s -> %d", #call, sd_rc_);            \
			return sd_rc_;                                              \
		}                                                                   \
	} while (0)
#define SD_CHECK_GOTO(call, rc, label)                                              \
	do {                                                                        \
		(rc) = (call);                                                      \
		if ((rc) != SMDDP_OK) {                                             \
			SD_TRACE(SD_SUB_ALL, "%s -> %d", #call, (rc));              \
			goto label;                                                 \
		}                                                                   \
	} while (0)

/* ---- this machine (lib/util/bootid.c) -------------------------------------
 * The kernel's boot id (a UUID, /proc/sys/kernel/random/boot_id) into buf,
 * without its newline; its length, 0 (buf "") where it cannot be read.
 */
#define SD_BOOT_ID_LEN 40 /* the 36 characters of a UUID, its newline, the NUL */
size_t sd_boot_id(char *buf, size_t len);

/* Retry on EINTR. */
#define SD_RETRY_EINTR(expr)                                                        \
	({                                                                          \
		long sd_r_;                                                         \
		do                                                                  \
			sd_r_ = (long)(expr);                                       \
		while (sd_r_ == -1 && errno == EINTR);                              \
		sd_r_;                                                              \
	})

#endif
