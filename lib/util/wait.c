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
 */
#include "config.h"

#include "clock/clock.h"
#include "util/sd.h"
#include "util/wait.h"

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

			if (yield)
				sched_yield();
			else
				sd_cpu_relax();
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
