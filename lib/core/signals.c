/* signals.c - says when a library loaded with libsmddp took the process's stopping signals.
 *
 * Some libfabric builds (Debian's, through its psm provider) link
 * libinfinipath, whose constructor catches SIGTERM, SIGINT, SIGSEGV,
 * SIGBUS, SIGILL and SIGABRT unless IPATH_NO_BACKTRACE is set, and exits
 * from the handler: a rank told to stop by its launcher then exits 1
 * instead of dying of the signal, or hangs in malloc's locks.  The
 * constructor runs before any code of libsmddp, so all that can be done
 * here is to say so, once, with the cure; smddp-run and the PyTorch
 * backend set the variable themselves. */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "core/comm.h"
#include "util/sd.h"

static void check(void)
{
	static const int sigs[] = {SIGTERM, SIGINT, SIGSEGV};
	static const char *const names[] = {"SIGTERM", "SIGINT", "SIGSEGV"};

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction sa;
		Dl_info info;
		void *fn;

		if (sigaction(sigs[i], NULL, &sa) != 0)
			continue;
		fn = (sa.sa_flags & SA_SIGINFO) ? (void *)sa.sa_sigaction : (void *)sa.sa_handler;
		if (fn == (void *)SIG_DFL || fn == (void *)SIG_IGN || !dladdr(fn, &info) ||
		    !info.dli_fname)
			continue;
		if (strstr(info.dli_fname, "libinfinipath") || strstr(info.dli_fname, "libpsm")) {
			SD_WARN(SD_SUB_INIT,
				"%s handles %s in this process (loaded with libfabric): a rank "
				"stopped by its launcher exits 1, or hangs, instead of ending by "
				"the signal; set IPATH_NO_BACKTRACE=1 and HFI_NO_BACKTRACE=1 in "
				"the job's environment (smddp-run and the PyTorch backend do)",
				info.dli_fname, names[i]);
			return;
		}
	}
}

void sd_check_signals(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, check);
}
