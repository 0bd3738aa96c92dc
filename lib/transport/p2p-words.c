/* p2p-words.c - the words every transport's point to point uses for a message and for a size mismatch. */
#include "config.h"

#include <stdio.h>

#include "base/comm-types.h"
#include "transport/transport.h"

const char *sd_p2p_what(const struct sd_p2p_op *op, char *buf, size_t len)
{
	if (op->key & SD_P2P_KEY_COLL)
		snprintf(buf, len, "this call's message");
	else
		snprintf(buf, len, "the message with tag %llu", (unsigned long long)op->key);
	return buf;
}

int sd_p2p_size_differs(struct smddp_comm *c, int from, size_t sent, const struct sd_p2p_op *op)
{
	char wbuf[64];

	return sd_comm_error(c, SMDDP_EMISMATCH,
			     "rank %d sent %zu bytes (%s), but this rank's receive takes %zu: the "
			     "count or dtype differs",
			     SD_RANK_NAME(c, from), sent, sd_p2p_what(op, wbuf, sizeof(wbuf)),
			     op->bytes);
}

int sd_p2p_refused(struct smddp_comm *c, const struct sd_p2p_op *op)
{
	char wbuf[64];

	return sd_comm_error(c, SMDDP_EMISMATCH,
			     "rank %d refused %s (%zu bytes) from this rank: its receive has "
			     "another size",
			     SD_RANK_NAME(c, op->peer), sd_p2p_what(op, wbuf, sizeof(wbuf)),
			     op->bytes);
}
