/* socket-long.c - the socket endpoint's long messages: sent at once within the credit, by
 * rendezvous beyond it.
 *
 * A long send within the peer's credit (SMDDP_SOCKET_CREDIT) goes at once:
 * its header (PUSH) on the control connection, its pieces (an id, an
 * offset, a length, then the bytes) spread over the data connections to
 * that peer; the receiver makes a transfer (where the pieces go, by the
 * message's id) into the matching receive, or into memory of its own until
 * one is posted, and gives the credit back once the bytes are in place.
 * Beyond the credit a long send is announced (RTS) and waits; its receiver,
 * once a receive matches it, makes the transfer and answers CTS, and the
 * pieces follow.  A piece's header lets any connection carry any piece, so
 * their order across connections does not matter.
 *
 * This file holds what a long message is and when its pieces go; moving
 * them is socket-data.c's.  A failed collective lets go of its buffers
 * here (forget): a receive's transfer turns into a sink, a send's piece
 * half written is finished from a copy, and its pieces not begun go as
 * void (a header alone), so that the receiver fails that receive
 * (ECONNABORTED) instead of waiting.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config/param.h"
#include "transport/socket/socket-int.h"
#include "util/copy.h"

int sd_sock_long_init(struct sock *s)
{
	s->long_min = (size_t)sd_param_int("SMDDP_SOCKET_LONG");
	if (s->long_min < 1)
		s->long_min = 1;
	s->credit = (size_t)sd_param_int("SMDDP_SOCKET_CREDIT");
	return sd_sock_data_init(s);
}

/* ---- sending ------------------------------------------------------------ */

static size_t piece_size(struct sock *s, size_t len)
{
	size_t n = len / PIECE_MIN, size;

	if (n < 1)
		n = 1;
	if (n > (size_t)s->nsocks)
		n = (size_t)s->nsocks;
	size = (len + n - 1) / n;
	return (size + 4095) & ~(size_t)4095;
}

int sd_sock_npieces(struct sock *s, size_t len)
{
	size_t size = piece_size(s, len);

	return (int)((len + size - 1) / size);
}

/* x's pieces go out: the receiver is ready for it, or (push) it goes at
 * once, its header counted as one more piece (set by the caller). */
int sd_sock_data_send(struct sock *s, struct op *x, int push)
{
	struct out *o = &s->outs[x->peer];
	size_t size = piece_size(s, x->len), off = 0;
	size_t n = (x->len + size - 1) / size;

	if (!push)
		x->pieces = (int)n;
	for (size_t i = 0; i < n; i++, off += size) {
		struct dconn *dc = o->d[o->rr++ % (unsigned)s->nsocks];
		struct piece *p = calloc(1, sizeof(*p));
		size_t len = x->len - off < size ? x->len - off : size;

		if (!p || !dc) {
			free(p);
			sd_sock_piece_done(s, x, p ? ECONNRESET : ENOMEM, 0);
			continue;
		}
		p->x = x;
		p->off = off;
		p->len = len;
		put64(p->hdr, x->id);
		put64(p->hdr + 8, off);
		put64(p->hdr + 16, len);
		sd_sock_data_queue(dc, p);
	}
	return 0;
}

int sd_sock_rndv_cleared(struct sock *s, int peer, uint64_t id, int *got)
{
	struct op **pp = &s->outs[peer].wait;

	while (*pp && (*pp)->id != id)
		pp = &(*pp)->next;
	if (!*pp)
		return 0; /* withdrawn (GONE is on its way): the peer forgets it */
	struct op *x = *pp;

	*pp = x->next;
	x->next = NULL;
	(void)got;
	return sd_sock_data_send(s, x, 0);
}

/* ---- receiving ---------------------------------------------------------- */

/* The transfer of the long message id of peer, into the receive x or (x
 * NULL) into e's memory; the data connections find it from now on. */
static struct xfer *add_xfer(struct sock *s, struct op *x, struct early *e, int peer,
			     uint64_t tag, uint64_t id, size_t len)
{
	struct xfer *t = calloc(1, sizeof(*t));

	if (!t) {
		if (x)
			sd_sock_complete(x, ENOMEM, 0, 0);
		return NULL;
	}
	t->peer = peer;
	t->id = id;
	t->tag = tag;
	t->x = x;
	t->e = e;
	t->buf = x ? x->buf : e->data;
	t->cap = x ? x->len : len;
	t->len = t->left = len;
	if (e)
		e->xf = t;
	pthread_mutex_lock(&s->xmu);
	t->next = s->xfers;
	s->xfers = t;
	pthread_cond_broadcast(&s->xcv);
	pthread_mutex_unlock(&s->xmu);
	return t;
}

int sd_sock_push_match(struct sock *s, struct op *x, struct early *e, int peer, uint64_t tag,
		       uint64_t id, size_t len)
{
	if (!add_xfer(s, x, e, peer, tag, id, len))
		return ENOMEM;
	if (x) /* it never took memory of ours */
		sd_sock_give_credit(s, peer, len);
	return 0;
}

int sd_sock_rndv_match(struct sock *s, struct op *x, int peer, uint64_t tag, uint64_t id,
		       size_t len)
{
	struct xfer *t = add_xfer(s, x, NULL, peer, tag, id, len);
	int err;

	if (!t)
		return ENOMEM;
	err = s->ctl(s, peer, F_CTS, id);
	if (err) { /* the connection back is broken: the peer fails this too */
		pthread_mutex_lock(&s->xmu);
		t->x = NULL;
		t->buf = NULL;
		pthread_mutex_unlock(&s->xmu);
		sd_sock_complete(x, err, 0, 0);
	}
	return 0;
}

/* ---- forget, cancel, failures ------------------------------------------- */

/* Every incoming data connection's mu, then xmu: no thread reads into a
 * transfer's buffer meanwhile. */
static void lock_ins(struct sock *s)
{
	for (struct dconn *dc = s->dins; dc; dc = dc->next)
		pthread_mutex_lock(&dc->mu);
	pthread_mutex_lock(&s->xmu);
}

static void unlock_ins(struct sock *s)
{
	pthread_mutex_unlock(&s->xmu);
	for (struct dconn *dc = s->dins; dc; dc = dc->next)
		pthread_mutex_unlock(&dc->mu);
}

/* t's receive is over (err) or forgotten (err < 0): the rest of its bytes
 * go into a sink.  Under lock_ins. */
static void detach(struct xfer *t, int err)
{
	struct op *x = t->x;

	t->x = NULL;
	t->buf = NULL;
	t->cap = 0;
	if (err < 0) {
		if (x->owner)
			x->owner->fc = NULL;
		x->owner = NULL;
		err = 0;
	}
	sd_sock_complete(x, err, 0, 0);
}

/* The pieces queued on dc let go of their sends' buffers (under dc->mu). */
static void forget_pieces(struct dconn *dc)
{
	for (struct piece *p = dc->head; p; p = p->next) {
		struct op *x = p->x;

		if (x->owner) {
			x->owner->fc = NULL;
			x->owner = NULL;
		}
		if (p->own || p->is_void)
			continue;
		if (p->done == 0) { /* not begun: a header says it never comes */
			p->is_void = 1;
			put64(p->hdr + 16, p->len | PF_VOID);
			continue;
		}
		size_t at = p->done > PHDR ? p->done - PHDR : 0;

		p->own = malloc(p->len - at ? p->len - at : 1);
		if (!p->own) { /* cannot finish it: the stream is lost */
			dc->err = ENOMEM;
			break;
		}
		sd_copy(p->own, x->buf + p->off + at, p->len - at);
	}
}

void sd_sock_data_forget(struct sock *s, int *left)
{
	*left = 0; /* every byte is copied inside our calls: nothing is held */
	lock_ins(s);
	for (struct xfer *t = s->xfers; t; t = t->next)
		if (t->x && !t->x->keep)
			detach(t, -1);
	unlock_ins(s);
	for (struct dconn *dc = s->douts; dc; dc = dc->next) {
		pthread_mutex_lock(&dc->mu);
		forget_pieces(dc);
		pthread_mutex_unlock(&dc->mu);
	}
}

int sd_sock_data_cancel(struct sock *s, struct op *x)
{
	int found = 0;

	lock_ins(s);
	for (struct xfer *t = s->xfers; t; t = t->next)
		if (t->x == x) {
			x->owner = NULL;
			detach(t, 0);
			found = 1;
			break;
		}
	unlock_ins(s);
	return found;
}

/* The long message id of peer was withdrawn after its receive was matched:
 * no piece of it comes. */
void sd_sock_data_gone(struct sock *s, int peer, uint64_t id, int *got)
{
	struct xfer *t;

	lock_ins(s);
	t = sd_sock_find_xfer(s, peer, id);
	if (t) {
		for (struct xfer **pp = &s->xfers; *pp; pp = &(*pp)->next)
			if (*pp == t) {
				*pp = t->next;
				break;
			}
		if (t->x) {
			detach(t, ECONNABORTED);
			(*got)++;
		}
		free(t);
	}
	unlock_ins(s);
}

void sd_sock_data_fail(struct sock *s, int peer, int err, int *got)
{
	struct early *gone[64];
	int ngone = 0;

	lock_ins(s);
	for (struct xfer *t = s->xfers; t; t = t->next) {
		if (t->peer == peer && t->x) {
			detach(t, err);
			(*got)++;
		} else if (t->peer == peer && t->e && ngone < 64) {
			/* its early memory is given up: the rest goes into a sink */
			t->e->xf = NULL;
			gone[ngone++] = t->e;
			t->e = NULL;
			t->buf = NULL;
			t->cap = 0;
		}
	}
	unlock_ins(s);
	for (int i = 0; i < ngone; i++)
		s->early_arrived(s, gone[i], err, got);
	for (int i = 0; s->outs && i < s->nsocks; i++) {
		struct dconn *dc = s->outs[peer].d[i];

		if (!dc)
			continue;
		pthread_mutex_lock(&dc->mu);
		if (!dc->err)
			dc->err = err;
		dc->reported = 1;
		sd_sock_data_drop(dc, err);
		pthread_mutex_unlock(&dc->mu);
	}
	/* the sends these pieces ended are completed by the next drain */
	__atomic_store_n(&s->flag, 1, __ATOMIC_RELEASE);
}
