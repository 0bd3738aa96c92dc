/* comm-error.c - names and descriptions of calls, and the sentence a failure leaves in smddp_last_error().
 *
 * Every layer reports through sd_comm_error(): it needs only the
 * communicator (lib/base/comm-types.h), the names of dtypes and ops
 * (errors.c) and the logging of util, so it sits at the bottom with them.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/comm-types.h"

static const char *const coll_names[SD_NUM_COLLS] = {
	[SD_COLL_ALLREDUCE] = "allreduce",	   [SD_COLL_ALLGATHER] = "allgather",
	[SD_COLL_REDUCE_SCATTER] = "reduce_scatter", [SD_COLL_BROADCAST] = "broadcast",
	[SD_COLL_REDUCE] = "reduce",		   [SD_COLL_ALLTOALL] = "alltoall",
	[SD_COLL_BARRIER] = "barrier",		   [SD_COLL_SPLIT] = "comm_split",
	[SD_COLL_DESTROY] = "comm_destroy",	   [SD_COLL_INIT] = "init",
	[SD_COLL_GATHER] = "gather",		   [SD_COLL_SCATTER] = "scatter",
	[SD_COLL_ALLTOALLV] = "alltoallv",	   [SD_COLL_SEND] = "send",
	[SD_COLL_RECV] = "recv",		   [SD_COLL_GROUP] = "group",
};

const char *sd_coll_name(int coll)
{
	if (coll < 0 || coll >= SD_NUM_COLLS)
		return "unknown";
	return coll_names[coll];
}

void sd_coll_describe(const struct sd_coll_desc *d, char *buf, size_t len)
{
	const char *dt = smddp_dtype_name(d->dtype), *op = smddp_op_name(d->op);
	int n = d->coll == SD_COLL_INIT
			? snprintf(buf, len, "%s", sd_coll_name(d->coll))
			: snprintf(buf, len, "%s #%llu", sd_coll_name(d->coll),
				   (unsigned long long)d->seq);

	if (n < 0 || (size_t)n >= len)
		return;
	switch (d->coll) {
	case SD_COLL_ALLREDUCE:
	case SD_COLL_REDUCE_SCATTER:
		snprintf(buf + n, len - (size_t)n, " (count %llu, %s, %s)",
			 (unsigned long long)d->count, dt ? dt : "?", op ? op : "?");
		break;
	case SD_COLL_REDUCE:
		snprintf(buf + n, len - (size_t)n, " (count %llu, %s, %s, root %d)",
			 (unsigned long long)d->count, dt ? dt : "?", op ? op : "?", d->root);
		break;
	case SD_COLL_BROADCAST:
	case SD_COLL_GATHER:
	case SD_COLL_SCATTER:
		snprintf(buf + n, len - (size_t)n, " (count %llu, %s, root %d)",
			 (unsigned long long)d->count, dt ? dt : "?", d->root);
		break;
	case SD_COLL_ALLGATHER:
	case SD_COLL_ALLTOALL:
		snprintf(buf + n, len - (size_t)n, " (count %llu, %s)",
			 (unsigned long long)d->count, dt ? dt : "?");
		break;
	case SD_COLL_ALLTOALLV:
		snprintf(buf + n, len - (size_t)n, " (%s)", dt ? dt : "?");
		break;
	case SD_COLL_SEND:
	case SD_COLL_RECV:
		if (d->root < 0)
			snprintf(buf + n, len - (size_t)n, " (count %llu, %s, from anyone, tag %d)",
				 (unsigned long long)d->count, dt ? dt : "?", d->op);
		else
			snprintf(buf + n, len - (size_t)n, " (count %llu, %s, %s rank %d, tag %d)",
				 (unsigned long long)d->count, dt ? dt : "?",
				 d->coll == SD_COLL_SEND ? "to" : "from", d->root, d->op);
		break;
	case SD_COLL_GROUP:
		snprintf(buf + n, len - (size_t)n, " (%llu sends and receives)",
			 (unsigned long long)d->count);
		break;
	default:
		break;
	}
	n = (int)strlen(buf);
	if (d->mem && (size_t)n + 1 < len)
		snprintf(buf + n, len - (size_t)n, " on device memory");
	n = (int)strlen(buf);
	if (d->refused && (size_t)n + 1 < len)
		snprintf(buf + n, len - (size_t)n, " with arguments it refused");
}

int sd_comm_error(struct smddp_comm *c, int rc, const char *fmt, ...)
{
	char msg[768], what[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	char who[24] = "";

	/* Before rank discovery succeeded this process has no rank to name. */
	if (c->rank >= 0)
		snprintf(who, sizeof(who), "rank %d: ", SD_RANK_NAME(c, c->rank));
	if (c->cur.seq || c->cur.coll == SD_COLL_INIT) {
		sd_coll_describe(&c->cur, what, sizeof(what));
		snprintf(c->last_error, sizeof(c->last_error), "%s%s: %s", who, what, msg);
	} else {
		snprintf(c->last_error, sizeof(c->last_error), "%s%s", who, msg);
	}
	SD_WARN(c->cur.coll == SD_COLL_INIT ? SD_SUB_INIT : SD_SUB_COLL, "%s (%s)", c->last_error,
		smddp_strerror(rc));
	return rc;
}

int sd_comm_cancelled(struct smddp_comm *c)
{
	if (!sd_comm_cancel_asked(c))
		return SMDDP_OK;
	return sd_comm_error(c, SMDDP_EABORTED,
			     "the communicator was cancelled on this rank (smddp_comm_cancel)");
}
