/* bootstrap.c - TCP rendezvous and the out-of-band channel (a star around rank 0).
 *
 * Design.  Every connection carries frames {u32 type, u32 length, payload},
 * integers in network byte order.  All sockets are non-blocking and every
 * wait is one poll() over all of them (plus, on rank 0 during rendezvous,
 * the listening socket and the connections that have not said hello yet),
 * bounded by a deadline.  Reads go frame by frame straight into a buffer of
 * the announced size, after checking that size against a limit that depends
 * on the state of the connection (a stranger may announce at most a hello);
 * writes go through a per-connection queue of reference-counted frames, so
 * that rank 0 sends one copy of an all-gather result to every rank and two
 * large transfers in opposite directions can never deadlock.
 *
 * Admission (protocol version 2).  A rank proves that it knows the job
 * token without sending it, and learns that rank 0 knows it too:
 *   rank -> 0   HELLO      magic, version, rank, size, client nonce (32 bytes)
 *   0 -> rank   CHALLENGE  server nonce (32), HMAC(token, "rank 0" nonces rank size)
 *   rank -> 0   AUTH       HMAC(token, "rank" nonces rank size), pid, host id
 * HMAC is HMAC-SHA-256 (lib/hash/sha256.c); both nonces are fresh, and the
 * two MACs carry different labels, so neither side can replay or reflect
 * the other's.  Nothing about the job (the table of ranks, pids, hosts)
 * leaves rank 0 before every rank has passed, in the WELCOME; a rank's own
 * pid and host leave it only once rank 0 has proved itself.  Without a
 * token (the empty key) the MACs prove nothing, so rank 0 then admits
 * only connections from a loopback address, unless told otherwise
 * (allow_no_token, SMDDP_ALLOW_NO_TOKEN).  A tokenless job on one host is
 * thus open to the other users of that host: see smddp(7).
 *
 * Rank 0 is the only one that sees every rank: when a connection closes
 * without a BYE, or an ABORT arrives, it records the failure (sticky) and
 * queues a DEATH or ABORT notice to every other rank, flushed in this and
 * every later call.  A rank's NOTE (its last error of its own, which left
 * its communicator working) stays with rank 0 and goes out with its DEATH;
 * rank 0's own NOTE goes to every rank, who see its connection close.  Frames that arrive outside a call that wants them (an
 * all-gather contribution while rank 0 is in sd_boot_poll) wait in a one-frame
 * stash per connection; a sequence number tells a stray frame from the right
 * one.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock/clock.h"
#include "config/param.h"
#include "util/sd.h"
#include "bootstrap/wire.h"

/* ---- rendezvous --------------------------------------------------------- */

static int listen_on(struct sd_boot *b, const struct sd_boot_params *p, struct sd_err *err)
{
	struct addrinfo hints = {0}, *res = NULL;
	int gai, e = 0;

	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	gai = getaddrinfo(p->addr[0] ? p->addr : NULL, p->port, &hints, &res);
	if (gai)
		return sd_err_set(err, SMDDP_ECONFIG,
				  "rank 0 cannot resolve its own address %s (MASTER_ADDR/MASTER_PORT): %s", b->where,
				  gai == EAI_SYSTEM ? strerror(errno) : gai_strerror(gai));
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int one = 1, fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);

		if (fd < 0) {
			e = errno;
			continue;
		}
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6) { /* "::" takes IPv4 ranks too */
			int zero = 0;

			(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		}
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, b->size + 128 > 4096 ? b->size + 128 : 4096) == 0) {
			b->lfd = fd;
			break;
		}
		e = errno;
		close(fd);
	}
	freeaddrinfo(res);
	if (b->lfd < 0)
		return sd_err_set(err, e == EADDRNOTAVAIL ? SMDDP_ECONFIG : SMDDP_ESYSTEM,
				  "rank 0 cannot listen on %s: %s%s", b->where, strerror(e),
				  e == EADDRINUSE      ? " (is another job using MASTER_PORT?)"
				  : e == EADDRNOTAVAIL ? " (is MASTER_ADDR an address of rank 0's host?)"
				  : e == EACCES	       ? " (ports below 1024 need privileges: pick another MASTER_PORT)"
						       : "");
	SD_TRACE(SD_SUB_BOOT, "rank 0 listening on %s", b->where);
	return SMDDP_OK;
}

int sd_boot_listen(int *fd, int *port, struct sd_err *err)
{
	static const int families[] = {AF_INET6, AF_INET};
	int e = 0;

	*fd = -1;
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
		struct sockaddr_storage ss = {0};
		socklen_t len;
		int one = 1, zero = 0, s = socket(families[i], SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

		if (s < 0) {
			e = errno;
			continue;
		}
		(void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		ss.ss_family = (sa_family_t)families[i];
		if (families[i] == AF_INET6) { /* "::" takes IPv4 ranks too */
			(void)setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
			len = sizeof(struct sockaddr_in6);
		} else {
			len = sizeof(struct sockaddr_in);
		}
		if (bind(s, (struct sockaddr *)&ss, len) == 0 && listen(s, 4096) == 0) {
			len = sizeof(ss);
			if (getsockname(s, (struct sockaddr *)&ss, &len) == 0) {
				*port = ntohs(families[i] == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
								      : ((struct sockaddr_in *)&ss)->sin_port);
				*fd = s;
				SD_TRACE(SD_SUB_BOOT, "listening on port %d for a rendezvous to come", *port);
				return SMDDP_OK;
			}
		}
		e = errno;
		close(s);
	}
	return sd_err_set(err, SMDDP_ESYSTEM, "cannot listen on a TCP port for the rendezvous: %s", strerror(e));
}

/* The local address of the route to host (no packet is sent: connecting a
 * UDP socket only picks the route); 0 if there is one and it is not
 * loopback. */
static int route_to(const char *host, char *buf, size_t len)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res = NULL;
	struct sockaddr_in me;
	socklen_t ml = sizeof(me);
	int fd, rc = -1;

	if (!host || !*host || getaddrinfo(host, "9", &hints, &res) != 0)
		return -1;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
	    getsockname(fd, (struct sockaddr *)&me, &ml) == 0 &&
	    (ntohl(me.sin_addr.s_addr) >> 24) != 127 &&
	    inet_ntop(AF_INET, &me.sin_addr, buf, (socklen_t)len))
		rc = 0;
	if (fd >= 0)
		close(fd);
	freeaddrinfo(res);
	return rc;
}

/* The address a unique id tells the other ranks to connect to.  On a host
 * with several interfaces the first one up may lead nowhere (a container
 * bridge, a management network), so where the job names its master
 * (torchrun, smddp-run and Slurm's scripts set MASTER_ADDR on every host)
 * the address of the route to it is taken: on the master's own host that
 * is the master address itself, elsewhere the interface facing it. */
void sd_boot_local_addr(char *buf, size_t len)
{
	const char *v = sd_param_str("SMDDP_BOOT_ADDR");
	struct ifaddrs *ifa = NULL;

	snprintf(buf, len, "127.0.0.1");
	if (v && *v) {
		snprintf(buf, len, "%s", v);
		return;
	}
	v = getenv("SMDDP_MASTER_ADDR");
	if (route_to(v && *v ? v : getenv("MASTER_ADDR"), buf, len) == 0)
		return;
	if (getifaddrs(&ifa) != 0)
		return;
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
		    (i->ifa_flags & IFF_LOOPBACK))
			continue;
		if (inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, buf,
			      (socklen_t)len))
			break;
	}
	freeifaddrs(ifa);
}

static void give_up(struct sd_boot *b, int rc, const char *why)
{
	struct frame *f = sd_boot_frame_str(F_GIVEUP, 0, 0, 1, rc, why);

	if (!f)
		return;
	sd_boot_broadcast(b, f, -1);
	sd_boot_frame_unref(f);
}

/* How long one poll may wait: until deadline, or with a gone() to ask,
 * until its next question. */
#define GONE_POLL_NS (100 * MS)
static uint64_t gone_deadline(const struct sd_boot_params *p, uint64_t deadline)
{
	uint64_t next = sd_now_ns() + GONE_POLL_NS;

	return p->gone && next < deadline ? next : deadline;
}

static int rendezvous0(struct sd_boot *b, const struct sd_boot_params *p, uint64_t *nonce, struct sd_err *err)
{
	uint64_t start = sd_now_ns();
	uint8_t *missing;
	int rc;

	if (p->listen_fd >= 0) {
		b->lfd = p->listen_fd;
	} else {
		rc = listen_on(b, p, err);
		if (rc)
			return rc;
	}
	b->pending = calloc(PENDING_MAX, sizeof(*b->pending));
	missing = calloc((size_t)b->size, 1);
	if (!b->pending || !missing) {
		free(missing);
		return sd_err_set(err, SMDDP_ENOMEM, "out of memory for the rendezvous of %d ranks", b->size);
	}
	for (;;) {
		int have = 1;

		for (int r = 1; r < b->size; r++)
			have += b->conns[r] != NULL;
		if (b->failed) {
			rc = sd_boot_report_fail(b, NULL, err);
			/* The ranks already in wait for the welcome: tell them why
			 * it will not come (rank 0's own failure, not a death). */
			if (b->key_differs != sd_boot_job_token_differs)
				give_up(b, rc, b->fail_err);
			break;
		}
		if (have == b->size) {
			rc = SMDDP_OK;
			break;
		}
		if (p->gone) {
			char why[300], msg[512];
			int r;

			for (r = 1; r < b->size; r++)
				if (!b->conns[r] && p->gone(p->gone_arg, r, why, sizeof(why)))
					break;
			if (r < b->size) {
				snprintf(msg, sizeof(msg), "rendezvous on %s: rank %d of %d will not come: %s",
					 b->where, r, b->size, why);
				sd_err_set(err, SMDDP_EPEER, "%s", msg);
				give_up(b, SMDDP_EPEER, msg);
				rc = SMDDP_EPEER;
				break;
			}
		}
		if (sd_now_ns() >= p->deadline_ns) {
			char list[200], msg[512];

			for (int r = 1; r < b->size; r++)
				missing[r] = b->conns[r] == NULL;
			sd_boot_fmt_ranks(list, sizeof(list), missing, b->size);
			snprintf(msg, sizeof(msg), "rendezvous on %s: rank(s) %s of %d did not connect within %g s%s%s",
				 b->where, list, b->size, sd_boot_span(p->deadline_ns, start),
				 b->last_reject[0] ? "; last rejected: " : "", b->last_reject);
			sd_err_set(err, SMDDP_ETIMEDOUT, "%s", msg);
			give_up(b, SMDDP_ETIMEDOUT, msg);
			rc = SMDDP_ETIMEDOUT;
			break;
		}
		sd_boot_pump(b, gone_deadline(p, p->deadline_ns), nonce);
	}
	free(missing);
	if (rc && b->key_differs != sd_boot_job_token_differs) {
		/* A failed shrink: survivors that come a little late would
		 * otherwise wait for a challenge until their deadline.  Those
		 * that come within a second are told why it failed. */
		uint64_t until = sd_now_ns() + 1000 * MS;
		char why[REASON_MAX];

		snprintf(why, sizeof(why), "the rendezvous failed before this rank came: %s",
			 err ? err->msg : smddp_strerror(rc));
		b->refuse_why = why;
		sd_boot_refuse_pending(b, why);
		while (sd_now_ns() < until)
			sd_boot_pump(b, until, NULL);
		b->refuse_why = NULL;
	}
	/* The rendezvous is over either way: nobody else may come in. */
	for (int i = 0; i < b->npending; i++) {
		SD_INFO(SD_SUB_BOOT, "closing connection from %s: the rendezvous is over", b->pending[i]->addr);
		sd_boot_conn_free(b->pending[i]);
	}
	b->npending = 0;
	close(b->lfd);
	b->lfd = -1;
	if (b->unwarned)
		SD_WARN(SD_SUB_BOOT, "%d more rejected connection(s) not logged (at most %d lines per %llu s)",
			b->unwarned, WARN_PER_WINDOW, WARN_WINDOW_NS / 1000000000ull);
	b->unwarned = 0;
	if (rc)
		return rc;

	/* WELCOME: nonce and the table of every rank. */
	size_t plen = 12;
	for (int r = 0; r < b->size; r++)
		plen += 8 + strlen(b->ids[r].hostid);
	struct frame *f = sd_boot_frame_new(F_WELCOME, plen);
	if (!f)
		return sd_err_set(err, SMDDP_ENOMEM, "out of memory for the rendezvous of %d ranks", b->size);
	*nonce = sd_boot_random64();
	uint8_t *q = f->data + 8;
	sd_boot_put64(q, *nonce);
	sd_boot_put32(q + 8, (uint32_t)b->size);
	q += 12;
	for (int r = 0; r < b->size; r++) {
		size_t hl = strlen(b->ids[r].hostid);

		sd_boot_put32(q, (uint32_t)b->ids[r].pid);
		sd_boot_put32(q + 4, (uint32_t)hl);
		memcpy(q + 8, b->ids[r].hostid, hl);
		q += 8 + hl;
	}
	sd_boot_broadcast(b, f, -1);
	sd_boot_frame_unref(f);
	b->ready = 1;
	/* Make sure every rank gets it (bounded by the same deadline). */
	while (sd_boot_output_pending(b) && !b->failed && sd_now_ns() < p->deadline_ns)
		sd_boot_pump(b, p->deadline_ns, NULL);
	if (b->failed)
		return sd_boot_report_fail(b, NULL, err);
	if (sd_boot_output_pending(b))
		return sd_err_set(err, SMDDP_ETIMEDOUT,
				  "rendezvous on %s: the welcome could not be sent to every rank within %g s", b->where,
				  sd_boot_span(p->deadline_ns, start));
	return SMDDP_OK;
}

static int connect_once(const struct addrinfo *ai, uint64_t deadline, int *err)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
	socklen_t sl = sizeof(*err);

	if (fd < 0) {
		*err = errno;
		return -1;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	if (errno != EINPROGRESS && errno != EINTR) {
		*err = errno;
		close(fd);
		return -1;
	}
	for (;;) {
		struct pollfd pf = {fd, POLLOUT, 0};
		int n = poll(&pf, 1, sd_boot_ms_until(deadline));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			*err = n == 0 ? ETIMEDOUT : errno;
			close(fd);
			return -1;
		}
		break;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &sl) < 0)
		*err = errno;
	if (*err) {
		close(fd);
		return -1;
	}
	return fd;
}

/* *fd: a socket connected to rank 0, retrying until the deadline. */
static int connect_hub(struct sd_boot *b, const struct sd_boot_params *p, int *fdp, struct sd_err *err)
{
	uint64_t start = sd_now_ns(), backoff = 10 * MS;
	char last[200] = "none";

	for (;;) {
		struct addrinfo hints = {0}, *res = NULL;
		int gai;

		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		gai = getaddrinfo(p->addr, p->port, &hints, &res);
		if (gai == 0) {
			for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
				int e = 0;
				/* One attempt may not eat the whole deadline: another address may answer. */
				uint64_t lim = sd_now_ns() + 2000 * MS;
				int fd = connect_once(ai, lim < p->deadline_ns ? lim : p->deadline_ns, &e);

				if (fd >= 0) {
					freeaddrinfo(res);
					*fdp = fd;
					return SMDDP_OK;
				}
				snprintf(last, sizeof(last), "%s", strerror(e));
			}
			freeaddrinfo(res);
		} else if (gai == EAI_AGAIN || gai == EAI_SYSTEM || gai == EAI_NONAME || gai == EAI_FAIL
#ifdef EAI_NODATA
			   || gai == EAI_NODATA
#endif
		) {
			/* Names of rank 0 may appear late (DNS of a starting cluster): retry. */
			snprintf(last, sizeof(last), "cannot resolve %s: %s", p->addr,
				 gai == EAI_SYSTEM ? strerror(errno) : gai_strerror(gai));
		} else {
			return sd_err_set(err, SMDDP_ECONFIG,
					  "rank %d cannot resolve rank 0's address %s (MASTER_ADDR/MASTER_PORT): %s",
					  b->rank, b->where, gai_strerror(gai));
		}
		uint64_t left = sd_boot_left_ns(p->deadline_ns);
		char why[300];

		if (p->gone && p->gone(p->gone_arg, 0, why, sizeof(why)))
			return sd_err_set(err, SMDDP_EPEER, "rank %d cannot reach rank 0 at %s: %s", b->rank,
					  b->where, why);
		if (!left)
			return sd_err_set(err, SMDDP_ETIMEDOUT,
					  "could not reach rank 0 at %s within %g s (last error: %s): is rank 0 running, and are "
					  "MASTER_ADDR/MASTER_PORT the same for every rank?", b->where,
					  sd_boot_span(p->deadline_ns, start), last);
		sd_boot_sleep_ns(backoff < left ? backoff : left);
		backoff = backoff * 2 > 500 * MS ? 500 * MS : backoff * 2;
	}
}

static int rendezvous(struct sd_boot *b, const struct sd_boot_params *p, uint64_t *nonce, struct sd_err *err)
{
	uint64_t start = sd_now_ns();
	struct frame *f;
	struct conn *c;
	int fd = -1, rc;

	rc = connect_hub(b, p, &fd, err);
	if (rc != SMDDP_OK)
		return rc;
	sd_boot_set_nodelay(fd);
	c = sd_boot_conn_new(fd);
	if (!c) {
		close(fd);
		return sd_err_set(err, SMDDP_ENOMEM, "out of memory");
	}
	c->rank = 0;
	snprintf(c->addr, sizeof(c->addr), "%s", b->where);
	b->conns[0] = c;
	if (sd_boot_random_fill(b->cnonce, NONCE_LEN) < 0)
		return sd_err_set(err, SMDDP_ESYSTEM,
				  "rank %d has no random numbers for the rendezvous (getrandom and /dev/urandom "
				  "failed)", b->rank);
	/* The hello says only who this rank claims to be: pid and host go in
	 * the AUTH, once rank 0 has shown that it knows the token. */
	f = sd_boot_frame_new(F_HELLO, 8 + 12 + NONCE_LEN);
	if (!f)
		return sd_err_set(err, SMDDP_ENOMEM, "out of memory");
	uint8_t *q = f->data + 8;
	memcpy(q, HELLO_MAGIC, 8);
	sd_boot_put32(q + 8, PROTO_VERSION);
	sd_boot_put32(q + 12, (uint32_t)b->rank);
	sd_boot_put32(q + 16, (uint32_t)b->size);
	memcpy(q + 20, b->cnonce, NONCE_LEN);
	(void)sd_boot_conn_send(c, f);
	sd_boot_frame_unref(f);
	/* Wait a little past our own deadline: rank 0 is the one that knows
	 * which ranks are missing, and its deadline may end after ours (it
	 * may have started later).  Its sentence beats ours. */
	uint64_t until = p->deadline_ns + HUB_GRACE_NS;

	while (!b->ready && !b->failed) {
		char why[300];

		if (sd_now_ns() >= until)
			return sd_err_set(err, SMDDP_ETIMEDOUT,
					  "rank 0 at %s took rank %d's hello but did not complete the rendezvous within %g s "
					  "(are other ranks missing? rank 0's log names them)", b->where, b->rank,
					  sd_boot_span(until, start));
		/* A listener whose process died may hold the connection open
		 * (its socket outlived it in a child): ask. */
		if (p->gone && p->gone(p->gone_arg, 0, why, sizeof(why)))
			return sd_err_set(err, SMDDP_EPEER, "rank 0 at %s will not complete the rendezvous: %s",
					  b->where, why);
		sd_boot_pump(b, gone_deadline(p, until), nonce);
	}
	if (b->failed)
		return sd_boot_report_fail(b, NULL, err);
	return SMDDP_OK;
}

int sd_boot_init(const struct sd_boot_params *p, struct sd_boot **out, struct sd_boot_peer *peers, uint64_t *nonce,
		 struct sd_err *err)
{
	struct sd_boot *b = NULL;
	const char *hostid, *token;
	uint64_t n = 0;
	int rc;

	if (out)
		*out = NULL;
	if (!p || !out || !peers || !nonce || p->size < 1 || p->rank < 0 || p->rank >= p->size ||
	    (p->size > 1 && (!p->addr || !p->port)))
		return sd_err_set(err, SMDDP_EINVAL, "bootstrap: bad parameters (rank %d, size %d)", p ? p->rank : -1,
				  p ? p->size : -1);
	if (p->size > 1) {
		char *end;
		long port;

		errno = 0;
		port = strtol(p->port, &end, 10);
		if (!p->port[0] || *end || errno || port < 1 || port > 65535)
			return sd_err_set(err, SMDDP_ECONFIG,
					  "rank %d: MASTER_PORT \"%s\" is not a port number (1..65535)", p->rank,
					  p->port);
	}
	hostid = p->hostid ? p->hostid : "";
	token = p->token ? p->token : "";
	if (strlen(hostid) >= SD_HOSTID_MAX)
		return sd_err_set(err, SMDDP_EINVAL, "host id of rank %d is longer than %d bytes", p->rank,
				  SD_HOSTID_MAX - 1);
	if (strlen(token) > TOKEN_MAX)
		return sd_err_set(err, SMDDP_ECONFIG, "the job token (SMDDP_JOB_TOKEN) is longer than %d bytes",
				  TOKEN_MAX);
	b = calloc(1, sizeof(*b));
	if (b) {
		b->conns = calloc((size_t)p->size, sizeof(*b->conns));
		b->ids = calloc((size_t)p->size, sizeof(*b->ids));
	}
	if (!b || !b->conns || !b->ids) {
		rc = sd_err_set(err, SMDDP_ENOMEM, "out of memory for a bootstrap of %d ranks", p->size);
		goto out;
	}
	b->rank = p->rank;
	b->size = p->size;
	b->lfd = -1;
	b->token = token;
	b->key_differs = p->key_differs ? p->key_differs : sd_boot_job_token_differs;
	b->hostid = hostid;
	b->allow_no_token = p->allow_no_token;
	b->ids[p->rank].pid = (int32_t)getpid();
	snprintf(b->ids[p->rank].hostid, SD_HOSTID_MAX, "%s", hostid);
	if (p->size == 1) {
		b->ready = 1;
		n = sd_boot_random64();
		rc = SMDDP_OK;
		goto out;
	}
	sd_boot_fmt_where(b->where, sizeof(b->where), p->addr, p->port);
	if (p->rank == 0 && !token[0])
		SD_INFO(SD_SUB_BOOT, "no job token: rank 0 admits ranks %s", p->allow_no_token
			? "from anywhere (SMDDP_ALLOW_NO_TOKEN)" : "from this host only (loopback)");
	if (p->rank == 0)
		rc = rendezvous0(b, p, &n, err);
	else
		rc = rendezvous(b, p, &n, err);
	b->token = NULL;
	b->hostid = NULL;
out:
	if (rc) {
		if (b && b->conns) {
			sd_boot_close(b, 0); /* sends the GIVEUP or DEATH notices first */
		} else if (b) {
			free(b->ids);
			free(b);
		}
		return rc;
	}
	memcpy(peers, b->ids, (size_t)b->size * sizeof(*peers));
	*nonce = n;
	*out = b;
	if (p->size > 1)
		SD_INFO(SD_SUB_BOOT, "rendezvous done: %d ranks via %s", b->size, b->where);
	return SMDDP_OK;
}

/* ---- after the rendezvous ----------------------------------------------- */

int sd_boot_poll(struct sd_boot *b, int *rank, struct sd_err *err)
{
	if (rank)
		*rank = -1;
	if (!b)
		return SMDDP_EINVAL;
	if (!b->failed)
		sd_boot_pump(b, 0, NULL);
	if (b->failed) {
		sd_boot_drain_output(b, 0); /* relays go out even if nobody polls again */
		return sd_boot_report_fail(b, rank, err);
	}
	return SMDDP_OK;
}

void sd_boot_own_addr(struct sd_boot *b, char *buf, size_t len)
{
	const char *v = sd_param_str("SMDDP_BOOT_ADDR");

	buf[0] = 0;
	if (!b || b->size < 2)
		return;
	if (v && *v) {
		snprintf(buf, len, "%s", v);
		return;
	}
	/* The address the peers already reach this rank by (rank 0's side of
	 * every connection, or ours towards rank 0): one they can reach again.
	 * Loopback only where nothing else is used (a job on one host). */
	for (int r = 0; r < b->size; r++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct conn *c = b->conns[r];
		char host[NI_MAXHOST];

		if (!c || c->fd < 0 || getsockname(c->fd, (struct sockaddr *)&ss, &sl) ||
		    getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), NULL, 0, NI_NUMERICHOST))
			continue;
		/* "::ffff:a.b.c.d" (an IPv4 peer on rank 0's IPv6 socket) reads as a.b.c.d */
		snprintf(buf, len, "%s", strncmp(host, "::ffff:", 7) || !strchr(host, '.') ? host : host + 7);
		if (!sd_boot_is_loopback((struct sockaddr *)&ss))
			return;
	}
}

int sd_boot_fds(struct sd_boot *b, int *fds, int max)
{
	int n = 0;

	if (!b)
		return 0;
	for (int r = 0; r < b->size && n < max; r++)
		if (b->conns[r] && b->conns[r]->fd >= 0)
			fds[n++] = b->conns[r]->fd;
	return n;
}

static int ag_rank0(struct sd_boot *b, void *all, size_t len, uint64_t deadline, struct sd_err *err)
{
	uint64_t start = sd_now_ns();
	uint8_t *got = calloc((size_t)b->size, 1);
	int have = 1, rc = SMDDP_OK;

	if (!got)
		return sd_err_set(err, SMDDP_ENOMEM, "out of memory");
	got[0] = 1;
	for (;;) {
		for (int r = 1; r < b->size; r++) {
			struct conn *c = b->conns[r];

			if (got[r] || !c || !c->stash)
				continue;
			uint64_t s = c->stash_len >= 8 ? sd_boot_get64(c->stash) : 0;
			if (c->stash_len != 8 + len || s != b->seq) {
				char msg[300];
				struct frame *f;

				snprintf(msg, sizeof(msg),
					 "out-of-band all-gather #%llu: rank %d sent %zu bytes for all-gather #%llu "
					 "where rank 0 has %zu bytes for #%llu (ranks called different collectives)",
					 (unsigned long long)b->seq, r, c->stash_len >= 8 ? c->stash_len - 8 : 0,
					 (unsigned long long)s, len, (unsigned long long)b->seq);
				sd_boot_fail(b, SMDDP_EMISMATCH, r, "%s", msg);
				f = sd_boot_frame_str(F_ABORT, 1, 0, 0, 0, msg);
				if (f) {
					sd_boot_broadcast(b, f, -1);
					sd_boot_frame_unref(f);
				}
				break;
			}
			if (len)
				memcpy((uint8_t *)all + (size_t)r * len, c->stash + 8, len);
			free(c->stash);
			c->stash = NULL;
			got[r] = 1;
			have++;
		}
		if (b->failed) {
			rc = sd_boot_report_fail(b, NULL, err);
			goto out;
		}
		if (have == b->size)
			break;
		for (int r = 1; r < b->size; r++) {
			if (!got[r] && b->conns[r] && b->conns[r]->fd < 0) {
				rc = sd_err_set(err, SMDDP_EPEER,
						"out-of-band all-gather #%llu: rank %d closed its channel cleanly (BYE) and "
						"cannot take part", (unsigned long long)b->seq, r);
				goto out;
			}
		}
		if (sd_now_ns() >= deadline) {
			char list[200];

			for (int r = 0; r < b->size; r++)
				got[r] = !got[r];
			sd_boot_fmt_ranks(list, sizeof(list), got, b->size);
			rc = sd_err_set(err, SMDDP_ETIMEDOUT,
					"out-of-band all-gather #%llu: rank(s) %s of %d did not contribute within %g s",
					(unsigned long long)b->seq, list, b->size, sd_boot_span(deadline, start));
			/* The ranks that did contribute wait for us a little past
			 * their deadline: tell them who is missing, and let the
			 * words leave before this rank may exit (bounded). */
			give_up(b, rc, err ? err->msg : NULL);
			{
				uint64_t until = sd_now_ns() + 1000000000ull;

				while (sd_boot_output_pending(b) && sd_now_ns() < until)
					sd_boot_pump(b, until, NULL);
			}
			goto out;
		}
		sd_boot_pump(b, deadline, NULL);
	}

	struct frame *f = sd_boot_frame_new(F_RESULT, 8 + (size_t)b->size * len);
	if (!f) {
		rc = sd_err_set(err, SMDDP_ENOMEM, "out of memory for an all-gather of %d x %zu bytes", b->size, len);
		goto out;
	}
	sd_boot_put64(f->data + 8, b->seq);
	if (len)
		memcpy(f->data + 16, all, (size_t)b->size * len);
	sd_boot_broadcast(b, f, -1);
	sd_boot_frame_unref(f);
	/* Wait until all of it left: ranks must not wait on rank 0's next call. */
	while (sd_boot_output_pending(b) && !b->failed && sd_now_ns() < deadline)
		sd_boot_pump(b, deadline, NULL);
	if (b->failed) {
		rc = sd_boot_report_fail(b, NULL, err);
	} else if (sd_boot_output_pending(b)) {
		rc = sd_err_set(err, SMDDP_ETIMEDOUT,
				"out-of-band all-gather #%llu: rank 0 could not send the result to every rank within %g s",
				(unsigned long long)b->seq, sd_boot_span(deadline, start));
	}
out:
	free(got);
	return rc;
}

static int ag_other(struct sd_boot *b, const void *mine, void *all, size_t len, uint64_t deadline, struct sd_err *err)
{
	uint64_t start = sd_now_ns();
	struct conn *c = b->conns[0];
	struct frame *f;

	if (c->fd < 0)
		return sd_err_set(err, SMDDP_EPEER,
				  "out-of-band all-gather #%llu: rank 0 has closed the channel (clean close)",
				  (unsigned long long)b->seq);
	f = sd_boot_frame_new(F_GATHER, 8 + len);
	if (!f)
		return sd_err_set(err, SMDDP_ENOMEM, "out of memory for an all-gather of %zu bytes", len);
	sd_boot_put64(f->data + 8, b->seq);
	if (len)
		memcpy(f->data + 16, mine, len);
	(void)sd_boot_conn_send(c, f);
	sd_boot_frame_unref(f);
	for (;;) {
		if (c->stash) {
			uint64_t s = c->stash_len >= 8 ? sd_boot_get64(c->stash) : 0;

			if (c->stash_len != 8 + (size_t)b->size * len || s != b->seq) {
				sd_err_set(err, SMDDP_EMISMATCH,
					   "out-of-band all-gather #%llu: rank 0 answered with %zu bytes for #%llu where "
					   "rank %d expected %zu (ranks called different collectives)",
					   (unsigned long long)b->seq, c->stash_len >= 8 ? c->stash_len - 8 : 0,
					   (unsigned long long)s, b->rank, (size_t)b->size * len);
				sd_boot_fail(b, SMDDP_EMISMATCH, 0, "%s", err ? err->msg : "all-gather mismatch");
				return SMDDP_EMISMATCH;
			}
			if (len)
				memcpy(all, c->stash + 8, (size_t)b->size * len);
			free(c->stash);
			c->stash = NULL;
			return SMDDP_OK;
		}
		if (b->failed)
			return sd_boot_report_fail(b, NULL, err);
		if (c->fd < 0)
			return sd_err_set(err, SMDDP_EPEER,
					  "out-of-band all-gather #%llu: rank 0 closed the channel cleanly (BYE)",
					  (unsigned long long)b->seq);
		/* As in the rendezvous: give rank 0 the chance to name who is missing. */
		if (sd_now_ns() >= deadline + HUB_GRACE_NS)
			return sd_err_set(err, SMDDP_ETIMEDOUT,
					  "out-of-band all-gather #%llu: rank 0 did not send the result within %g s (some rank "
					  "did not call it; rank 0's error names them)", (unsigned long long)b->seq,
					  sd_boot_span(deadline + HUB_GRACE_NS, start));
		sd_boot_pump(b, deadline + HUB_GRACE_NS, NULL);
	}
}

int sd_boot_allgather(struct sd_boot *b, const void *mine, void *all, size_t len, uint64_t deadline_ns, struct sd_err *err)
{
	int rc;

	if (!b || (len && (!mine || !all)) || (b->size && len > (BIG_MAX - 8) / (size_t)b->size))
		return sd_err_set(err, SMDDP_EINVAL,
				  "out-of-band all-gather: bad arguments (len %zu, %d ranks; at most %u bytes in all)",
				  len, b ? b->size : 0, BIG_MAX - 8);
	if (b->failed) {
		sd_boot_drain_output(b, 0);
		return sd_boot_report_fail(b, NULL, err);
	}
	if (b->ag_broken)
		return sd_err_set(err, b->ag_broken, "%s", b->ag_err);
	if (len && (const uint8_t *)mine != (uint8_t *)all + (size_t)b->rank * len)
		memmove((uint8_t *)all + (size_t)b->rank * len, mine, len);
	if (b->size == 1)
		return SMDDP_OK;
	if (b->rank == 0)
		rc = ag_rank0(b, all, len, deadline_ns, err);
	else
		rc = ag_other(b, (uint8_t *)all + (size_t)b->rank * len, all, len, deadline_ns, err);
	if (rc == SMDDP_OK) {
		b->seq++;
	} else if (!b->failed) {
		/* Some frames of this round may still come: the next round would be out of step. */
		b->ag_broken = rc;
		snprintf(b->ag_err, sizeof(b->ag_err), "the out-of-band channel is out of step after a failed "
						       "all-gather: %s",
			 err ? err->msg : smddp_strerror(rc));
	}
	if (b->failed)
		sd_boot_drain_output(b, 0);
	return rc;
}

void sd_boot_abort(struct sd_boot *b, const char *why)
{
	struct frame *f;

	if (!b)
		return;
	if (!why)
		why = "(no reason given)";
	SD_INFO(SD_SUB_BOOT, "rank %d aborts the channel: %s", b->rank, why);
	f = sd_boot_frame_str(F_ABORT, 1, b->rank, 0, 0, why);
	if (f) {
		if (b->rank == 0)
			sd_boot_broadcast(b, f, -1);
		else if (b->conns[0])
			(void)sd_boot_conn_send(b->conns[0], f);
		sd_boot_frame_unref(f);
	}
	sd_boot_fail(b, SMDDP_EABORTED, b->rank, "rank %d aborted: %s", b->rank, why);
	sd_boot_drain_output(b, 100 * MS);
}

void sd_boot_note(struct sd_boot *b, const char *why)
{
	struct frame *f;

	if (!b || !b->ready || b->failed)
		return;
	sd_boot_keep_note(b, b->rank, why);
	f = sd_boot_frame_str(F_NOTE, 1, b->rank, 0, 0, why);
	if (!f)
		return;
	if (b->rank == 0)
		sd_boot_broadcast(b, f, -1);
	else if (b->conns[0])
		(void)sd_boot_conn_send(b->conns[0], f);
	sd_boot_frame_unref(f);
	sd_boot_drain_output(b, 0);
}

int sd_boot_how(int clean, int rc)
{
	if (clean)
		return SD_BOOT_CLEAN;
	return rc == SMDDP_EPEER || rc == SMDDP_EABORTED || rc == SMDDP_ENETWORK ? SD_BOOT_WITNESS
										 : SD_BOOT_FAILED;
}

void sd_boot_close(struct sd_boot *b, int how)
{
	int clean = how == SD_BOOT_CLEAN;

	if (!b)
		return;
	if (how != SD_BOOT_FAILED) {
		struct frame *f = sd_boot_frame_new(F_BYE, 0);

		if (f) {
			for (int r = 0; r < b->size; r++)
				if (b->conns[r] && b->conns[r]->fd >= 0)
					(void)sd_boot_conn_send(b->conns[r], f);
			sd_boot_frame_unref(f);
		}
	}
	/* Leaving after a failure: take in what has come (a dead rank's
	 * connection closing), so that rank 0 relays that death to all before
	 * its own connections close, and the others learn the root cause
	 * rather than rank 0's departure. */
	if (!clean && !b->failed)
		sd_boot_pump(b, 0, NULL);
	sd_boot_drain_output(b, clean ? 2000 * MS : 200 * MS);
	for (int r = 0; r < b->size; r++) {
		struct conn *c = b->conns[r];

		if (!c)
			continue;
		if (c->fd >= 0) {
			/* Read what the peer already sent (its own BYE, say): closing a socket
			 * with unread data resets the connection, and a reset may overtake
			 * our last frames (BYE, ABORT) at the far end.  Bounded. */
			uint8_t sink[16384];

			(void)shutdown(c->fd, SHUT_WR);
			for (int i = 0; i < 256 && recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
				;
		}
		sd_boot_conn_free(c);
	}
	for (int i = 0; i < b->npending; i++)
		sd_boot_conn_free(b->pending[i]);
	if (b->lfd >= 0)
		close(b->lfd);
	free(b->pending);
	free(b->conns);
	free(b->ids);
	free(b->notes);
	free(b->pfd);
	free(b->pconn);
	free(b);
}
