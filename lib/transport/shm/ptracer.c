/* ptracer.c - Yama's PR_SET_PTRACER_ANY, held only while a communicator uses single copy.
 *
 * Single copy reads and writes peers' memory (process_vm_readv/writev),
 * which Yama's ptrace_scope 1 allows only to a process's ancestors and to
 * the one it names with PR_SET_PTRACER.  The peers are many, so the only
 * name that fits is "any": every process of this user may then ptrace this
 * one.  That is wider than single copy needs, so it is held like a lock:
 * taken by the first communicator that tries single copy, given back by
 * the last one that stops using it (PR_SET_PTRACER 0 reverts to Yama's
 * default), logged both ways at INFO, and never taken with
 * SMDDP_SINGLE_COPY_PTRACER=0.  Under other scopes nothing is done: 0
 * needs nothing, 2 and 3 cannot be widened this way.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "util/sd.h"
#include "transport/shm/shm.h"

#ifndef PR_SET_PTRACER
#define PR_SET_PTRACER 0x59616d61
#endif
#ifndef PR_SET_PTRACER_ANY
#define PR_SET_PTRACER_ANY ((unsigned long)-1)
#endif

const char *sd_shm_yama_scope_path = "/proc/sys/kernel/yama/ptrace_scope";

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int holders; /* communicators holding it; > 0 iff PR_SET_PTRACER_ANY is set */

static int yama_scope(void)
{
	FILE *f = fopen(sd_shm_yama_scope_path, "re");
	int scope = 0;

	if (!f)
		return 0; /* no Yama: the kernel's own rule (same user) applies */
	if (fscanf(f, "%d", &scope) != 1)
		scope = 0;
	fclose(f);
	return scope;
}

int sd_shm_ptracer_hold(int allowed)
{
	int held = 0;

	pthread_mutex_lock(&lock);
	if (holders > 0) {
		holders++;
		held = 1;
	} else if (yama_scope() == 1) {
		if (!allowed) {
			SD_INFO(SD_SUB_SHM, "single copy: Yama ptrace_scope is 1 and SMDDP_SINGLE_COPY_PTRACER=0, "
					    "so peers may not read this process: single copy stays off");
		} else if (prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) == 0) {
			holders = 1;
			held = 1;
			SD_INFO(SD_SUB_SHM,
				"single copy: any process of user %d may now ptrace this one (Yama ptrace_scope 1, "
				"PR_SET_PTRACER_ANY) until no communicator uses single copy; "
				"SMDDP_SINGLE_COPY_PTRACER=0 prevents it",
				(int)getuid());
		} else {
			SD_INFO(SD_SUB_SHM, "single copy: PR_SET_PTRACER_ANY failed (%s): single copy stays off",
				strerror(errno));
		}
	}
	pthread_mutex_unlock(&lock);
	return held;
}

void sd_shm_ptracer_release(void)
{
	pthread_mutex_lock(&lock);
	if (holders > 0 && --holders == 0) {
		if (prctl(PR_SET_PTRACER, 0, 0, 0, 0) == 0)
			SD_INFO(SD_SUB_SHM, "single copy: PR_SET_PTRACER_ANY reverted (no communicator uses "
					    "single copy any more)");
		else
			SD_WARN(SD_SUB_SHM, "single copy: could not revert PR_SET_PTRACER_ANY (%s): any process "
					    "of this user may still ptrace this one",
				strerror(errno));
	}
	pthread_mutex_unlock(&lock);
}

int sd_shm_ptracer_holders(void)
{
	int n;

	pthread_mutex_lock(&lock);
	n = holders;
	pthread_mutex_unlock(&lock);
	return n;
}
