/* enosys.c - the stubs that fill a transport's table where an op does not apply (enosys.h). */
#include "config.h"

#include <stddef.h>
#include <stdint.h>

#include "base/comm-types.h"
#include "transport/enosys.h"
#include "transport/transport.h"

/* An op without an answer was called: the caller should not have. */
static void missing(struct smddp_comm *c, const char *op)
{
	SD_WARN(SD_SUB_COLL,
		"internal error (a bug in libsmddp): rank %d called the op %s of the %s "
		"transport, which has none",
		c ? c->rank : -1, op, c && c->tp ? c->tp->name : "(no)");
}

int sd_no_attach(struct smddp_comm *c, const char *name, int leader)
{
	(void)c, (void)name, (void)leader;
	return SMDDP_EUNSUPPORTED;
}

int sd_no_create(struct smddp_comm *c, char *name, size_t namelen)
{
	(void)c, (void)name, (void)namelen;
	return SMDDP_EUNSUPPORTED;
}

void sd_no_unlink(struct smddp_comm *c)
{
	missing(c, "unlink");
}

int sd_no_barrier(struct smddp_comm *c)
{
	(void)c;
	return SMDDP_EUNSUPPORTED;
}

size_t sd_no_half_bytes(struct smddp_comm *c)
{
	missing(c, "half_bytes");
	return 0;
}

void *sd_no_slot(struct smddp_comm *c, int r, int h)
{
	(void)r, (void)h;
	missing(c, "slot");
	return NULL;
}

void *sd_no_tiny(struct smddp_comm *c, int r, int h)
{
	(void)r, (void)h;
	missing(c, "tiny");
	return NULL;
}

/* No hint area is an answer, not a misuse: the caller goes without. */
void *sd_no_hint(struct smddp_comm *c, int r, int h)
{
	(void)c, (void)r, (void)h;
	return NULL;
}

void sd_no_put_desc(struct smddp_comm *c, const void *desc, size_t len)
{
	(void)desc, (void)len;
	missing(c, "put_desc");
}

void sd_no_get_desc(struct smddp_comm *c, int r, void *desc, size_t len)
{
	(void)r, (void)desc, (void)len;
	missing(c, "get_desc");
}

int sd_no_finish(struct smddp_comm *c)
{
	(void)c;
	return SMDDP_EUNSUPPORTED;
}

void sd_no_put_addrs(struct smddp_comm *c, const void *a, const void *b)
{
	(void)a, (void)b;
	missing(c, "put_addrs");
}

void sd_no_get_addrs(struct smddp_comm *c, int r, uintptr_t *a, uintptr_t *b)
{
	(void)r;
	missing(c, "get_addrs");
	/* No address, rather than whatever the caller's stack held. */
	if (a)
		*a = 0;
	if (b)
		*b = 0;
}

int sd_no_peer_read(struct smddp_comm *c, int r, void *dst, uintptr_t src, size_t len)
{
	(void)c, (void)r, (void)dst, (void)src, (void)len;
	return SMDDP_EUNSUPPORTED;
}

int sd_no_peer_write(struct smddp_comm *c, int r, uintptr_t dst, const void *src, size_t len)
{
	(void)c, (void)r, (void)dst, (void)src, (void)len;
	return SMDDP_EUNSUPPORTED;
}

int sd_no_p2p(struct smddp_comm *c, struct sd_p2p_op *ops, int n)
{
	(void)c, (void)ops, (void)n;
	return SMDDP_EUNSUPPORTED;
}

int sd_no_health(struct smddp_comm *c)
{
	(void)c;
	return SMDDP_EUNSUPPORTED;
}

void sd_no_abort(struct smddp_comm *c)
{
	missing(c, "abort");
}

void sd_no_detach(struct smddp_comm *c)
{
	missing(c, "detach");
}

#define STUB(op) .op = sd_no_##op,
const struct sd_transport_ops sd_transport_none = {
	.size = sizeof(struct sd_transport_ops),
	.name = "none",
	SD_TRANSPORT_OPS(STUB)
};
