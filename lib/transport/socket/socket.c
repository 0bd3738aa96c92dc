/* socket.c - the endpoint between hosts over plain TCP sockets: tagged messages, no libfabric.
 *
 * Each rank listens on one port (bound to the address it reaches rank 0
 * by); its name carries that address and a random cookie, and reaches the
 * peers through the bootstrap, which authenticated them.  Connections are
 * made on the first send: one control connection per pair of ranks,
 * carrying both ways, on which the messages of a direction keep their
 * order (the FI_ORDER_SAS of netep.h; socket-conn.c makes it and settles
 * on one where both ranks opened one), plus SMDDP_SOCKET_NSOCKS data
 * connections per direction for the bytes of long messages.  A connection
 * opens with a hello: the cookie of the listener, which only members
 * know, the sender's rank and which connection it is.  Connections are
 * made lazily, so a rank holds sockets only for the peers its algorithms
 * talk to (two in a ring).
 *
 * A short message is a 24-byte header (tag, length) and its bytes, on the
 * control connection (eager).  Receives are matched in post order; a short
 * message that finds no receive is read into memory of its own and kept,
 * in arrival order, until one is posted.  A payload whose receive is
 * posted is read straight into it.  Small messages and headers come
 * through a per-connection input buffer, so a stream of small messages
 * costs one recv() per batch, not two per message.  Sends are written at
 * once when their connection is idle (a small one then completes before
 * the post returns), else queued and written as the socket takes them, by
 * progress.
 *
 * A long message (SMDDP_SOCKET_LONG, 128K, and up) has its header matched
 * in order like a short one's, on the control connection, and its bytes
 * go in pieces over the data connections, each read straight into the
 * posted buffer (socket-long.c): at once (PUSH) while the bytes the peer
 * holds unreceived stay within SMDDP_SOCKET_CREDIT, else only once the
 * receiver has a receive for it and says so (RTS, then CTS).  The
 * algorithms keep many sends in flight and few receives posted; the
 * credit bounds what a receiver reads into memory of its own and copies
 * again, and the rendezvous leaves the rest at the sender, as libfabric's
 * does.
 *
 * Progress is one poll() over the listener and the connections, then the
 * reads and writes they are ready for; a wait sleeps in that poll.  The
 * data connections (socket-data.c) have a thread each
 * (SMDDP_SOCKET_THREADS), so that one pair of hosts moves bytes on several
 * cores, or are polled with the rest.
 * The kernel copies every byte inside our calls, so a failed collective
 * can always let go of its buffers (forget): a send half written is
 * finished from a copy, a long one not yet cleared is withdrawn (GONE), a
 * receive half read goes on into a sink.  The endpoint is never poisoned.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/comm-types.h"
#include "clock/clock.h"
#include "transport/socket/socket-int.h"
#include "util/copy.h"
#include "util/wait.h"

static int queue_ctl(struct sock *s, int peer, int type, uint64_t id);
static void peer_fail(struct sock *s, int peer, int err, int send, int *got);

static int so_open(struct smddp_comm *c, const char *src_ip, struct sd_fab **out)
{
	struct sock *s = calloc(1, sizeof(*s));
	struct sockaddr_storage ss;
	socklen_t sl;
	int one = 1;

	*out = NULL;
	if (!s)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	s->base.ops = &sd_ep_socket;
	s->lfd = -1;
	s->rank = c->rank;
	s->timeout_ns = c->timeout_ns;
	s->wake_fd = -1;
	s->ctl = queue_ctl;
	s->peer_fail = peer_fail;
	s->early_arrived = sd_sock_early_arrived;
	if (sd_sock_long_init(s)) {
		free(s);
		return sd_comm_error(c, SMDDP_ENOMEM, "socket transport: out of memory or threads");
	}
	s->base.piece = s->long_min > (4u << 20) ? s->long_min : 4u << 20; /* long, and few */
	s->base.chunk = 1u << 20;
	memset(&ss, 0, sizeof(ss));
	if (src_ip && *src_ip && strchr(src_ip, ':')) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		if (inet_pton(AF_INET6, src_ip, &a->sin6_addr) != 1)
			goto bad_ip;
		sl = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		if (src_ip && *src_ip && inet_pton(AF_INET, src_ip, &a->sin_addr) != 1)
			goto bad_ip;
		sl = sizeof(*a);
	}
	s->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->lfd < 0 || setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(s->lfd, (struct sockaddr *)&ss, sl) || listen(s->lfd, 1024) ||
	    getsockname(s->lfd, (struct sockaddr *)&ss, &sl)) {
		int e = errno;

		if (s->lfd >= 0)
			close(s->lfd);
		sd_sock_data_close(s);
		free(s);
		return sd_comm_error(c, SMDDP_ENETWORK, "socket transport: cannot listen on %s: %s",
				     src_ip && *src_ip ? src_ip : "any address", strerror(e));
	}
	s->me.magic = NAME_MAGIC;
	sd_sock_cpus_mine(&s->me);
	s->me.family = ss.ss_family;
	if (getrandom(&s->me.cookie, sizeof(s->me.cookie), 0) != sizeof(s->me.cookie))
		s->me.cookie = (uint64_t)sd_now_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
	if (ss.ss_family == AF_INET6) {
		s->me.port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		memcpy(s->me.addr, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
	} else {
		s->me.port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		memcpy(s->me.addr, &((struct sockaddr_in *)&ss)->sin_addr, 4);
	}
	snprintf(s->family, sizeof(s->family), "%s",
		 ss.ss_family == AF_INET6 ? "FI_SOCKADDR_IN6" : "FI_SOCKADDR_IN");
	snprintf(s->desc, sizeof(s->desc), "sockets on %s port %u",
		 src_ip && *src_ip ? src_ip : "any address", (unsigned)s->me.port);
	SD_INFO(SD_SUB_NET,
		"socket transport: listening on %s port %u; long messages (%zu bytes and up) over %d "
		"data connection(s) per peer, %s, %zu bytes of them sent before their receive",
		src_ip && *src_ip ? src_ip : "*", (unsigned)s->me.port, s->long_min, s->nsocks,
		s->threads ? "a thread each" : "polled by the caller", s->credit);
	*out = &s->base;
	return SMDDP_OK;
bad_ip:
	sd_sock_data_close(s);
	free(s);
	return sd_comm_error(c, SMDDP_EINTERNAL, "socket transport: \"%s\" is not an address", src_ip);
}

static size_t so_name(struct sd_fab *f, void *buf, size_t len)
{
	if (len < sizeof(struct name))
		return 0;
	memcpy(buf, &S(f)->me, sizeof(struct name));
	return sizeof(struct name);
}

static const char *so_describe(struct sd_fab *f)
{
	return S(f)->desc;
}

static void so_kind(struct sd_fab *f, struct sd_fab_kind *k)
{
	memset(k, 0, sizeof(*k));
	snprintf(k->prov, sizeof(k->prov), "sockets (smddp)");
	snprintf(k->domain, sizeof(k->domain), "port %u", (unsigned)S(f)->me.port);
	snprintf(k->format, sizeof(k->format), "%s", S(f)->family);
}

static int so_insert(struct smddp_comm *c, struct sd_fab *f, const void *names, size_t stride, int n)
{
	struct sock *s = S(f);
	int mine, cores;

	s->peers = calloc((size_t)n, sizeof(*s->peers));
	s->outs = calloc((size_t)n, sizeof(*s->outs));
	if (!s->peers || !s->outs)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	s->npeers = n;
	for (int r = 0; r < n; r++) {
		const char *p = (const char *)names + (size_t)r * stride;
		uint32_t len;

		memcpy(&len, p, sizeof(len));
		if (len != sizeof(struct name))
			return sd_comm_error(c, SMDDP_ENETWORK,
					     "socket transport: rank %d's address is not one this "
					     "libsmddp reads (%u bytes, not %zu): do all ranks run the "
					     "same version of libsmddp?",
					     r, (unsigned)len, sizeof(struct name));
		memcpy(&s->peers[r], p + sizeof(uint32_t), sizeof(struct name));
		if (s->peers[r].magic != NAME_MAGIC)
			return sd_comm_error(c, SMDDP_ENETWORK,
					     "socket transport: rank %d's address is not one this "
					     "libsmddp reads (another format): do all ranks run the same "
					     "version of libsmddp?",
					     r);
		s->outs[r].fd = -1;
		s->outs[r].credit = s->credit;
	}
	s->spin = sd_sock_cpus_spare(s->peers, n, s->rank, &mine, &cores);
	SD_INFO(SD_SUB_NET,
		"socket transport: %d rank(s) of %d on this machine, %d core(s) for them: a wait "
		"%s",
		mine, n, cores,
		s->spin ? "keeps its core, polling, for up to 10 ms (small messages only), then sleeps"
			: "gives its core away between polls");
	return SMDDP_OK;
}

/* ---- sends ------------------------------------------------------------ */

/* A frame is written: a long send's announcement now waits for its
 * clear-to-send; anything else is over. */
static void written(struct sock *s, int peer, struct op *x, int *got)
{
	struct out *o = &s->outs[peer];

	if (x->type == F_PUSH) { /* its header was one of its pieces */
		sd_sock_piece_done(s, x, 0, 0);
		return;
	}
	if (x->type == F_MOVE) {
		free(x);
		sd_sock_move_over(s, peer);
		return;
	}
	if (x->type == F_RTS) {
		if (!x->owner && !x->keep) { /* forgotten while its header went out */
			queue_ctl(s, peer, F_GONE, x->id);
			free(x->own);
			free(x);
			return;
		}
		x->next = o->wait;
		o->wait = x;
		return;
	}
	sd_sock_complete(x, 0, x->len, x->tag);
	(*got)++;
}

/* Writes what the connection takes of its queue; completes what is
 * written; 1 if anything moved. */
static int push(struct sock *s, int peer, int *got)
{
	struct out *o = &s->outs[peer];
	int moved = 0;

	if (o->fd < 0 || o->err)
		return 0;
	if (o->connecting) {
		struct hello h = {.magic = HELLO_MAGIC, .rank = s->rank, .cookie = s->peers[peer].cookie};
		int e = 0;
		socklen_t el = sizeof(e);
		ssize_t w;

		if (getsockopt(o->fd, SOL_SOCKET, SO_ERROR, &e, &el) || e) {
			o->err = e ? e : errno;
			return 1;
		}
		/* Not connected yet: the write says EAGAIN or ENOTCONN. */
		w = send(o->fd, &h, sizeof(h), MSG_NOSIGNAL);
		if (w < 0)
			return errno == EAGAIN || errno == ENOTCONN ? 0 : (o->err = errno, 1);
		if (w != (ssize_t)sizeof(h)) { /* 24 bytes into an empty socket */
			o->err = EPROTO;
			return 1;
		}
		o->connecting = 0;
		moved = 1;
	}
	while (o->head) {
		struct op *x = o->head;
		const char *payload = x->own ? x->own : x->buf;
		struct iovec iov[2];
		int niov = 0;
		size_t left;
		ssize_t w;

		if (x->done < HDR) {
			iov[niov].iov_base = x->hdr + x->done;
			iov[niov++].iov_len = HDR - x->done;
			iov[niov].iov_base = (void *)payload;
			iov[niov++].iov_len = x->wire;
		} else {
			size_t at = x->done - HDR;

			/* a forgotten send's copy holds only what was left */
			iov[niov].iov_base = (void *)(x->own ? payload : payload + at);
			iov[niov++].iov_len = x->wire - at;
		}
		left = HDR + x->wire - x->done;
		if (left == 0) {
			w = 0;
		} else {
			struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)niov};

			w = sendmsg(o->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w < 0) {
				if (errno == EAGAIN || errno == EINTR)
					break;
				o->err = errno;
				return 1;
			}
		}
		moved |= w > 0;
		if (x->own && x->done >= HDR) {
			/* keep the copy's front at the next byte */
			memmove(x->own, x->own + w, x->wire - (x->done - HDR) - (size_t)w);
		} else if (x->own && x->done + (size_t)w > HDR) {
			size_t into = x->done + (size_t)w - HDR;

			memmove(x->own, x->own + into, x->wire - into);
		}
		x->done += (size_t)w;
		if (x->done < HDR + x->wire)
			break;
		o->head = x->next;
		if (!o->head)
			o->tail = NULL;
		x->next = NULL;
		written(s, peer, x, got);
		moved = 1;
	}
	return moved;
}

/* Queues x on its peer's control connection (opening it), and writes it
 * if the connection is idle.  0, or the errno that failed x (completed). */
static int enqueue(struct sock *s, struct op *x, int *got)
{
	struct out *o = &s->outs[x->peer];

	if (o->err || (o->fd < 0 && sd_sock_connect(s, x->peer))) {
		int e = o->err;

		sd_sock_complete(x, e, 0, 0);
		return e;
	}
	if (o->tail)
		o->tail->next = x;
	else
		o->head = x;
	o->tail = x;
	if (o->head == x)
		push(s, x->peer, got); /* an idle connection takes it now */
	return 0;
}

static int queue_ctl(struct sock *s, int peer, int type, uint64_t id)
{
	struct op *x = sd_sock_ctl_op(s, peer, type, id);
	int got = 0;

	if (!x)
		return ENOMEM;
	return enqueue(s, x, &got);
}

static int post_send(struct smddp_comm *c, struct sock *s, int peer, uint64_t tag, const void *buf,
		     size_t len, struct sd_freq *r, int keep)
{
	struct op *x = calloc(1, sizeof(*x));
	int got = 0;

	if (!x)
		return c ? sd_comm_error(c, SMDDP_ENOMEM, "out of memory") : -1;
	x->is_send = 1;
	x->peer = peer;
	x->tag = tag;
	x->buf = (char *)buf;
	x->len = len;
	x->keep = keep;
	x->owner = r;
	if (len >= s->long_min && !keep) {
		struct out *o = &s->outs[peer];

		/* At once while the receiver can hold it (credit), else when
		 * it is ready for it. */
		x->id = o->next_id++;
		if (o->credit >= len && !o->err) {
			x->type = F_PUSH;
			o->credit -= len;
			x->pieces = sd_sock_npieces(s, len) + 1;
		} else {
			x->type = F_RTS;
		}
	} else {
		x->type = F_EAGER;
		x->wire = len;
	}
	put64(x->hdr, tag);
	put64(x->hdr + 8, (uint64_t)x->type << 56 | len);
	put64(x->hdr + 16, x->id);
	r->fab = &s->base;
	r->peer = peer;
	r->is_send = 1;
	r->len = len;
	r->fc = x;
	/* a failure is in r: the wait reports it (and a short send written at
	 * once is over and freed: x is read before) */
	int push = x->type == F_PUSH;

	if (!enqueue(s, x, &got) && push)
		sd_sock_data_send(s, x, 1);
	return SMDDP_OK;
}

static int so_send(struct smddp_comm *c, struct sd_fab *f, int peer, uint64_t tag, const void *buf,
		   size_t len, struct sd_freq *r)
{
	struct sock *s = S(f);

	if (peer < 0 || peer >= s->npeers)
		return sd_comm_error(c, SMDDP_EINTERNAL, "socket transport: no rank %d (of %d)", peer,
				     s->npeers);
	if (len > SPIN_LEN) /* a wait does not keep its core for a while (spun) */
		s->big_at = sd_now_ns();
	return post_send(c, s, peer, tag, buf, len, r, r->keep);
}

static int so_notify(struct sd_fab *f, int peer, uint64_t tag, const void *buf, size_t len,
		     struct sd_freq *r)
{
	struct sock *s = S(f);

	if (peer < 0 || peer >= s->npeers || s->outs[peer].err)
		return -1;
	memset(r, 0, sizeof(*r));
	return post_send(NULL, s, peer, tag, buf, len, r, 1) ? -1 : 0;
}

static void fail_to(struct sock *s, int peer, int *got)
{
	struct out *o = &s->outs[peer];

	while (o->head) {
		struct op *x = o->head;

		o->head = x->next;
		if (x->type == F_PUSH) { /* its pieces fail too: the last one ends it */
			sd_sock_piece_done(s, x, o->err, 0);
			continue;
		}
		sd_sock_complete(x, o->err, 0, 0);
		(*got)++;
	}
	o->tail = NULL;
	while (o->wait) {
		struct op *x = o->wait;

		o->wait = x->next;
		sd_sock_complete(x, o->err, 0, 0);
		(*got)++;
	}
}

/* Everything to and from peer fails with err (a connection to it broke). */
static void peer_fail(struct sock *s, int peer, int err, int send, int *got)
{
	struct out *o = &s->outs[peer];

	if (!err)
		err = ECONNRESET;
	if (!o->err)
		o->err = err;
	fail_to(s, peer, got);
	sd_sock_fail_from(s, peer, err, got);
	sd_sock_data_fail(s, peer, err, got);
	sd_sock_failed(s, peer, err, send);
}

/* An empty poll gives the core away (so_progress): by sd_wait_yield(), the
 * shm waits' timed sched_yield(); where yields have been slow lately (a
 * yielder waits behind the busy processes of its session, and a message
 * that came meanwhile waited for the next tick: two ranks beside two busy
 * processes took 8 ms a call) it does not yield, and the pass naps in poll
 * for YIELD_NAP_NS instead, woken at once by the message.  A nap costs
 * more than a quick yield (a wake-up: 5-10 us a call on two cores), so
 * yields stay the rule where they are quick; wait.c says when yields
 * count as slow, and for how long. */
#define YIELD_NAP_NS 50000ll

/* One pass: poll (for at most wait_ns), then the I/O that is ready. */
static int pass(struct sock *s, int64_t wait_ns, int *got)
{
	struct timespec ts = {.tv_sec = wait_ns / 1000000000, .tv_nsec = wait_ns % 1000000000};
	size_t n = 2 + (size_t)s->nins + (size_t)s->npeers + sd_sock_data_nfds(s), k = 0, kd, kin;
	struct in *in, *next;
	int nready;

	sd_sock_sweep(s, got);
	if (n > s->npfd) {
		struct pollfd *p = realloc(s->pfd, n * sizeof(*p));

		if (!p)
			return ENOMEM;
		s->pfd = p;
		s->npfd = n;
	}
	s->pfd[k++] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
	s->pfd[k++] = (struct pollfd){.fd = s->wake_fd, .events = POLLIN};
	for (in = s->ins; in; in = in->next) /* held: nothing to read until a kick */
		s->pfd[k++] = (struct pollfd){.fd = in->fd, .events = in->hold ? 0 : POLLIN};
	kin = k;
	for (int p = 0; p < s->npeers; p++) {
		struct out *o = &s->outs[p];

		if (o->fd >= 0 && !o->err && (o->head || o->connecting))
			s->pfd[k++] = (struct pollfd){.fd = o->fd, .events = POLLOUT};
	}
	s->queued = k - kin;
	kd = k;
	k += sd_sock_data_pollfds(s, s->pfd + k);
	nready = ppoll(s->pfd, k, &ts, NULL);
	if (nready > 0 && s->pfd[1].revents) {
		uint64_t v;

		if (read(s->wake_fd, &v, sizeof(v)) < 0) {
			/* nothing to read: another pass took it */
		}
	}
	if (nready < 0)
		for (size_t i = 0; i < k; i++)
			s->pfd[i].revents = 0;
	/* (pieces that wait for their header are tried whatever poll says) */
	sd_sock_data_io(s, s->pfd + kd, k - kd);
	sd_sock_data_drain(s, got);
	if (nready <= 0)
		return 0;
	if (s->pfd[0].revents)
		sd_sock_accept_all(s);
	k = 2;
	for (in = s->ins; in; in = next) {
		next = in->next;
		/* new connections are not in this poll's list: read them next time */
		if (k >= kin || s->pfd[k].fd != in->fd)
			continue;
		if (s->pfd[k++].revents && !in->dead)
			sd_sock_pull_in(s, in, got);
	}
	for (int p = 0; p < s->npeers; p++) {
		struct out *o = &s->outs[p];

		if (o->fd < 0 || o->err || !(o->head || o->connecting))
			continue;
		push(s, p, got);
		if (o->err)
			peer_fail(s, p, o->err, 1, got);
	}
	sd_sock_data_retry(s);
	sd_sock_sweep(s, got);
	sd_sock_data_drain(s, got);
	return 0;
}

/* An empty poll where the ranks of this machine have a core each
 * (socket-cpus.c says why): it keeps the core, polling on through what
 * would be a sleep of wait_ms, for SPIN_NS from the first empty poll of
 * the wait (longer than the time slice of a busy process beside the rank,
 * after which the peer's answer is there).  A sleep would cost a wake-up
 * per message (two ranks beside two busy loops: 36-44 us an 8 B
 * allreduce, against 9-12 polling), a yield the busy process's whole
 * slice.  Small messages only: not within SPIN_NS of a message over
 * SPIN_LEN posted, nor while bytes wait to be written.  Their bytes flow
 * only while both ranks, and the kernel's own network work on their cores,
 * get to run, and a rank that spent its share polling holds that off
 * (1 MiB allreduce 3.6-8.0 ms instead of 1.3; a 64 KiB alltoallv, 32-40
 * KiB messages, 8.0 ms a call in most runs).  0 where it does not keep
 * the core, or once SPIN_NS is spent: then the wait yields or sleeps. */
static int spun(struct sock *s, int wait_ms, int *got, int *rc)
{
	uint64_t t = sd_now_ns(), end, now;

	if (t - s->big_at < SPIN_NS || t < s->calm_until || s->queued)
		return 0;
	if (t - s->idle_last > SPIN_NS) {
		s->idle_since = t; /* a new wait: a completion cleared idle_last */
		s->gapped = 0;
	} else if (t - s->idle_last > GAP_NS) {
		s->gapped = 1;
	}
	s->idle_last = t;
	end = s->idle_since + SPIN_NS;
	if (t >= end)
		return 0;
	if (wait_ms > 0 && t + (uint64_t)wait_ms * 1000000 < end)
		end = t + (uint64_t)wait_ms * 1000000;
	while (wait_ms > 0 && !*rc && !*got && (now = sd_now_ns()) < end) {
		s->gapped |= now - s->idle_last > GAP_NS;
		s->idle_last = now;
		*rc = pass(s, 0, got);
	}
	return 1;
}

/* A wait is over where waits keep their core.  Its answer came only after
 * this rank had been off its core (gapped: a poll GAP_NS after the last),
 * BAD_WAITS times in a row: the peer runs only while this rank does not,
 * which is a peer on this very core (namespaces of one machine, paired
 * on a core by the scheduler, which counts two CPU-bound tasks a core as
 * balanced: 8 ms a call, the tick, in 3 of 20 runs) or slices that never
 * overlap.  Polling then only holds the core from the peer, so for
 * calm_for (CALM_MIN_NS, doubled each time up to CALM_MAX_NS, forgotten
 * after CLEAN_WAITS waits that went well) the waits yield or sleep. */
static void judge(struct sock *s)
{
	uint64_t now;

	if (!s->gapped) {
		s->bad = 0;
		if (s->calm_for && ++s->clean >= CLEAN_WAITS && sd_now_ns() >= s->calm_until)
			s->calm_for = 0;
		return;
	}
	s->gapped = 0;
	s->clean = 0;
	if (++s->bad < BAD_WAITS)
		return;
	now = sd_now_ns();
	s->bad = 0;
	s->calm_for = !s->calm_for ? CALM_MIN_NS
		      : 2 * s->calm_for < CALM_MAX_NS ? 2 * s->calm_for : CALM_MAX_NS;
	s->calm_until = now + s->calm_for;
	SD_TRACE(SD_SUB_NET,
		 "socket transport: %d waits in a row answered only after this rank was off its "
		 "core: waits give it away for %llu ms",
		 BAD_WAITS, (unsigned long long)(s->calm_for / 1000000));
}

static int so_progress(struct smddp_comm *c, struct sd_fab *f, int wait_ms, int *got)
{
	struct sock *s = S(f);
	int rc, fp;

	*got = 0;
	s->fail_peer = 0;
	/* Ready work first, without sleeping; then sleep only if none. */
	rc = pass(s, 0, got);
	if (!rc && !*got && s->spin && spun(s, wait_ms, got, &rc))
		goto out;
	/* A rank that polls in vain gives its core away: on loopback the
	 * peer it waits for may need it to send (ranks outnumbering cores
	 * waited out whole spins, 0.5 ms a message, without this); by a
	 * yield, or a nap where yields were slow (YIELD_NAP_NS says why). */
	if (!rc && !*got && !wait_ms && sd_wait_yield())
		rc = pass(s, YIELD_NAP_NS, got);
	if (!rc && !*got && wait_ms > 0)
		rc = pass(s, (int64_t)wait_ms * 1000000, got);
out:
	if (*got && s->spin)
		judge(s);
	if (*got)
		s->idle_last = 0;
	if (rc)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	fp = s->fail_peer;
	s->fail_peer = 0;
	if (fp)
		return sd_comm_error(c, SMDDP_ENETWORK, "socket transport: %s rank %d failed: %s",
				     s->fail_send ? "sending to" : "receiving from", fp - 1,
				     strerror(s->fail_err));
	return SMDDP_OK;
}

static void so_patience(struct sd_fab *f, uint64_t ns)
{
	(void)f;
	(void)ns; /* posts never wait for room: the queues are the endpoint's */
}

static void so_on_wait(struct sd_fab *f, int (*news)(struct smddp_comm *c))
{
	S(f)->news = news;
}

static void so_cancel(struct sd_fab *f, struct sd_freq *r)
{
	struct sock *s = S(f);
	struct op *x = r->fc;

	if (r->done || !x || r->is_send)
		return;
	for (struct op *q = s->posted; q; q = q->next)
		if (q == x) {
			sd_sock_unlink_posted(s, x);
			sd_sock_complete(x, ECANCELED, 0, 0);
			return;
		}
	/* Waiting for an early message still arriving: it stays for another. */
	for (struct early *e = s->early; e; e = e->next)
		if (e->taker == x) {
			e->taker = NULL;
			sd_sock_complete(x, ECANCELED, 0, 0);
			return;
		}
	/* A long one's bytes go on into a sink; its op is freed there. */
	if (sd_sock_data_cancel(s, x)) {
		r->fc = NULL;
		r->err = ECANCELED;
		r->done = 1;
		return;
	}
	/* Being read, or waiting for an early message: it ends as a sink. */
	x->owner = NULL;
	r->fc = NULL;
	r->err = ECANCELED;
	r->done = 1;
}

static int so_forget(struct sd_fab *f, int wait_ms)
{
	struct sock *s = S(f);
	int left = 0;

	(void)wait_ms;
	for (struct op *x = s->posted, *nx; x; x = nx) {
		nx = x->next;
		if (x->keep)
			continue;
		if (x->owner)
			x->owner->fc = NULL;
		x->owner = NULL;
		sd_sock_unlink_posted(s, x);
		sd_sock_complete(x, 0, 0, 0);
	}
	for (struct in *in = s->ins; in; in = in->next) {
		if (in->reading && in->into && !in->into->keep) {
			/* the rest of its bytes go nowhere */
			if (in->into->owner)
				in->into->owner->fc = NULL;
			sd_sock_complete(in->into, 0, 0, 0);
			in->into = NULL;
		}
	}
	for (struct early *e = s->early; e; e = e->next)
		if (e->taker && !e->taker->keep) {
			if (e->taker->owner)
				e->taker->owner->fc = NULL;
			sd_sock_complete(e->taker, 0, 0, 0);
			e->taker = NULL;
		}
	for (int p = 0; p < s->npeers; p++) {
		struct out *o = &s->outs[p];
		struct op **pp = &o->head;

		/* Long sends announced: withdrawn; the receiver forgets them. */
		while (o->wait) {
			struct op *x = o->wait;

			o->wait = x->next;
			if (x->owner)
				x->owner->fc = NULL;
			if (!o->err)
				queue_ctl(s, p, F_GONE, x->id);
			free(x->own);
			free(x);
		}
		pp = &o->head;
		o->tail = NULL;
		while (*pp) {
			struct op *x = *pp;

			if (x->keep) {
				o->tail = x;
				pp = &x->next;
				continue;
			}
			if (x->owner)
				x->owner->fc = NULL;
			x->owner = NULL;
			if (x->type == F_PUSH) { /* its pieces are on their way: it stays */
				o->tail = x;
				pp = &x->next;
				continue;
			}
			if (x->done == 0 || o->err) { /* nothing of it sent: it never was */
				*pp = x->next;
				free(x);
				continue;
			}
			/* half sent: the peer expects the rest; it comes from a copy
			 * (a long send's header: GONE follows it, written()) */
			size_t at = x->done > HDR ? x->done - HDR : 0;

			if (!x->own && x->wire) {
				x->own = malloc(x->wire - at ? x->wire - at : 1);
				if (!x->own) { /* cannot finish it: the stream is lost */
					o->err = ENOMEM;
					*pp = x->next;
					free(x);
					continue;
				}
				sd_copy(x->own, x->buf + at, x->wire - at);
			}
			x->buf = NULL;
			o->tail = x;
			pp = &x->next;
		}
	}
	sd_sock_data_forget(s, &left);
	return left;
}

static int so_poisoned(struct sd_fab *f)
{
	(void)f;
	return 0;
}

static int so_close(struct sd_fab *f)
{
	struct sock *s = S(f);
	uint64_t until = sd_now_ns() + 200000000ull;
	int got = 0;

	if (!s)
		return 0;
	so_forget(f, 0);
	/* What is still queued (abort notices, the rest of forgotten sends)
	 * gets a moment to leave. */
	for (;;) {
		int left = sd_sock_data_busy(s);

		for (int p = 0; p < s->npeers; p++)
			left += s->outs[p].head && !s->outs[p].err;
		if (!left || sd_now_ns() >= until)
			break;
		pass(s, 1000000, &got);
	}
	sd_sock_data_close(s);
	for (int p = 0; p < s->npeers; p++) {
		struct out *o = &s->outs[p];

		while (o->head) {
			struct op *x = o->head;

			o->head = x->next;
			sd_sock_complete(x, ECANCELED, 0, 0);
		}
		while (o->wait) {
			struct op *x = o->wait;

			o->wait = x->next;
			sd_sock_complete(x, ECANCELED, 0, 0);
		}
		if (o->fd >= 0 && !o->borrowed)
			close(o->fd);
	}
	while (s->posted) {
		struct op *x = s->posted;

		s->posted = x->next;
		sd_sock_complete(x, ECANCELED, 0, 0);
	}
	while (s->ins) {
		struct in *in = s->ins;

		s->ins = in->next;
		if (in->reading && in->into)
			sd_sock_complete(in->into, ECANCELED, 0, 0);
		if (!in->shared)
			close(in->fd);
		free(in->buf);
		free(in);
	}
	while (s->early) {
		struct early *e = s->early;

		s->early = e->next;
		if (e->taker)
			sd_sock_complete(e->taker, ECANCELED, 0, 0);
		free(e->data);
		free(e);
	}
	if (s->lfd >= 0)
		close(s->lfd);
	free(s->pfd);
	free(s->outs);
	free(s->peers);
	free(s);
	return 0;
}

const struct sd_ep_ops sd_ep_socket = {
	.size = sizeof(struct sd_ep_ops),
	.name = "socket",
	.open = so_open,
	.name_of = so_name,
	.describe = so_describe,
	.kind = so_kind,
	.insert = so_insert,
	.send = so_send,
	.recv = sd_sock_recv,
	.notify = so_notify,
	.patience = so_patience,
	.on_wait = so_on_wait,
	.cancel = so_cancel,
	.forget = so_forget,
	.poisoned = so_poisoned,
	.progress = so_progress,
	.close = so_close,
};
