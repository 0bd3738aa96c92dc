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
 * HMAC is HMAC-SHA-256 (lib/core/sha256.c); both nonces are fresh, and the
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
 * every later call.  Frames that arrive outside a call that wants them (an
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

#include "core/sd.h"
#include "bootstrap/bootstrap.h"

/* How long a rank waits for rank 0 past its own deadline (see its uses). */
#define HUB_GRACE_NS (3ull * 1000000000ull)
#define PROTO_VERSION 2
#define HELLO_MAGIC "SMDDPB1" /* 8 bytes with the NUL */
#define TOKEN_MAX 256
#define HELLO_MAX 1024               /* largest hello a stranger may announce */
#define SMALL_MAX 2048               /* REJECT, GIVEUP, DEATH, ABORT, BYE */
#define REASON_MAX 1024              /* reason strings inside frames */
#define BIG_MAX (1u << 30)           /* GATHER, RESULT, WELCOME */
#define HELLO_LIMIT_NS (5ull * 1000000000ull)
#define PENDING_MAX 256              /* connections that have not said hello yet */
#define MS 1000000ull
#define NONCE_LEN 32
#define WARN_WINDOW_NS (10ull * 1000000000ull)
#define WARN_PER_WINDOW 10           /* rejected-connection WARN lines per window */

enum frame_type {
	F_HELLO = 1,   /* magic, version, rank, size, client nonce */
	F_REJECT = 2,  /* reason */
	F_WELCOME = 3, /* nonce, size, {pid, hostid} per rank */
	F_GIVEUP = 4,  /* rank 0 gives up the rendezvous: result code, reason */
	F_GATHER = 5,  /* seq, bytes */
	F_RESULT = 6,  /* seq, concatenation */
	F_DEATH = 7,   /* rank */
	F_ABORT = 8,   /* rank, reason */
	F_BYE = 9,     /* clean close follows */
	F_CHALLENGE = 10, /* server nonce, rank 0's MAC */
	F_AUTH = 11,   /* the rank's MAC, pid, hostid */
};

static const char *type_name(uint32_t t)
{
	static const char *const names[] = {"?",      "HELLO", "REJECT", "WELCOME", "GIVEUP",    "GATHER",
					    "RESULT", "DEATH", "ABORT",  "BYE",     "CHALLENGE", "AUTH"};
	return t < sizeof(names) / sizeof(names[0]) ? names[t] : "?";
}

/* A frame ready to send, shared by the queues of several connections. */
struct frame {
	int ref;
	uint32_t type;
	size_t len; /* header included */
	uint8_t data[];
};

struct oseg {
	struct oseg *next;
	struct frame *f;
	size_t off;
};

struct conn {
	int fd;           /* -1 once closed */
	int rank;         /* rank at the far end; -1 while a stranger (rank 0 side) */
	int bye;          /* the far end said BYE: its close is not a death */
	uint64_t limit_ns; /* stranger: time to complete the hello */
	char addr[80];    /* far end, numeric "a.b.c.d:port" or "[v6]:port" */
	/* rank 0's side of the admission of a stranger */
	int loopback;     /* it connected from a loopback address */
	int challenged;   /* CHALLENGE sent: AUTH expected next */
	int32_t claim_rank, claim_size;
	uint8_t cnonce[NONCE_LEN], snonce[NONCE_LEN];
	/* input: one frame at a time, read straight into its buffer */
	uint8_t hdr[8];
	size_t hdr_got;
	uint32_t type, len;
	uint8_t *in;      /* grows with what arrives, not with what is announced */
	size_t in_got, in_cap;
	/* a GATHER (rank 0) or RESULT (others) that arrived before it was wanted */
	uint8_t *stash;
	size_t stash_len;
	/* output */
	struct oseg *out_head, *out_tail;
	char why[160]; /* protocol error found while reading */
};

struct sd_boot {
	int rank, size;
	int ready;            /* rendezvous done */
	char where[300];      /* rank 0's "ADDR:PORT" */
	struct conn **conns;  /* by rank; on ranks > 0 only conns[0] */
	struct sd_boot_peer *ids;
	uint64_t seq;         /* all-gathers done */
	/* rank 0 during rendezvous */
	int lfd;
	struct conn **pending;
	int npending;
	const char *token;
	int allow_no_token;
	char last_reject[300];
	/* rejected-connection WARN lines: at most WARN_PER_WINDOW per window */
	uint64_t warn_window;
	int warned, unwarned;
	/* ranks > 0 during rendezvous */
	const char *hostid;
	uint8_t cnonce[NONCE_LEN];
	int authed;           /* AUTH sent */
	/* sticky failure */
	int failed;
	int fail_rank;
	char fail_err[512];
	/* all-gather out of step after a timeout */
	int ag_broken;
	char ag_err[512];
	/* poll scratch */
	struct pollfd *pfd;
	struct conn **pconn;
	int pcap;
};

/* ---- small helpers ---------------------------------------------------- */

static void seterr(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static void fail(struct sd_boot *b, int rc, int rank, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void fail(struct sd_boot *b, int rc, int rank, const char *fmt, ...)
{
	va_list ap;

	if (b->failed)
		return;
	b->failed = rc;
	b->fail_rank = rank;
	va_start(ap, fmt);
	vsnprintf(b->fail_err, sizeof(b->fail_err), fmt, ap);
	va_end(ap);
	SD_INFO(SD_SUB_BOOT, "channel failed: %s", b->fail_err);
}

static int report_fail(struct sd_boot *b, int *rank, char *err, size_t errlen)
{
	if (rank)
		*rank = b->fail_rank;
	seterr(err, errlen, "%s", b->fail_err);
	return b->failed;
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static uint64_t get64(const uint8_t *p)
{
	return ((uint64_t)get32(p) << 32) | get32(p + 4);
}

/* Bounds-checked reader of a payload. */
struct rd {
	const uint8_t *p;
	size_t n, off;
	int bad;
};

static uint32_t rd32(struct rd *r)
{
	if (r->bad || r->n - r->off < 4) {
		r->bad = 1;
		return 0;
	}
	r->off += 4;
	return get32(r->p + r->off - 4);
}

static const uint8_t *rdbytes(struct rd *r, size_t len)
{
	if (r->bad || r->n - r->off < len) {
		r->bad = 1;
		return NULL;
	}
	r->off += len;
	return r->p + r->off - len;
}

/* Length-prefixed string of at most max bytes, copied NUL-terminated into out[max+1]. */
static int rdstr(struct rd *r, char *out, size_t max)
{
	uint32_t len = rd32(r);
	const uint8_t *s;

	if (r->bad || len > max) {
		r->bad = 1;
		return -1;
	}
	s = rdbytes(r, len);
	if (!s)
		return -1;
	memcpy(out, s, len);
	out[len] = '\0';
	return (int)len;
}

static uint64_t left_ns(uint64_t deadline)
{
	uint64_t now = sd_now_ns();

	return deadline > now ? deadline - now : 0;
}

static int ms_until(uint64_t deadline)
{
	uint64_t ns = left_ns(deadline);
	uint64_t ms = (ns + MS - 1) / MS;

	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* Seconds from start to deadline, rounded to a tenth, for messages. */
static double span(uint64_t deadline, uint64_t start)
{
	uint64_t ns = deadline > start ? deadline - start : 0;

	return (double)((ns + 50000000ull) / 100000000ull) / 10.0;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static uint64_t random64(void)
{
	uint64_t v = 0;
	size_t got = 0;

	while (got < sizeof(v)) {
		ssize_t n = getrandom((uint8_t *)&v + got, sizeof(v) - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		got += (size_t)n;
	}
	if (got < sizeof(v)) { /* no getrandom: still differ between jobs */
		int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			if (read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
				v = 0;
			close(fd);
		}
		v ^= sd_now_ns() * 0x9e3779b97f4a7c15ull ^ ((uint64_t)getpid() << 32);
	}
	return v;
}

/* len random bytes from the kernel: 0, or -1 when it has none to give. */
static int random_fill(void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = getrandom(p + got, len - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		got += (size_t)n;
	}
	if (got < len) {
		int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			return -1;
		while (got < len) {
			ssize_t n = read(fd, p + got, len - got);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		close(fd);
	}
	return got == len ? 0 : -1;
}

/* The admission MAC: HMAC-SHA-256 keyed with the token over a label that
 * says who proves ("rank 0" or "rank"), both nonces, rank and size. */
static void admission_mac(const char *token, const char *label, const uint8_t *cnonce, const uint8_t *snonce,
			  int32_t rank, int32_t size, uint8_t out[SD_SHA256_LEN])
{
	struct sd_hmac_sha256 m;
	uint8_t rs[8];

	put32(rs, (uint32_t)rank);
	put32(rs + 4, (uint32_t)size);
	sd_hmac_sha256_init(&m, token, strlen(token));
	sd_hmac_sha256_update(&m, "smddp-boot-2 ", 13);
	sd_hmac_sha256_update(&m, label, strlen(label) + 1);
	sd_hmac_sha256_update(&m, cnonce, NONCE_LEN);
	sd_hmac_sha256_update(&m, snonce, NONCE_LEN);
	sd_hmac_sha256_update(&m, rs, sizeof(rs));
	sd_hmac_sha256_final(&m, out);
}

static int is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		if (IN6_IS_ADDR_LOOPBACK(a))
			return 1;
		return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
	}
	return 0;
}

static void fmt_where(char *out, size_t n, const char *addr, const char *port)
{
	if (strchr(addr, ':'))
		snprintf(out, n, "[%s]:%s", addr, port);
	else
		snprintf(out, n, "%s:%s", addr, port);
}

static void fmt_sockaddr(char *out, size_t n, const struct sockaddr *sa, socklen_t salen)
{
	char host[NI_MAXHOST], serv[NI_MAXSERV];

	if (getnameinfo(sa, salen, host, sizeof(host), serv, sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV)) {
		snprintf(out, n, "(unknown address)");
		return;
	}
	fmt_where(out, n, host, serv);
}

/* "2,3,5-9" into out, truncated with "..." when long. */
static void fmt_ranks(char *out, size_t n, const uint8_t *missing, int size)
{
	size_t used = 0;
	int r = 0;

	out[0] = '\0';
	while (r < size) {
		int s, e;

		if (!missing[r]) {
			r++;
			continue;
		}
		s = r;
		while (r + 1 < size && missing[r + 1])
			r++;
		e = r++;
		if (used + 32 >= n) {
			snprintf(out + used, n - used, ",...");
			return;
		}
		used += (size_t)snprintf(out + used, n - used, e > s ? "%s%d-%d" : "%s%d", used ? "," : "", s, e);
	}
}

static void set_nodelay(int fd)
{
	int one = 1;

	/* Frames are small and latency-bound; failure only costs speed. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- frames and connections ------------------------------------------- */

static struct frame *frame_new(uint32_t type, size_t paylen)
{
	struct frame *f;

	if (paylen > BIG_MAX)
		return NULL;
	f = malloc(sizeof(*f) + 8 + paylen);
	if (!f)
		return NULL;
	f->ref = 1;
	f->type = type;
	f->len = 8 + paylen;
	put32(f->data, type);
	put32(f->data + 4, (uint32_t)paylen);
	return f;
}

static void frame_unref(struct frame *f)
{
	if (f && --f->ref == 0)
		free(f);
}

static struct conn *conn_new(int fd)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = fd;
	c->rank = -1;
	return c;
}

static void conn_drop_output(struct conn *c)
{
	while (c->out_head) {
		struct oseg *s = c->out_head;

		c->out_head = s->next;
		frame_unref(s->f);
		free(s);
	}
	c->out_tail = NULL;
}

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	conn_drop_output(c);
	free(c->in);
	c->in = NULL;
	c->in_cap = 0;
	/* The stash stays: a result followed by BYE and EOF is still a result. */
}

static void conn_free(struct conn *c)
{
	if (!c)
		return;
	conn_close(c);
	free(c->stash);
	free(c);
}

static const char *conn_name(const struct conn *c, char *buf, size_t n)
{
	if (c->rank >= 0)
		snprintf(buf, n, "rank %d", c->rank);
	else
		snprintf(buf, n, "stranger at %s", c->addr);
	return buf;
}

/* Send what the socket takes now.  0, or -1 with errno when the connection broke. */
static int conn_flush(struct conn *c)
{
	while (c->out_head && c->fd >= 0) {
		struct oseg *s = c->out_head;
		ssize_t n = send(c->fd, s->f->data + s->off, s->f->len - s->off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -1;
		}
		s->off += (size_t)n;
		if (s->off == s->f->len) {
			c->out_head = s->next;
			if (!c->out_head)
				c->out_tail = NULL;
			frame_unref(s->f);
			free(s);
		}
	}
	return 0;
}

/* Queue f (taking a new reference) and send what fits now.  A broken
 * connection is noticed by the next read, which tells why. */
static int conn_send(struct conn *c, struct frame *f)
{
	struct oseg *s;
	char name[100];

	if (c->fd < 0)
		return 0;
	s = calloc(1, sizeof(*s));
	if (!s)
		return SMDDP_ENOMEM;
	f->ref++;
	s->f = f;
	if (c->out_tail)
		c->out_tail->next = s;
	else
		c->out_head = s;
	c->out_tail = s;
	SD_TRACE(SD_SUB_BOOT, "send %s (%zu bytes) to %s", type_name(f->type), f->len - 8,
		 conn_name(c, name, sizeof(name)));
	(void)conn_flush(c);
	return SMDDP_OK;
}

static struct frame *frame_str(uint32_t type, int has_rank, int32_t rank, int has_code, int code, const char *s)
{
	size_t len = strlen(s);
	struct frame *f;
	uint8_t *p;

	if (len > REASON_MAX)
		len = REASON_MAX;
	f = frame_new(type, (has_rank ? 4 : 0) + (has_code ? 4 : 0) + 4 + len);
	if (!f)
		return NULL;
	p = f->data + 8;
	if (has_rank) {
		put32(p, (uint32_t)rank);
		p += 4;
	}
	if (has_code) {
		put32(p, (uint32_t)code);
		p += 4;
	}
	put32(p, (uint32_t)len);
	memcpy(p + 4, s, len);
	return f;
}

/* Queue f to every live rank connection except rank `except`. */
static void broadcast(struct sd_boot *b, struct frame *f, int except)
{
	for (int r = 1; r < b->size; r++)
		if (r != except && b->conns[r] && b->conns[r]->fd >= 0)
			(void)conn_send(b->conns[r], f);
}

/* Rank 0: tell every other rank that `rank` died. */
static void relay_death(struct sd_boot *b, int rank)
{
	struct frame *f = frame_new(F_DEATH, 4);

	if (!f)
		return;
	put32(f->data + 8, (uint32_t)rank);
	broadcast(b, f, rank);
	frame_unref(f);
}

const char *sd_host_name(const char *hostid)
{
	static __thread char buf[SD_HOSTID_MAX];
	const char *slash = strchr(hostid, '/');

	if (!slash || slash == hostid)
		return hostid;
	snprintf(buf, sizeof(buf), "%.*s", (int)(slash - hostid), hostid);
	return buf;
}

static const char *host_of(struct sd_boot *b, int r)
{
	if (!b->ids || !b->ids[r].hostid[0])
		return "an unknown host";
	return sd_host_name(b->ids[r].hostid);
}

/* The far end of c closed (err == 0) or broke (errno err), or sent nonsense (proto != NULL). */
static void conn_lost(struct sd_boot *b, struct conn *c, int err, const char *proto)
{
	char detail[200] = "";
	int r = c->rank;

	if (err)
		snprintf(detail, sizeof(detail), " (%s)", strerror(err));
	if (c->rank < 0) { /* a stranger on rank 0 */
		conn_close(c);
		return;
	}
	if (c->bye && !proto) {
		SD_TRACE(SD_SUB_BOOT, "rank %d closed its connection after BYE", b->rank == 0 ? r : 0);
		conn_close(c);
		return;
	}
	conn_close(c);
	if (b->rank == 0) {
		if (proto)
			fail(b, SMDDP_EPEER, r, "rank %d (pid %d on %s) sent a malformed frame to rank 0 (%s)", r,
			     (int)b->ids[r].pid, host_of(b, r), proto);
		else
			fail(b, SMDDP_EPEER, r,
			     "rank %d (pid %d on %s) closed its connection to rank 0%s: it died or was killed%s", r,
			     (int)b->ids[r].pid, host_of(b, r), detail, b->ready ? "" : " (during the rendezvous)");
		relay_death(b, r);
	} else if (!b->ready) {
		if (proto)
			fail(b, SMDDP_ECONFIG, 0,
			     "rank 0 at %s answered rank %d with something that is not libsmddp's rendezvous (%s): "
			     "is MASTER_PORT used by another program?",
			     b->where, b->rank, proto);
		else
			fail(b, SMDDP_EPEER, 0,
			     "rank 0 at %s closed the connection of rank %d during the rendezvous%s: did rank 0 die?",
			     b->where, b->rank, detail);
	} else {
		if (proto)
			fail(b, SMDDP_EPEER, 0, "rank 0 (pid %d on %s) sent a malformed frame to rank %d (%s)",
			     (int)b->ids[0].pid, host_of(b, 0), b->rank, proto);
		else
			fail(b, SMDDP_EPEER, 0,
			     "rank 0 (pid %d on %s) closed its connection to rank %d%s: it died or was killed",
			     (int)b->ids[0].pid, host_of(b, 0), b->rank, detail);
	}
}

/* ---- rank 0: hellos from strangers ------------------------------------- */

static void reject(struct sd_boot *b, struct conn *c, const char *reason, int claimed)
{
	struct frame *f = frame_str(F_REJECT, 0, 0, 0, 0, reason);
	uint64_t now = sd_now_ns();
	char claim[40] = "";

	if (claimed >= 0)
		snprintf(claim, sizeof(claim), " (it says it is rank %d)", claimed);
	/* A port scan or a flood of strangers must not flood the log: a few
	 * lines per window, then one that counts what was left out. */
	if (now - b->warn_window >= WARN_WINDOW_NS) {
		if (b->unwarned)
			SD_WARN(SD_SUB_BOOT, "%d more rejected connection(s) not logged (at most %d lines per %llu s)",
				b->unwarned, WARN_PER_WINDOW, WARN_WINDOW_NS / 1000000000ull);
		b->warn_window = now;
		b->warned = 0;
		b->unwarned = 0;
	}
	if (b->warned < WARN_PER_WINDOW) {
		b->warned++;
		SD_WARN(SD_SUB_BOOT, "rejected connection from %s: %s%s%s", c->addr, reason, claim,
			b->warned == WARN_PER_WINDOW ? " (more in the next seconds are counted, not logged)" : "");
	} else {
		b->unwarned++;
		SD_TRACE(SD_SUB_BOOT, "rejected connection from %s: %s%s", c->addr, reason, claim);
	}
	snprintf(b->last_reject, sizeof(b->last_reject), "%s from %s", reason, c->addr);
	if (f) {
		/* A few hundred bytes into an empty socket buffer: fits at once. */
		(void)conn_send(c, f);
		frame_unref(f);
	}
	conn_close(c);
}

/* HELLO from a stranger: check the form, then challenge it.  Nothing
 * about the job is said before it has answered (on_auth). */
static void on_hello(struct sd_boot *b, struct conn *c, const uint8_t *p, uint32_t len)
{
	struct rd r = {p, len, 0, 0};
	const uint8_t *magic = rdbytes(&r, 8);
	uint32_t version = rd32(&r);
	int32_t rank = (int32_t)rd32(&r), size = (int32_t)rd32(&r);
	const uint8_t *cn = rdbytes(&r, NONCE_LEN);
	char why[300];
	struct frame *f;

	if (!magic || memcmp(magic, HELLO_MAGIC, 8)) {
		reject(b, c, "bad magic: not a libsmddp rank (is something else using MASTER_PORT?)", -1);
		return;
	}
	if (version != PROTO_VERSION) {
		snprintf(why, sizeof(why), "protocol version %u differs from rank 0's %u (mixed libsmddp versions?)",
			 version, PROTO_VERSION);
		reject(b, c, why, (int)rank);
		return;
	}
	if (!cn || r.off != r.n) {
		reject(b, c, "malformed hello", -1);
		return;
	}
	if (!b->token[0] && !b->allow_no_token && !c->loopback) {
		snprintf(why, sizeof(why),
			 "rank 0 has no job token and admits ranks without one only from this host (loopback): "
			 "set SMDDP_JOB_TOKEN to the same secret on every rank (smddp-run does), or "
			 "SMDDP_ALLOW_NO_TOKEN=1 on rank 0 where the network is trusted");
		reject(b, c, why, (int)rank);
		return;
	}
	f = frame_new(F_CHALLENGE, 2 * NONCE_LEN);
	if (!f || random_fill(c->snonce, NONCE_LEN) < 0) {
		frame_unref(f);
		reject(b, c, "rank 0 has no random numbers for the challenge (getrandom failed)", (int)rank);
		return;
	}
	memcpy(c->cnonce, cn, NONCE_LEN);
	c->claim_rank = rank;
	c->claim_size = size;
	c->challenged = 1;
	memcpy(f->data + 8, c->snonce, NONCE_LEN);
	admission_mac(b->token, "rank 0", c->cnonce, c->snonce, rank, size, f->data + 8 + NONCE_LEN);
	(void)conn_send(c, f);
	frame_unref(f);
}

/* AUTH from a challenged stranger: the proof, then the checks of a rank. */
static void on_auth(struct sd_boot *b, struct conn *c, const uint8_t *p, uint32_t len)
{
	struct rd r = {p, len, 0, 0};
	const uint8_t *mac = rdbytes(&r, SD_SHA256_LEN);
	int32_t pid = (int32_t)rd32(&r), rank = c->claim_rank, size = c->claim_size;
	uint8_t want[SD_SHA256_LEN];
	char hostid[SD_HOSTID_MAX], why[200];

	if (!mac || rdstr(&r, hostid, SD_HOSTID_MAX - 1) < 0 || r.off != r.n) {
		reject(b, c, "malformed answer to the challenge", -1);
		return;
	}
	admission_mac(b->token, "rank", c->cnonce, c->snonce, rank, size, want);
	if (!sd_memeq_ct(want, mac, SD_SHA256_LEN)) {
		reject(b, c, "wrong job token (SMDDP_JOB_TOKEN differs between ranks)", (int)rank);
		return;
	}
	if (size != b->size) {
		snprintf(why, sizeof(why), "world size %d differs from rank 0's %d (WORLD_SIZE differs between ranks)",
			 (int)size, b->size);
		reject(b, c, why, (int)rank);
		return;
	}
	if (rank < 1 || rank >= b->size) {
		snprintf(why, sizeof(why), "rank %d is out of range 1..%d", (int)rank, b->size - 1);
		reject(b, c, why, (int)rank);
		return;
	}
	if (b->conns[rank]) {
		snprintf(why, sizeof(why),
			 "rank %d is already connected from %s (duplicate rank: two processes with the same RANK?)",
			 (int)rank, b->conns[rank]->addr);
		reject(b, c, why, (int)rank);
		return;
	}
	c->rank = rank;
	c->limit_ns = 0;
	b->conns[rank] = c;
	b->ids[rank].pid = pid;
	snprintf(b->ids[rank].hostid, SD_HOSTID_MAX, "%s", hostid);
	SD_TRACE(SD_SUB_BOOT, "rank %d (pid %d on %s) admitted from %s", (int)rank, (int)pid, hostid, c->addr);
}

/* A rank's side: rank 0's CHALLENGE.  Check its proof, then answer. */
static void on_challenge(struct sd_boot *b, struct conn *c, const uint8_t *p, uint32_t len)
{
	const char *token = b->token ? b->token : "";
	size_t hl = strlen(b->hostid);
	uint8_t want[SD_SHA256_LEN];
	struct frame *f;

	if (len != 2 * NONCE_LEN) {
		conn_lost(b, c, 0, "bad CHALLENGE");
		return;
	}
	admission_mac(token, "rank 0", b->cnonce, p, b->rank, b->size, want);
	if (!sd_memeq_ct(want, p + NONCE_LEN, SD_SHA256_LEN)) {
		fail(b, SMDDP_ECONFIG, 0,
		     "rank 0 at %s and rank %d have different job tokens: rank 0's answer to the challenge does not "
		     "match this rank's SMDDP_JOB_TOKEN%s (set the same token on every rank, or is another job "
		     "using MASTER_PORT?)",
		     b->where, b->rank, token[0] ? "" : " (this rank has none)");
		conn_close(c);
		return;
	}
	f = frame_new(F_AUTH, SD_SHA256_LEN + 4 + 4 + hl);
	if (!f) {
		fail(b, SMDDP_ENOMEM, 0, "out of memory");
		conn_close(c);
		return;
	}
	admission_mac(token, "rank", b->cnonce, p, b->rank, b->size, f->data + 8);
	put32(f->data + 8 + SD_SHA256_LEN, (uint32_t)getpid());
	put32(f->data + 12 + SD_SHA256_LEN, (uint32_t)hl);
	memcpy(f->data + 16 + SD_SHA256_LEN, b->hostid, hl);
	(void)conn_send(c, f);
	frame_unref(f);
	b->authed = 1;
}

/* ---- incoming frames --------------------------------------------------- */

/* Largest payload acceptable for a frame of this type on this connection;
 * 0 with c->why set when the type itself is wrong here. */
static uint32_t frame_limit(struct sd_boot *b, struct conn *c, uint32_t type)
{
	if (b->rank == 0 && c->rank < 0) {
		if (type == (c->challenged ? F_AUTH : F_HELLO))
			return HELLO_MAX;
		if (c->challenged)
			snprintf(c->why, sizeof(c->why), "unexpected frame type %u (%s) in answer to the challenge",
				 type, type_name(type));
		else
			snprintf(c->why, sizeof(c->why), "bad magic: not a libsmddp rank (is something else using "
							 "MASTER_PORT?)");
		return 0;
	}
	switch (type) {
	case F_CHALLENGE:
		if (b->rank != 0 && !b->ready && !b->authed)
			return 2 * NONCE_LEN;
		break;
	case F_WELCOME:
		if (b->rank != 0 && !b->ready && b->authed)
			return 12 + (uint32_t)b->size * (8 + SD_HOSTID_MAX - 1);
		break;
	case F_REJECT:
		if (b->rank != 0 && !b->ready)
			return SMALL_MAX;
		break;
	case F_GIVEUP: /* rendezvous, or an all-gather rank 0 timed out on */
		if (b->rank != 0)
			return SMALL_MAX;
		break;
	case F_GATHER:
		if (b->rank == 0 && b->ready)
			return BIG_MAX;
		break;
	case F_RESULT:
		if (b->rank != 0 && b->ready)
			return BIG_MAX;
		break;
	case F_DEATH: /* also during the rendezvous: a rank that said hello died */
		if (b->rank != 0)
			return SMALL_MAX;
		break;
	case F_ABORT:
	case F_BYE:
		return SMALL_MAX;
	}
	snprintf(c->why, sizeof(c->why), "unexpected frame type %u (%s)", type, type_name(type));
	return 0;
}

static void on_welcome(struct sd_boot *b, struct conn *c, const uint8_t *p, uint32_t len, uint64_t *nonce)
{
	struct rd r = {p, len, 0, 0};
	const uint8_t *n = rdbytes(&r, 8);
	int32_t size = (int32_t)rd32(&r);

	if (!n || size != b->size) {
		conn_lost(b, c, 0, "bad WELCOME");
		return;
	}
	*nonce = get64(n);
	for (int i = 0; i < b->size; i++) {
		b->ids[i].pid = (int32_t)rd32(&r);
		if (rdstr(&r, b->ids[i].hostid, SD_HOSTID_MAX - 1) < 0)
			break;
	}
	if (r.bad || r.off != r.n) {
		conn_lost(b, c, 0, "bad WELCOME");
		return;
	}
	b->ready = 1;
}

/* Returns 1 when reading from c must stop (closed or failed). */
static int on_frame(struct sd_boot *b, struct conn *c, uint32_t type, uint8_t **payload, uint32_t len,
		    uint64_t *nonce)
{
	const uint8_t *p = *payload;
	struct rd r = {p, len, 0, 0};
	char reason[REASON_MAX + 1], name[100];

	SD_TRACE(SD_SUB_BOOT, "recv %s (%u bytes) from %s", type_name(type), len, conn_name(c, name, sizeof(name)));
	if (b->rank == 0 && c->rank < 0) {
		if (c->challenged)
			on_auth(b, c, p, len);
		else
			on_hello(b, c, p, len);
		return 1; /* one frame at a time from a stranger */
	}
	switch (type) {
	case F_CHALLENGE:
		on_challenge(b, c, p, len);
		return c->fd < 0;
	case F_WELCOME:
		on_welcome(b, c, p, len, nonce);
		return c->fd < 0;
	case F_REJECT:
		if (rdstr(&r, reason, REASON_MAX) < 0)
			snprintf(reason, sizeof(reason), "(malformed reason)");
		fail(b, SMDDP_ECONFIG, 0, "rank 0 at %s refused rank %d: %s", b->where, b->rank, reason);
		conn_close(c);
		return 1;
	case F_GIVEUP: {
		int code = (int)rd32(&r);

		if (rdstr(&r, reason, REASON_MAX) < 0 || code <= 0 || code > SMDDP_EINTERNAL) {
			conn_lost(b, c, 0, "bad GIVEUP");
			return 1;
		}
		if (b->ready)
			fail(b, code, 0, "rank 0 gave up: %s", reason);
		else
			fail(b, code, 0, "rank 0 at %s gave up the rendezvous: %s", b->where, reason);
		conn_close(c);
		return 1;
	}
	case F_GATHER:
	case F_RESULT:
		if (c->stash) {
			/* The previous one was not taken: this rank runs ahead of its peers. */
			conn_lost(b, c, 0, "two all-gather frames without a round between them");
			return 1;
		}
		c->stash = *payload;
		c->stash_len = len;
		*payload = NULL;
		return 0;
	case F_DEATH: {
		int32_t dead = (int32_t)rd32(&r);

		if (r.bad || dead < 1 || dead >= b->size || dead == b->rank) {
			conn_lost(b, c, 0, "bad DEATH");
			return 1;
		}
		if (b->ready)
			fail(b, SMDDP_EPEER, dead,
			     "rank %d (pid %d on %s) died or was killed: rank 0 saw its connection close", (int)dead,
			     (int)b->ids[dead].pid, host_of(b, dead));
		else
			fail(b, SMDDP_EPEER, dead,
			     "rank %d died or was killed during the rendezvous: rank 0 at %s saw its connection "
			     "close",
			     (int)dead, b->where);
		return 0;
	}
	case F_ABORT: {
		int32_t who = (int32_t)rd32(&r);

		if (rdstr(&r, reason, REASON_MAX) < 0 || who < 0 || who >= b->size) {
			conn_lost(b, c, 0, "bad ABORT");
			return 1;
		}
		if (b->rank == 0) {
			struct frame *f;

			who = c->rank; /* trust the connection, not the claim */
			fail(b, SMDDP_EABORTED, who, "rank %d (pid %d on %s) aborted: %s", (int)who,
			     (int)b->ids[who].pid, host_of(b, who), reason);
			f = frame_str(F_ABORT, 1, who, 0, 0, reason);
			if (f) {
				broadcast(b, f, who);
				frame_unref(f);
			}
		} else {
			fail(b, SMDDP_EABORTED, who, "rank %d (pid %d on %s) aborted: %s", (int)who,
			     (int)b->ids[who].pid, host_of(b, who), reason);
		}
		return 0;
	}
	case F_BYE:
		c->bye = 1;
		return 0;
	}
	conn_lost(b, c, 0, "unexpected frame");
	return 1;
}

/* Read what the socket has, frame by frame.  Problems end in conn_lost()
 * (or, for a stranger, reject()). */
static void conn_read(struct sd_boot *b, struct conn *c, uint64_t *nonce)
{
	for (int budget = 64; c->fd >= 0 && budget > 0; budget--) {
		uint8_t *dst;
		size_t want;
		ssize_t n;

		if (c->hdr_got < 8) {
			dst = c->hdr + c->hdr_got;
			want = 8 - c->hdr_got;
		} else {
			if (c->in_got == c->in_cap && c->in_got < c->len) {
				size_t cap = c->in_cap ? c->in_cap * 2 : 65536;
				uint8_t *in;

				if (cap > c->len)
					cap = c->len;
				in = realloc(c->in, cap);
				if (!in) {
					conn_lost(b, c, ENOMEM, NULL);
					return;
				}
				c->in = in;
				c->in_cap = cap;
			}
			dst = c->in + c->in_got;
			want = c->in_cap - c->in_got;
		}
		if (want) {
			n = recv(c->fd, dst, want, MSG_DONTWAIT);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				return;
			if (n <= 0) {
				int e = n < 0 ? errno : 0;

				if (c->rank < 0 && b->rank == 0) {
					if (c->challenged && n == 0)
						reject(b, c,
						       "closed without answering the challenge: its job token "
						       "(SMDDP_JOB_TOKEN) differs from rank 0's, or it is no rank of "
						       "this job",
						       c->claim_rank);
					else if (c->hdr_got || n < 0)
						reject(b, c, n < 0 ? strerror(e) : "closed before completing its hello",
						       -1);
					else {
						SD_INFO(SD_SUB_BOOT, "connection from %s closed without a word",
							c->addr);
						conn_close(c);
					}
				} else if (e == ECONNRESET && c->bye) {
					conn_lost(b, c, 0, NULL);
				} else {
					conn_lost(b, c, e, NULL);
				}
				return;
			}
			if (c->hdr_got < 8) {
				c->hdr_got += (size_t)n;
				if (c->hdr_got < 8)
					continue;
				c->type = get32(c->hdr);
				c->len = get32(c->hdr + 4);
				uint32_t lim = frame_limit(b, c, c->type);
				if (lim && c->len > lim)
					snprintf(c->why, sizeof(c->why), "announced a %s frame of %u bytes (limit %u)",
						 type_name(c->type), c->len, lim);
				if (!lim || c->len > lim) {
					if (c->rank < 0 && b->rank == 0)
						reject(b, c, c->why, -1);
					else
						conn_lost(b, c, 0, c->why);
					return;
				}
				c->in_got = 0;
				c->in_cap = 0;
				c->in = NULL;
				if (c->len)
					continue;
			} else {
				c->in_got += (size_t)n;
				if (c->in_got < c->len)
					continue;
			}
		}
		/* A whole frame. */
		uint8_t *payload = c->in;
		c->in = NULL;
		c->in_cap = 0;
		c->hdr_got = 0;
		int stop = on_frame(b, c, c->type, &payload, c->len, nonce);
		free(payload);
		if (stop)
			return;
	}
}

/* ---- the event loop ---------------------------------------------------- */

static int grow_poll(struct sd_boot *b, int need)
{
	if (need <= b->pcap)
		return 0;
	struct pollfd *pfd = realloc(b->pfd, (size_t)need * sizeof(*pfd));
	if (!pfd)
		return -1;
	b->pfd = pfd;
	struct conn **pc = realloc(b->pconn, (size_t)need * sizeof(*pc));
	if (!pc)
		return -1;
	b->pconn = pc;
	b->pcap = need;
	return 0;
}

static void accept_strangers(struct sd_boot *b, uint64_t now)
{
	while (b->npending < PENDING_MAX) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(b->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct conn *c;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				/* Out of descriptors, say: the connection stays in the backlog
				 * and poll() says so again at once; do not spin on it. */
				SD_WARN(SD_SUB_BOOT, "accept on %s: %s", b->where, strerror(errno));
				sleep_ns(10 * MS);
			}
			return;
		}
		c = conn_new(fd);
		if (!c) {
			close(fd);
			return;
		}
		set_nodelay(fd);
		fmt_sockaddr(c->addr, sizeof(c->addr), (struct sockaddr *)&ss, sl);
		c->loopback = is_loopback((struct sockaddr *)&ss);
		c->limit_ns = now + HELLO_LIMIT_NS;
		b->pending[b->npending++] = c;
		SD_TRACE(SD_SUB_BOOT, "connection from %s", c->addr);
	}
}

/* One poll() over everything, waiting at most until deadline, then handle
 * what is ready.  Never fails: trouble is recorded on the connections and
 * in b->failed. */
static void pump(struct sd_boot *b, uint64_t deadline, uint64_t *nonce)
{
	int n = 0, timeout;
	uint64_t now;

	if (grow_poll(b, b->size + b->npending + 1) < 0) {
		sleep_ns(MS);
		return;
	}
	for (int r = 0; r < b->size; r++) {
		struct conn *c = b->conns[r];

		if (!c || c->fd < 0)
			continue;
		b->pfd[n] = (struct pollfd){c->fd, POLLIN | (c->out_head ? POLLOUT : 0), 0};
		b->pconn[n++] = c;
	}
	for (int i = 0; i < b->npending; i++) {
		struct conn *c = b->pending[i];

		b->pfd[n] = (struct pollfd){c->fd, POLLIN | (c->out_head ? POLLOUT : 0), 0};
		b->pconn[n++] = c;
		if (c->limit_ns < deadline)
			deadline = c->limit_ns;
	}
	if (b->lfd >= 0 && b->npending < PENDING_MAX) { /* full: the backlog waits, no spinning */
		b->pfd[n] = (struct pollfd){b->lfd, POLLIN, 0};
		b->pconn[n++] = NULL;
	}
	timeout = ms_until(deadline);
	if (poll(b->pfd, (nfds_t)n, timeout) < 0) {
		if (errno != EINTR)
			sleep_ns(MS);
		return;
	}
	now = sd_now_ns();
	for (int i = 0; i < n; i++) {
		struct conn *c = b->pconn[i];
		short re = b->pfd[i].revents;

		if (!re)
			continue;
		if (!c) {
			accept_strangers(b, now);
			continue;
		}
		int werr = 0;

		if (c->fd >= 0 && (re & POLLOUT) && conn_flush(c) < 0)
			werr = errno;
		/* Read first: what the peer said before it went (an ABORT) counts. */
		if (c->fd >= 0 && (werr || (re & (POLLIN | POLLHUP | POLLERR))))
			conn_read(b, c, nonce);
		if (c->fd >= 0 && werr) {
			if (c->rank < 0 && b->rank == 0)
				reject(b, c, strerror(werr), -1);
			else
				conn_lost(b, c, werr, NULL);
		}
	}
	/* Strangers: drop those closed or promoted to ranks, time out the slow. */
	int k = 0;
	for (int i = 0; i < b->npending; i++) {
		struct conn *c = b->pending[i];

		if (c->fd >= 0 && c->rank < 0 && now >= c->limit_ns)
			reject(b, c,
			       c->challenged ? "did not answer the challenge within 5 s"
					     : "sent no complete hello within 5 s",
			       c->challenged ? c->claim_rank : -1);
		if (c->rank >= 0)
			continue;
		if (c->fd < 0) {
			conn_free(c);
			continue;
		}
		b->pending[k++] = c;
	}
	b->npending = k;
}

static int output_pending(struct sd_boot *b)
{
	for (int r = 0; r < b->size; r++)
		if (b->conns[r] && b->conns[r]->fd >= 0 && b->conns[r]->out_head)
			return 1;
	return 0;
}

/* Push queued frames out for at most wait_ns, reading nothing (used on the
 * way out, and by abort). */
static void drain_output(struct sd_boot *b, uint64_t wait_ns)
{
	uint64_t deadline = sd_now_ns() + wait_ns;

	for (;;) {
		int n = 0;

		if (grow_poll(b, b->size) < 0)
			return;
		for (int r = 0; r < b->size; r++) {
			struct conn *c = b->conns[r];

			if (c && c->fd >= 0 && c->out_head) {
				if (conn_flush(c) < 0) {
					conn_drop_output(c);
					continue;
				}
				if (c->out_head) {
					b->pfd[n] = (struct pollfd){c->fd, POLLOUT, 0};
					b->pconn[n++] = c;
				}
			}
		}
		if (!n || sd_now_ns() >= deadline)
			return;
		if (poll(b->pfd, (nfds_t)n, ms_until(deadline)) < 0 && errno != EINTR)
			return;
	}
}

/* ---- rendezvous --------------------------------------------------------- */

static int listen_on(struct sd_boot *b, const struct sd_boot_params *p, char *err, size_t errlen)
{
	struct addrinfo hints = {0}, *res = NULL;
	int gai, e = 0;

	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	gai = getaddrinfo(p->addr[0] ? p->addr : NULL, p->port, &hints, &res);
	if (gai) {
		seterr(err, errlen, "rank 0 cannot resolve its own address %s (MASTER_ADDR/MASTER_PORT): %s", b->where,
		       gai == EAI_SYSTEM ? strerror(errno) : gai_strerror(gai));
		return SMDDP_ECONFIG;
	}
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
	if (b->lfd < 0) {
		seterr(err, errlen, "rank 0 cannot listen on %s: %s%s", b->where, strerror(e),
		       e == EADDRINUSE	      ? " (is another job using MASTER_PORT?)"
		       : e == EADDRNOTAVAIL ? " (is MASTER_ADDR an address of rank 0's host?)"
		       : e == EACCES	      ? " (ports below 1024 need privileges: pick another MASTER_PORT)"
					      : "");
		return e == EADDRNOTAVAIL ? SMDDP_ECONFIG : SMDDP_ESYSTEM;
	}
	SD_TRACE(SD_SUB_BOOT, "rank 0 listening on %s", b->where);
	return SMDDP_OK;
}

int sd_boot_listen(int *fd, int *port, char *err, size_t errlen)
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
	seterr(err, errlen, "cannot listen on a TCP port for the rendezvous: %s", strerror(e));
	return SMDDP_ESYSTEM;
}

void sd_boot_local_addr(char *buf, size_t len)
{
	const char *v = sd_param_str("SMDDP_BOOT_ADDR");
	struct ifaddrs *ifa = NULL;

	snprintf(buf, len, "127.0.0.1");
	if (v && *v) {
		snprintf(buf, len, "%s", v);
		return;
	}
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
	struct frame *f = frame_str(F_GIVEUP, 0, 0, 1, rc, why);

	if (!f)
		return;
	broadcast(b, f, -1);
	frame_unref(f);
}

static int rendezvous0(struct sd_boot *b, const struct sd_boot_params *p, uint64_t *nonce, char *err, size_t errlen)
{
	uint64_t start = sd_now_ns();
	uint8_t *missing;
	int rc;

	if (p->listen_fd >= 0) {
		b->lfd = p->listen_fd;
	} else {
		rc = listen_on(b, p, err, errlen);
		if (rc)
			return rc;
	}
	b->pending = calloc(PENDING_MAX, sizeof(*b->pending));
	missing = calloc((size_t)b->size, 1);
	if (!b->pending || !missing) {
		free(missing);
		seterr(err, errlen, "out of memory for the rendezvous of %d ranks", b->size);
		return SMDDP_ENOMEM;
	}
	for (;;) {
		int have = 1;

		for (int r = 1; r < b->size; r++)
			have += b->conns[r] != NULL;
		if (b->failed) {
			rc = report_fail(b, NULL, err, errlen);
			break;
		}
		if (have == b->size) {
			rc = SMDDP_OK;
			break;
		}
		if (sd_now_ns() >= p->deadline_ns) {
			char list[200], msg[512];

			for (int r = 1; r < b->size; r++)
				missing[r] = b->conns[r] == NULL;
			fmt_ranks(list, sizeof(list), missing, b->size);
			snprintf(msg, sizeof(msg), "rendezvous on %s: rank(s) %s of %d did not connect within %g s%s%s",
				 b->where, list, b->size, span(p->deadline_ns, start),
				 b->last_reject[0] ? "; last rejected: " : "", b->last_reject);
			seterr(err, errlen, "%s", msg);
			give_up(b, SMDDP_ETIMEDOUT, msg);
			rc = SMDDP_ETIMEDOUT;
			break;
		}
		pump(b, p->deadline_ns, nonce);
	}
	free(missing);
	/* The rendezvous is over either way: nobody else may come in. */
	for (int i = 0; i < b->npending; i++) {
		SD_INFO(SD_SUB_BOOT, "closing connection from %s: the rendezvous is over", b->pending[i]->addr);
		conn_free(b->pending[i]);
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
	struct frame *f = frame_new(F_WELCOME, plen);
	if (!f) {
		seterr(err, errlen, "out of memory for the rendezvous of %d ranks", b->size);
		return SMDDP_ENOMEM;
	}
	*nonce = random64();
	uint8_t *q = f->data + 8;
	put64(q, *nonce);
	put32(q + 8, (uint32_t)b->size);
	q += 12;
	for (int r = 0; r < b->size; r++) {
		size_t hl = strlen(b->ids[r].hostid);

		put32(q, (uint32_t)b->ids[r].pid);
		put32(q + 4, (uint32_t)hl);
		memcpy(q + 8, b->ids[r].hostid, hl);
		q += 8 + hl;
	}
	broadcast(b, f, -1);
	frame_unref(f);
	b->ready = 1;
	/* Make sure every rank gets it (bounded by the same deadline). */
	while (output_pending(b) && !b->failed && sd_now_ns() < p->deadline_ns)
		pump(b, p->deadline_ns, NULL);
	if (b->failed)
		return report_fail(b, NULL, err, errlen);
	if (output_pending(b)) {
		seterr(err, errlen, "rendezvous on %s: the welcome could not be sent to every rank within %g s",
		       b->where, span(p->deadline_ns, start));
		return SMDDP_ETIMEDOUT;
	}
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
		int n = poll(&pf, 1, ms_until(deadline));

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

static int connect_hub(struct sd_boot *b, const struct sd_boot_params *p, char *err, size_t errlen)
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
					return fd;
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
			seterr(err, errlen, "rank %d cannot resolve rank 0's address %s (MASTER_ADDR/MASTER_PORT): %s",
			       b->rank, b->where, gai_strerror(gai));
			return -SMDDP_ECONFIG;
		}
		uint64_t left = left_ns(p->deadline_ns);
		if (!left) {
			seterr(err, errlen,
			       "could not reach rank 0 at %s within %g s (last error: %s): is rank 0 running, and are "
			       "MASTER_ADDR/MASTER_PORT the same for every rank?",
			       b->where, span(p->deadline_ns, start), last);
			return -SMDDP_ETIMEDOUT;
		}
		sleep_ns(backoff < left ? backoff : left);
		backoff = backoff * 2 > 500 * MS ? 500 * MS : backoff * 2;
	}
}

static int rendezvous(struct sd_boot *b, const struct sd_boot_params *p, uint64_t *nonce, char *err, size_t errlen)
{
	uint64_t start = sd_now_ns();
	int fd = connect_hub(b, p, err, errlen);
	struct frame *f;
	struct conn *c;

	if (fd < 0)
		return -fd;
	set_nodelay(fd);
	c = conn_new(fd);
	if (!c) {
		close(fd);
		seterr(err, errlen, "out of memory");
		return SMDDP_ENOMEM;
	}
	c->rank = 0;
	snprintf(c->addr, sizeof(c->addr), "%s", b->where);
	b->conns[0] = c;
	if (random_fill(b->cnonce, NONCE_LEN) < 0) {
		seterr(err, errlen, "rank %d has no random numbers for the rendezvous (getrandom and /dev/urandom "
				    "failed)", b->rank);
		return SMDDP_ESYSTEM;
	}
	/* The hello says only who this rank claims to be: pid and host go in
	 * the AUTH, once rank 0 has shown that it knows the token. */
	f = frame_new(F_HELLO, 8 + 12 + NONCE_LEN);
	if (!f) {
		seterr(err, errlen, "out of memory");
		return SMDDP_ENOMEM;
	}
	uint8_t *q = f->data + 8;
	memcpy(q, HELLO_MAGIC, 8);
	put32(q + 8, PROTO_VERSION);
	put32(q + 12, (uint32_t)b->rank);
	put32(q + 16, (uint32_t)b->size);
	memcpy(q + 20, b->cnonce, NONCE_LEN);
	(void)conn_send(c, f);
	frame_unref(f);
	/* Wait a little past our own deadline: rank 0 is the one that knows
	 * which ranks are missing, and its deadline may end after ours (it
	 * may have started later).  Its sentence beats ours. */
	uint64_t until = p->deadline_ns + HUB_GRACE_NS;

	while (!b->ready && !b->failed) {
		if (sd_now_ns() >= until) {
			seterr(err, errlen,
			       "rank 0 at %s took rank %d's hello but did not complete the rendezvous within %g s "
			       "(are other ranks missing? rank 0's log names them)",
			       b->where, b->rank, span(until, start));
			return SMDDP_ETIMEDOUT;
		}
		pump(b, until, nonce);
	}
	if (b->failed)
		return report_fail(b, NULL, err, errlen);
	return SMDDP_OK;
}

int sd_boot_init(const struct sd_boot_params *p, struct sd_boot **out, struct sd_boot_peer *peers, uint64_t *nonce,
		 char *err, size_t errlen)
{
	struct sd_boot *b = NULL;
	const char *hostid, *token;
	uint64_t n = 0;
	int rc;

	if (out)
		*out = NULL;
	if (!p || !out || !peers || !nonce || p->size < 1 || p->rank < 0 || p->rank >= p->size ||
	    (p->size > 1 && (!p->addr || !p->port))) {
		seterr(err, errlen, "bootstrap: bad parameters (rank %d, size %d)", p ? p->rank : -1, p ? p->size : -1);
		return SMDDP_EINVAL;
	}
	if (p->size > 1) {
		char *end;
		long port;

		errno = 0;
		port = strtol(p->port, &end, 10);
		if (!p->port[0] || *end || errno || port < 1 || port > 65535) {
			seterr(err, errlen, "rank %d: MASTER_PORT \"%s\" is not a port number (1..65535)", p->rank,
			       p->port);
			return SMDDP_ECONFIG;
		}
	}
	hostid = p->hostid ? p->hostid : "";
	token = p->token ? p->token : "";
	if (strlen(hostid) >= SD_HOSTID_MAX) {
		seterr(err, errlen, "host id of rank %d is longer than %d bytes", p->rank, SD_HOSTID_MAX - 1);
		return SMDDP_EINVAL;
	}
	if (strlen(token) > TOKEN_MAX) {
		seterr(err, errlen, "the job token (SMDDP_JOB_TOKEN) is longer than %d bytes", TOKEN_MAX);
		return SMDDP_ECONFIG;
	}
	b = calloc(1, sizeof(*b));
	if (b) {
		b->conns = calloc((size_t)p->size, sizeof(*b->conns));
		b->ids = calloc((size_t)p->size, sizeof(*b->ids));
	}
	if (!b || !b->conns || !b->ids) {
		seterr(err, errlen, "out of memory for a bootstrap of %d ranks", p->size);
		rc = SMDDP_ENOMEM;
		goto out;
	}
	b->rank = p->rank;
	b->size = p->size;
	b->lfd = -1;
	b->token = token;
	b->hostid = hostid;
	b->allow_no_token = p->allow_no_token;
	b->ids[p->rank].pid = (int32_t)getpid();
	snprintf(b->ids[p->rank].hostid, SD_HOSTID_MAX, "%s", hostid);
	if (p->size == 1) {
		b->ready = 1;
		n = random64();
		rc = SMDDP_OK;
		goto out;
	}
	fmt_where(b->where, sizeof(b->where), p->addr, p->port);
	if (p->rank == 0 && !token[0])
		SD_INFO(SD_SUB_BOOT, "no job token: rank 0 admits ranks %s", p->allow_no_token
			? "from anywhere (SMDDP_ALLOW_NO_TOKEN)" : "from this host only (loopback)");
	if (p->rank == 0)
		rc = rendezvous0(b, p, &n, err, errlen);
	else
		rc = rendezvous(b, p, &n, err, errlen);
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

int sd_boot_poll(struct sd_boot *b, int *rank, char *err, size_t errlen)
{
	if (rank)
		*rank = -1;
	if (!b)
		return SMDDP_EINVAL;
	if (!b->failed)
		pump(b, 0, NULL);
	if (b->failed) {
		drain_output(b, 0); /* relays go out even if nobody polls again */
		return report_fail(b, rank, err, errlen);
	}
	return SMDDP_OK;
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

static int ag_rank0(struct sd_boot *b, void *all, size_t len, uint64_t deadline, char *err, size_t errlen)
{
	uint64_t start = sd_now_ns();
	uint8_t *got = calloc((size_t)b->size, 1);
	int have = 1, rc = SMDDP_OK;

	if (!got) {
		seterr(err, errlen, "out of memory");
		return SMDDP_ENOMEM;
	}
	got[0] = 1;
	for (;;) {
		for (int r = 1; r < b->size; r++) {
			struct conn *c = b->conns[r];

			if (got[r] || !c || !c->stash)
				continue;
			uint64_t s = c->stash_len >= 8 ? get64(c->stash) : 0;
			if (c->stash_len != 8 + len || s != b->seq) {
				char msg[300];
				struct frame *f;

				snprintf(msg, sizeof(msg),
					 "out-of-band all-gather #%llu: rank %d sent %zu bytes for all-gather #%llu "
					 "where rank 0 has %zu bytes for #%llu (ranks called different collectives)",
					 (unsigned long long)b->seq, r, c->stash_len >= 8 ? c->stash_len - 8 : 0,
					 (unsigned long long)s, len, (unsigned long long)b->seq);
				fail(b, SMDDP_EMISMATCH, r, "%s", msg);
				f = frame_str(F_ABORT, 1, 0, 0, 0, msg);
				if (f) {
					broadcast(b, f, -1);
					frame_unref(f);
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
			rc = report_fail(b, NULL, err, errlen);
			goto out;
		}
		if (have == b->size)
			break;
		for (int r = 1; r < b->size; r++) {
			if (!got[r] && b->conns[r] && b->conns[r]->fd < 0) {
				seterr(err, errlen,
				       "out-of-band all-gather #%llu: rank %d closed its channel cleanly (BYE) and "
				       "cannot take part",
				       (unsigned long long)b->seq, r);
				rc = SMDDP_EPEER;
				goto out;
			}
		}
		if (sd_now_ns() >= deadline) {
			char list[200];

			for (int r = 0; r < b->size; r++)
				got[r] = !got[r];
			fmt_ranks(list, sizeof(list), got, b->size);
			seterr(err, errlen,
			       "out-of-band all-gather #%llu: rank(s) %s of %d did not contribute within %g s",
			       (unsigned long long)b->seq, list, b->size, span(deadline, start));
			rc = SMDDP_ETIMEDOUT;
			/* The ranks that did contribute wait for us a little past
			 * their deadline: tell them who is missing, and let the
			 * words leave before this rank may exit (bounded). */
			give_up(b, rc, err);
			{
				uint64_t until = sd_now_ns() + 1000000000ull;

				while (output_pending(b) && sd_now_ns() < until)
					pump(b, until, NULL);
			}
			goto out;
		}
		pump(b, deadline, NULL);
	}

	struct frame *f = frame_new(F_RESULT, 8 + (size_t)b->size * len);
	if (!f) {
		seterr(err, errlen, "out of memory for an all-gather of %d x %zu bytes", b->size, len);
		rc = SMDDP_ENOMEM;
		goto out;
	}
	put64(f->data + 8, b->seq);
	if (len)
		memcpy(f->data + 16, all, (size_t)b->size * len);
	broadcast(b, f, -1);
	frame_unref(f);
	/* Wait until all of it left: ranks must not wait on rank 0's next call. */
	while (output_pending(b) && !b->failed && sd_now_ns() < deadline)
		pump(b, deadline, NULL);
	if (b->failed) {
		rc = report_fail(b, NULL, err, errlen);
	} else if (output_pending(b)) {
		seterr(err, errlen,
		       "out-of-band all-gather #%llu: rank 0 could not send the result to every rank within %g s",
		       (unsigned long long)b->seq, span(deadline, start));
		rc = SMDDP_ETIMEDOUT;
	}
out:
	free(got);
	return rc;
}

static int ag_other(struct sd_boot *b, const void *mine, void *all, size_t len, uint64_t deadline, char *err,
		    size_t errlen)
{
	uint64_t start = sd_now_ns();
	struct conn *c = b->conns[0];
	struct frame *f;

	if (c->fd < 0) {
		seterr(err, errlen, "out-of-band all-gather #%llu: rank 0 has closed the channel (clean close)",
		       (unsigned long long)b->seq);
		return SMDDP_EPEER;
	}
	f = frame_new(F_GATHER, 8 + len);
	if (!f) {
		seterr(err, errlen, "out of memory for an all-gather of %zu bytes", len);
		return SMDDP_ENOMEM;
	}
	put64(f->data + 8, b->seq);
	if (len)
		memcpy(f->data + 16, mine, len);
	(void)conn_send(c, f);
	frame_unref(f);
	for (;;) {
		if (c->stash) {
			uint64_t s = c->stash_len >= 8 ? get64(c->stash) : 0;

			if (c->stash_len != 8 + (size_t)b->size * len || s != b->seq) {
				seterr(err, errlen,
				       "out-of-band all-gather #%llu: rank 0 answered with %zu bytes for #%llu where "
				       "rank %d expected %zu (ranks called different collectives)",
				       (unsigned long long)b->seq, c->stash_len >= 8 ? c->stash_len - 8 : 0,
				       (unsigned long long)s, b->rank, (size_t)b->size * len);
				fail(b, SMDDP_EMISMATCH, 0, "%s", err ? err : "all-gather mismatch");
				return SMDDP_EMISMATCH;
			}
			if (len)
				memcpy(all, c->stash + 8, (size_t)b->size * len);
			free(c->stash);
			c->stash = NULL;
			return SMDDP_OK;
		}
		if (b->failed)
			return report_fail(b, NULL, err, errlen);
		if (c->fd < 0) {
			seterr(err, errlen, "out-of-band all-gather #%llu: rank 0 closed the channel cleanly (BYE)",
			       (unsigned long long)b->seq);
			return SMDDP_EPEER;
		}
		/* As in the rendezvous: give rank 0 the chance to name who is missing. */
		if (sd_now_ns() >= deadline + HUB_GRACE_NS) {
			seterr(err, errlen,
			       "out-of-band all-gather #%llu: rank 0 did not send the result within %g s (some rank "
			       "did not call it; rank 0's error names them)",
			       (unsigned long long)b->seq, span(deadline + HUB_GRACE_NS, start));
			return SMDDP_ETIMEDOUT;
		}
		pump(b, deadline + HUB_GRACE_NS, NULL);
	}
}

int sd_boot_allgather(struct sd_boot *b, const void *mine, void *all, size_t len, uint64_t deadline_ns, char *err,
		      size_t errlen)
{
	int rc;

	if (!b || (len && (!mine || !all)) || (b->size && len > (BIG_MAX - 8) / (size_t)b->size)) {
		seterr(err, errlen, "out-of-band all-gather: bad arguments (len %zu, %d ranks; at most %u bytes in all)",
		       len, b ? b->size : 0, BIG_MAX - 8);
		return SMDDP_EINVAL;
	}
	if (b->failed) {
		drain_output(b, 0);
		return report_fail(b, NULL, err, errlen);
	}
	if (b->ag_broken) {
		seterr(err, errlen, "%s", b->ag_err);
		return b->ag_broken;
	}
	if (len && (const uint8_t *)mine != (uint8_t *)all + (size_t)b->rank * len)
		memmove((uint8_t *)all + (size_t)b->rank * len, mine, len);
	if (b->size == 1)
		return SMDDP_OK;
	if (b->rank == 0)
		rc = ag_rank0(b, all, len, deadline_ns, err, errlen);
	else
		rc = ag_other(b, (uint8_t *)all + (size_t)b->rank * len, all, len, deadline_ns, err, errlen);
	if (rc == SMDDP_OK) {
		b->seq++;
	} else if (!b->failed) {
		/* Some frames of this round may still come: the next round would be out of step. */
		b->ag_broken = rc;
		snprintf(b->ag_err, sizeof(b->ag_err), "the out-of-band channel is out of step after a failed "
						       "all-gather: %s",
			 err && errlen ? err : smddp_strerror(rc));
	}
	if (b->failed)
		drain_output(b, 0);
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
	f = frame_str(F_ABORT, 1, b->rank, 0, 0, why);
	if (f) {
		if (b->rank == 0)
			broadcast(b, f, -1);
		else if (b->conns[0])
			(void)conn_send(b->conns[0], f);
		frame_unref(f);
	}
	fail(b, SMDDP_EABORTED, b->rank, "rank %d aborted: %s", b->rank, why);
	drain_output(b, 100 * MS);
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
		struct frame *f = frame_new(F_BYE, 0);

		if (f) {
			for (int r = 0; r < b->size; r++)
				if (b->conns[r] && b->conns[r]->fd >= 0)
					(void)conn_send(b->conns[r], f);
			frame_unref(f);
		}
	}
	/* Leaving after a failure: take in what has come (a dead rank's
	 * connection closing), so that rank 0 relays that death to all before
	 * its own connections close, and the others learn the root cause
	 * rather than rank 0's departure. */
	if (!clean && !b->failed)
		pump(b, 0, NULL);
	drain_output(b, clean ? 2000 * MS : 200 * MS);
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
		conn_free(c);
	}
	for (int i = 0; i < b->npending; i++)
		conn_free(b->pending[i]);
	if (b->lfd >= 0)
		close(b->lfd);
	free(b->pending);
	free(b->conns);
	free(b->ids);
	free(b->pfd);
	free(b->pconn);
	free(b);
}
