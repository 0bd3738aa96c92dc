/* socket-data.c - the socket endpoint's data connections: SMDDP_SOCKET_NSOCKS of them a peer
 * and direction, each driven by a thread of its own (SMDDP_SOCKET_THREADS) or by progress.
 *
 * It exists so that the bytes of long messages (socket-long.c says what
 * they are and when they go) move on several connections and cores while
 * the caller's thread keeps every operation.  An outgoing connection
 * writes the pieces queued on it; an incoming one reads each piece (an id,
 * an offset, a length, then the bytes) straight into the transfer its id
 * names, or waits, when the piece overtook its PUSH, for progress to read
 * that header and make the transfer.
 *
 * Each connection's thread sleeps in poll() and does its connection's
 * I/O, so that the kernel's copies of several connections run on several
 * cores, as NCCL's socket helper threads do; or, without threads, progress
 * polls them with the rest.  Either way the caller's thread keeps every
 * operation's sd_freq: a thread only moves bytes and leaves what finished
 * on a list (and a word in an eventfd) for progress to complete (drain).
 *
 * Locks, taken in this order: a data connection's mu (its pieces, the
 * piece it reads), xmu (the transfers and their counts), dmu (the list of
 * finished sends).  A forget takes every incoming connection's mu, then
 * xmu, before it turns a transfer's buffer into a sink: a thread reads the
 * buffer's address only under its mu, so no byte lands in memory that the
 * caller has taken back.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "config/param.h"
#include "transport/socket/socket-int.h"
#include "util/sd.h"

#define THREAD_NAP_MS 100 /* a thread's longest sleep, between looks at its stop flag */

static void wake(struct sock *s, int threaded)
{
	uint64_t one = 1;

	__atomic_store_n(&s->flag, 1, __ATOMIC_RELEASE);
	if (threaded && write(s->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is full: progress is awake anyway */
	}
}

/* ms from now, on the clock pthread_cond_timedwait reads. */
static struct timespec after_ms(long ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += ms * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

int sd_sock_data_init(struct sock *s)
{
	const char *t = sd_param_str("SMDDP_SOCKET_THREADS");
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	int64_t n = sd_param_int("SMDDP_SOCKET_NSOCKS");

	/* Threads pay where there are cores to run them beside the ranks'
	 * own; on two cores they only take turns with the caller. */
	s->threads = !strcmp(t, "1") || (!strcmp(t, "auto") && cores >= 4);
	s->nsocks = n > 0 ? (int)n : s->threads ? 2 : 1;
	if (s->nsocks > MAX_NSOCKS)
		s->nsocks = MAX_NSOCKS;
	if (pthread_mutex_init(&s->xmu, NULL))
		return -1;
	pthread_cond_init(&s->xcv, NULL);
	if (pthread_mutex_init(&s->dmu, NULL)) {
		pthread_mutex_destroy(&s->xmu);
		return -1;
	}
	s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->wake_fd < 0) {
		pthread_mutex_destroy(&s->xmu);
		pthread_mutex_destroy(&s->dmu);
		return -1;
	}
	return 0;
}

/* ---- outgoing connections: pieces written ------------------------------- */

/* A piece is written (or dropped, err): the last one ends its send. */
void sd_sock_piece_done(struct sock *s, struct op *x, int err, int threaded)
{
	if (err)
		__atomic_store_n(&x->err, err, __ATOMIC_RELAXED);
	if (__atomic_sub_fetch(&x->pieces, 1, __ATOMIC_ACQ_REL))
		return;
	pthread_mutex_lock(&s->dmu);
	x->next = s->done;
	s->done = x;
	pthread_mutex_unlock(&s->dmu);
	wake(s, threaded);
}

/* Writes what dc takes of its pieces (under dc->mu): 1 if anything moved,
 * 0 when it would block, -1 when it failed (dc->err). */
static int dout_io(struct dconn *dc)
{
	struct sock *s = dc->s;
	int moved = 0;

	if (dc->err)
		return -1;
	if (dc->connecting) {
		struct hello h = {.magic = HELLO_MAGIC,
				  .rank = s->rank,
				  .cookie = s->peers[dc->peer].cookie,
				  .idx = dc->idx};
		int e = 0;
		socklen_t el = sizeof(e);
		ssize_t w;

		if (getsockopt(dc->fd, SOL_SOCKET, SO_ERROR, &e, &el) || e) {
			dc->err = e ? e : errno;
			return -1;
		}
		w = send(dc->fd, &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EAGAIN || errno == ENOTCONN || errno == EINTR)
				return 0;
			dc->err = errno;
			return -1;
		}
		if (w != (ssize_t)sizeof(h)) {
			dc->err = EPROTO;
			return -1;
		}
		dc->connecting = 0;
		moved = 1;
	}
	while (dc->head) {
		struct piece *p = dc->head;
		size_t body = p->is_void ? 0 : p->len, at;
		struct iovec iov[2];
		int niov = 0;
		ssize_t w;

		if (p->done < PHDR) {
			iov[niov].iov_base = p->hdr + p->done;
			iov[niov++].iov_len = PHDR - p->done;
			at = 0;
		} else {
			at = p->done - PHDR;
		}
		if (body > at) {
			/* a forgotten piece's copy begins where it was left */
			iov[niov].iov_base = p->own ? (void *)p->own : (void *)(p->x->buf + p->off + at);
			iov[niov++].iov_len = body - at;
		}
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)niov};

		w = sendmsg(dc->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return moved;
			dc->err = errno;
			return -1;
		}
		if (p->own) { /* keep the copy's front at the next byte */
			size_t into = p->done + (size_t)w > PHDR ? p->done + (size_t)w - PHDR : 0;
			size_t from = p->done > PHDR ? p->done - PHDR : 0;

			if (into > from)
				memmove(p->own, p->own + (into - from), body - into);
		}
		p->done += (size_t)w;
		moved = 1;
		if (p->done < PHDR + body)
			return moved; /* the socket is full */
		dc->head = p->next;
		if (!dc->head)
			dc->tail = NULL;
		dc->queued -= p->len;
		dc->pieces++;
		sd_sock_piece_done(s, p->x, 0, dc->threaded);
		free(p->own);
		free(p);
	}
	return moved;
}

static void *out_main(void *arg)
{
	struct dconn *dc = arg;

	pthread_mutex_lock(&dc->mu);
	while (!dc->stop) {
		if (dc->err || (!dc->connecting && !dc->head)) {
			struct timespec ts = after_ms(THREAD_NAP_MS);

			pthread_cond_timedwait(&dc->cv, &dc->mu, &ts);
			continue;
		}
		int r = dout_io(dc);

		if (r < 0) {
			wake(dc->s, 1);
			continue;
		}
		if (r == 0) {
			struct pollfd p = {.fd = dc->fd, .events = POLLOUT};

			pthread_mutex_unlock(&dc->mu);
			poll(&p, 1, THREAD_NAP_MS);
			pthread_mutex_lock(&dc->mu);
		}
	}
	pthread_mutex_unlock(&dc->mu);
	return NULL;
}

static struct dconn *dconn_new(struct sock *s, int fd, int peer, int idx, int out)
{
	struct dconn *dc = calloc(1, sizeof(*dc));

	if (!dc)
		return NULL;
	dc->s = s;
	dc->fd = fd;
	dc->peer = peer;
	dc->idx = idx;
	dc->out = out;
	if (!out && !(dc->sink = malloc(SINK))) {
		free(dc);
		return NULL;
	}
	if (pthread_mutex_init(&dc->mu, NULL)) {
		free(dc->sink);
		free(dc);
		return NULL;
	}
	pthread_cond_init(&dc->cv, NULL);
	return dc;
}

static void *in_main(void *arg);

static void start(struct dconn *dc)
{
	if (dc->s->threads &&
	    !pthread_create(&dc->th, NULL, dc->out ? out_main : in_main, dc))
		dc->threaded = 1;
}

void sd_sock_data_connect(struct sock *s, int peer, int (*open_fd)(struct sock *, int))
{
	struct out *o = &s->outs[peer];
	struct dconn **pp = &s->douts;

	/* douts is in peer order, the order progress polls them and reports
	 * their failures in */
	while (*pp && (*pp)->peer < peer)
		pp = &(*pp)->next;
	for (int i = 0; i < s->nsocks; i++) {
		int fd = open_fd(s, peer);
		struct dconn *dc;

		if (fd < 0) {
			o->err = errno;
			return;
		}
		dc = dconn_new(s, fd, peer, i + 1, 1);
		if (!dc) {
			close(fd);
			o->err = ENOMEM;
			return;
		}
		dc->connecting = 1;
		o->d[i] = dc;
		dc->next = *pp;
		*pp = dc;
		pp = &dc->next;
		start(dc);
	}
}

void sd_sock_data_queue(struct dconn *dc, struct piece *p)
{
	int err;

	pthread_mutex_lock(&dc->mu);
	err = dc->err;
	if (!err) {
		if (dc->tail)
			dc->tail->next = p;
		else
			dc->head = p;
		dc->tail = p;
		dc->queued += p->len;
		if (dc->threaded)
			pthread_cond_signal(&dc->cv);
		else if (dc->head == p && dout_io(dc) < 0) /* an idle connection takes it now */
			wake(dc->s, 0);
	}
	pthread_mutex_unlock(&dc->mu);
	if (err) {
		struct op *x = p->x;

		free(p);
		sd_sock_piece_done(dc->s, x, err, 0);
	}
}

void sd_sock_data_drop(struct dconn *dc, int err)
{
	while (dc->head) {
		struct piece *p = dc->head;

		dc->head = p->next;
		sd_sock_piece_done(dc->s, p->x, err, 0);
		free(p->own);
		free(p);
	}
	dc->tail = NULL;
}

/* ---- incoming connections: pieces read into transfers ------------------- */

struct xfer *sd_sock_find_xfer(struct sock *s, int peer, uint64_t id)
{
	for (struct xfer *t = s->xfers; t; t = t->next)
		if (t->peer == peer && t->id == id)
			return t;
	return NULL;
}

/* n bytes of t came (err: as void); the last ones finish it. */
static void account(struct sock *s, struct xfer *t, size_t n, int err, int threaded)
{
	int last;

	pthread_mutex_lock(&s->xmu);
	if (err && !t->err)
		t->err = err;
	t->left -= n < t->left ? n : t->left;
	last = !t->left;
	pthread_mutex_unlock(&s->xmu);
	if (last)
		wake(s, threaded);
}

/* Reads what dc has (under dc->mu): 1 if anything moved, 0 when it would
 * block, -1 when it ended or failed (dc->err, 0 for a close between
 * pieces). */
static int din_io(struct dconn *dc)
{
	struct sock *s = dc->s;
	int moved = 0;

	for (;;) {
		ssize_t n;

		if (dc->phave < PHDR) {
			n = recv(dc->fd, dc->ph + dc->phave, PHDR - dc->phave, MSG_DONTWAIT);
			if (n > 0) {
				dc->phave += (size_t)n;
				moved = 1;
				continue;
			}
		} else if (!dc->xf) {
			uint64_t id = get64(dc->ph), lw = get64(dc->ph + 16);

			pthread_mutex_lock(&s->xmu);
			dc->xf = sd_sock_find_xfer(s, dc->peer, id);
			pthread_mutex_unlock(&s->xmu);
			/* A PUSH's pieces may overtake its header on the control
			 * connection: wait for progress to read it. */
			__atomic_store_n(&dc->waiting, !dc->xf, __ATOMIC_RELEASE);
			if (!dc->xf)
				return moved;
			dc->off = (size_t)get64(dc->ph + 8);
			dc->plen = (size_t)(lw & LEN_MASK);
			dc->got = 0;
			if (dc->off + dc->plen > dc->xf->len) {
				dc->err = EPROTO;
				return -1;
			}
			if (lw & PF_VOID || !dc->plen) {
				struct xfer *t = dc->xf;

				dc->xf = NULL;
				dc->phave = 0;
				account(s, t, dc->plen, lw & PF_VOID ? ECONNABORTED : 0, dc->threaded);
			}
			continue;
		} else {
			struct xfer *t = dc->xf;
			size_t at = dc->off + dc->got, want = dc->plen - dc->got;
			char *d;

			if (t->buf && at < t->cap) {
				d = t->buf + at;
				if (want > t->cap - at)
					want = t->cap - at;
			} else {
				d = dc->sink;
				if (want > SINK)
					want = SINK;
			}
			n = recv(dc->fd, d, want, MSG_DONTWAIT);
			if (n > 0) {
				dc->got += (size_t)n;
				moved = 1;
				if (dc->got == dc->plen) {
					dc->pieces++;
					dc->xf = NULL;
					dc->phave = 0;
					account(s, t, dc->plen, 0, dc->threaded);
				}
				continue;
			}
		}
		if (n == 0) {
			dc->err = dc->phave ? ECONNRESET : 0;
			__atomic_store_n(&dc->stop, 1, __ATOMIC_RELEASE);
			return -1;
		}
		if (errno == EAGAIN || errno == EINTR)
			return moved;
		dc->err = errno;
		return -1;
	}
}

static void *in_main(void *arg)
{
	struct dconn *dc = arg;

	for (;;) {
		struct pollfd p = {.fd = dc->fd, .events = POLLIN};
		int r;

		if (__atomic_load_n(&dc->stop, __ATOMIC_ACQUIRE))
			break;
		if (__atomic_load_n(&dc->waiting, __ATOMIC_ACQUIRE)) {
			struct timespec ts = after_ms(10); /* until progress adds a transfer */

			pthread_mutex_lock(&dc->s->xmu);
			if (!sd_sock_find_xfer(dc->s, dc->peer, get64(dc->ph)))
				pthread_cond_timedwait(&dc->s->xcv, &dc->s->xmu, &ts);
			pthread_mutex_unlock(&dc->s->xmu);
		} else {
			poll(&p, 1, THREAD_NAP_MS);
		}
		pthread_mutex_lock(&dc->mu);
		r = __atomic_load_n(&dc->stop, __ATOMIC_ACQUIRE) ? -1 : din_io(dc);
		pthread_mutex_unlock(&dc->mu);
		if (r < 0) {
			__atomic_store_n(&dc->stop, 1, __ATOMIC_RELEASE);
			wake(dc->s, 1);
			break;
		}
	}
	return NULL;
}

int sd_sock_data_adopt(struct sock *s, int fd, int peer, int idx)
{
	struct dconn *dc = dconn_new(s, fd, peer, idx, 0);

	if (!dc)
		return -1;
	dc->next = s->dins;
	s->dins = dc;
	s->ndins++;
	start(dc);
	return 0;
}

/* ---- progress ----------------------------------------------------------- */

size_t sd_sock_data_nfds(struct sock *s)
{
	return (size_t)s->ndins + (size_t)s->npeers * (size_t)s->nsocks;
}

static int polled_out(struct dconn *dc)
{
	return !dc->threaded && !dc->err && (dc->connecting || dc->head);
}

static int polled_in(struct dconn *dc)
{
	return !dc->threaded && !dc->err && !__atomic_load_n(&dc->stop, __ATOMIC_ACQUIRE);
}

size_t sd_sock_data_pollfds(struct sock *s, struct pollfd *p)
{
	size_t k = 0;

	for (struct dconn *dc = s->douts; dc; dc = dc->next)
		if (polled_out(dc))
			p[k++] = (struct pollfd){.fd = dc->fd, .events = POLLOUT};
	for (struct dconn *dc = s->dins; dc; dc = dc->next)
		if (polled_in(dc)) /* a piece that waits for its header: tried each pass */
			p[k++] = (struct pollfd){.fd = dc->fd, .events = dc->waiting ? 0 : POLLIN};
	return k;
}

void sd_sock_data_io(struct sock *s, const struct pollfd *p, size_t n)
{
	size_t k = 0;

	for (struct dconn *dc = s->douts; dc; dc = dc->next) {
		if (!polled_out(dc))
			continue;
		if (k < n && p[k].fd == dc->fd && p[k++].revents) {
			if (dout_io(dc) < 0)
				wake(s, 0);
		}
	}
	for (struct dconn *dc = s->dins; dc; dc = dc->next) {
		if (!polled_in(dc))
			continue;
		if (k < n && p[k].fd == dc->fd && (p[k++].revents || dc->waiting)) {
			if (din_io(dc) < 0)
				wake(s, 0);
		}
	}
}

void sd_sock_data_retry(struct sock *s)
{
	for (struct dconn *dc = s->dins; dc; dc = dc->next)
		if (polled_in(dc) && dc->waiting && din_io(dc) < 0)
			wake(s, 0);
}

static int pending_from(struct sock *s, int peer)
{
	int n = 0;

	pthread_mutex_lock(&s->xmu);
	for (struct xfer *t = s->xfers; t; t = t->next)
		n += t->peer == peer && t->left && (t->x || t->e);
	pthread_mutex_unlock(&s->xmu);
	return n;
}

void sd_sock_data_drain(struct sock *s, int *got)
{
	struct op *done;

	if (!__atomic_exchange_n(&s->flag, 0, __ATOMIC_ACQ_REL))
		return;
	pthread_mutex_lock(&s->dmu);
	done = s->done;
	s->done = NULL;
	pthread_mutex_unlock(&s->dmu);
	while (done) {
		struct op *x = done;
		int err = __atomic_load_n(&x->err, __ATOMIC_RELAXED);

		done = x->next;
		if (x->owner)
			(*got)++;
		sd_sock_complete(x, err, err ? 0 : x->len, x->tag);
	}
	struct xfer *fin = NULL;

	pthread_mutex_lock(&s->xmu);
	for (struct xfer **pp = &s->xfers; *pp;) {
		struct xfer *t = *pp;

		if (t->left) {
			pp = &t->next;
			continue;
		}
		*pp = t->next;
		t->next = fin;
		fin = t;
	}
	pthread_mutex_unlock(&s->xmu);
	while (fin) {
		struct xfer *t = fin;

		fin = t->next;
		if (t->x) {
			int err = t->err ? t->err : t->len > t->cap ? EMSGSIZE : 0;

			sd_sock_complete(t->x, err, t->len > t->cap ? t->cap : t->len, t->tag);
			(*got)++;
		} else if (t->e) {
			s->early_arrived(s, t->e, t->err, got);
		}
		free(t);
	}
	/* Connections that failed or ended */
	for (struct dconn *dc = s->douts; dc; dc = dc->next) {
		int err;

		pthread_mutex_lock(&dc->mu);
		err = dc->err && !dc->reported ? dc->err : 0;
		dc->reported |= err != 0;
		pthread_mutex_unlock(&dc->mu);
		if (err)
			s->peer_fail(s, dc->peer, err, 1, got);
	}
	for (struct dconn *dc = s->dins; dc; dc = dc->next) {
		int err, ended;

		pthread_mutex_lock(&dc->mu);
		ended = (dc->err || __atomic_load_n(&dc->stop, __ATOMIC_ACQUIRE)) && !dc->reported;
		err = dc->err;
		dc->reported |= ended;
		pthread_mutex_unlock(&dc->mu);
		if (ended && (err || pending_from(s, dc->peer)))
			s->peer_fail(s, dc->peer, err ? err : ECONNRESET, 0, got);
	}
}

int sd_sock_data_busy(struct sock *s)
{
	int n = 0;

	for (struct dconn *dc = s->douts; dc; dc = dc->next) {
		pthread_mutex_lock(&dc->mu);
		n += dc->head && !dc->err;
		pthread_mutex_unlock(&dc->mu);
	}
	return n;
}

/* ---- close -------------------------------------------------------------- */

/* Tells dc's thread, if any, to end. */
static void stop(struct dconn *dc)
{
	pthread_mutex_lock(&dc->mu);
	__atomic_store_n(&dc->stop, 1, __ATOMIC_RELEASE);
	pthread_cond_signal(&dc->cv);
	pthread_mutex_unlock(&dc->mu);
}

static void dconn_free(struct dconn *dc)
{
	stop(dc);
	if (dc->threaded)
		pthread_join(dc->th, NULL);
	close(dc->fd);
	pthread_mutex_destroy(&dc->mu);
	pthread_cond_destroy(&dc->cv);
	free(dc->sink);
	free(dc);
}

/* At INFO: how the long messages to each peer spread over the connections. */
static void log_spread(struct sock *s)
{
	for (int q = 0; s->outs && q < s->npeers; q++) {
		char line[160] = "";
		size_t at = 0;
		unsigned long all = 0;

		for (int i = 0; i < s->nsocks && s->outs[q].d[i]; i++) {
			int w = snprintf(line + at, sizeof(line) - at, " %lu", s->outs[q].d[i]->pieces);

			all += s->outs[q].d[i]->pieces;
			if (w > 0 && (size_t)w < sizeof(line) - at)
				at += (size_t)w;
		}
		if (all)
			SD_INFO(SD_SUB_NET,
				"socket transport: to rank %d, pieces of long messages per data "
				"connection:%s",
				q, line);
	}
}

void sd_sock_data_close(struct sock *s)
{
	int got = 0;

	log_spread(s);

	/* The threads first: nothing moves after this. */
	for (struct dconn *dc = s->douts; dc; dc = dc->next) {
		stop(dc);
		if (dc->threaded)
			shutdown(dc->fd, SHUT_RDWR);
	}
	for (struct dconn *dc = s->dins; dc; dc = dc->next) {
		__atomic_store_n(&dc->stop, 1, __ATOMIC_RELEASE);
		if (dc->threaded) /* its poll returns now, not at its next nap */
			shutdown(dc->fd, SHUT_RDWR);
	}
	while (s->douts) {
		struct dconn *dc = s->douts;

		s->douts = dc->next;
		if (dc->threaded)
			pthread_join(dc->th, NULL);
		dc->threaded = 0;
		sd_sock_data_drop(dc, ECANCELED);
		s->outs[dc->peer].d[dc->idx - 1] = NULL;
		dconn_free(dc);
	}
	while (s->dins) {
		struct dconn *dc = s->dins;

		s->dins = dc->next;
		dconn_free(dc);
	}
	__atomic_store_n(&s->flag, 1, __ATOMIC_RELEASE);
	if (s->wake_fd >= 0) {
		/* the sends that were still out, and the transfers */
		sd_sock_data_drain(s, &got);
		while (s->xfers) {
			struct xfer *t = s->xfers;

			s->xfers = t->next;
			if (t->x)
				sd_sock_complete(t->x, ECANCELED, 0, 0);
			free(t);
		}
		close(s->wake_fd);
		s->wake_fd = -1;
		pthread_cond_destroy(&s->xcv);
		pthread_mutex_destroy(&s->xmu);
		pthread_mutex_destroy(&s->dmu);
	}
}
