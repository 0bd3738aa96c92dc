/* test_bootstrap.c - multi-process tests of the TCP rendezvous and out-of-band channel.
 *
 * Each scenario forks its processes (ranks, impostors, strangers) on
 * 127.0.0.1 with a fresh port; every child runs under alarm() and says
 * what it checks; the parent reaps every child, kills the stragglers of a
 * scenario past its time limit, and fails when any child failed.  The one
 * slow scenario (a stranger that stays silent for the whole 5 s hello limit)
 * runs in the background while the others run.
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

#define MS 1000000ull
#define SEC 1000000000ull
#define BIG (4u << 20)

struct ctx {
	const char *scen;
	int idx;   /* process number in the scenario */
	int nproc;
	const char *addr;
	char port[16];
	int bad;   /* failed checks in this process */
	char who[64];
};

/* Wire constants, restated here so that a change of the protocol is a
 * deliberate change of this test too. */
enum { W_HELLO = 1, W_REJECT = 2, W_WELCOME = 3, W_CHALLENGE = 10, W_AUTH = 11, W_VERSION = 2 };

static void say(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct ctx *c, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = snprintf(line, sizeof(line), "[%s %s] ", c->scen, c->who);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	printf("%s\n", line);
	fflush(stdout);
}

#define CHECK(c, cond, ...)                                                                  \
	do {                                                                                 \
		if (cond) {                                                                  \
			say((c), "ok   " __VA_ARGS__);                                       \
		} else {                                                                     \
			say((c), "FAIL " __VA_ARGS__);                                       \
			say((c), "     (%s:%d: %s)", __FILE__, __LINE__, #cond);            \
			(c)->bad++;                                                          \
		}                                                                            \
	} while (0)

static uint64_t now(void)
{
	return sd_now_ns();
}

static void msleep(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static struct sd_boot_params params(struct ctx *c, int rank, int size, const char *token, unsigned deadline_ms)
{
	static char hostid[SD_HOSTID_MAX];
	struct sd_boot_params p;

	snprintf(hostid, sizeof(hostid), "host-%d", rank);
	p.rank = rank;
	p.size = size;
	p.addr = c->addr;
	p.port = c->port;
	p.token = token;
	p.allow_no_token = 0;
	p.hostid = hostid;
	p.deadline_ns = now() + deadline_ms * MS;
	p.listen_fd = -1;
	return p;
}

/* Rendezvous as rank/size and check what every rank must agree on. */
static struct sd_boot *join(struct ctx *c, int rank, int size, unsigned deadline_ms)
{
	struct sd_boot_params p = params(c, rank, size, "job-secret", deadline_ms);
	struct sd_boot_peer *peers = calloc((size_t)size, sizeof(*peers));
	struct sd_boot *b = NULL;
	uint64_t nonce = 0;
	struct sd_err err = {""};
	int rc, ok = 1;

	snprintf(c->who, sizeof(c->who), "rank %d/%d", rank, size);
	rc = sd_boot_init(&p, &b, peers, &nonce, &err);
	CHECK(c, rc == SMDDP_OK && b, "rendezvous succeeds (rc %d: %s)", rc, err.msg);
	if (rc) {
		free(peers);
		return NULL;
	}
	for (int r = 0; r < size; r++) {
		char want[32];

		snprintf(want, sizeof(want), "host-%d", r);
		if (strcmp(peers[r].hostid, want) || peers[r].pid <= 0)
			ok = 0;
	}
	CHECK(c, ok, "peers[] has every rank's host id and a pid");
	CHECK(c, peers[rank].pid == getpid(), "peers[self].pid is my pid");

	/* Everyone has the same nonce and the same table. */
	struct {
		uint64_t nonce;
		int32_t pid;
		int32_t pad;
	} mine = {nonce, getpid(), 0}, *all = calloc((size_t)size, sizeof(mine));
	rc = sd_boot_allgather(b, &mine, all, sizeof(mine), now() + 10 * SEC, &err);
	CHECK(c, rc == SMDDP_OK, "all-gather of nonce and pid (rc %d: %s)", rc, err.msg);
	if (rc == SMDDP_OK) {
		ok = 1;
		for (int r = 0; r < size; r++)
			if (all[r].nonce != nonce || all[r].pid != peers[r].pid)
				ok = 0;
		CHECK(c, ok, "nonce %016llx is the same on every rank, pids match the table",
		      (unsigned long long)nonce);
	}
	free(all);
	free(peers);
	return b;
}

/* All-gather of len bytes with a pattern that depends on rank, round and offset. */
static int gather_check(struct ctx *c, struct sd_boot *b, int rank, int size, size_t len, int round, int in_place)
{
	uint8_t *all = malloc((size_t)size * len + 1), *mine = in_place ? all + (size_t)rank * len : malloc(len + 1);
	struct sd_err err = {""};
	size_t bad = 0;
	int rc;

	for (size_t i = 0; i < len; i++)
		mine[i] = (uint8_t)(rank * 131 + i * 7 + (size_t)round * 13);
	rc = sd_boot_allgather(b, len ? mine : NULL, len ? all : NULL, len, now() + 10 * SEC, &err);
	if (rc == SMDDP_OK)
		for (int r = 0; r < size; r++)
			for (size_t i = 0; i < len; i++)
				bad += all[(size_t)r * len + i] != (uint8_t)(r * 131 + i * 7 + (size_t)round * 13);
	CHECK(c, rc == SMDDP_OK && bad == 0, "all-gather #%d of %zu bytes%s: rc %d, %zu wrong bytes %s", round, len,
	      in_place ? " (in place)" : "", rc, bad, err.msg);
	if (!in_place)
		free(mine);
	free(all);
	return rc;
}

/* Poll until something happens or ms pass; returns rc, *who, err, elapsed. */
static int poll_for(struct sd_boot *b, unsigned ms, int *who, char *err, size_t errlen, uint64_t *took)
{
	uint64_t t0 = now(), end = t0 + ms * MS;
	int rc;

	do {
		int fds[16], n = sd_boot_fds(b, fds, 16);
		struct pollfd pf[16];

		for (int i = 0; i < n; i++)
			pf[i] = (struct pollfd){fds[i], POLLIN, 0};
		rc = sd_boot_poll(b, who, err, errlen);
		if (rc)
			break;
		poll(pf, (nfds_t)n, 10);
	} while (now() < end);
	*took = now() - t0;
	return rc;
}

/* A raw TCP connection to rank 0's port, retried until it answers. */
static int raw_connect(struct ctx *c, unsigned ms)
{
	uint64_t end = now() + ms * MS;

	for (;;) {
		struct sockaddr_in sa = {0};
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		sa.sin_family = AF_INET;
		sa.sin_port = htons((uint16_t)atoi(c->port));
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		close(fd);
		if (now() >= end)
			return -1;
		msleep(10);
	}
}

/* Read until EOF or ms pass.  Returns bytes read (-1 on timeout); the first
 * 8 bytes land in hdr. */
static long read_to_eof(int fd, unsigned ms, uint8_t hdr[8])
{
	uint64_t end = now() + ms * MS;
	long total = 0;

	memset(hdr, 0, 8);
	for (;;) {
		struct pollfd pf = {fd, POLLIN, 0};
		uint8_t buf[4096];
		ssize_t n;
		int left = (int)((end > now() ? end - now() : 0) / MS);

		if (poll(&pf, 1, left) <= 0)
			return -1;
		n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0)
			return total;
		for (ssize_t i = 0; i < n && total + i < 8; i++)
			hdr[total + i] = buf[i];
		total += n;
	}
}

static int contains(const char *s, const char *sub)
{
	return s && strstr(s, sub) != NULL;
}

/* A hello written by hand: the wire format is part of what is tested. */
static size_t raw_hello(uint8_t *buf, uint32_t version, int32_t rank, int32_t size, const uint8_t cnonce[32])
{
	size_t n = 8;
	uint32_t v;

	memcpy(buf + n, "SMDDPB1", 8);
	n += 8;
#define PUT(x) (v = htonl((uint32_t)(x)), memcpy(buf + n, &v, 4), n += 4)
	PUT(version);
	PUT(rank);
	PUT(size);
	memcpy(buf + n, cnonce, 32);
	n += 32;
	v = htonl(W_HELLO);
	memcpy(buf, &v, 4);
	v = htonl((uint32_t)(n - 8));
	memcpy(buf + 4, &v, 4);
#undef PUT
	return n;
}

/* One frame within ms: its type in *type, payload in buf (at most cap).
 * Returns the payload length, -1 on EOF, timeout or an oversized frame. */
static long raw_frame(int fd, unsigned ms, uint32_t *type, uint8_t *buf, size_t cap)
{
	uint64_t end = now() + ms * MS;
	uint8_t hdr[8];
	size_t got = 0, len = 0;

	while (got < 8 + len) {
		struct pollfd pf = {fd, POLLIN, 0};
		int left = (int)((end > now() ? end - now() : 0) / MS);
		ssize_t n;

		if (poll(&pf, 1, left) <= 0)
			return -1;
		if (got < 8)
			n = recv(fd, hdr + got, 8 - got, 0);
		else
			n = recv(fd, buf + got - 8, 8 + len - got, 0);
		if (n <= 0)
			return -1;
		got += (size_t)n;
		if (got == 8) {
			uint32_t v;

			memcpy(&v, hdr, 4);
			*type = ntohl(v);
			memcpy(&v, hdr + 4, 4);
			len = ntohl(v);
			if (len > cap)
				return -1;
		}
	}
	return (long)len;
}

/* The admission MAC as the protocol defines it (restated, not borrowed). */
static void raw_mac(const char *token, const char *label, const uint8_t *cn, const uint8_t *sn, int32_t rank,
		    int32_t size, uint8_t out[32])
{
	struct sd_hmac_sha256 m;
	uint32_t rs[2] = {htonl((uint32_t)rank), htonl((uint32_t)size)};

	sd_hmac_sha256_init(&m, token, strlen(token));
	sd_hmac_sha256_update(&m, "smddp-boot-2 ", 13);
	sd_hmac_sha256_update(&m, label, strlen(label) + 1);
	sd_hmac_sha256_update(&m, cn, 32);
	sd_hmac_sha256_update(&m, sn, 32);
	sd_hmac_sha256_update(&m, rs, 8);
	sd_hmac_sha256_final(&m, out);
}

/* Connect and go through the admission by hand as rank/size with token:
 * HELLO, CHALLENGE (whose proof is checked against token when
 * *rank0_proved is wanted), AUTH.  Returns the socket, with the AUTH sent,
 * or -1 with the reason of a REJECT in why. */
static int raw_join(struct ctx *c, uint32_t version, int32_t rank, int32_t size, const char *token, char *why,
		    size_t n, int *rank0_proved)
{
	uint8_t buf[600], cn[32], mac[32];
	uint32_t type = 0, v;
	size_t len;
	long got;
	int fd = raw_connect(c, 3000);

	why[0] = '\0';
	if (fd < 0) {
		snprintf(why, n, "(cannot connect)");
		return -1;
	}
	for (int i = 0; i < 32; i++)
		cn[i] = (uint8_t)(rand() ^ (getpid() * 7 + i));
	len = raw_hello(buf, version, rank, size, cn);
	(void)!write(fd, buf, len);
	got = raw_frame(fd, 3000, &type, buf, sizeof(buf));
	if (got >= 4 && type == W_REJECT) {
		uint32_t l;

		memcpy(&l, buf, 4);
		l = ntohl(l);
		if (l < n && (size_t)got >= 4 + l) {
			memcpy(why, buf + 4, l);
			why[l] = '\0';
		}
		close(fd);
		return -1;
	}
	if (got != 64 || type != W_CHALLENGE) {
		snprintf(why, n, "(no CHALLENGE: type %u, %ld bytes)", type, got);
		close(fd);
		return -1;
	}
	if (rank0_proved) {
		raw_mac(token, "rank 0", cn, buf, rank, size, mac);
		*rank0_proved = memcmp(mac, buf + 32, 32) == 0;
	}
	raw_mac(token, "rank", cn, buf, rank, size, mac);
	/* AUTH: MAC, pid, host id */
	{
		uint8_t a[8 + 32 + 8 + 8];

		v = htonl(W_AUTH);
		memcpy(a, &v, 4);
		v = htonl(32 + 8 + 8);
		memcpy(a + 4, &v, 4);
		memcpy(a + 8, mac, 32);
		v = htonl((uint32_t)getpid());
		memcpy(a + 40, &v, 4);
		v = htonl(8);
		memcpy(a + 44, &v, 4);
		memcpy(a + 48, "raw-host", 8);
		(void)!write(fd, a, sizeof(a));
	}
	return fd;
}

/* Go through the admission by hand; the reason of the REJECT that follows
 * in why ("" if none; "(welcomed)" if a WELCOME came instead). */
static void raw_rejected(struct ctx *c, uint32_t version, int32_t rank, int32_t size, const char *token, char *why,
			 size_t n)
{
	uint8_t buf[4096];
	uint32_t type = 0;
	long got;
	int fd = raw_join(c, version, rank, size, token, why, n, NULL);

	if (fd < 0)
		return;
	got = raw_frame(fd, 3000, &type, buf, sizeof(buf));
	close(fd);
	if (got >= 4 && type == W_REJECT) {
		uint32_t l;

		memcpy(&l, buf, 4);
		l = ntohl(l);
		if (l < n && (size_t)got >= 4 + l) {
			memcpy(why, buf + 4, l);
			why[l] = '\0';
		}
	} else if (type == W_WELCOME) {
		snprintf(why, n, "(welcomed)");
	}
}

/* ---- scenarios: each function is one process of the scenario ------------ */

static void sc_size1(struct ctx *c)
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
	CHECK(c, sd_boot_allgather(b, mine, all, 5, now() + SEC, &err) == 0 && !strcmp(all, "abcd"),
	      "all-gather copies");
	CHECK(c, sd_boot_poll(b, &who, err.msg, sizeof(err.msg)) == SMDDP_OK, "poll: nothing happened");
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
static void sc_world(struct ctx *c)
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
	CHECK(c, sd_boot_poll(b, &who, err.msg, sizeof(err.msg)) == SMDDP_OK, "poll: nothing happened (%s)", err.msg);
	if (rank != 0) {
		sd_boot_close(b, 1);
		say(c, "closed cleanly");
		return;
	}
	/* The others close cleanly now: no death may be reported. */
	rc = poll_for(b, 300, &who, err.msg, sizeof(err.msg), &took);
	CHECK(c, rc == SMDDP_OK, "no false death after the others' clean close (rc %d: %s)", rc, err.msg);
	sd_boot_close(b, 1);
}

/* Many ranks at once on the backlog: rendezvous, small all-gathers, clean close. */
static void sc_many(struct ctx *c)
{
	struct sd_boot *b = join(c, c->idx, c->nproc, 10000);

	if (!b)
		return;
	gather_check(c, b, c->idx, c->nproc, 0, 1, 0);
	gather_check(c, b, c->idx, c->nproc, 300, 2, 1);
	sd_boot_close(b, 1);
}

/* Rank 0 closes cleanly first: the others see no death, then a clear error. */
static void sc_close0(struct ctx *c)
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
	rc = poll_for(b, 300, &who, err.msg, sizeof(err.msg), &took);
	CHECK(c, rc == SMDDP_OK, "no false death after rank 0's clean close (rc %d: %s)", rc, err.msg);
	rc = sd_boot_allgather(b, &x, all, 1, now() + SEC, &err);
	CHECK(c, rc == SMDDP_EPEER, "an all-gather after rank 0 left: EPEER (%s)", err.msg);
	sd_boot_close(b, 1);
}

/* A wrong token: that rank is refused, rank 0 times out naming it. */
static void sc_token(struct ctx *c)
{
	struct sd_err err = {""};
	char logpath[64], log[8192] = "";
	struct sd_boot_peer peers[3];
	struct sd_boot *b = NULL;
	uint64_t nonce, t0 = now();
	int rc;

	snprintf(c->who, sizeof(c->who), "rank %d/3", c->idx);
	if (c->idx == 0) {
		snprintf(logpath, sizeof(logpath), "/tmp/test_bootstrap.%d.log", (int)getpid());
		setenv("SMDDP_DEBUG_FILE", logpath, 1);
		setenv("SMDDP_DEBUG", "WARN", 1);
		struct sd_boot_params p = params(c, 0, 3, "job-secret", 1500);
		rc = sd_boot_init(&p, &b, peers, &nonce, &err);
		CHECK(c, rc == SMDDP_ETIMEDOUT, "rank 0 times out: rc %d", rc);
		CHECK(c, contains(err.msg, "rank(s) 1 of 3 did not connect within 1.5 s"), "err names rank 1: %s", err.msg);
		FILE *f = fopen(logpath, "r");
		if (f) {
			size_t n = fread(log, 1, sizeof(log) - 1, f);
			log[n] = '\0';
			fclose(f);
		}
		unlink(logpath);
		CHECK(c, contains(log, "rejected connection from 127.0.0.1:") &&
				 contains(log, "closed without answering the challenge: its job token (SMDDP_JOB_TOKEN) "
					       "differs from rank 0's"),
		      "rank 0 logged a WARN naming the peer's address and the reason");
		return;
	}
	struct sd_boot_params p = params(c, c->idx, 3, c->idx == 1 ? "not-the-secret" : "job-secret", 5000);
	rc = sd_boot_init(&p, &b, peers, &nonce, &err);
	if (c->idx == 1) {
		char want[128];

		/* Rank 1 finds out first: rank 0's proof does not match its token. */
		snprintf(want, sizeof(want), "rank 0 at 127.0.0.1:%s and rank 1 have different job tokens", c->port);
		CHECK(c, rc == SMDDP_ECONFIG, "a wrong token is ECONFIG: rc %d", rc);
		CHECK(c, contains(err.msg, want), "err: %s", err.msg);
		CHECK(c, now() - t0 < SEC, "refused at once (%.2f s)", (double)(now() - t0) / 1e9);
	} else {
		CHECK(c, rc == SMDDP_ETIMEDOUT, "rank 2 learns that rank 0 gave up: rc %d", rc);
		CHECK(c, contains(err.msg, "gave up") && contains(err.msg, "rank(s) 1 of 3"), "err: %s", err.msg);
		CHECK(c, now() - t0 < 3 * SEC, "before its own deadline (%.2f s)", (double)(now() - t0) / 1e9);
	}
}

/* Impostors and strangers come and go while the real ranks complete. */
static void sc_strangers(struct ctx *c)
{
	struct sd_boot_peer peers[8];
	struct sd_boot *b = NULL;
	struct sd_err err = {""};
	uint8_t hdr[8];
	uint64_t nonce, t0 = now();
	long n;
	int rc, fd;

	switch (c->idx) {
	case 0:
	case 1:
	case 2:
		if (c->idx == 2)
			msleep(800); /* the duplicate rank 1 comes before rank 2 */
		b = join(c, c->idx, 3, 5000);
		if (b) {
			gather_check(c, b, c->idx, 3, 100, 1, 0);
			sd_boot_close(b, 1);
		}
		return;
	case 3: {
		struct sd_boot_params p = params(c, 1, 4, "job-secret", 3000);
		snprintf(c->who, sizeof(c->who), "impostor size 4");
		rc = sd_boot_init(&p, &b, peers, &nonce, &err);
		CHECK(c, rc == SMDDP_ECONFIG && contains(err.msg, "world size 4 differs from rank 0's 3"), "rc %d: %s",
		      rc, err.msg);
		return;
	}
	case 4: {
		struct sd_boot_params p = params(c, 7, 3, "job-secret", 3000);
		p.size = 8; /* a consistent but different world */
		snprintf(c->who, sizeof(c->who), "impostor rank 7");
		rc = sd_boot_init(&p, &b, peers, &nonce, &err);
		CHECK(c, rc == SMDDP_ECONFIG && contains(err.msg, "refused rank 7"), "rc %d: %s", rc, err.msg);
		return;
	}
	case 5: {
		struct sd_boot_params p = params(c, 1, 3, "job-secret", 3000);
		snprintf(c->who, sizeof(c->who), "duplicate rank 1");
		msleep(300);
		rc = sd_boot_init(&p, &b, peers, &nonce, &err);
		CHECK(c, rc == SMDDP_ECONFIG && contains(err.msg, "duplicate rank"), "rc %d: %s", rc, err.msg);
		return;
	}
	case 6:
		snprintf(c->who, sizeof(c->who), "garbage stranger");
		fd = raw_connect(c, 3000);
		CHECK(c, fd >= 0, "connected");
		if (fd < 0)
			return;
		(void)!write(fd, "GET / HTTP/1.0\r\n\r\n", 18);
		n = read_to_eof(fd, 1000, hdr);
		CHECK(c, n >= 8 && hdr[3] == W_REJECT, "got a REJECT frame (%ld bytes, type %d)", n, hdr[3]);
		CHECK(c, n > 0, "then EOF within 1 s");
		close(fd);
		return;
	case 7:
		snprintf(c->who, sizeof(c->who), "huge-frame stranger");
		fd = raw_connect(c, 3000);
		if (fd < 0)
			{
			CHECK(c, 0, "connected");
			return;
		}
		{
			uint8_t h[8] = {0, 0, 0, W_HELLO, 0xff, 0xff, 0xff, 0xf0};
			(void)!write(fd, h, 8);
		}
		n = read_to_eof(fd, 1000, hdr);
		CHECK(c, n >= 8 && hdr[3] == W_REJECT, "a 4 GB hello is refused with REJECT and EOF (%ld bytes)", n);
		close(fd);
		return;
	case 8:
	case 9:
		snprintf(c->who, sizeof(c->who), c->idx == 8 ? "silent stranger" : "half-hello stranger");
		fd = raw_connect(c, 3000);
		if (fd < 0)
			{
			CHECK(c, 0, "connected");
			return;
		}
		if (c->idx == 9)
			(void)!write(fd, "\0\0\0\1", 4);
		n = read_to_eof(fd, 3000, hdr);
		CHECK(c, n >= 0 && now() - t0 < 2500 * MS, "closed when the rendezvous ended (%.2f s)",
		      (double)(now() - t0) / 1e9);
		close(fd);
		return;
	case 10: {
		char why[300];

		snprintf(c->who, sizeof(c->who), "raw hello rank 5 of 3");
		raw_rejected(c, W_VERSION, 5, 3, "job-secret", why, sizeof(why));
		CHECK(c, contains(why, "rank 5 is out of range 1..2"), "REJECT says: %s", why);
		raw_rejected(c, W_VERSION, 0, 3, "job-secret", why, sizeof(why));
		CHECK(c, contains(why, "rank 0 is out of range 1..2"), "a second rank 0: REJECT says: %s", why);
		return;
	}
	case 11: {
		char why[300];

		snprintf(c->who, sizeof(c->who), "raw hello version 99");
		raw_rejected(c, 99, 1, 3, "job-secret", why, sizeof(why));
		CHECK(c, contains(why, "protocol version 99 differs"), "REJECT says: %s", why);
		raw_rejected(c, 1, 1, 3, "job-secret", why, sizeof(why));
		CHECK(c, contains(why, "protocol version 1 differs from rank 0's 2"),
		      "a version-1 hello (the token in clear): REJECT says: %s", why);
		raw_rejected(c, W_VERSION, 1, 3, "", why, sizeof(why));
		CHECK(c, contains(why, "wrong job token"), "no token: REJECT says: %s", why);
		return;
	}
	}
}

/* Read rank 0's log file (and remove it). */
static void slurp(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "r");

	buf[0] = '\0';
	if (f) {
		size_t got = fread(buf, 1, n - 1, f);

		buf[got] = '\0';
		fclose(f);
	}
	unlink(path);
}

static int count(const char *s, const char *sub)
{
	int k = 0;

	for (const char *p = s; (p = strstr(p, sub)) != NULL; p += strlen(sub))
		k++;
	return k;
}

/* A stranger with a well-formed hello claiming rank 1, but no token: it
 * gets a CHALLENGE that says nothing about the job, then a REJECT (never a
 * WELCOME), and the real rank 1 still gets in. */
static void sc_stranger_hello(struct ctx *c)
{
	char why[300] = "";

	if (c->idx == 0 || c->idx == 2) {
		if (c->idx == 2)
			msleep(600); /* after the stranger */
		struct sd_boot *b = join(c, c->idx == 0 ? 0 : 1, 2, 4000);
		if (b)
			sd_boot_close(b, 1);
		return;
	}
	snprintf(c->who, sizeof(c->who), "stranger claiming rank 1");
	msleep(100);
	int proved = 1, fd = raw_join(c, W_VERSION, 1, 2, "", why, sizeof(why), &proved);
	CHECK(c, fd >= 0, "challenged (%s)", why);
	if (fd < 0)
		return;
	CHECK(c, !proved, "the CHALLENGE does not verify with the empty token");
	uint8_t buf[4096];
	uint32_t type = 0;
	long got = raw_frame(fd, 3000, &type, buf, sizeof(buf));
	CHECK(c, got > 4 && type == W_REJECT, "answered with a REJECT (type %u, %ld bytes)", type, got);
	if (got > 4 && type == W_REJECT) {
		buf[got] = '\0';
		CHECK(c, contains((char *)buf + 4, "wrong job token"), "REJECT says: %s", (char *)buf + 4);
		CHECK(c, !contains((char *)buf + 4, "host-0"), "and names no host of the job");
	}
	close(fd);
	/* And a stranger that guesses the token wrong in the same way. */
	raw_rejected(c, W_VERSION, 1, 2, "job-secreT", why, sizeof(why));
	CHECK(c, contains(why, "wrong job token"), "a wrong token: REJECT says: %s", why);
}

/* Without a token: loopback is admitted; another address is refused
 * (rank 1 learns why), unless allow_no_token. */
static void sc_tokenless(struct ctx *c)
{
	struct sd_boot_peer peers[2];
	struct sd_boot *b = NULL;
	struct sd_err err = {""};
	uint64_t nonce;
	int allow = !strcmp(c->scen, "tokenless-allowed"), remote = strcmp(c->addr, "127.0.0.1") != 0;
	struct sd_boot_params p = params(c, c->idx, 2, "", 3000);
	int rc;

	snprintf(c->who, sizeof(c->who), "rank %d/2", c->idx);
	p.allow_no_token = allow && c->idx == 0;
	rc = sd_boot_init(&p, &b, peers, &nonce, &err);
	if (!remote || allow) {
		CHECK(c, rc == SMDDP_OK, "tokenless rendezvous on %s%s succeeds (rc %d: %s)", c->addr,
		      allow ? " (allowed)" : "", rc, err.msg);
	} else if (c->idx == 1) {
		CHECK(c, rc == SMDDP_ECONFIG && contains(err.msg, "no job token") && contains(err.msg, "loopback") &&
				 contains(err.msg, "SMDDP_JOB_TOKEN") && contains(err.msg, "SMDDP_ALLOW_NO_TOKEN"),
		      "tokenless rank 1 from %s refused: ECONFIG (rc %d): %s", c->addr, rc, err.msg);
	} else {
		CHECK(c, rc == SMDDP_ETIMEDOUT && contains(err.msg, "no job token"),
		      "rank 0 times out naming the reason (rc %d): %s", rc, err.msg);
	}
	if (b)
		sd_boot_close(b, 1);
}

/* 30 garbage connections: at most 10 WARN lines, then a count. */
static void sc_flood(struct ctx *c)
{
	char logpath[64], log[65536];

	if (c->idx == 0) {
		snprintf(logpath, sizeof(logpath), "/tmp/test_bootstrap.flood.%d.log", (int)getpid());
		setenv("SMDDP_DEBUG_FILE", logpath, 1);
		setenv("SMDDP_DEBUG", "WARN", 1);
		struct sd_boot *b = join(c, 0, 2, 5000);
		if (b)
			sd_boot_close(b, 1);
		slurp(logpath, log, sizeof(log));
		int k = count(log, "rejected connection from");
		CHECK(c, k == 10, "10 WARN lines for 30 rejected connections (%d)", k);
		CHECK(c, contains(log, "20 more rejected connection(s) not logged"), "and a count of the rest");
		return;
	}
	if (c->idx == 1) {
		snprintf(c->who, sizeof(c->who), "flood");
		for (int i = 0; i < 30; i++) {
			uint8_t hdr[8];
			int fd = raw_connect(c, 3000);

			if (fd < 0)
				continue;
			(void)!write(fd, "GET / HTTP/1.0\r\n\r\n", 18);
			(void)read_to_eof(fd, 1000, hdr);
			close(fd);
		}
		return;
	}
	msleep(1500);
	struct sd_boot *b = join(c, 1, 2, 3000);
	if (b)
		sd_boot_close(b, 1);
}

/* A stranger silent for 5 s is told so and closed, while rank 0 waits on. */
static void sc_silent(struct ctx *c)
{
	uint64_t t0 = now();
	uint8_t hdr[8];
	long n;
	int fd;

	if (c->idx == 0) {
		struct sd_boot *b = join(c, 0, 2, 9000);
		if (b)
			sd_boot_close(b, 1);
		return;
	}
	if (c->idx == 2) {
		msleep(5700);
		struct sd_boot *b = join(c, 1, 2, 3000);
		if (b)
			sd_boot_close(b, 1);
		return;
	}
	snprintf(c->who, sizeof(c->who), "silent stranger");
	fd = raw_connect(c, 3000);
	if (fd < 0)
		{
			CHECK(c, 0, "connected");
			return;
		}
	n = read_to_eof(fd, 7000, hdr);
	double s = (double)(now() - t0) / 1e9;
	CHECK(c, n >= 8 && hdr[3] == W_REJECT && s > 4.5 && s < 6.5, "REJECT and EOF after the 5 s hello limit (%.2f s)",
	      s);
	close(fd);
}

/* World of 4 where rank 3 never comes; rank 1 says hello and dies: the
 * rendezvous fails with EPEER naming it, on rank 0 and on the waiting rank 2. */
static void sc_die_in_rendezvous(struct ctx *c)
{
	struct sd_boot_peer peers[3];
	struct sd_boot *b = NULL;
	struct sd_err err = {""};
	uint64_t nonce, t0 = now();
	int rc;

	if (c->idx == 1) {
		char why[300];
		int fd, proved = 0;

		snprintf(c->who, sizeof(c->who), "raw rank 1");
		msleep(200);
		fd = raw_join(c, W_VERSION, 1, 4, "job-secret", why, sizeof(why), &proved);
		if (fd < 0) {
			CHECK(c, 0, "admitted (%s)", why);
			return;
		}
		CHECK(c, proved, "rank 0's CHALLENGE proves that it knows the token");
		msleep(200);
		say(c, "closing without a word");
		close(fd);
		return;
	}
	snprintf(c->who, sizeof(c->who), "rank %d/4", c->idx);
	struct sd_boot_params p = params(c, c->idx, 4, "job-secret", 4000);
	rc = sd_boot_init(&p, &b, peers, &nonce, &err);
	CHECK(c, rc == SMDDP_EPEER && contains(err.msg, "rank 1 ") && contains(err.msg, "rendezvous"),
	      "EPEER naming rank 1 (rc %d): %s", rc, err.msg);
	CHECK(c, now() - t0 < 2 * SEC, "long before the deadline (%.2f s)", (double)(now() - t0) / 1e9);
}

/* Rank 0 starts 300 ms after the others. */
static void sc_late0(struct ctx *c)
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

static void sc_no_rank0(struct ctx *c)
{
	struct sd_boot_params p = params(c, 1, 2, "", 500);
	struct sd_boot_peer peers[2];
	struct sd_boot *b = NULL;
	uint64_t nonce, t0 = now();
	struct sd_err err = {""};
	char want[128];
	int rc;

	snprintf(c->who, sizeof(c->who), "rank 1/2");
	rc = sd_boot_init(&p, &b, peers, &nonce, &err);
	snprintf(want, sizeof(want), "could not reach rank 0 at 127.0.0.1:%s within 0.5 s (last error: Connection refused)",
		 c->port);
	CHECK(c, rc == SMDDP_ETIMEDOUT && contains(err.msg, want) && contains(err.msg, "MASTER_ADDR/MASTER_PORT"),
	      "ETIMEDOUT (rc %d): %s", rc, err.msg);
	double s = (double)(now() - t0) / 1e9;
	CHECK(c, s > 0.4 && s < 1.5, "gave up at its deadline (%.2f s)", s);
}

static void sc_port_busy(struct ctx *c)
{
	struct sd_boot_params p = params(c, 0, 2, "", 2000);
	struct sockaddr_in sa = {0};
	struct sd_boot_peer peers[2];
	struct sd_boot *b = NULL;
	uint64_t nonce, t0 = now();
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
	CHECK(c, now() - t0 < SEC, "at once");
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

/* A rank killed after the rendezvous; mode 0: others poll, 1: others are in an all-gather. */
static void killed(struct ctx *c, int victim, int in_gather)
{
	int rank = c->idx, size = c->nproc, who = -1, rc;
	struct sd_boot *b = join(c, rank, size, 5000);
	struct sd_err err = {""};
	char want[64];
	uint64_t took;

	if (!b)
		return;
	gather_check(c, b, rank, size, 8, 1, 0); /* everyone is past the rendezvous */
	if (rank == victim) {
		say(c, "killing myself with SIGKILL");
		raise(SIGKILL);
	}
	if (in_gather) {
		uint8_t *all = malloc((size_t)size * BIG), *mine = calloc(1, BIG);
		uint64_t t0 = now();

		rc = sd_boot_allgather(b, mine, all, BIG, now() + 5 * SEC, &err);
		took = now() - t0;
		free(all);
		free(mine);
		who = victim; /* the all-gather names it in err.msg only */
	} else {
		rc = poll_for(b, 3000, &who, err.msg, sizeof(err.msg), &took);
	}
	snprintf(want, sizeof(want), "rank %d (pid ", victim);
	CHECK(c, rc == SMDDP_EPEER && who == victim && contains(err.msg, want),
	      "%s reports EPEER naming rank %d (rc %d, rank %d): %s", in_gather ? "all-gather" : "poll", victim, rc,
	      who, err.msg);
	CHECK(c, took < (rank == 0 || victim == 0 ? 1 : 2) * SEC, "within %d s (%.3f s)",
	      rank == 0 || victim == 0 ? 1 : 2, (double)took / 1e9);
	if (rank == 0)
		CHECK(c, contains(err.msg, "closed its connection to rank 0: it died or was killed"), "the sentence says so");
	/* Sticky. */
	int who2 = -1;
	rc = sd_boot_poll(b, &who2, err.msg, sizeof(err.msg));
	CHECK(c, rc == SMDDP_EPEER && who2 == victim, "poll again: still EPEER naming rank %d", victim);
	sd_boot_close(b, 0);
}

static void sc_kill3(struct ctx *c)
{
	killed(c, 3, 0);
}

static void sc_kill3_gather(struct ctx *c)
{
	killed(c, 3, 1);
}

static void sc_kill0(struct ctx *c)
{
	killed(c, 0, 0);
}

static void sc_kill0_gather(struct ctx *c)
{
	killed(c, 0, 1);
}

static void aborted(struct ctx *c, int aborter, int in_gather)
{
	int rank = c->idx, size = c->nproc, who = -1, rc;
	struct sd_boot *b = join(c, rank, size, 5000);
	struct sd_err err = {""};
	char why[64];
	uint64_t took;

	if (!b)
		return;
	snprintf(why, sizeof(why), "test abort from rank %d", aborter);
	gather_check(c, b, rank, size, 8, 1, 0);
	if (rank == aborter) {
		uint64_t t0 = now();

		sd_boot_abort(b, why);
		CHECK(c, now() - t0 < 200 * MS, "sd_boot_abort returns at once");
		rc = sd_boot_poll(b, &who, err.msg, sizeof(err.msg));
		CHECK(c, rc == SMDDP_EABORTED, "and this rank's channel is aborted (rc %d: %s)", rc, err.msg);
		sd_boot_close(b, 0);
		return;
	}
	if (in_gather) {
		uint8_t *all = malloc((size_t)size * BIG), *mine = calloc(1, BIG);
		uint64_t t0 = now();

		rc = sd_boot_allgather(b, mine, all, BIG, now() + 5 * SEC, &err);
		took = now() - t0;
		who = aborter;
		free(all);
		free(mine);
	} else {
		rc = poll_for(b, 3000, &who, err.msg, sizeof(err.msg), &took);
	}
	CHECK(c, rc == SMDDP_EABORTED && who == aborter && contains(err.msg, why),
	      "%s reports EABORTED naming rank %d (rc %d, rank %d): %s", in_gather ? "all-gather" : "poll", aborter,
	      rc, who, err.msg);
	CHECK(c, took < SEC, "within 1 s (%.3f s)", (double)took / 1e9);
	sd_boot_close(b, 0);
}

static void sc_abort2(struct ctx *c)
{
	aborted(c, 2, 0);
}

static void sc_abort2_gather(struct ctx *c)
{
	aborted(c, 2, 1);
}

static void sc_abort0(struct ctx *c)
{
	aborted(c, 0, 0);
}

/* Rank 1 gathers 8 bytes, the others 4: a clear error everywhere, no hang. */
static void sc_mismatch(struct ctx *c)
{
	int rank = c->idx, size = c->nproc, rc;
	struct sd_boot *b = join(c, rank, size, 5000);
	struct sd_err err = {""};
	char mine[8] = {0}, all[64];
	uint64_t t0 = now();

	if (!b)
		return;
	rc = sd_boot_allgather(b, mine, all, rank == 1 ? 8 : 4, now() + 5 * SEC, &err);
	CHECK(c, rc != SMDDP_OK && rc != SMDDP_ETIMEDOUT && contains(err.msg, "different collectives"),
	      "mismatched all-gather fails at once (rc %d: %s)", rc, err.msg);
	CHECK(c, now() - t0 < 2 * SEC, "within 2 s");
	sd_boot_close(b, 0);
}

/* Rank 2 never joins the all-gather: the others time out, naming it. */
static void sc_gather_timeout(struct ctx *c)
{
	int rank = c->idx, size = c->nproc, rc;
	struct sd_boot *b = join(c, rank, size, 5000);
	struct sd_err err = {""};
	char mine[4] = {0}, all[12];

	if (!b)
		return;
	if (rank == 2) {
		msleep(900);
		sd_boot_close(b, 1);
		return;
	}
	rc = sd_boot_allgather(b, mine, all, 4, now() + 500 * MS, &err);
	if (rank == 0)
		CHECK(c, rc == SMDDP_ETIMEDOUT && contains(err.msg, "rank(s) 2 of 3 did not contribute"), "rc %d: %s", rc,
		      err.msg);
	else
		CHECK(c, rc == SMDDP_ETIMEDOUT && contains(err.msg, "rank(s) 2 of 3 did not contribute"),
		      "rc %d, naming the missing rank as rank 0 saw it: %s", rc, err.msg);
	rc = sd_boot_allgather(b, mine, all, 4, now() + 500 * MS, &err);
	CHECK(c, rc != SMDDP_OK && (contains(err.msg, "out of step") || contains(err.msg, "gave up")),
	      "the next all-gather refuses at once: %s", err.msg);
	msleep(300); /* rank 0 must see its own time-out, not this rank's close */
	sd_boot_close(b, 0);
}

static void sc_ipv6(struct ctx *c)
{
	struct sd_boot *b = join(c, c->idx, c->nproc, 5000);

	if (b) {
		gather_check(c, b, c->idx, c->nproc, 64, 1, 0);
		sd_boot_close(b, 1);
	}
}

/* ---- the runner --------------------------------------------------------- */

static int total_bad;

static int free_port(int family, char *port, size_t n)
{
	struct sockaddr_storage ss = {0};
	socklen_t sl = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	int fd = socket(family, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	ss.ss_family = (sa_family_t)family;
	if (family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else
		((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
	if (bind(fd, (struct sockaddr *)&ss, sl) || getsockname(fd, (struct sockaddr *)&ss, &sl)) {
		close(fd);
		return -1;
	}
	snprintf(port, n, "%d",
		 ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port : ((struct sockaddr_in6 *)&ss)->sin6_port));
	close(fd);
	return 0;
}

struct run {
	const char *name;
	int nproc;
	pid_t pids[64];
	int alive;
	uint64_t end;
	unsigned killmask; /* processes that kill themselves */
};

static struct run bg; /* the slow scenario, reaped by whoever waits */

static void start(struct run *r, const char *name, int nproc, void (*fn)(struct ctx *), const char *addr,
		  unsigned limit_s, unsigned killmask)
{
	struct ctx c = {0};

	c.scen = name;
	c.nproc = nproc;
	c.addr = addr;
	if (free_port(strchr(addr, ':') ? AF_INET6 : AF_INET, c.port, sizeof(c.port))) {
		printf("[%s] FAIL cannot find a free port\n", name);
		total_bad++;
		r->alive = 0;
		return;
	}
	/* Under a sanitizer every process runs several times slower:
	 * make check-sanitize stretches the scenarios' limits alike. */
	const char *scale = getenv("TEST_TIME_SCALE");
	if (scale && atoi(scale) > 1)
		limit_s *= (unsigned)atoi(scale);
	printf("[%s] %d process(es) on %s port %s\n", name, nproc, addr, c.port);
	fflush(stdout);
	r->name = name;
	r->nproc = nproc;
	r->killmask = killmask;
	r->end = now() + limit_s * SEC;
	r->alive = 0;
	for (int i = 0; i < nproc; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			alarm(limit_s);
			c.idx = i;
			snprintf(c.who, sizeof(c.who), "process %d", i);
			fn(&c);
			fflush(stdout);
			_exit(c.bad ? 1 : 0);
		}
		r->pids[i] = pid;
		if (pid > 0)
			r->alive++;
	}
}

/* Reap every child of r; kill those past the limit. */
static void finish(struct run *r)
{
	while (r->alive > 0) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);
		int i;

		if (pid <= 0) {
			if (now() > r->end + 2 * SEC) {
				for (i = 0; i < r->nproc; i++)
					if (r->pids[i] > 0) {
						printf("[%s] FAIL process %d still running past the limit: killed\n",
						       r->name, i);
						kill(r->pids[i], SIGKILL);
						waitpid(r->pids[i], NULL, 0);
						r->pids[i] = 0;
						r->alive--;
						total_bad++;
					}
				break;
			}
			msleep(5);
			continue;
		}
		for (i = 0; i < r->nproc && r->pids[i] != pid; i++)
			;
		if (i == r->nproc) {
			/* A child of the background run: keep its status there. */
			for (i = 0; i < bg.nproc && bg.pids[i] != pid; i++)
				;
			if (i < bg.nproc) {
				bg.pids[i] = 0;
				bg.alive--;
				if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
					printf("[%s] FAIL process %d ended with status 0x%x\n", bg.name, i, st);
					total_bad++;
				}
			}
			continue;
		}
		r->pids[i] = 0;
		r->alive--;
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && (r->killmask & (1u << i)))
			continue;
		if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			printf("[%s] FAIL process %d ended with %s %d\n", r->name, i,
			       WIFSIGNALED(st) ? "signal" : "exit status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			total_bad++;
		}
	}
	fflush(stdout);
}

static void run(const char *name, int nproc, void (*fn)(struct ctx *), const char *addr, unsigned limit_s,
		unsigned killmask)
{
	struct run r = {0};
	uint64_t t0 = now();

	start(&r, name, nproc, fn, addr, limit_s, killmask);
	finish(&r);
	printf("[%s] done in %.2f s\n", name, (double)(now() - t0) / 1e9);
}

static int have_ipv6(void)
{
	char port[16];

	return free_port(AF_INET6, port, sizeof(port)) == 0;
}

int main(void)
{
	uint64_t t0 = now();

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_DFL); /* the library must not raise it */
	printf("test_bootstrap: rendezvous and out-of-band channel over loopback TCP\n");
	fflush(stdout);

	/* The slow one first, in the background. */
	start(&bg, "silent-5s", 3, sc_silent, "127.0.0.1", 12, 0);

	run("size-1", 1, sc_size1, "127.0.0.1", 5, 0);
	run("world-2", 2, sc_world, "127.0.0.1", 15, 0);
	run("world-3", 3, sc_world, "127.0.0.1", 15, 0);
	run("world-8", 8, sc_world, "127.0.0.1", 15, 0);
	run("world-48", 48, sc_many, "127.0.0.1", 15, 0);
	run("close-rank0-first", 3, sc_close0, "127.0.0.1", 5, 0);
	run("wrong-token", 3, sc_token, "127.0.0.1", 6, 0);
	run("strangers", 12, sc_strangers, "127.0.0.1", 6, 0);
	run("stranger-hello", 3, sc_stranger_hello, "127.0.0.1", 6, 0);
	run("tokenless-loopback", 2, sc_tokenless, "127.0.0.1", 6, 0);
	{
		static char ip[64];

		sd_boot_local_addr(ip, sizeof(ip));
		if (strcmp(ip, "127.0.0.1")) {
			run("tokenless-remote", 2, sc_tokenless, ip, 6, 0);
			run("tokenless-allowed", 2, sc_tokenless, ip, 6, 0);
		} else {
			printf("[tokenless-remote] skipped: no address here but loopback\n");
		}
	}
	run("flood", 3, sc_flood, "127.0.0.1", 8, 0);
	run("death-in-rendezvous", 3, sc_die_in_rendezvous, "127.0.0.1", 6, 0);
	run("rank0-late", 4, sc_late0, "127.0.0.1", 6, 0);
	run("no-rank0", 1, sc_no_rank0, "127.0.0.1", 5, 0);
	run("port-busy", 1, sc_port_busy, "127.0.0.1", 5, 0);
	run("kill-rank3", 4, sc_kill3, "127.0.0.1", 6, 1u << 3);
	run("kill-rank3-in-allgather", 4, sc_kill3_gather, "127.0.0.1", 8, 1u << 3);
	run("kill-rank0", 3, sc_kill0, "127.0.0.1", 6, 1u << 0);
	run("kill-rank0-in-allgather", 3, sc_kill0_gather, "127.0.0.1", 8, 1u << 0);
	run("abort-rank2", 4, sc_abort2, "127.0.0.1", 6, 0);
	run("abort-rank2-in-allgather", 4, sc_abort2_gather, "127.0.0.1", 6, 0);
	run("abort-rank0", 3, sc_abort0, "127.0.0.1", 6, 0);
	run("mismatch", 3, sc_mismatch, "127.0.0.1", 6, 0);
	run("allgather-timeout", 3, sc_gather_timeout, "127.0.0.1", 6, 0);
	if (have_ipv6())
		run("ipv6", 3, sc_ipv6, "::1", 6, 0);
	else
		printf("[ipv6] skipped: no IPv6 loopback here\n");

	finish(&bg);
	printf("test_bootstrap: %s (%d failure(s)) in %.1f s\n", total_bad ? "FAIL" : "PASS", total_bad,
	       (double)(now() - t0) / 1e9);
	return total_bad ? 1 : 0;
}
