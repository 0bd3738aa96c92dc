/* socket-conn.c - the socket endpoint's control connections: one per pair of ranks, both ways.
 *
 * A rank sends to a peer over the control connection the peer opened to
 * it, where there is one (borrowed), else over one it opens itself, and
 * reads what the peer sends back on that.  A TCP connection that carries
 * both ways lets a small message's acknowledgement ride on the answer;
 * one connection each way made every small message cost a pure ACK, a
 * packet of its own (commit a1cf9bf has the figures), which Open MPI's
 * tcp btl does not pay.  Where both ranks opened one at once (the first
 * exchange of recursive doubling does), the higher rank moves to the
 * lower one's: F_MOVE is its last frame on its own connection, F_MOVED
 * its first on the other, and the reader holds what follows F_MOVED
 * until it has read F_MOVE, so the messages of a direction keep their
 * order (struct out; socket-recv.c reads the frames).  The name's magic
 * (NAME_MAGIC, socket-int.h) makes ranks of other versions refuse each
 * other.  The data connections of long
 * messages (socket-data.c) stay one way.
 *
 * This file holds the connecting, the move, and the reading of the
 * incoming connections with what their end fails; socket.c's progress
 * calls it, and reaches a peer's failure through struct sock's callback.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/socket/socket-int.h"
#include "util/sd.h"

/* A socket connecting (non-blocking) to peer's listener; -1 with errno. */
static int open_fd(struct sock *s, int peer)
{
	struct name *nm = &s->peers[peer];
	struct sockaddr_storage ss;
	socklen_t sl;
	int one = 1, fd;

	memset(&ss, 0, sizeof(ss));
	if (nm->family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons(nm->port);
		memcpy(&a->sin6_addr, nm->addr, 16);
		sl = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		a->sin_port = htons(nm->port);
		memcpy(&a->sin_addr, nm->addr, 4);
		sl = sizeof(*a);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&ss, sl) && errno != EINPROGRESS) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* The connections to peer: its control connection to us where it opened
 * one (struct out), else one of our own (non-blocking; the hello follows
 * once it is made, before anything else) and an in that reads what the
 * peer may send back on it; the data connections are always our own. */
int sd_sock_connect(struct sock *s, int peer)
{
	struct out *o = &s->outs[peer];
	struct in *in;

	for (in = s->ins; in; in = in->next)
		if (in->peer == peer && !in->shared && !in->dead && !in->err) {
			o->fd = in->fd;
			o->borrowed = 1;
			SD_INFO(SD_SUB_NET, "socket transport: sending to rank %d over its connection "
					    "to this rank", peer);
			sd_sock_data_connect(s, peer, open_fd);
			return 0;
		}
	in = calloc(1, sizeof(*in));
	if (in)
		in->buf = malloc(INBUF);
	if (!in || !in->buf) {
		free(in);
		o->err = ENOMEM;
		return -1;
	}
	o->fd = open_fd(s, peer);
	if (o->fd < 0) {
		o->err = errno;
		free(in->buf);
		free(in);
		return -1;
	}
	o->connecting = 1;
	in->fd = o->fd;
	in->peer = peer;
	in->shared = 1;
	in->next = s->ins;
	s->ins = in;
	s->nins++;
	o->self = in;
	sd_sock_data_connect(s, peer, open_fd);
	return 0;
}

/* Our F_MOVE is written: from now on this rank sends to peer over the
 * peer's connection (o->to), F_MOVED first; our own connection, and its
 * reader, go at the end of the pass (a pass may be walking the ins). */
void sd_sock_move_over(struct sock *s, int peer)
{
	struct out *o = &s->outs[peer];
	struct op *x = sd_sock_ctl_op(s, peer, F_MOVED, 0);

	if (!o->to || !x) {
		free(x);
		if (!o->err)
			o->err = o->to ? ENOMEM : ECONNRESET;
		return;
	}
	if (o->self) {
		o->self->shared = 0; /* its end closes the old connection */
		o->self->dead = 1;
		o->self = NULL;
	} else {
		close(o->fd);
	}
	o->fd = o->to->fd;
	o->borrowed = 1;
	o->to = NULL;
	SD_INFO(SD_SUB_NET, "socket transport: sending to rank %d over its connection to this "
			    "rank, ours closed (both had opened one)", peer);
	x->next = o->head;
	o->head = x;
	if (!o->tail)
		o->tail = x;
}

/* The long sends to peer that wait for a clear-to-send which will not
 * come: its connection to us ended. */
static void unclear(struct sock *s, int peer, int err, int *got)
{
	struct out *o = &s->outs[peer];

	if (!o->wait)
		return;
	while (o->wait) {
		struct op *x = o->wait;

		o->wait = x->next;
		sd_sock_complete(x, err, 0, 0);
		(*got)++;
	}
	sd_sock_failed(s, peer, err, 1);
}

/* Reads in; where it ended, drops it and fails what depended on it. */
void sd_sock_pull_in(struct sock *s, struct in *in, int *got)
{
	int r = sd_sock_pull(s, in, got);

	if (r == PULL_GONE) /* a data connection, gone to socket-data.c */
		return;
	if (r == PULL_MOVED) {
		in->dead = 1;
		sd_sock_drop_in(s, in, got);
		return;
	}
	if (r < 0) {
		int peer = in->peer, err = in->err;

		sd_sock_drop_in(s, in, got);
		if (peer >= 0 && err)
			s->peer_fail(s, peer, err, 0, got);
		else if (peer >= 0)
			unclear(s, peer, ECONNRESET, got);
	}
}

/* The readers of connections moved from, and those whose hold ended. */
void sd_sock_sweep(struct sock *s, int *got)
{
	for (struct in *in = s->ins, *next; in; in = next) {
		next = in->next;
		if (in->dead) {
			sd_sock_drop_in(s, in, got);
		} else if (in->kick) {
			in->kick = 0;
			sd_sock_pull_in(s, in, got);
			next = s->ins; /* the list may have changed: kicks are rare */
		}
	}
}
