/* clock/clock.h - the one monotonic clock of the library, the tools and the tests.
 *
 * libc only and header only, at the bottom of the layers (as curl's
 * lib/curlx/timeval.h serves libcurl and the curl tool): every deadline,
 * heartbeat and timing of libsmddp, of smddp-run and the other tools, and
 * of the test programs reads CLOCK_MONOTONIC through these.  Static inline
 * rather than a .c file compiled twice: the tools link the public API only
 * (smddp-run does not link libsmddp at all) and the library hides its
 * internal symbols, so an inline header is the one form that both sides
 * (and a test built against the public header alone) can share without an
 * object in two archives or a symbol in the ABI.
 */
#ifndef SD_CLOCK_H
#define SD_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds of CLOCK_MONOTONIC: one clock for every process of the host. */
static inline uint64_t sd_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Milliseconds of the same clock, for poll() timeouts and the tools' deadlines. */
static inline int64_t sd_now_ms(void)
{
	return (int64_t)(sd_now_ns() / 1000000ull);
}

/* Seconds of the same clock, for measurements. */
static inline double sd_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A duration in seconds (a flag, a parameter) as milliseconds, rounded. */
static inline int64_t sd_ms_from_s(double s)
{
	return (int64_t)(s * 1000.0 + 0.5);
}

#endif
