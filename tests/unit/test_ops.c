/* test_ops.c - every transport fills its ops table completely: no op is NULL.
 *
 * Walks each table of the library through SD_TRANSPORT_OPS (transport.h),
 * the one list of the ops, so a new op is checked without touching this
 * file; and checks that the stubs of lib/transport/enosys.c answer
 * SMDDP_EUNSUPPORTED (the int ops) or nothing, NULL and 0 (the others),
 * which the algorithms rely on in place of NULL tests.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/comm-types.h"
#include "transport/enosys.h"
#include "transport/transport.h"
#ifdef HAVE_LIBFABRIC
#include "coll/net.h"
#endif
#include "check.h"

static void walk(const struct sd_transport_ops *tp, const char *what)
{
	int nulls = 0;

	CHECK(tp->size == sizeof(*tp), "%s: size is sizeof(struct sd_transport_ops)", what);
	CHECK(tp->name && *tp->name, "%s: has a name", what);
#define NOT_NULL(op)                                                                     \
	do {                                                                             \
		if (!tp->op) {                                                           \
			printf("FAIL %s: op " #op " is NULL (use sd_no_" #op                   \
			       " of lib/transport/enosys.h)\n",                                 \
			       what);                                                    \
			nulls++;                                                         \
		}                                                                        \
	} while (0);
	SD_TRANSPORT_OPS(NOT_NULL)
#undef NOT_NULL
	CHECK(nulls == 0, "%s: all %d ops set", what, SD_TRANSPORT_NOPS);
}

int main(void)
{
	struct smddp_comm c;
	uintptr_t a = 1, b = 1;
	char name[64];

	walk(&sd_transport_shm, "sd_transport_shm");
#ifdef HAVE_LIBFABRIC
	walk(&sd_transport_net, "sd_transport_net");
#else
	printf("skip sd_transport_net: built without libfabric\n");
#endif
	walk(&sd_transport_none, "sd_transport_none");

	/* The stubs: a communicator that only names its transport. */
	memset(&c, 0, sizeof(c));
	c.rank = 0;
	c.size = 2;
	c.tp = &sd_transport_none;
	CHECK(sd_no_attach(&c, "x", 1) == SMDDP_EUNSUPPORTED, "attach: EUNSUPPORTED");
	CHECK(sd_no_create(&c, name, sizeof(name)) == SMDDP_EUNSUPPORTED, "create: EUNSUPPORTED");
	CHECK(sd_no_barrier(&c) == SMDDP_EUNSUPPORTED, "barrier: EUNSUPPORTED");
	CHECK(sd_no_finish(&c) == SMDDP_EUNSUPPORTED, "finish: EUNSUPPORTED");
	CHECK(sd_no_peer_read(&c, 1, name, 0, 0) == SMDDP_EUNSUPPORTED,
	      "peer_read: EUNSUPPORTED (len 0 too: the probe)");
	CHECK(sd_no_peer_write(&c, 1, 0, name, 0) == SMDDP_EUNSUPPORTED,
	      "peer_write: EUNSUPPORTED (len 0 too: the probe)");
	CHECK(sd_no_p2p(&c, NULL, 0) == SMDDP_EUNSUPPORTED, "p2p: EUNSUPPORTED");
	CHECK(sd_no_health(&c) == SMDDP_EUNSUPPORTED, "health: EUNSUPPORTED");
	/* The others log a warning each (an internal error) and answer nothing. */
	CHECK(sd_no_half_bytes(&c) == 0, "half_bytes: 0");
	CHECK(sd_no_slot(&c, 0, 0) == NULL, "slot: NULL");
	CHECK(sd_no_tiny(&c, 0, 0) == NULL, "tiny: NULL");
	CHECK(sd_no_hint(&c, 0, 0) == NULL, "hint: NULL");
	sd_no_get_addrs(&c, 1, &a, &b);
	CHECK(a == 0 && b == 0, "get_addrs: no address");
	sd_no_unlink(&c);
	sd_no_put_desc(&c, name, 1);
	sd_no_get_desc(&c, 1, name, 1);
	sd_no_put_addrs(&c, name, name);
	sd_no_abort(&c);
	sd_no_detach(&c);

	/* The probe the algorithms use on shm: a transfer of 0 bytes works. */
	CHECK(sd_transport_shm.peer_read(&c, 0, NULL, 0, 0) == SMDDP_OK,
	      "shm peer_read of 0 bytes: 0 (single copy available)");
	CHECK(sd_transport_shm.peer_write(&c, 0, 0, NULL, 0) == SMDDP_OK,
	      "shm peer_write of 0 bytes: 0");

	printf("%s\n", failures ? "FAILED" : "all passed");
	return failures ? 1 : 0;
}
