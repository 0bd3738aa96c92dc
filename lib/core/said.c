/* said.c - what smddp_comm_get_async_error() reported, kept per thread, and the communicators' serials.
 *
 * Below api.c, comm.c, p2p_api.c and trace.c, which all use it: a poller
 * may run while another thread is inside a call on the communicator,
 * which owns comm->last_error, so the sentence has storage of its own. */
#include "config.h"

#include <string.h>

#include "core/said.h"

/* The sentence of the async error that smddp_comm_get_async_error() last
 * reported on this thread, and whose communicator (its serial; 0: none).
 * Storage of its own: the poller may run while another thread is inside a
 * call on the communicator, which owns comm->last_error. */
static __thread struct {
	uint64_t serial;
	struct sd_err err;
} async_said;

static uint64_t serials;

/* Set once any thread has kept a sentence: until then no thread's serial
 * can name a communicator, and forgetting skips the thread-local (reached
 * through __tls_get_addr in a shared library).  A thread's own keep is
 * seen by its own later forget, so a relaxed flag is enough. */
static int kept_any;

void sd_api_async_keep(const struct smddp_comm *c, const struct sd_err *err)
{
	__atomic_store_n(&kept_any, 1, __ATOMIC_RELAXED);
	async_said.err = *err;
	async_said.serial = c->serial;
}

uint64_t sd_api_serial(void)
{
	return __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
}

const char *sd_api_async_said(const struct smddp_comm *c)
{
	return c->serial && async_said.serial == c->serial ? async_said.err.msg : NULL;
}

void sd_api_async_forget(const struct smddp_comm *c)
{
	if (!__atomic_load_n(&kept_any, __ATOMIC_RELAXED))
		return;
	if (async_said.serial == c->serial)
		async_said.serial = 0;
}
