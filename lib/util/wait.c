/* wait.c - the one wait loop: spin, then sleep, with a liveness check and a deadline.
 *
 * Why spin first: a peer that runs on its own core usually answers within
 * microseconds, far less than a futex round trip or a blocking read
 * (tens of microseconds, and a trip through the scheduler); so the loop
 * polls w->spin times (pausing between polls, and yielding every
 * yield_mask + 1 polls so that a peer sharing this core gets to run).
 * Why sleep then: with more ranks than cores, or a peer that is simply
 * late, polling burns the core the peer needs; asleep the rank costs
 * nothing and is woken by the peer (doorbell, completion queue) or by its
 * own timer.  While asleep it wakes at least every liveness period to ask
 * health() whether what it waits for can still come, and gives up at the
 * deadline.  Progress (SD_WAIT_MOVED) starts the spin and the deadline
 * again: a long transfer that moves is not stuck.
 *
 * The first polls run in line in the caller (sd_wait() in wait.h), where
 * ready() is inlined; what follows them, here, calls through the pointers.
 *
 * Slow yields: with CPU-bound processes in the rank's own session (one
 * autogroup: a make or a CI run started from the same shell) the scheduler
 * puts a yielder behind every one of them, so a yield lasts a time slice
 * (4 ms with HZ 250), and the peer's arrival waits for it: two ranks beside
 * two busy loops took 4-8 ms a 64 KiB allreduce, their yields 0.5-7.6 ms,
 * most over 2 ms.  A sleeper woken by the peer's doorbell runs again at
 * once, so where two of the last SLOW_NEAR yields took SLOW_YIELD_NS or
 * more (one alone is, now and then, another session's task that got the
 * core) the spins sleep instead of yielding, for a window: NAP_MIN_NS,
 * times NAP_GROW while the yield that ends it is slow again, up to
 * NAP_MAX_NS, divided when it is quick (each such yield can cost a slice,
 * so there are few).  A sleep costs the peer a futex wake and this rank a
 * wake-up, more than a quick yield: quick yields stay the rule.  The state
 * is the process's: the scheduler treats its threads alike.
 */
#include "config.h"

#include "clock/clock.h"
#include "util/sd.h"
#include "util/wait.h"

#define SLOW_YIELD_NS 2000000ull
#define SLOW_NEAR 16
#define NAP_MIN_NS 20000000ull
#define NAP_GROW 4
#define NAP_MAX_NS 1000000000ull

/* Relaxed: a race between threads only moves a window or a count. */
static uint64_t slow_yield_ns = SLOW_YIELD_NS;
static uint64_t nap_until, nap_for;
static unsigned nyields, last_slow;

void sd_wait_set_slow_yield_ns(uint64_t ns)
{
	__atomic_store_n(&slow_yield_ns, ns, __ATOMIC_RELAXED);
	__atomic_store_n(&nap_until, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&nap_for, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&nyields, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&last_slow, 0, __ATOMIC_RELAXED);
}

/* Every yield is timed, so that the first slow ones are seen: two clock
 * reads cost about a twentieth of a quick yield (23 and 500 ns here). */
int sd_wait_yield(void)
{
	uint64_t t = sd_now_ns(), d, n;
	unsigned k, last;

	if (t < __atomic_load_n(&nap_until, __ATOMIC_RELAXED))
		return 1;
	sched_yield();
	d = sd_now_ns() - t;
	k = __atomic_load_n(&nyields, __ATOMIC_RELAXED) + 1;
	__atomic_store_n(&nyields, k, __ATOMIC_RELAXED);
	n = __atomic_load_n(&nap_for, __ATOMIC_RELAXED);
	if (d >= __atomic_load_n(&slow_yield_ns, __ATOMIC_RELAXED)) {
		last = __atomic_load_n(&last_slow, __ATOMIC_RELAXED);
		__atomic_store_n(&last_slow, k, __ATOMIC_RELAXED);
		if (n)
			n = NAP_GROW * n < NAP_MAX_NS ? NAP_GROW * n : NAP_MAX_NS;
		else if (last && k - last <= SLOW_NEAR)
			n = NAP_MIN_NS;
		else
			return 0;
	} else if (n) {
		n = n / NAP_GROW < NAP_MIN_NS ? 0 : n / NAP_GROW;
	} else {
		return 0;
	}
	__atomic_store_n(&nap_for, n, __ATOMIC_RELAXED);
	__atomic_store_n(&nap_until, n ? t + d + n : 0, __ATOMIC_RELAXED);
	return 0;
}

int sd_wait_more(struct sd_wait *w, int state, int rc, int spins)
{
	uint64_t now, spun = 0, next_health = 0, nap = 0, ns;
	int look = 0, asleep = 0;

	/* The deadline counts from here, the spin included: on a loaded core
	 * each sched_yield() can give away a whole time slice, so a spin
	 * bounded by its count alone can outlast the deadline. */
	w->start = sd_now_ns();
	w->expired = 0;
	for (;; state = w->ready(w->arg, &rc)) {
	seen:
		switch (state) {
		case SD_WAIT_DONE:
			return SMDDP_OK;
		case SD_WAIT_FAILED:
			return rc;
		case SD_WAIT_MOVED:
			spins = 0;
			spun = 0;
			asleep = 0;
			w->start = sd_now_ns();
			continue;
		case SD_WAIT_LOOK:
			/* Ask now, not at the end of the spin or of the
			 * liveness period: the answer is likely an error. */
			look = 1;
			break;
		default:
			break;
		}
		if (w->stop && __atomic_load_n(w->stop, __ATOMIC_ACQUIRE))
			return SMDDP_EABORTED;
		if (!look && spins < w->spin) {
			int yield = (++spins & w->yield_mask) == 0;

			if (!yield)
				sd_cpu_relax();
			else if (!w->yield_mask)
				sched_yield();
			else if (sd_wait_yield())
				spins = w->spin;
			/* The clock is read now and then only: it costs more
			 * than a poll of shared memory. */
			if (yield || (w->spin_ns && (spins & 15) == 0)) {
				now = sd_now_ns();
				if (!spun)
					spun = now;
				if ((w->spin_ns && now - spun >= w->spin_ns) ||
				    now - w->start >= w->timeout_ns)
					spins = w->spin;
			}
			continue;
		}
		now = sd_now_ns();
		if (!asleep) {
			asleep = 1;
			next_health = now + w->liveness_ns;
			nap = w->nap_ns;
		}
		/* Root causes before the deadline: a peer that died is the
		 * reason, not the time it made this rank wait. */
		if (look || now >= next_health || now - w->start >= w->timeout_ns) {
			look = 0;
			if (w->health) {
				rc = w->health(w->arg);
				if (rc != SMDDP_OK)
					return rc;
			}
			next_health = now + w->liveness_ns;
		}
		if (now - w->start >= w->timeout_ns) {
			w->expired = 1;
			return SMDDP_ETIMEDOUT;
		}
		ns = nap ? nap : UINT64_MAX;
		if (w->liveness_ns && next_health - now < ns)
			ns = next_health - now;
		if (w->timeout_ns - (now - w->start) < ns)
			ns = w->timeout_ns - (now - w->start);
		state = w->sleep(w->arg, ns, &rc);
		if (nap && nap < w->nap_max_ns)
			nap = 2 * nap < w->nap_max_ns ? 2 * nap : w->nap_max_ns;
		if (state != SD_WAIT_NOT_YET)
			goto seen;
	}
}
