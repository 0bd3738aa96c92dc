/* shm-table.c - the shared-memory transport's ops table.
 *
 * Its own file, above shm.c and p2p.c, so that neither names the other's
 * functions in both directions (tests/layers/calls.sh): the table needs
 * both, p2p.c needs shm.c's peers. */
#include "config.h"

#include "transport/transport.h"
#include "transport/shm/shm.h"

const struct sd_transport_ops sd_transport_shm = {
	.size = sizeof(struct sd_transport_ops),
	.name = "shm",
	.attach = sd_shm_attach,
	.create = sd_shm_create,
	.unlink = sd_shm_unlink_seg,
	.barrier = sd_shm_barrier,
	.half_bytes = sd_shm_half_bytes,
	.slot = sd_shm_slot,
	.tiny = sd_shm_tiny,
	.hint = sd_shm_hint,
	.put_desc = sd_shm_put_desc,
	.get_desc = sd_shm_get_desc,
	.finish = sd_shm_finish,
	.put_addrs = sd_shm_put_addrs,
	.get_addrs = sd_shm_get_addrs,
	.peer_read = sd_shm_peer_read,
	.peer_write = sd_shm_peer_write,
	.p2p = sd_shm_p2p,
	.health = sd_shm_health,
	.abort = sd_shm_abort,
	.detach = sd_shm_detach,
};
