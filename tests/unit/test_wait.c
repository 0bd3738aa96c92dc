/* test_wait.c - the wait loop of lib/util/wait.c: its results, its deadline, its liveness cadence. */
#include "config.h"

#include <stdio.h>
#include <time.h>

#include "check.h"
#include "clock/clock.h"
#include "util/sd.h"
#include "util/wait.h"

/* A scripted waiter: done after `done_after` polls (0: never), progress
 * every `move_every` polls until `move_until` (ns since the start), an
 * error from health() after `sick_after` health calls, and so on. */
struct fake {
	int polls, sleeps, healths;
	int done_after, move_every, sick_after, look_at, fail_at, done_in_sleep;
	uint64_t move_until, t0, moved, slept_max, slept_min;
	int stop;
};

static int ready(void *arg, int *rc)
{
	struct fake *f = arg;

	f->polls++;
	if (f->fail_at && f->polls == f->fail_at) {
		*rc = SMDDP_ENETWORK;
		return SD_WAIT_FAILED;
	}
	if (f->done_after && f->polls >= f->done_after)
		return SD_WAIT_DONE;
	if (f->look_at && f->polls == f->look_at)
		return SD_WAIT_LOOK;
	if (f->move_every && f->polls % f->move_every == 0 && sd_now_ns() - f->t0 < f->move_until) {
		f->moved = sd_now_ns();
		return SD_WAIT_MOVED;
	}
	return SD_WAIT_NOT_YET;
}

static int nap(void *arg, uint64_t ns, int *rc)
{
	struct fake *f = arg;
	struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(ns < 1000000 ? ns : 1000000)};

	(void)rc;
	f->sleeps++;
	if (ns > f->slept_max)
		f->slept_max = ns;
	if (!f->slept_min || ns < f->slept_min)
		f->slept_min = ns;
	if (f->done_in_sleep && f->sleeps >= f->done_in_sleep)
		return SD_WAIT_DONE;
	nanosleep(&ts, NULL);
	return SD_WAIT_NOT_YET;
}

static int health(void *arg)
{
	struct fake *f = arg;

	f->healths++;
	return f->sick_after && f->healths >= f->sick_after ? SMDDP_EPEER : SMDDP_OK;
}

static struct sd_wait waiter(struct fake *f)
{
	struct sd_wait w = {
		.spin = 100,
		.yield_mask = 15,
		.nap_ns = 0,
		.liveness_ns = 20000000ull, /* 20 ms */
		.timeout_ns = 200000000ull, /* 200 ms */
		.stop = &f->stop,
		.ready = ready,
		.sleep = nap,
		.health = health,
		.arg = f,
	};

	f->t0 = sd_now_ns();
	return w;
}

int main(void)
{
	struct fake f;
	struct sd_wait w;
	uint64_t t;
	int rc;

	f = (struct fake){.done_after = 1};
	w = waiter(&f);
	rc = sd_wait(&w);
	CHECK(rc == SMDDP_OK && f.polls == 1 && f.sleeps == 0 && w.start == 0,
	      "ready at once: OK after one poll, no sleep (%d polls)", f.polls);

	f = (struct fake){.done_after = 50};
	w = waiter(&f);
	rc = sd_wait(&w);
	CHECK(rc == SMDDP_OK && f.sleeps == 0, "ready within the spin: no sleep (%d)", f.sleeps);

	f = (struct fake){.done_in_sleep = 3};
	w = waiter(&f);
	rc = sd_wait(&w);
	CHECK(rc == SMDDP_OK && f.polls == 100 + 3 && w.start != 0,
	      "spins 100 polls, then sleeps; done seen while going to sleep (%d polls)", f.polls);

	f = (struct fake){0};
	w = waiter(&f);
	rc = sd_wait(&w);
	t = sd_now_ns() - f.t0;
	CHECK(rc == SMDDP_ETIMEDOUT && w.expired, "nothing comes: SMDDP_ETIMEDOUT, expired (%d)", rc);
	CHECK(t >= 200000000ull && t < 2000000000ull, "after the deadline, not long after (%.0f ms)",
	      (double)t / 1e6);
	CHECK(f.healths >= 2 && f.healths <= 12, "health every liveness period (%d in 200 ms)",
	      f.healths);
	CHECK(f.slept_max <= 20000000ull, "sleeps no longer than the liveness period (%.1f ms)",
	      (double)f.slept_max / 1e6);

	f = (struct fake){.sick_after = 2};
	w = waiter(&f);
	rc = sd_wait(&w);
	t = sd_now_ns() - f.t0;
	CHECK(rc == SMDDP_EPEER && f.healths == 2 && !w.expired,
	      "health's result ends the wait, not expired (%d)", rc);
	CHECK(t >= 35000000ull && t < 1000000000ull, "at the second liveness tick (%.0f ms)",
	      (double)t / 1e6);

	f = (struct fake){.sick_after = 1, .look_at = 5};
	w = waiter(&f);
	rc = sd_wait(&w);
	CHECK(rc == SMDDP_EPEER && f.polls == 5 && f.sleeps == 0,
	      "SD_WAIT_LOOK asks health at once, mid-spin (%d polls)", f.polls);

	f = (struct fake){.fail_at = 150};
	w = waiter(&f);
	rc = sd_wait(&w);
	CHECK(rc == SMDDP_ENETWORK, "a failed poll's rc is the result (%d)", rc);

	/* Progress every 10 polls for 300 ms: 100 ms more than the timeout,
	 * which counts from the last progress (on a loaded machine the last
	 * one can come a little before 300 ms). */
	f = (struct fake){.move_every = 10, .move_until = 300000000ull};
	w = waiter(&f);
	rc = sd_wait(&w);
	t = sd_now_ns();
	CHECK(rc == SMDDP_ETIMEDOUT && f.moved - f.t0 > 200000000ull &&
		      t - f.moved >= 200000000ull,
	      "progress restarts the deadline (last progress at %.0f ms, over at %.0f ms)",
	      (double)(f.moved - f.t0) / 1e6, (double)(t - f.t0) / 1e6);

	/* The same without a stop word, where sd_wait() spins in line and
	 * must restart its spin on progress itself. */
	f = (struct fake){.move_every = 10, .done_after = 500, .move_until = 1000000000ull};
	w = waiter(&f);
	w.stop = NULL;
	rc = sd_wait(&w);
	CHECK(rc == SMDDP_OK && f.polls == 500 && f.sleeps == 0,
	      "in line: progress restarts the spin, no sleep (%d polls, %d sleeps)", f.polls,
	      f.sleeps);
	f = (struct fake){.move_every = 10, .move_until = 300000000ull};
	w = waiter(&f);
	w.stop = NULL;
	rc = sd_wait(&w);
	t = sd_now_ns();
	CHECK(rc == SMDDP_ETIMEDOUT && w.expired && f.moved - f.t0 > 200000000ull &&
		      t - f.moved >= 200000000ull,
	      "in line: progress restarts the deadline (last progress at %.0f ms, over at %.0f ms)",
	      (double)(f.moved - f.t0) / 1e6, (double)(t - f.t0) / 1e6);

	f = (struct fake){.stop = 1};
	w = waiter(&f);
	rc = sd_wait(&w);
	CHECK(rc == SMDDP_EABORTED && f.polls == 1, "the stop word: SMDDP_EABORTED (%d)", rc);

	/* Naps double from nap_ns to nap_max_ns, within the spin's time. */
	f = (struct fake){.done_in_sleep = 12};
	w = waiter(&f);
	w.spin = 1 << 30;
	w.spin_ns = 100000;
	w.yield_mask = 0;
	w.nap_ns = 2000;
	w.nap_max_ns = 512000;
	w.health = NULL;
	rc = sd_wait(&w);
	t = sd_now_ns() - f.t0;
	CHECK(rc == SMDDP_OK && f.slept_min == 2000 && f.slept_max == 512000,
	      "naps from 2 us to 512 us (%llu..%llu ns)", (unsigned long long)f.slept_min,
	      (unsigned long long)f.slept_max);
	CHECK(f.polls < 1000000 && t < 1000000000ull, "the spin ends after spin_ns (%d polls)",
	      f.polls);

	printf("%d failure(s)\n", failures);
	return failures ? 1 : 0;
}
