/* socket-recv.c - the socket endpoint's receiving side: matching, early messages, reading.
 *
 * Receives are matched in post order against each message's header; a
 * short message that finds none is read into memory of its own and kept,
 * in arrival order, until one is posted; a long one's announcement is kept
 * likewise, and its bytes wait at the sender (socket.c says why the design
 * is so; socket-long.c and socket-data.c move them).
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/comm-types.h"
#include "clock/clock.h"
#include "transport/socket/socket-int.h"
#include "util/copy.h"

static int matches(const struct op *x, int peer, uint64_t tag)
{
	return (x->peer < 0 || x->peer == peer) && ((x->tag ^ tag) & ~x->ignore) == 0;
}

/* Copies an early message into its receive and completes it. */
static int take_early(struct op *x, struct early *e, int *got)
{
	int err = 0;
	size_t n = e->len;

	if (n > x->len) {
		err = EMSGSIZE;
		n = x->len;
	}
	if (e->err) {
		err = e->err;
		n = 0;
	}
	if (n)
		sd_copy(x->buf, e->data, n);
	sd_sock_complete(x, err, n, e->tag);
	(*got)++;
	return err;
}

static void unlink_early(struct sock *s, struct early *e)
{
	struct early **pp = &s->early;

	while (*pp && *pp != e)
		pp = &(*pp)->next;
	if (*pp)
		*pp = e->next;
	s->early_tail = NULL;
	for (struct early *q = s->early; q; q = q->next)
		s->early_tail = q;
}

int sd_sock_recv(struct smddp_comm *c, struct sd_fab *f, int peer, uint64_t tag, void *buf,
		   size_t len, struct sd_freq *r)
{
	struct sock *s = S(f);
	struct op *x;
	int got = 0;

	if (peer >= s->npeers)
		return sd_comm_error(c, SMDDP_EINTERNAL, "socket transport: no rank %d (of %d)", peer,
				     s->npeers);
	if (len > SPIN_LEN) /* a wait does not keep its core for a while (socket.c's spun) */
		s->big_at = sd_now_ns();
	x = calloc(1, sizeof(*x));
	if (!x)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	x->peer = peer;
	x->tag = tag;
	x->ignore = r->ignore;
	x->buf = buf;
	x->len = len;
	x->keep = r->keep;
	x->owner = r;
	r->fab = f;
	r->peer = peer;
	r->is_send = 0;
	r->len = len;
	r->fc = x;
	/* A message that came first, complete or arriving, in arrival order. */
	for (struct early *e = s->early; e; e = e->next) {
		if (e->taker || !matches(x, e->peer, e->tag))
			continue;
		if (e->rts) {
			int err;

			unlink_early(s, e);
			err = sd_sock_rndv_match(s, x, e->peer, e->tag, e->id, e->len);
			free(e);
			if (err)
				return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
			return SMDDP_OK;
		}
		if (e->got < e->len) {
			e->taker = x;
			return SMDDP_OK;
		}
		unlink_early(s, e);
		take_early(x, e, &got);
		sd_sock_give_credit(s, e->peer, e->credit);
		free(e->data);
		free(e);
		return SMDDP_OK;
	}
	if (s->posted_tail)
		s->posted_tail->next = x;
	else
		s->posted = x;
	s->posted_tail = x;
	return SMDDP_OK;
}

void sd_sock_unlink_posted(struct sock *s, struct op *x)
{
	struct op **pp = &s->posted;

	s->posted_tail = NULL;
	while (*pp) {
		if (*pp == x) {
			*pp = x->next;
			continue;
		}
		s->posted_tail = *pp;
		pp = &(*pp)->next;
	}
	x->next = NULL;
}

/* A long message's header: a transfer if its receive is posted, else
 * kept until one is, its bytes (push: they come now) in memory of its own. */
static int announce(struct sock *s, struct in *in, uint64_t tag, size_t len, uint64_t id,
		    int push)
{
	struct early *e;

	for (struct op *x = s->posted; x; x = x->next)
		if (matches(x, in->peer, tag)) {
			sd_sock_unlink_posted(s, x);
			return push ? sd_sock_push_match(s, x, NULL, in->peer, tag, id, len)
				    : sd_sock_rndv_match(s, x, in->peer, tag, id, len);
		}
	e = calloc(1, sizeof(*e));
	if (!e)
		return ENOMEM;
	e->peer = in->peer;
	e->tag = tag;
	e->len = len;
	e->id = id;
	if (push) {
		e->data = malloc(len);
		e->credit = len;
		if (!e->data || sd_sock_push_match(s, NULL, e, in->peer, tag, id, len)) {
			free(e->data);
			free(e);
			return ENOMEM;
		}
	} else {
		e->got = len;
		e->rts = 1;
	}
	if (s->early_tail)
		s->early_tail->next = e;
	else
		s->early = e;
	s->early_tail = e;
	return 0;
}

void sd_sock_early_arrived(struct sock *s, struct early *e, int err, int *got)
{
	e->xf = NULL;
	e->err = err;
	e->got = e->len;
	if (!e->taker)
		return;
	unlink_early(s, e);
	take_early(e->taker, e, got);
	sd_sock_give_credit(s, e->peer, e->credit);
	free(e->data);
	free(e);
}

/* The long message id of peer was withdrawn before its clear-to-send
 * reached the sender: forget its announcement, or fail its receive. */
void sd_sock_rndv_gone(struct sock *s, int peer, uint64_t id, int *got)
{
	for (struct early *e = s->early; e; e = e->next)
		if (e->rts && e->peer == peer && e->id == id) {
			unlink_early(s, e);
			free(e);
			return;
		}
	sd_sock_data_gone(s, peer, id, got);
}

/* A header has arrived on in: where its bytes go. */
static int begin_message(struct sock *s, struct in *in, uint64_t tag, size_t len)
{
	in->reading = 1;
	in->tag = tag;
	in->len = len;
	in->got = 0;
	in->into = NULL;
	in->e = NULL;
	for (struct op *x = s->posted; x; x = x->next)
		if (matches(x, in->peer, tag)) {
			sd_sock_unlink_posted(s, x);
			in->into = x;
			return 0;
		}
	in->e = calloc(1, sizeof(*in->e));
	if (!in->e)
		return ENOMEM;
	in->e->peer = in->peer;
	in->e->tag = tag;
	in->e->len = len;
	in->e->data = len ? malloc(len) : NULL;
	if (len && !in->e->data) {
		free(in->e);
		in->e = NULL;
		return ENOMEM;
	}
	if (s->early_tail)
		s->early_tail->next = in->e;
	else
		s->early = in->e;
	s->early_tail = in->e;
	return 0;
}

/* Where the next n payload bytes of in's message go (NULL: nowhere). */
static char *dest(struct in *in)
{
	if (in->into)
		return in->got < in->into->len ? in->into->buf + in->got : NULL;
	if (in->e)
		return in->e->data + in->got;
	return NULL;
}

static void end_message(struct sock *s, struct in *in, int *got)
{
	in->reading = 0;
	if (in->into) {
		struct op *x = in->into;

		in->into = NULL;
		if (x->owner || x->keep) {
			sd_sock_complete(x, in->len > x->len ? EMSGSIZE : 0,
				 in->len > x->len ? x->len : in->len, in->tag);
			(*got)++;
		} else {
			sd_sock_complete(x, 0, 0, 0); /* forgotten: nobody to tell */
			(*got)++;
		}
	} else if (in->e) {
		struct early *e = in->e;

		in->e = NULL;
		if (e->taker) {
			unlink_early(s, e);
			take_early(e->taker, e, got);
			free(e->data);
			free(e);
		}
	}
}

/* Bytes of payload into the message being read. */
static void feed(struct in *in, const unsigned char *p, size_t n)
{
	char *d = dest(in);

	if (d) {
		size_t room = in->into ? in->into->len - in->got : n;

		sd_copy(d, p, n < room ? n : room);
	}
	in->got += n;
	if (in->e)
		in->e->got = in->got;
}

/* 0, or which data connection the hello names; -1: no hello of ours. */
static int read_hello(struct sock *s, struct in *in)
{
	struct hello h;

	if (in->hi - in->lo < sizeof(h))
		return 0;
	memcpy(&h, in->buf + in->lo, sizeof(h));
	in->lo += sizeof(h);
	if (h.magic != HELLO_MAGIC || h.cookie != s->me.cookie || h.rank < 0 ||
	    h.rank >= s->npeers || h.rank == s->rank || h.idx < 0 || h.idx > MAX_NSOCKS) {
		SD_WARN(SD_SUB_NET, "socket transport: a connection without this communicator's "
				    "hello: closed");
		return -1;
	}
	in->peer = h.rank;
	return h.idx;
}

/* A data connection: its socket goes to socket-data.c (nothing of it was
 * read past the hello), the rest of in is freed. */
static int adopt(struct sock *s, struct in *in, int idx)
{
	struct in **pp = &s->ins;

	if (in->lo != in->hi || sd_sock_data_adopt(s, in->fd, in->peer, idx)) {
		in->err = in->lo != in->hi ? EPROTO : ENOMEM;
		return -1;
	}
	while (*pp && *pp != in)
		pp = &(*pp)->next;
	if (*pp)
		*pp = in->next;
	s->nins--;
	free(in->buf);
	free(in);
	return PULL_GONE;
}

/* The peer's control connection has said who it is.  Where this rank sends
 * to that peer over a connection of its own too, the higher of the two
 * ranks moves to the lower one's (struct out): its F_MOVE goes last on its
 * own, and socket-conn.c takes in's connection once it is written. */
static void met(struct sock *s, struct in *in)
{
	struct out *o = &s->outs[in->peer];

	if (s->rank > in->peer && o->fd >= 0 && !o->borrowed && !o->to && !o->err) {
		o->to = in; /* before the queue: an idle connection writes F_MOVE at once */
		if (s->ctl(s, in->peer, F_MOVE, 0))
			o->to = NULL;
	}
}

/* The peer's F_MOVE: nothing more comes on in; what it sends next comes on
 * our own connection, whose reader may wait for this (F_MOVED). */
static int moved_off(struct sock *s, struct in *in)
{
	struct out *o = &s->outs[in->peer];

	o->move_seen = 1;
	if (o->self && o->self->hold) {
		o->self->hold = 0;
		o->self->kick = 1;
	}
	return PULL_MOVED;
}

int sd_sock_pull(struct sock *s, struct in *in, int *got)
{
	/* drained: a read returned less than it asked for, so the socket
	 * held no more; the next poll says when it does (a read that only
	 * finds EAGAIN was half the system calls of a small message). */
	int moved = 0, drained = 0;

	for (;;) {
		ssize_t n;

		/* Parse what is buffered. */
		while (in->lo < in->hi) {
			if (in->peer < 0) {
				int idx = read_hello(s, in);

				if (idx < 0)
					return -1;
				if (in->peer < 0)
					break;
				if (idx > 0)
					return adopt(s, in, idx);
				met(s, in);
				continue;
			}
			if (!in->reading) {
				uint64_t tag, lw, id;
				int type, err = 0;

				if (in->hold || in->hi - in->lo < HDR)
					break;
				tag = get64(in->buf + in->lo);
				lw = get64(in->buf + in->lo + 8);
				id = get64(in->buf + in->lo + 16);
				type = (int)(lw >> 56);
				in->lo += HDR;
				moved = 1;
				if (type == F_EAGER)
					err = begin_message(s, in, tag, (size_t)(lw & LEN_MASK));
				else if (type == F_RTS || type == F_PUSH)
					err = announce(s, in, tag, (size_t)(lw & LEN_MASK), id,
						       type == F_PUSH);
				else if (type == F_CREDIT)
					s->outs[in->peer].credit += id;
				else if (type == F_CTS)
					err = sd_sock_rndv_cleared(s, in->peer, id, got);
				else if (type == F_GONE)
					sd_sock_rndv_gone(s, in->peer, id, got);
				else if (type == F_MOVE && !in->shared)
					return moved_off(s, in);
				else if (type == F_MOVED && in->shared)
					in->hold = !s->outs[in->peer].move_seen;
				else
					err = EPROTO;
				if (err) {
					in->err = err;
					return -1;
				}
				if (!in->reading)
					continue;
			}
			size_t take = in->len - in->got;

			if (take > in->hi - in->lo)
				take = in->hi - in->lo;
			feed(in, in->buf + in->lo, take);
			in->lo += take;
			if (in->got == in->len)
				end_message(s, in, got);
		}
		if (in->lo == in->hi)
			in->lo = in->hi = 0;
		if (drained || in->hold)
			return moved;
		/* A long payload goes straight into its place. */
		if (in->reading && in->len - in->got >= DIRECT_MIN && in->lo == in->hi && dest(in) &&
		    (!in->into || in->into->len >= in->len)) {
			n = recv(in->fd, dest(in), in->len - in->got, MSG_DONTWAIT);
			if (n > 0) {
				drained = (size_t)n < in->len - in->got;
				in->got += (size_t)n;
				if (in->e)
					in->e->got = in->got;
				moved = 1;
				if (in->got == in->len)
					end_message(s, in, got);
				continue;
			}
		} else {
			if (in->hi == INBUF) { /* compact */
				memmove(in->buf, in->buf + in->lo, in->hi - in->lo);
				in->hi -= in->lo;
				in->lo = 0;
			}
			/* Between messages take a little: the next one may be long,
			 * and a long payload is better read in place than copied. */
			size_t want = INBUF - in->hi;

			if (!in->reading && want > HEAD_READ)
				want = HEAD_READ;
			/* The hello alone: a data connection's bytes are not ours. */
			if (in->peer < 0)
				want = sizeof(struct hello) - (in->hi - in->lo);
			n = recv(in->fd, in->buf + in->hi, want, MSG_DONTWAIT);
			if (n > 0) {
				drained = in->peer >= 0 && (size_t)n < want;
				in->hi += (size_t)n;
				moved = 1;
				continue;
			}
		}
		if (n == 0) {
			in->err = in->reading ? ECONNRESET : 0;
			return -1;
		}
		if (errno == EAGAIN || errno == EINTR)
			return moved;
		in->err = errno;
		return -1;
	}
}

void sd_sock_accept_all(struct sock *s)
{
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), one = 1;
		struct in *in;

		if (fd < 0)
			return;
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		in = calloc(1, sizeof(*in));
		if (in)
			in->buf = malloc(INBUF);
		if (!in || !in->buf) {
			free(in);
			close(fd);
			return;
		}
		in->fd = fd;
		in->peer = -1;
		in->next = s->ins;
		s->ins = in;
		s->nins++;
	}
}

/* Fails the receives waiting for peer (whose connection to us broke). */
void sd_sock_fail_from(struct sock *s, int peer, int err, int *got)
{
	for (struct op *x = s->posted, *nx; x; x = nx) {
		nx = x->next;
		if (x->peer == peer) {
			sd_sock_unlink_posted(s, x);
			sd_sock_complete(x, err, 0, 0);
			(*got)++;
		}
	}
}

void sd_sock_drop_in(struct sock *s, struct in *in, int *got)
{
	struct in **pp = &s->ins;

	if (in->peer >= 0) {
		struct out *o = &s->outs[in->peer];

		/* This rank's sends to the peer went, or were to go, over it. */
		if (o->to == in || (o->borrowed && o->fd == in->fd)) {
			o->to = NULL;
			if (o->borrowed && o->fd == in->fd)
				o->fd = -1;
			if (!o->err && !in->dead)
				o->err = in->err ? in->err : ECONNRESET;
		}
		if (o->self == in)
			o->self = NULL;
	}
	if (in->peer >= 0 && in->err)
		SD_INFO(SD_SUB_NET, "socket transport: the connection from rank %d ended: %s",
			in->peer, strerror(in->err));
	if (in->reading) {
		if (in->into) {
			sd_sock_complete(in->into, in->err ? in->err : ECONNRESET, 0, 0);
			(*got)++;
		} else if (in->e) {
			unlink_early(s, in->e);
			if (in->e->taker) {
				sd_sock_complete(in->e->taker, ECONNRESET, 0, 0);
				(*got)++;
			}
			free(in->e->data);
			free(in->e);
		}
	}
	while (*pp && *pp != in)
		pp = &(*pp)->next;
	if (*pp)
		*pp = in->next;
	s->nins--;
	if (!in->shared)
		close(in->fd);
	free(in->buf);
	free(in);
}
