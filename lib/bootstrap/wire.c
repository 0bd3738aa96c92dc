/* wire.c - the bootstrap's frames and connections, and the small helpers of its files (design: bootstrap.c). */
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
#include "hash/sha256.h"
#include "util/sd.h"
#include "bootstrap/wire.h"

const char *sd_boot_type_name(uint32_t t)
{
	static const char *const names[] = {"?",      "HELLO", "REJECT", "WELCOME", "GIVEUP",    "GATHER",
					    "RESULT", "DEATH", "ABORT",  "BYE",     "CHALLENGE", "AUTH",
					    "NOTE"};
	return t < sizeof(names) / sizeof(names[0]) ? names[t] : "?";
}

const char sd_boot_job_token_differs[] = "SMDDP_JOB_TOKEN differs between ranks";

/* ---- small helpers ---------------------------------------------------- */

void sd_boot_fail(struct sd_boot *b, int rc, int rank, const char *fmt, ...)
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

int sd_boot_report_fail(struct sd_boot *b, int *rank, struct sd_err *err)
{
	if (rank)
		*rank = b->fail_rank;
	return sd_err_set(err, b->failed, "%s", b->fail_err);
}

void sd_boot_put32(uint8_t *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

uint32_t sd_boot_get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

void sd_boot_put64(uint8_t *p, uint64_t v)
{
	sd_boot_put32(p, (uint32_t)(v >> 32));
	sd_boot_put32(p + 4, (uint32_t)v);
}

uint64_t sd_boot_get64(const uint8_t *p)
{
	return ((uint64_t)sd_boot_get32(p) << 32) | sd_boot_get32(p + 4);
}

/* Bounds-checked reader of a payload. */

uint32_t sd_boot_rd32(struct rd *r)
{
	if (r->bad || r->n - r->off < 4) {
		r->bad = 1;
		return 0;
	}
	r->off += 4;
	return sd_boot_get32(r->p + r->off - 4);
}

const uint8_t *sd_boot_rdbytes(struct rd *r, size_t len)
{
	if (r->bad || r->n - r->off < len) {
		r->bad = 1;
		return NULL;
	}
	r->off += len;
	return r->p + r->off - len;
}

/* Length-prefixed string of at most max bytes, copied NUL-terminated into out[max+1]. */
int sd_boot_rdstr(struct rd *r, char *out, size_t max)
{
	uint32_t len = sd_boot_rd32(r);
	const uint8_t *s;

	if (r->bad || len > max) {
		r->bad = 1;
		return -1;
	}
	s = sd_boot_rdbytes(r, len);
	if (!s)
		return -1;
	memcpy(out, s, len);
	out[len] = '\0';
	return (int)len;
}

uint64_t sd_boot_left_ns(uint64_t deadline)
{
	uint64_t now = sd_now_ns();

	return deadline > now ? deadline - now : 0;
}

int sd_boot_ms_until(uint64_t deadline)
{
	uint64_t ns = sd_boot_left_ns(deadline);
	uint64_t ms = (ns + MS - 1) / MS;

	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* Seconds from start to deadline, rounded to a tenth, for messages. */
double sd_boot_span(uint64_t deadline, uint64_t start)
{
	uint64_t ns = deadline > start ? deadline - start : 0;

	return (double)((ns + 50000000ull) / 100000000ull) / 10.0;
}

void sd_boot_sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

uint64_t sd_boot_random64(void)
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
int sd_boot_random_fill(void *buf, size_t len)
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
void sd_boot_admission_mac(const char *token, const char *label, const uint8_t *cnonce, const uint8_t *snonce,
			  int32_t rank, int32_t size, uint8_t out[SD_SHA256_LEN])
{
	struct sd_hmac_sha256 m;
	uint8_t rs[8];

	sd_boot_put32(rs, (uint32_t)rank);
	sd_boot_put32(rs + 4, (uint32_t)size);
	sd_hmac_sha256_init(&m, token, strlen(token));
	sd_hmac_sha256_update(&m, "smddp-boot-2 ", 13);
	sd_hmac_sha256_update(&m, label, strlen(label) + 1);
	sd_hmac_sha256_update(&m, cnonce, NONCE_LEN);
	sd_hmac_sha256_update(&m, snonce, NONCE_LEN);
	sd_hmac_sha256_update(&m, rs, sizeof(rs));
	sd_hmac_sha256_final(&m, out);
}

int sd_boot_is_loopback(const struct sockaddr *sa)
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

void sd_boot_fmt_where(char *out, size_t n, const char *addr, const char *port)
{
	if (strchr(addr, ':'))
		snprintf(out, n, "[%s]:%s", addr, port);
	else
		snprintf(out, n, "%s:%s", addr, port);
}

void sd_boot_fmt_sockaddr(char *out, size_t n, const struct sockaddr *sa, socklen_t salen)
{
	char host[NI_MAXHOST], serv[NI_MAXSERV];

	if (getnameinfo(sa, salen, host, sizeof(host), serv, sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV)) {
		snprintf(out, n, "(unknown address)");
		return;
	}
	sd_boot_fmt_where(out, n, host, serv);
}

/* "2,3,5-9" into out, truncated with "..." when long. */
void sd_boot_fmt_ranks(char *out, size_t n, const uint8_t *missing, int size)
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

void sd_boot_set_nodelay(int fd)
{
	int one = 1;

	/* Frames are small and latency-bound; failure only costs speed. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- frames and connections ------------------------------------------- */

struct frame *sd_boot_frame_new(uint32_t type, size_t paylen)
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
	sd_boot_put32(f->data, type);
	sd_boot_put32(f->data + 4, (uint32_t)paylen);
	return f;
}

void sd_boot_frame_unref(struct frame *f)
{
	if (f && --f->ref == 0)
		free(f);
}

struct conn *sd_boot_conn_new(int fd)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = fd;
	c->rank = -1;
	return c;
}

void sd_boot_conn_drop_output(struct conn *c)
{
	while (c->out_head) {
		struct oseg *s = c->out_head;

		c->out_head = s->next;
		sd_boot_frame_unref(s->f);
		free(s);
	}
	c->out_tail = NULL;
}

void sd_boot_conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	sd_boot_conn_drop_output(c);
	free(c->in);
	c->in = NULL;
	c->in_cap = 0;
	/* The stash stays: a result followed by BYE and EOF is still a result. */
}

void sd_boot_conn_free(struct conn *c)
{
	if (!c)
		return;
	sd_boot_conn_close(c);
	free(c->stash);
	free(c);
}

const char *sd_boot_conn_name(const struct conn *c, char *buf, size_t n)
{
	if (c->rank >= 0)
		snprintf(buf, n, "rank %d", c->rank);
	else
		snprintf(buf, n, "stranger at %s", c->addr);
	return buf;
}

/* Send what the socket takes now.  0, or -1 with errno when the connection broke. */
int sd_boot_conn_flush(struct conn *c)
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
			sd_boot_frame_unref(s->f);
			free(s);
		}
	}
	return 0;
}

/* Queue f (taking a new reference) and send what fits now.  A broken
 * connection is noticed by the next read, which tells why. */
int sd_boot_conn_send(struct conn *c, struct frame *f)
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
	SD_TRACE(SD_SUB_BOOT, "send %s (%zu bytes) to %s", sd_boot_type_name(f->type), f->len - 8,
		 sd_boot_conn_name(c, name, sizeof(name)));
	(void)sd_boot_conn_flush(c);
	return SMDDP_OK;
}

struct frame *sd_boot_frame_str(uint32_t type, int has_rank, int32_t rank, int has_code, int code, const char *s)
{
	size_t len = strlen(s);
	struct frame *f;
	uint8_t *p;

	if (len > REASON_MAX)
		len = REASON_MAX;
	f = sd_boot_frame_new(type, (has_rank ? 4 : 0) + (has_code ? 4 : 0) + 4 + len);
	if (!f)
		return NULL;
	p = f->data + 8;
	if (has_rank) {
		sd_boot_put32(p, (uint32_t)rank);
		p += 4;
	}
	if (has_code) {
		sd_boot_put32(p, (uint32_t)code);
		p += 4;
	}
	sd_boot_put32(p, (uint32_t)len);
	memcpy(p + 4, s, len);
	return f;
}

/* Queue f to every live rank connection except rank `except`. */
void sd_boot_broadcast(struct sd_boot *b, struct frame *f, int except)
{
	for (int r = 1; r < b->size; r++)
		if (r != except && b->conns[r] && b->conns[r]->fd >= 0)
			(void)sd_boot_conn_send(b->conns[r], f);
}

/* Rank 0: tell every other rank that `rank` died. */
static void relay_death(struct sd_boot *b, int rank)
{
	struct frame *f = b->notes && b->notes[rank][0]
				  ? sd_boot_frame_str(F_DEATH, 1, rank, 0, 0, b->notes[rank])
				  : sd_boot_frame_new(F_DEATH, 4);

	if (!f)
		return;
	sd_boot_put32(f->data + 8, (uint32_t)rank);
	sd_boot_broadcast(b, f, rank);
	sd_boot_frame_unref(f);
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

const char *sd_boot_host_of(struct sd_boot *b, int r)
{
	if (!b->ids || !b->ids[r].hostid[0])
		return "an unknown host";
	return sd_host_name(b->ids[r].hostid);
}

void sd_boot_keep_note(struct sd_boot *b, int r, const char *note)
{
	if (!b->notes)
		b->notes = calloc((size_t)b->size, sizeof(*b->notes));
	if (b->notes)
		snprintf(b->notes[r], sizeof(b->notes[r]), "%s", note);
}

const char *sd_boot_note_words(struct sd_boot *b, int r, char *buf, size_t n)
{
	if (!b->notes || !b->notes[r][0])
		return "";
	snprintf(buf, n, " after an error of its own (its last: %s)", b->notes[r]);
	return buf;
}

/* The far end of c closed (err == 0) or broke (errno err), or sent nonsense (proto != NULL). */
void sd_boot_conn_lost(struct sd_boot *b, struct conn *c, int err, const char *proto)
{
	char detail[200] = "", note[NOTE_MAX + 60];
	int r = c->rank;

	if (err)
		snprintf(detail, sizeof(detail), " (%s)", strerror(err));
	if (c->rank < 0) { /* a stranger on rank 0 */
		sd_boot_conn_close(c);
		return;
	}
	if (c->bye && !proto) {
		SD_TRACE(SD_SUB_BOOT, "rank %d closed its connection after BYE", b->rank == 0 ? r : 0);
		sd_boot_conn_close(c);
		return;
	}
	sd_boot_conn_close(c);
	if (b->rank == 0) {
		if (proto)
			sd_boot_fail(b, SMDDP_EPEER, r, "rank %d (pid %d on %s) sent a malformed frame to rank 0 (%s)", r,
			     (int)b->ids[r].pid, sd_boot_host_of(b, r), proto);
		else if (sd_boot_note_words(b, r, note, sizeof(note))[0])
			sd_boot_fail(b, SMDDP_EPEER, r,
			     "rank %d (pid %d on %s) left%s: rank 0 saw its connection close%s", r,
			     (int)b->ids[r].pid, sd_boot_host_of(b, r), note, detail);
		else
			sd_boot_fail(b, SMDDP_EPEER, r,
			     "rank %d (pid %d on %s) closed its connection to rank 0%s: it died or was killed%s", r,
			     (int)b->ids[r].pid, sd_boot_host_of(b, r), detail, b->ready ? "" : " (during the rendezvous)");
		relay_death(b, r);
	} else if (!b->ready) {
		if (proto)
			sd_boot_fail(b, SMDDP_ECONFIG, 0,
			     "rank 0 at %s answered rank %d with something that is not libsmddp's rendezvous (%s): "
			     "is MASTER_PORT used by another program?",
			     b->where, b->rank, proto);
		else
			sd_boot_fail(b, SMDDP_EPEER, 0,
			     "rank 0 at %s closed the connection of rank %d during the rendezvous%s: did rank 0 die?",
			     b->where, b->rank, detail);
	} else {
		if (proto)
			sd_boot_fail(b, SMDDP_EPEER, 0, "rank 0 (pid %d on %s) sent a malformed frame to rank %d (%s)",
			     (int)b->ids[0].pid, sd_boot_host_of(b, 0), b->rank, proto);
		else if (sd_boot_note_words(b, 0, note, sizeof(note))[0])
			sd_boot_fail(b, SMDDP_EPEER, 0, "rank 0 (pid %d on %s) left%s: rank %d saw its connection close%s",
			     (int)b->ids[0].pid, sd_boot_host_of(b, 0), note, b->rank, detail);
		else
			sd_boot_fail(b, SMDDP_EPEER, 0,
			     "rank 0 (pid %d on %s) closed its connection to rank %d%s: it died or was killed",
			     (int)b->ids[0].pid, sd_boot_host_of(b, 0), b->rank, detail);
	}
}
