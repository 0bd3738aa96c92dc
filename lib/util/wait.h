/* wait.h - the one wait loop of the library: spin, then sleep, with a liveness check and a deadline.
 *
 * A wait is described by a struct sd_wait: how long to spin, how often to
 * yield, how long to sleep, how often to ask about the peers' health, the
 * deadline, an optional stop word, and three callbacks that the caller
 * supplies and the loop calls:
 *
 *   ready(arg, &rc)   is it done?  It may make progress (poll a completion
 *                     queue, step a batch of messages).  Says one of
 *                     enum sd_wait_state; on SD_WAIT_FAILED sets rc.
 *   sleep(arg, ns, &rc)
 *                     block for at most ns (futex on a doorbell, a blocking
 *                     completion-queue read, nanosleep).  It may look once
 *                     more and not block at all (the Dekker re-check of
 *                     shm), and says what it found, as ready() does.
 *   health(arg)       every liveness period while asleep, and before the
 *                     deadline is declared: a dead peer, an abort notice,
 *                     bootstrap news.  An smddp_result; nonzero ends the
 *                     wait with it.  NULL: nothing to ask.
 *
 * The loop owns the policy, so that shm, fabric and CUDA waits behave
 * alike; the callers own the words: at the deadline sd_wait() returns
 * SMDDP_ETIMEDOUT with w->expired set and no message, and the caller
 * writes its own (how long, from w->start, and for whom). docs/internals/wait.md. */
#ifndef SD_UTIL_WAIT_H
#define SD_UTIL_WAIT_H

#include <sched.h>
#include <stdint.h>

#include <smddp/smddp.h>

enum sd_wait_state {
	SD_WAIT_NOT_YET = 0, /* nothing moved */
	SD_WAIT_DONE,        /* what the wait is for happened: SMDDP_OK */
	SD_WAIT_MOVED,       /* progress but not done: spin again, the deadline restarts */
	SD_WAIT_LOOK,        /* a sign of trouble (an abort flag): call health() now */
	SD_WAIT_FAILED,      /* failed: the wait returns the rc the callback set */
};

struct sd_wait {
	/* policy */
	int spin;             /* polls before the first sleep (SMDDP_SPIN) */
	unsigned yield_mask;  /* poll & mask == 0: sched_yield, else a pause (0: always yield) */
	uint64_t spin_ns;     /* and at most this long spinning (0: no limit) */
	uint64_t nap_ns;      /* first sleep; doubles up to nap_max_ns (0: sleep until health) */
	uint64_t nap_max_ns;
	uint64_t liveness_ns; /* health() this often while asleep (0: before every sleep) */
	uint64_t timeout_ns;  /* the deadline, from the first sleep or the last progress */
	const int *stop;      /* nonzero (acquire): SMDDP_EABORTED; may be NULL */
	/* the caller's side */
	int (*ready)(void *arg, int *rc);
	int (*sleep)(void *arg, uint64_t ns, int *rc);
	int (*health)(void *arg);
	void *arg;
	/* out: when the wait began to sleep (sd_now_ns), 0 if it never did;
	 * a timeout message says how long from here. */
	uint64_t start;
	/* out: 1 when the deadline ended the wait (a health() that returns
	 * SMDDP_ETIMEDOUT, passing on a peer's timeout, leaves it 0). */
	int expired;
};

/* A pause for a spinning poll: lets the sibling hyperthread run. */
static inline void sd_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* The loop past its first polls (wait.c): state is what ready() said
 * last, rc its result, spins how many polls were spun (w->spin or more:
 * sleep now). */
int sd_wait_more(struct sd_wait *w, int state, int rc, int spins);

/* The yield of a spin that yields now and then (yield_mask nonzero: a
 * core per rank; wait.c), and of the socket endpoint's empty polls
 * (socket.c, which naps in poll instead): sched_yield(), timed.  Returns 1 where yields
 * are slow in this process now (two of the last 16 took 2 ms or more:
 * other runnable tasks got a whole time slice each): then it did not yield, and
 * the wait should sleep on its doorbell instead, as a woken sleeper gets
 * the core back at once where a yielder waits behind them.  A spin that
 * yields at every poll (more ranks than cores) yields plainly: there the
 * yield is how the peer gets the core, and its slice is the peer's work. */
int sd_wait_yield(void);

/* For tests: the threshold of a slow yield (0: every yield is slow,
 * UINT64_MAX: none is), which also forgets the yields seen so far. */
void sd_wait_set_slow_yield_ns(uint64_t ns);

/* Runs the wait: SMDDP_OK, a callback's result, SMDDP_ETIMEDOUT at the
 * deadline (w->expired set), SMDDP_EABORTED when *stop turned nonzero.
 *
 * The first polls run here, in the caller: its ready() is a known function
 * there and is inlined, where a call through the pointer per poll costs
 * about 1 us in 17 on a barrier between two ranks that share a core
 * (measured with 256 polls between yields; docs/internals/wait.md).  A
 * wait with a stop word or a time limit on its spin goes to
 * sd_wait_more() at once. */
static inline __attribute__((always_inline)) int sd_wait(struct sd_wait *w)
{
	int (*ready)(void *, int *) = w->ready;
	void *arg = w->arg;
	unsigned mask = w->yield_mask;
	int spin = w->stop || w->spin_ns ? 0 : w->spin;
	int spins = 0, rc = SMDDP_OK, state;

	/* 64 yields at most in line, which reads no clock: on a loaded core a
	 * yield can cost a time slice, and sd_wait_more() bounds the rest of
	 * the spin by the deadline. */
	if (mask < 1024 && spin > 64 * (int)(mask + 1))
		spin = 64 * (int)(mask + 1);

	for (;;) {
		state = ready(arg, &rc);
		/* Progress starts the spin again, here as in sd_wait_more():
		 * a batch that posted its sends goes on polling in line. */
		if (state == SD_WAIT_MOVED && spin) {
			spins = 0;
			continue;
		}
		if (state != SD_WAIT_NOT_YET || spins >= spin)
			break;
		if ((++spins & mask) == 0) {
			if (!mask) {
				sched_yield();
			} else if (sd_wait_yield()) {
				spins = INT32_MAX;
				break;
			}
		} else {
			sd_cpu_relax();
		}
	}
	if (state == SD_WAIT_DONE) {
		w->start = 0;
		w->expired = 0;
		return SMDDP_OK;
	}
	return sd_wait_more(w, state, rc, spins);
}

#endif
