/* tests/tsan-canary.c - a known data race, to show that ThreadSanitizer runs and its reports are counted.
 *
 * Two threads bump one int without a lock.  scripts/tsan-torch.sh loads it
 * as a library into python (canary()); lab/gpu/run-on-device.sh's tsan
 * stage runs it as a program (built with -DCANARY_MAIN).  Either must see
 * one report, or a clean run of the real tests would prove nothing. */
#include <pthread.h>

static int shared;

static void *bump(void *arg)
{
	shared++; /* the race */
	return arg;
}

int canary(void)
{
	pthread_t a, b;

	if (pthread_create(&a, 0, bump, 0) != 0)
		return -1;
	if (pthread_create(&b, 0, bump, 0) != 0) {
		pthread_join(a, 0);
		return -1;
	}
	pthread_join(a, 0);
	pthread_join(b, 0);
	return shared;
}

#ifdef CANARY_MAIN
int main(void)
{
	return canary() == 2 ? 0 : 1;
}
#endif
