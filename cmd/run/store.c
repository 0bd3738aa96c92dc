/* cmd/run/store.c - torch's TCPStore, served by smddp-run so that no rank holds it */

/*
 * Design. One thread, one poll() loop over a wake pipe (store_stop()), the
 * listening socket and the clients. Each client has an input buffer, parsed
 * a whole request at a time (an incomplete one waits for more bytes), and
 * an output buffer written as the socket takes it: a slow or stuck client
 * never blocks the others, nor smddp-run's own loop in the main thread.
 *
 * The wire protocol is torch's (torch/csrc/distributed/c10d/TCPStore*.cpp),
 * learnt from its description there: a request is one byte of query type,
 * then its arguments; integers are in the host's byte order (the clients
 * are on hosts like this one), strings and byte vectors are a uint64 length
 * and the bytes. A client must first send VALIDATE with the magic number,
 * then anything; WAIT answers when every key it names has been written
 * since (or existed), CANCEL_WAIT withdraws it. The values are kept in a
 * hash table of keys, and queues (QUEUE_*) in a second one, as torch
 * keeps them apart.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "hash/fnv.h"
#include "run/store.h"

enum query {
	Q_VALIDATE, Q_SET, Q_COMPARE_SET, Q_GET, Q_ADD, Q_CHECK, Q_WAIT, Q_GETNUMKEYS,
	Q_DELETE_KEY, Q_APPEND, Q_MULTI_GET, Q_MULTI_SET, Q_CANCEL_WAIT, Q_PING,
	Q_QUEUE_PUSH, Q_QUEUE_POP, Q_QUEUE_LEN,
};
enum { CHECK_READY, CHECK_NOT_READY };
enum { WAIT_STOP_WAITING, WAIT_CANCELED };

#define MAGIC          0x3C85F7CEu
#define MAX_KEY        (64u << 10)      /* a longer key: the client is dropped */
#define MAX_VALUE      (256u << 20)
#define MAX_KEYS       (128u << 10)     /* keys of one CHECK, WAIT, MULTI_* */
#define NBUCKETS       4096u
#define MAX_CLIENTS    8192

/* A key and its bytes; in the queue table, a queue of values instead. */
struct item {
	struct item *next;
	size_t len;
	uint8_t data[];
};

struct entry {
	struct entry *next;
	char *key;
	size_t klen;
	uint8_t *val;                  /* values */
	size_t vlen;
	struct item *qhead, *qtail;    /* queues */
	int64_t qlen;
};

struct table {
	struct entry *b[NBUCKETS];
	size_t n;
};

struct buf {
	uint8_t *p;
	size_t off, len, cap;          /* pending bytes are p[off, len) */
};

struct client {
	int fd;
	bool validated;
	struct buf in, out;
	/* WAIT in progress: the keys still missing (seen[i] once written) */
	char **wkey;
	size_t *wklen;
	bool *wseen;
	size_t nwait, nleft;
};

struct store {
	int lfd;
	int wake[2];
	pthread_t thread;
	bool started;
	struct table kv, queues;
	struct client **c;
	size_t nc, capc;
};

/* ---- keys ----------------------------------------------------------------- */

static uint32_t hash(const char *k, size_t n)
{
	return (uint32_t)(sd_fnv1a(SD_FNV1A_BASIS, k, n) % NBUCKETS);
}

static struct entry **find(struct table *t, const char *k, size_t n)
{
	struct entry **e = &t->b[hash(k, n)];
	for (; *e; e = &(*e)->next)
		if ((*e)->klen == n && memcmp((*e)->key, k, n) == 0)
			return e;
	return e;    /* where it would go */
}

static struct entry *lookup(struct table *t, const char *k, size_t n)
{
	return *find(t, k, n);
}

/* The entry of K, made if missing; NULL: out of memory. */
static struct entry *upsert(struct table *t, const char *k, size_t n)
{
	struct entry **slot = find(t, k, n);
	if (*slot)
		return *slot;
	struct entry *e = calloc(1, sizeof *e);
	if (!e || !(e->key = malloc(n ? n : 1))) {
		free(e);
		return NULL;
	}
	memcpy(e->key, k, n);
	e->klen = n;
	*slot = e;
	t->n++;
	return e;
}

static void entry_free(struct entry *e)
{
	while (e->qhead) {
		struct item *i = e->qhead;
		e->qhead = i->next;
		free(i);
	}
	free(e->key);
	free(e->val);
	free(e);
}

static bool erase(struct table *t, const char *k, size_t n)
{
	struct entry **slot = find(t, k, n);
	struct entry *e = *slot;
	if (!e)
		return false;
	*slot = e->next;
	entry_free(e);
	t->n--;
	return true;
}

static void table_free(struct table *t)
{
	for (size_t i = 0; i < NBUCKETS; i++)
		while (t->b[i]) {
			struct entry *e = t->b[i];
			t->b[i] = e->next;
			entry_free(e);
		}
	t->n = 0;
}

/* E's value becomes a copy of V (N bytes); -1: out of memory */
static int set_value(struct entry *e, const uint8_t *v, size_t n)
{
	uint8_t *p = malloc(n ? n : 1);
	if (!p)
		return -1;
	memcpy(p, v, n);
	free(e->val);
	e->val = p;
	e->vlen = n;
	return 0;
}

/* ---- buffers -------------------------------------------------------------- */

static int buf_reserve(struct buf *b, size_t more)
{
	if (b->off && b->off == b->len)
		b->off = b->len = 0;
	if (b->len + more <= b->cap)
		return 0;
	if (b->off) {     /* slide the pending bytes down first */
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
		if (b->len + more <= b->cap)
			return 0;
	}
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + more)
		cap *= 2;
	uint8_t *p = realloc(b->p, cap);
	if (!p)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

/* Replies go to the client's output buffer; a failure to grow it drops the
 * client (its fd is closed on the next turn of the loop). */
struct reply {
	struct client *c;
	bool failed;
};

static void put(struct reply *r, const void *p, size_t n)
{
	if (r->failed || buf_reserve(&r->c->out, n) < 0) {
		r->failed = true;
		return;
	}
	memcpy(r->c->out.p + r->c->out.len, p, n);
	r->c->out.len += n;
}

static void put_u8(struct reply *r, uint8_t v) { put(r, &v, 1); }
static void put_i64(struct reply *r, int64_t v) { put(r, &v, 8); }

static void put_vec(struct reply *r, const uint8_t *p, size_t n)
{
	uint64_t len = n;
	put(r, &len, 8);
	put(r, p, n);
}

/* ---- requests ------------------------------------------------------------- */

/* A cursor over a client's unparsed input: every read either takes whole
 * bytes or says "not yet" (more must come) or "bad" (drop the client). */
struct cur {
	const uint8_t *p;
	size_t n, at;
	int state;      /* 0 fine, 1 incomplete, 2 bad */
};

static bool take(struct cur *c, void *out, size_t n)
{
	if (c->state)
		return false;
	if (c->n - c->at < n) {
		c->state = 1;
		return false;
	}
	if (out)
		memcpy(out, c->p + c->at, n);
	c->at += n;
	return true;
}

/* A string or byte vector: a pointer into the input, valid until it is consumed. */
static bool take_bytes(struct cur *c, const uint8_t **p, size_t *n, uint64_t max)
{
	uint64_t len;
	if (!take(c, &len, 8))
		return false;
	if (len > max) {
		c->state = 2;
		return false;
	}
	*p = c->p + c->at;
	*n = (size_t)len;
	return take(c, NULL, (size_t)len);
}

static bool take_count(struct cur *c, uint64_t *n)
{
	if (!take(c, n, 8))
		return false;
	if (*n > MAX_KEYS) {
		c->state = 2;
		return false;
	}
	return true;
}

static void wait_clear(struct client *c)
{
	for (size_t i = 0; i < c->nwait; i++)
		free(c->wkey[i]);
	free(c->wkey);
	free(c->wklen);
	free(c->wseen);
	c->wkey = NULL;
	c->wklen = NULL;
	c->wseen = NULL;
	c->nwait = c->nleft = 0;
}

/* Key K was written: waiters on it are told once all their keys were. ONE:
 * only the first such waiter (a queue push feeds one popper). */
static void written(struct store *s, const char *k, size_t n, bool one)
{
	for (size_t i = 0; i < s->nc; i++) {
		struct client *c = s->c[i];
		bool hit = false;
		for (size_t j = 0; j < c->nwait && c->nleft; j++)
			if (!c->wseen[j] && c->wklen[j] == n && memcmp(c->wkey[j], k, n) == 0) {
				c->wseen[j] = true;
				c->nleft--;
				hit = true;
			}
		if (hit && c->nleft == 0) {
			struct reply r = { c, false };
			wait_clear(c);
			put_u8(&r, WAIT_STOP_WAITING);
			if (one)
				return;
		}
	}
}

static bool present(struct store *s, const uint8_t *k, size_t n)
{
	if (lookup(&s->kv, (const char *)k, n))
		return true;
	struct entry *q = lookup(&s->queues, (const char *)k, n);
	return q && q->qlen > 0;
}

/* CHECK and WAIT: N keys, each a length and bytes, from C. */
static bool all_present(struct store *s, struct cur *c, uint64_t n)
{
	bool all = true;
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *k;
		size_t kl;
		if (!take_bytes(c, &k, &kl, MAX_KEY))
			return false;
		if (!present(s, k, kl))
			all = false;
	}
	return all;
}

/* Parses and runs one request of client C. 1: done; 0: incomplete, wait
 * for more input; -1: drop the client. */
static int serve_one(struct store *s, struct client *c)
{
	struct cur cu = { c->in.p + c->in.off, c->in.len - c->in.off, 0, 0 };
	struct reply r = { c, false };
	const uint8_t *k, *v, *v2;
	size_t kl, vl, vl2;
	uint8_t q;
	uint32_t u32;
	int64_t i64;
	uint64_t n;
	struct entry *e;

	if (!take(&cu, &q, 1))
		return 0;
	if (!c->validated && q != Q_VALIDATE)
		return -1;
	switch (q) {
	case Q_VALIDATE:
		if (!take(&cu, &u32, 4))
			break;
		if (u32 != MAGIC)
			return -1;
		c->validated = true;
		break;
	case Q_PING:
		if (take(&cu, &u32, 4))
			put(&r, &u32, 4);
		break;
	case Q_SET:
	case Q_APPEND:
	case Q_QUEUE_PUSH:
		if (!take_bytes(&cu, &k, &kl, MAX_KEY) || !take_bytes(&cu, &v, &vl, MAX_VALUE))
			break;
		if (q == Q_QUEUE_PUSH) {
			struct item *it = malloc(sizeof *it + (vl ? vl : 1));
			if (!it || !(e = upsert(&s->queues, (const char *)k, kl))) {
				free(it);
				return -1;
			}
			it->next = NULL;
			it->len = vl;
			memcpy(it->data, v, vl);
			if (e->qtail)
				e->qtail->next = it;
			else
				e->qhead = it;
			e->qtail = it;
			e->qlen++;
			written(s, (const char *)k, kl, true);
			break;
		}
		if (!(e = upsert(&s->kv, (const char *)k, kl)))
			return -1;
		if (q == Q_APPEND && e->val) {
			uint8_t *p = realloc(e->val, e->vlen + vl + 1);
			if (!p)
				return -1;
			memcpy(p + e->vlen, v, vl);
			e->val = p;
			e->vlen += vl;
		} else if (set_value(e, v, vl) < 0) {
			return -1;
		}
		written(s, (const char *)k, kl, false);
		break;
	case Q_COMPARE_SET:
		if (!take_bytes(&cu, &k, &kl, MAX_KEY) || !take_bytes(&cu, &v, &vl, MAX_VALUE) ||
		    !take_bytes(&cu, &v2, &vl2, MAX_VALUE))
			break;
		e = lookup(&s->kv, (const char *)k, kl);
		if (!e && vl == 0) {
			/* no key and nothing expected: set it */
			if (!(e = upsert(&s->kv, (const char *)k, kl)) || set_value(e, v2, vl2) < 0)
				return -1;
			put_vec(&r, v2, vl2);
		} else if (!e) {
			/* torch answers the expected value then, and so do we */
			put_vec(&r, v, vl);
		} else {
			if (e->vlen == vl && memcmp(e->val, v, vl) == 0 && set_value(e, v2, vl2) < 0)
				return -1;
			put_vec(&r, e->val, e->vlen);
		}
		written(s, (const char *)k, kl, false);
		break;
	case Q_GET:
		if (!take_bytes(&cu, &k, &kl, MAX_KEY))
			break;
		e = lookup(&s->kv, (const char *)k, kl);
		put_vec(&r, e ? e->val : NULL, e ? e->vlen : 0);
		break;
	case Q_ADD: {
		if (!take_bytes(&cu, &k, &kl, MAX_KEY) || !take(&cu, &i64, 8))
			break;
		if (!(e = upsert(&s->kv, (const char *)k, kl)))
			return -1;
		char num[32] = "";
		if (e->val && e->vlen < sizeof num) {
			memcpy(num, e->val, e->vlen);
			num[e->vlen] = '\0';
		}
		i64 = (int64_t)((uint64_t)i64 + (uint64_t)strtoll(num, NULL, 10));
		int len = snprintf(num, sizeof num, "%lld", (long long)i64);
		if (set_value(e, (const uint8_t *)num, (size_t)len) < 0)
			return -1;
		put_i64(&r, i64);
		written(s, (const char *)k, kl, false);
		break;
	}
	case Q_CHECK: {
		if (!take_count(&cu, &n))
			break;
		bool ready = all_present(s, &cu, n);
		if (!cu.state)
			put_u8(&r, ready ? CHECK_READY : CHECK_NOT_READY);
		break;
	}
	case Q_WAIT: {
		if (!take_count(&cu, &n))
			break;
		size_t start = cu.at;
		bool all = all_present(s, &cu, n);
		if (cu.state)
			break;
		if (all) {
			put_u8(&r, WAIT_STOP_WAITING);
			break;
		}
		/* remember the keys that are missing now */
		wait_clear(c);
		c->wkey = calloc(n, sizeof *c->wkey);
		c->wklen = calloc(n, sizeof *c->wklen);
		c->wseen = calloc(n, sizeof *c->wseen);
		if (!c->wkey || !c->wklen || !c->wseen)
			return -1;
		cu.at = start;
		for (uint64_t i = 0; i < n; i++) {
			take_bytes(&cu, &k, &kl, MAX_KEY);
			if (lookup(&s->kv, (const char *)k, kl))
				continue;
			char *copy = malloc(kl ? kl : 1);
			if (!copy)
				return -1;
			memcpy(copy, k, kl);
			c->wkey[c->nwait] = copy;
			c->wklen[c->nwait++] = kl;
		}
		c->nleft = c->nwait;
		if (c->nleft == 0) {     /* only non-empty queues were missing: cannot be */
			wait_clear(c);
			put_u8(&r, WAIT_STOP_WAITING);
		}
		break;
	}
	case Q_CANCEL_WAIT:
		wait_clear(c);
		put_u8(&r, WAIT_CANCELED);
		break;
	case Q_GETNUMKEYS:
		put_i64(&r, (int64_t)s->kv.n);
		break;
	case Q_DELETE_KEY:
		if (take_bytes(&cu, &k, &kl, MAX_KEY))
			put_i64(&r, erase(&s->kv, (const char *)k, kl) ? 1 : 0);
		break;
	case Q_MULTI_GET:
		if (!take_count(&cu, &n))
			break;
		/* parse everything first: nothing is answered for an incomplete request */
		for (uint64_t i = 0; i < n; i++)
			take_bytes(&cu, &k, &kl, MAX_KEY);
		if (cu.state)
			break;
		cu.at = 1 + 8;
		for (uint64_t i = 0; i < n; i++) {
			take_bytes(&cu, &k, &kl, MAX_KEY);
			e = lookup(&s->kv, (const char *)k, kl);
			put_vec(&r, e ? e->val : NULL, e ? e->vlen : 0);
		}
		break;
	case Q_MULTI_SET:
		if (!take_count(&cu, &n))
			break;
		for (uint64_t i = 0; i < n; i++)
			if (!take_bytes(&cu, &k, &kl, MAX_KEY) || !take_bytes(&cu, &v, &vl, MAX_VALUE))
				break;
		if (cu.state)
			break;
		cu.at = 1 + 8;
		for (uint64_t i = 0; i < n; i++) {
			take_bytes(&cu, &k, &kl, MAX_KEY);
			take_bytes(&cu, &v, &vl, MAX_VALUE);
			if (!(e = upsert(&s->kv, (const char *)k, kl)) || set_value(e, v, vl) < 0)
				return -1;
			written(s, (const char *)k, kl, false);
		}
		break;
	case Q_QUEUE_POP:
		if (!take_bytes(&cu, &k, &kl, MAX_KEY))
			break;
		e = lookup(&s->queues, (const char *)k, kl);
		put_i64(&r, e ? e->qlen : 0);
		if (e && e->qhead) {
			struct item *it = e->qhead;
			e->qhead = it->next;
			if (!e->qhead)
				e->qtail = NULL;
			e->qlen--;
			put_vec(&r, it->data, it->len);
			free(it);
		}
		break;
	case Q_QUEUE_LEN:
		if (!take_bytes(&cu, &k, &kl, MAX_KEY))
			break;
		e = lookup(&s->queues, (const char *)k, kl);
		put_i64(&r, e ? e->qlen : 0);
		break;
	default:
		return -1;
	}
	if (cu.state == 2 || r.failed)
		return -1;
	if (cu.state == 1)
		return 0;
	c->in.off += cu.at;
	return 1;
}

/* ---- connections ---------------------------------------------------------- */

static void client_free(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	wait_clear(c);
	free(c->in.p);
	free(c->out.p);
	free(c);
}

static void flush_out(struct client *c)
{
	while (c->fd >= 0 && c->out.off < c->out.len) {
		ssize_t w = send(c->fd, c->out.p + c->out.off, c->out.len - c->out.off, MSG_NOSIGNAL);
		if (w > 0) {
			c->out.off += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		close(c->fd);    /* gone: dropped below */
		c->fd = -1;
	}
}

/* Reads what client C sent and serves every whole request in it. */
static void read_client(struct store *s, struct client *c)
{
	for (;;) {
		if (buf_reserve(&c->in, 65536) < 0)
			goto drop;
		ssize_t n = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0)
			goto drop;
		c->in.len += (size_t)n;
		int rc;
		while ((rc = serve_one(s, c)) > 0)
			;
		if (rc < 0)
			goto drop;
	}
	flush_out(c);
	return;
drop:
	close(c->fd);
	c->fd = -1;
}

static void accept_clients(struct store *s)
{
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;   /* EAGAIN, or out of descriptors: try on the next turn */
		}
		struct client *c = calloc(1, sizeof *c);
		if (c && s->nc == s->capc) {
			size_t cap = s->capc ? 2 * s->capc : 64;
			struct client **cc = realloc(s->c, cap * sizeof *cc);
			if (cc) {
				s->c = cc;
				s->capc = cap;
			}
		}
		if (!c || s->nc == s->capc || s->nc >= MAX_CLIENTS) {
			free(c);
			close(fd);
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		c->fd = fd;
		s->c[s->nc++] = c;
	}
}

static void *serve(void *arg)
{
	struct store *s = arg;
	struct pollfd *pfd = NULL;
	size_t cap = 0;

	for (;;) {
		/* drop closed clients, keeping the others in order (a queue push
		 * wakes the longest waiter first) */
		size_t k = 0;
		for (size_t i = 0; i < s->nc; i++) {
			if (s->c[i]->fd < 0)
				client_free(s->c[i]);
			else
				s->c[k++] = s->c[i];
		}
		s->nc = k;
		if (cap < s->nc + 2) {
			cap = 2 * (s->nc + 2);
			struct pollfd *p = realloc(pfd, cap * sizeof *p);
			if (!p) {
				poll(NULL, 0, 100);     /* out of memory: breathe, then retry */
				cap = 0;
				continue;
			}
			pfd = p;
		}
		pfd[0] = (struct pollfd){ .fd = s->wake[0], .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = s->lfd, .events = POLLIN };
		for (size_t i = 0; i < s->nc; i++) {
			struct client *c = s->c[i];
			pfd[2 + i] = (struct pollfd){ .fd = c->fd, .events = POLLIN };
			if (c->out.off < c->out.len)
				pfd[2 + i].events |= POLLOUT;
		}
		if (poll(pfd, s->nc + 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[0].revents)
			break;
		size_t nc = s->nc;    /* accepted ones are polled on the next turn */
		for (size_t i = 0; i < nc; i++) {
			struct client *c = s->c[i];
			short ev = pfd[2 + i].revents;
			if (ev & POLLOUT)
				flush_out(c);
			if (c->fd >= 0 && (ev & (POLLIN | POLLHUP | POLLERR)))
				read_client(s, c);
		}
		/* a write by one client may have answered another's WAIT */
		for (size_t i = 0; i < nc; i++)
			flush_out(s->c[i]);
		if (pfd[1].revents & POLLIN)
			accept_clients(s);
	}
	free(pfd);
	return NULL;
}

/* ---- the interface -------------------------------------------------------- */

int store_open(long port, struct store **out, long *bound)
{
	struct store *s = calloc(1, sizeof *s);
	int e;

	*out = NULL;
	if (!s)
		return -1;
	s->wake[0] = s->wake[1] = -1;
	/* IPv6 and IPv4 at once where the host has IPv6, as torch's own server */
	s->lfd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1, zero = 0;
	if (s->lfd >= 0) {
		struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
		                           .sin6_addr = in6addr_any };
		setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		setsockopt(s->lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
		if (bind(s->lfd, (struct sockaddr *)&a6, sizeof a6) < 0) {
			e = errno;
			close(s->lfd);
			s->lfd = -1;
			if (e != EAFNOSUPPORT && e != EADDRNOTAVAIL) {
				errno = e;
				goto fail;
			}
		}
	}
	if (s->lfd < 0) {
		struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
		                          .sin_addr.s_addr = htonl(INADDR_ANY) };
		s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (s->lfd < 0)
			goto fail;
		setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(s->lfd, (struct sockaddr *)&a4, sizeof a4) < 0)
			goto fail;
	}
	if (listen(s->lfd, 1024) < 0 || pipe2(s->wake, O_CLOEXEC) < 0)
		goto fail;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	if (getsockname(s->lfd, (struct sockaddr *)&ss, &sl) < 0)
		goto fail;
	*bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
	                                        : ((struct sockaddr_in *)&ss)->sin_port);
	*out = s;
	return 0;
fail:
	e = errno;
	store_stop(s);
	errno = e;
	return -1;
}

int store_start(struct store *s)
{
	sigset_t all, old;
	int rc;

	/* no signal for this thread: smddp-run takes them from its signalfd */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&s->thread, NULL, serve, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		errno = rc;
		return -1;
	}
	s->started = true;
	return 0;
}

void store_stop(struct store *s)
{
	if (!s)
		return;
	if (s->started) {
		char x = 1;
		while (write(s->wake[1], &x, 1) < 0 && errno == EINTR)
			;
		pthread_join(s->thread, NULL);
	}
	for (size_t i = 0; i < s->nc; i++)
		client_free(s->c[i]);
	free(s->c);
	table_free(&s->kv);
	table_free(&s->queues);
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->wake[0] >= 0)
		close(s->wake[0]);
	if (s->wake[1] >= 0)
		close(s->wake[1]);
	free(s);
}
