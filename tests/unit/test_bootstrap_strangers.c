/* test_bootstrap_strangers.c - test_bootstrap's scenarios of wrong tokens, strangers and raw peers
 * at rank 0's port, with the raw wire helpers they speak through.
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

#include "hash/sha256.h"
#include "util/sd.h"
#include "bootstrap/bootstrap.h"
#include "test_bootstrap.h"

/* A raw TCP connection to rank 0's port, retried until it answers. */
static int raw_connect(struct ctx *c, unsigned ms)
{
	uint64_t end = sd_now_ns() + ms * MS;

	for (;;) {
		struct sockaddr_in sa = {0};
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		sa.sin_family = AF_INET;
		sa.sin_port = htons((uint16_t)atoi(c->port));
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		close(fd);
		if (sd_now_ns() >= end)
			return -1;
		msleep(10);
	}
}

/* Read until EOF or ms pass.  Returns bytes read (-1 on timeout); the first
 * 8 bytes land in hdr. */
static long read_to_eof(int fd, unsigned ms, uint8_t hdr[8])
{
	uint64_t end = sd_now_ns() + ms * MS;
	long total = 0;

	memset(hdr, 0, 8);
	for (;;) {
		struct pollfd pf = {fd, POLLIN, 0};
		uint8_t buf[4096];
		ssize_t n;
		int left = (int)((end > sd_now_ns() ? end - sd_now_ns() : 0) / MS);

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
	uint64_t end = sd_now_ns() + ms * MS;
	uint8_t hdr[8];
	size_t got = 0, len = 0;

	while (got < 8 + len) {
		struct pollfd pf = {fd, POLLIN, 0};
		int left = (int)((end > sd_now_ns() ? end - sd_now_ns() : 0) / MS);
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
int raw_join(struct ctx *c, uint32_t version, int32_t rank, int32_t size, const char *token, char *why,
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

/* A wrong token: that rank is refused, rank 0 times out naming it. */
void sc_token(struct ctx *c)
{
	struct sd_err err = {""};
	char logpath[64], log[8192] = "";
	struct sd_boot_peer peers[3];
	struct sd_boot *b = NULL;
	uint64_t nonce, t0 = sd_now_ns();
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
		CHECK(c, sd_now_ns() - t0 < SEC, "refused at once (%.2f s)", (double)(sd_now_ns() - t0) / 1e9);
	} else {
		CHECK(c, rc == SMDDP_ETIMEDOUT, "rank 2 learns that rank 0 gave up: rc %d", rc);
		CHECK(c, contains(err.msg, "gave up") && contains(err.msg, "rank(s) 1 of 3"), "err: %s", err.msg);
		CHECK(c, sd_now_ns() - t0 < 3 * SEC, "before its own deadline (%.2f s)", (double)(sd_now_ns() - t0) / 1e9);
	}
}

/* Impostors and strangers come and go while the real ranks complete. */
void sc_strangers(struct ctx *c)
{
	struct sd_boot_peer peers[8];
	struct sd_boot *b = NULL;
	struct sd_err err = {""};
	uint8_t hdr[8];
	uint64_t nonce, t0 = sd_now_ns();
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
		CHECK(c, n >= 0 && sd_now_ns() - t0 < 2500 * MS, "closed when the rendezvous ended (%.2f s)",
		      (double)(sd_now_ns() - t0) / 1e9);
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
void sc_stranger_hello(struct ctx *c)
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
void sc_tokenless(struct ctx *c)
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
void sc_flood(struct ctx *c)
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
void sc_silent(struct ctx *c)
{
	uint64_t t0 = sd_now_ns();
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
	double s = (double)(sd_now_ns() - t0) / 1e9;
	CHECK(c, n >= 8 && hdr[3] == W_REJECT && s > 4.5 && s < 6.5, "REJECT and EOF after the 5 s hello limit (%.2f s)",
	      s);
	close(fd);
}
