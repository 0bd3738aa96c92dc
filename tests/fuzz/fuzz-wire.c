/* fuzz-wire.c - the bootstrap's wire: bytes from a peer's socket, read
 * frame by frame by the rank in each of its roles.  The first byte of an
 * input picks the role (rank 0 before a stranger's hello, or after its
 * challenge, or with rank 1 admitted; rank 1 before the challenge, after
 * its answer, or after the rendezvous); the rest arrives on the connection,
 * which then closes. */
#include "bootstrap/channel.c"

#include "fuzz.h"

#define WORLD 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct conn *conns[WORLD] = {0};
	struct sd_boot_peer ids[WORLD];
	struct sd_boot b;
	struct conn *c;
	uint64_t nonce = 0;
	int sv[2], buf = 1 << 20, role;

	/* One write into the socket, whatever its buffer's size. */
	if (size < 1 || size > 65536 + 1)
		return 0;
	role = data[0] % 6;
	data++;
	size--;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	(void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	(void)setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	if (size && send(sv[1], data, size, MSG_NOSIGNAL) != (ssize_t)size)
		abort();
	shutdown(sv[1], SHUT_WR);

	memset(&b, 0, sizeof(b));
	memset(ids, 0, sizeof(ids));
	b.size = WORLD;
	b.conns = conns;
	b.ids = ids;
	b.token = "fuzz-token";
	b.hostid = "fuzzhost/1";
	b.lfd = -1;
	snprintf(b.where, sizeof(b.where), "127.0.0.1:29500");
	c = sd_boot_conn_new(sv[0]);
	if (!c)
		abort();
	snprintf(c->addr, sizeof(c->addr), "127.0.0.1:40000");
	switch (role) {
	case 0: /* rank 0, a stranger's hello */
	case 1: /* rank 0, a stranger's answer to the challenge */
		c->loopback = 1;
		c->challenged = role == 1;
		c->claim_rank = 1;
		c->claim_size = WORLD;
		break;
	case 2: /* rank 0, rank 1 admitted and the job running */
		b.ready = 1;
		c->rank = 1;
		conns[1] = c;
		break;
	default: /* rank 1 and its connection to rank 0 */
		b.rank = 1;
		b.authed = role >= 4;
		b.ready = role == 5;
		c->rank = 0;
		conns[0] = c;
		break;
	}
	for (int i = 0; i < 10000 && c->fd >= 0; i++)
		conn_read(&b, c, &nonce);
	sd_boot_conn_free(c);
	free(b.notes); /* a NOTE frame's (sd_boot_keep_note); sd_boot_free frees it */
	close(sv[1]);
	return 0;
}
