/* err.c - the one error idiom below the communicator: a result code, and its sentence in a sink.
 *
 * A function that can fail returns an enum smddp_result (0 or positive) and
 * writes what failed into the struct sd_err it was handed; the public entry
 * point that owns the sink (the per-thread init error, the per-thread topo
 * error, a config read) hands out the sentence.  The communicator's own sink
 * is its last_error, written by sd_comm_error() (lib/base/comm-error.c) in
 * the same way.  docs/internals/errors.md has the idiom and an example.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "util/sd.h"

int sd_err_vset(struct sd_err *e, int rc, const char *fmt, va_list ap)
{
	char msg[sizeof(e->msg)];

	if (!e)
		return rc;
	/* Through a copy: a caller may prefix the sentence already there
	 * ("%s: %s", path, e->msg), which vsnprintf into e->msg would clobber. */
	vsnprintf(msg, sizeof(msg), fmt, ap);
	snprintf(e->msg, sizeof(e->msg), "%s", msg);
	return rc;
}

int sd_err_set(struct sd_err *e, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rc = sd_err_vset(e, rc, fmt, ap);
	va_end(ap);
	return rc;
}
