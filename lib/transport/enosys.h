/* enosys.h - the stub of every transport op, for the ops a transport does not have (libfabric's fi_no_*).
 *
 * A table names sd_no_<op> where the op does not apply, so that no op is
 * ever NULL (transport.h).  The ops that return int answer
 * SMDDP_EUNSUPPORTED, which callers may meet and handle (a probe of
 * peer_read, say); the others have no answer to give, so calling one is a
 * bug of the library: they log one warning saying so and return nothing,
 * NULL or 0.
 */
#ifndef SD_TRANSPORT_ENOSYS_H
#define SD_TRANSPORT_ENOSYS_H

#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

int sd_no_attach(struct smddp_comm *c, const char *name, int leader);
int sd_no_create(struct smddp_comm *c, char *name, size_t namelen);
void sd_no_unlink(struct smddp_comm *c);
int sd_no_barrier(struct smddp_comm *c);
size_t sd_no_half_bytes(struct smddp_comm *c);
void *sd_no_slot(struct smddp_comm *c, int r, int h);
void *sd_no_tiny(struct smddp_comm *c, int r, int h);
void *sd_no_hint(struct smddp_comm *c, int r, int h);
void sd_no_put_desc(struct smddp_comm *c, const void *desc, size_t len);
void sd_no_get_desc(struct smddp_comm *c, int r, void *desc, size_t len);
int sd_no_finish(struct smddp_comm *c);
void sd_no_put_addrs(struct smddp_comm *c, const void *a, const void *b);
void sd_no_get_addrs(struct smddp_comm *c, int r, uintptr_t *a, uintptr_t *b);
int sd_no_peer_read(struct smddp_comm *c, int r, void *dst, uintptr_t src, size_t len);
int sd_no_peer_write(struct smddp_comm *c, int r, uintptr_t dst, const void *src, size_t len);
int sd_no_p2p(struct smddp_comm *c, struct sd_p2p_op *ops, int n);
int sd_no_health(struct smddp_comm *c);
void sd_no_abort(struct smddp_comm *c);
void sd_no_detach(struct smddp_comm *c);

/* A transport that has nothing: every op its stub (made from
 * SD_TRANSPORT_OPS, so a new op without a stub does not compile). */
extern const struct sd_transport_ops sd_transport_none;

#endif
