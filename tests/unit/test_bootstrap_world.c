/* test_bootstrap_world.c - test_bootstrap's scenarios of worlds that form, close and time out as
 * they should (see test_bootstrap.c).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/sd.h"
#include "bootstrap/bootstrap.h"
#include "test_bootstrap.h"

/* ---- scenarios: each function is one process of the scenario ------------ */

void sc_size1(struct ctx *c)
{
	struct sd_boot_params p = params(c, 0, 1, "", 1000);
	struct sd_boot_peer peer;
	struct sd_boot *b = NULL;
	uint64_t nonce = 0, nonce2 = 0;
	struct sd_err err = {""};
	char mine[5] = "abcd", all[5] = "";
	int fds[4], who = 7;

	snprintf(c->who, sizeof(c->who), "rank 0/1");
	p.addr = NULL; /* no socket at all: the address is not even looked at */
	p.port = NULL;
	CHECK(c, sd_boot_init(&p, &b, &peer, &nonce, &err) == SMDDP_OK, "size 1 needs no address (%s)",
	      err.msg);
	if (!b)
		return;
	CHECK(c, peer.pid == getpid() && !strcmp(peer.hostid, "host-0"), "peers[0] is this process");
	CHECK(c, sd_boot_fds(b, fds, 4) == 0, "no file descriptors");
	CHECK(c, sd_boot_allgather(b, mine, all, 5, sd_now_ns() + SEC, &err) == 0 && !strcmp(all, "abcd"),
	      "all-gather copies");
	CHECK(c, sd_boot_poll(b, &who, &err) == SMDDP_OK, "poll: nothing happened");
	sd_boot_close(b, 1);
	CHECK(c, sd_boot_init(&p, &b, &peer, &nonce2, &err) == SMDDP_OK && nonce2 != nonce,
	      "nonce is random (%016llx then %016llx)", (unsigned long long)nonce, (unsigned long long)nonce2);
	sd_boot_close(b, 0);
	p.rank = 1;
	CHECK(c, sd_boot_init(&p, &b, &peer, &nonce2, &err) == SMDDP_EINVAL && !b,
	      "rank 1 of 1: EINVAL (%s)", err.msg);
	p.rank = 0;
	char longer[400];
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	p.hostid = longer;
	CHECK(c, sd_boot_init(&p, &b, &peer, &nonce2, &err) == SMDDP_EINVAL, "a 399-byte host id: EINVAL (%s)",
	      err.msg);
	p.hostid = "h";
	p.token = longer;
	CHECK(c, sd_boot_init(&p, &b, &peer, &nonce2, &err) == SMDDP_ECONFIG,
	      "a 399-byte job token: ECONFIG (%s)", err.msg);
}

/* n ranks: rendezvous, all-gathers of 0, 1, 13 bytes and 4 MiB, clean close. */
void sc_world(struct ctx *c)
{
	int rank = c->idx, size = c->nproc, who = -1, fds[16];
	struct sd_boot *b = join(c, rank, size, 10000);
	struct sd_err err = {""};
	uint64_t took;
	int rc;

	if (!b)
		return;
	CHECK(c, sd_boot_fds(b, fds, 16) == (rank == 0 ? size - 1 : 1), "sd_boot_fds: %d socket(s)",
	      rank == 0 ? size - 1 : 1);
	gather_check(c, b, rank, size, 0, 1, 0);
	gather_check(c, b, rank, size, 1, 2, 0);
	gather_check(c, b, rank, size, 13, 3, 1);
	gather_check(c, b, rank, size, BIG, 4, 0);
	if (size <= 3) /* 8 ranks x 4 MiB twice only costs time */
		gather_check(c, b, rank, size, BIG, 5, 1);
	gather_check(c, b, rank, size, 1, 6, 0);
	CHECK(c, sd_boot_poll(b, &who, &err) == SMDDP_OK, "poll: nothing happened (%s)", err.msg);
	if (rank != 0) {
		sd_boot_close(b, 1);
		say(c, "closed cleanly");
		return;
	}
	/* The others close cleanly now: no death may be reported. */
	rc = poll_for(b, 300, &who, &err, &took);
	CHECK(c, rc == SMDDP_OK, "no false death after the others' clean close (rc %d: %s)", rc, err.msg);
	sd_boot_close(b, 1);
}

/* Many ranks at once on the backlog: rendezvous, small all-gathers, clean close. */
void sc_many(struct ctx *c)
{
	struct sd_boot *b = join(c, c->idx, c->nproc, 10000);

	if (!b)
		return;
	gather_check(c, b, c->idx, c->nproc, 0, 1, 0);
	gather_check(c, b, c->idx, c->nproc, 300, 2, 1);
	sd_boot_close(b, 1);
}

/* Rank 0 closes cleanly first: the others see no death, then a clear error. */
void sc_close0(struct ctx *c)
{
	int rank = c->idx, size = c->nproc, who = -1;
	struct sd_boot *b = join(c, rank, size, 10000);
	struct sd_err err = {""};
	char x = 1, all[8];
	uint64_t took;
	int rc;

	if (!b)
		return;
	if (rank == 0) {
		sd_boot_close(b, 1);
		return;
	}
	rc = poll_for(b, 300, &who, &err, &took);
	CHECK(c, rc == SMDDP_OK, "no false death after rank 0's clean close (rc %d: %s)", rc, err.msg);
	rc = sd_boot_allgather(b, &x, all, 1, sd_now_ns() + SEC, &err);
	CHECK(c, rc == SMDDP_EPEER, "an all-gather after rank 0 left: EPEER (%s)", err.msg);
	sd_boot_close(b, 1);
}

/* Rank 0 starts 300 ms after the others. */
void sc_late0(struct ctx *c)
{
	struct sd_boot *b;

	if (c->idx == 0)
		msleep(300);
	b = join(c, c->idx, c->nproc, 5000);
	if (b) {
		gather_check(c, b, c->idx, c->nproc, 1000, 1, 0);
		sd_boot_close(b, 1);
	}
}

void sc_no_rank0(struct ctx *c)
{
	struct sd_boot_params p = params(c, 1, 2, "", 500);
	struct sd_boot_peer peers[2];
	struct sd_boot *b = NULL;
	uint64_t nonce, t0 = sd_now_ns();
	struct sd_err err = {""};
	char want[128];
	int rc;

	snprintf(c->who, sizeof(c->who), "rank 1/2");
	rc = sd_boot_init(&p, &b, peers, &nonce, &err);
	snprintf(want, sizeof(want), "could not reach rank 0 at 127.0.0.1:%s within 0.5 s (last error: Connection refused)",
		 c->port);
	CHECK(c, rc == SMDDP_ETIMEDOUT && contains(err.msg, want) && contains(err.msg, "MASTER_ADDR/MASTER_PORT"),
	      "ETIMEDOUT (rc %d): %s", rc, err.msg);
	double s = (double)(sd_now_ns() - t0) / 1e9;
	CHECK(c, s > 0.4 && s < 1.5, "gave up at its deadline (%.2f s)", s);
}

void sc_port_busy(struct ctx *c)
{
	struct sd_boot_params p = params(c, 0, 2, "", 2000);
	struct sockaddr_in sa = {0};
	struct sd_boot_peer peers[2];
	struct sd_boot *b = NULL;
	uint64_t nonce, t0 = sd_now_ns();
	struct sd_err err = {""};
	char want[128];
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0), rc;

	snprintf(c->who, sizeof(c->who), "rank 0/2");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)atoi(c->port));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 4))
		{
			CHECK(c, 0, "set up a listener on the port: %s", strerror(errno));
			return;
		}
	rc = sd_boot_init(&p, &b, peers, &nonce, &err);
	snprintf(want, sizeof(want), "rank 0 cannot listen on 127.0.0.1:%s: Address already in use (is another job "
				     "using MASTER_PORT?)",
		 c->port);
	CHECK(c, rc == SMDDP_ESYSTEM && contains(err.msg, want), "port in use: ESYSTEM (rc %d): %s", rc, err.msg);
	CHECK(c, sd_now_ns() - t0 < SEC, "at once");
	close(fd);

	p.port = "29x";
	rc = sd_boot_init(&p, &b, peers, &nonce, &err);
	CHECK(c, rc == SMDDP_ECONFIG && contains(err.msg, "is not a port number"), "port \"29x\": ECONFIG (rc %d): %s", rc,
	      err.msg);
	p.port = c->port;
	p.addr = "192.0.2.1"; /* TEST-NET-1: never an address of this host; nothing is sent */
	rc = sd_boot_init(&p, &b, peers, &nonce, &err);
	CHECK(c, rc == SMDDP_ECONFIG && contains(err.msg, "Cannot assign requested address"),
	      "rank 0 on an address that is not its own: ECONFIG (rc %d): %s", rc, err.msg);
}

void sc_ipv6(struct ctx *c)
{
	struct sd_boot *b = join(c, c->idx, c->nproc, 5000);

	if (b) {
		gather_check(c, b, c->idx, c->nproc, 64, 1, 0);
		sd_boot_close(b, 1);
	}
}
