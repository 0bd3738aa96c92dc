/* net-table.c - the transport table of communicators that span hosts.
 *
 * Its own file because it is the one place that needs both halves: the
 * barrier is an algorithm (net-algo.c), the other ops are transfers
 * (net.c).  With the table here, net-algo.c calls net.c and neither calls
 * the other back; sd_net_setup() is handed the table by its caller.
 */
#include "config.h"

#include <stdlib.h>

#include "coll/net-int.h"
#include "transport/enosys.h"
#include "transport/transport.h"

static int net_barrier(struct smddp_comm *c)
{
	struct sd_net *n = c->net;

	if (n->desc_pending) {
		/* SMDDP_CHECK_COLL: the barrier carries every rank's descriptor. */
		size_t *off = calloc((size_t)c->size, sizeof(*off));
		struct grp g = sd_net_flat(c);
		int rc;

		if (!off)
			return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
		for (int r = 0; r < c->size; r++)
			off[r] = (size_t)r * sizeof(struct sd_coll_desc);
		n->desc_pending = 0;
		rc = sd_net_ring_allgather(c, &g, PH_DESC, &n->descs[c->rank], (char *)n->descs, off,
				    sizeof(struct sd_coll_desc), NULL);
		free(off);
		return rc;
	}
	if (sd_net_use_hier(c)) {
		struct grp g = sd_net_rail(c);

		SD_CHECK(sd_net_node_err(c, n->node->tp->barrier(n->node)));
		SD_CHECK(sd_net_dissemination(c, &g, PH_BARRIER));
		return sd_net_node_err(c, n->node->tp->barrier(n->node));
	}
	{
		struct grp g = sd_net_flat(c);

		return sd_net_dissemination(c, &g, PH_BARRIER);
	}
}

/* No slots and no segment: the collectives of a communicator that spans
 * hosts are its own (dispatch.c sends them to net-algo.c), and its node
 * communicator has the shared memory. */
const struct sd_transport_ops sd_transport_net = {
	.size = sizeof(struct sd_transport_ops),
	.name = "net",
	.attach = sd_no_attach,
	.create = sd_no_create,
	.unlink = sd_no_unlink,
	.barrier = net_barrier,
	.half_bytes = sd_no_half_bytes,
	.slot = sd_no_slot,
	.tiny = sd_no_tiny,
	.hint = sd_no_hint,
	.put_desc = sd_net_put_desc,
	.get_desc = sd_net_get_desc,
	.finish = sd_no_finish,
	.put_addrs = sd_no_put_addrs,
	.get_addrs = sd_no_get_addrs,
	.peer_read = sd_no_peer_read,
	.peer_write = sd_no_peer_write,
	.p2p = sd_net_p2p,
	.health = sd_no_health,
	.abort = sd_net_abort,
	.note = sd_net_note,
	.detach = sd_net_detach,
};
