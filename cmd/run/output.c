/* cmd/run/output.c - the ranks' output: whole lines, tagged, queued to smddp-run's own */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "common/tool.h"
#include "run/launch.h"
#include "run/run.h"

/* ---- output queues ---------------------------------------------------- */

void outq_init(struct outq *q, int fd)
{
	struct stat st;
	memset(q, 0, sizeof *q);
	q->fd = fd;
	q->chunked = !(fstat(fd, &st) == 0 && S_ISREG(st.st_mode));
	q->tty = isatty(fd);
	if (fcntl(fd, F_GETFD) < 0)
		q->broken = true;
}

size_t outq_pending(const struct outq *q)
{
	return q->len - q->off;
}

static void outq_put(struct outq *q, const char *a, size_t alen, const char *b, size_t blen,
                     bool newline)
{
	size_t need = alen + blen + (newline ? 1 : 0);
	if (q->broken)
		return;
	if (q->off && q->off == q->len)
		q->off = q->len = 0;
	if (q->len + need > q->cap && q->off) {
		memmove(q->buf, q->buf + q->off, q->len - q->off);
		q->len -= q->off;
		q->off = 0;
	}
	if (q->len + need > q->cap) {
		size_t cap = q->cap ? q->cap : 65536;
		while (cap < q->len + need)
			cap *= 2;
		char *nb = realloc(q->buf, cap);
		if (!nb) {
			/* Out of memory for output: losing lines beats dying. */
			q->broken = true;
			return;
		}
		q->buf = nb;
		q->cap = cap;
	}
	memcpy(q->buf + q->len, a, alen);
	memcpy(q->buf + q->len + alen, b, blen);
	q->len += alen + blen;
	if (newline)
		q->buf[q->len++] = '\n';
}

/* Called when poll() says the fd is writable. On a pipe or terminal a write
 * of up to PIPE_BUF then fits without blocking; keep going while poll()
 * says it still would. */
void outq_flush_some(struct outq *q)
{
	for (int i = 0; i < 64 && outq_pending(q) && !q->broken; i++) {
		size_t n = outq_pending(q);
		if (q->chunked && n > PIPE_BUF)
			n = PIPE_BUF;
		ssize_t w = write(q->fd, q->buf + q->off, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			q->broken = true;   /* EPIPE and friends: nobody listens */
			q->off = q->len = 0;
			return;
		}
		q->off += w;
		if (!q->chunked)
			continue;
		struct pollfd p = { .fd = q->fd, .events = POLLOUT };
		if (poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT))
			return;
	}
}

/* ---- streams ---------------------------------------------------------- */

/* Whether a piece shows anything: on a terminal, a piece of carriage
 * returns and escape sequences alone (a progress line's "\r\033[K" that
 * erases it) is passed untagged, or it would leave a "[R] " behind. */
static bool piece_visible(const struct stream *s, const char *p, size_t n)
{
	if (!s->q->tty)
		return true;
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\r' || p[i] == '\n')
			continue;
		if (p[i] != '\033')
			return true;
		if (i + 1 < n && p[i + 1] == '[') {   /* CSI: parameters, then a final byte */
			for (i += 2; i < n && !(p[i] >= 0x40 && p[i] <= 0x7e); i++)
				;
		}
	}
	return false;
}

static size_t tag_len(const struct rank *rk, const struct stream *s, const char *p, size_t n)
{
	return piece_visible(s, p, n) ? rk->taglen : 0;
}

void stream_close(struct rank *rk, struct stream *s)
{
	if (s->fd < 0)
		return;
	close(s->fd);
	s->fd = -1;
	/* a last line without '\n' still ends a line for us; on a terminal, a
	 * last erase of a progress line goes as it is */
	if (s->plen)
		outq_put(s->q, rk->tag, tag_len(rk, s, s->part, s->plen), s->part, s->plen,
		         piece_visible(s, s->part, s->plen));
	free(s->part);
	s->part = NULL;
	s->plen = s->pcap = 0;
}

static bool stream_grow(struct stream *s, size_t need)
{
	size_t cap = s->pcap ? s->pcap : 256;
	while (cap < need)
		cap *= 2;
	char *np = realloc(s->part, cap);
	if (!np)
		return false;
	s->part = np;
	s->pcap = cap;
	return true;
}

/* Where the piece that starts at DATA ends: a '\n', or for a terminal also
 * a '\r', so that a rank's progress line ("42%\r") shows as it is redrawn. */
static const char *piece_end(const struct stream *s, const char *data, size_t n)
{
	const char *nl = memchr(data, '\n', n);
	if (s->q->tty) {
		const char *cr = memchr(data, '\r', nl ? (size_t)(nl - data) : n);
		if (cr)
			return cr;
	}
	return nl;
}

static void stream_add(struct rank *rk, struct stream *s, const char *data, size_t n)
{
	while (n) {
		const char *nl = piece_end(s, data, n);
		size_t take = nl ? (size_t)(nl - data) + 1 : n;
		if (nl && !s->plen) {
			outq_put(s->q, rk->tag, tag_len(rk, s, data, take), data, take, false);
		} else if (s->plen + take > s->pcap && !stream_grow(s, s->plen + take)) {
			/* No memory to hold the line: end it here rather than lose it. */
			outq_put(s->q, rk->tag, rk->taglen, s->part, s->plen, false);
			outq_put(s->q, "", 0, data, take, !nl);
			s->plen = 0;
		} else {
			memcpy(s->part + s->plen, data, take);
			s->plen += take;
			if (nl || s->plen >= LINE_MAX_BYTES) {
				/* an endless line is cut: a rank's bytes stay whole lines */
				outq_put(s->q, rk->tag, tag_len(rk, s, s->part, s->plen), s->part,
				         s->plen, !nl);
				s->plen = 0;
			}
		}
		data += take;
		n -= take;
	}
}

void stream_read(struct rank *rk, struct stream *s)
{
	char buf[READ_CHUNK];
	ssize_t n = read(s->fd, buf, sizeof buf);
	if (n > 0)
		stream_add(rk, s, buf, n);
	else if (n == 0 || (errno != EINTR && errno != EAGAIN))
		stream_close(rk, s);
}

static struct run *the_run;

/* With tagging, smddp-run's messages join the ranks' stderr lines in order
 * rather than cutting into a half-written one. */
static void message_to_queue(const char *line, size_t len)
{
	outq_put(the_run->qmsg, "", 0, line, len, false);
}

/* smddp-run's own stdout and stderr, and how the ranks' reach them. Returns
 * whether stdout and stderr are one file. */
bool output_open(struct run *r)
{
	/* When stdout and stderr are one file, one queue keeps lines whole. */
	outq_init(&r->qout, 1);
	outq_init(&r->qerr, 2);
	struct stat s1, s2;
	bool same = fstat(1, &s1) == 0 && fstat(2, &s2) == 0 &&
	            s1.st_dev == s2.st_dev && s1.st_ino == s2.st_ino;

	r->qmsg = same ? &r->qout : &r->qerr;
	if (r->opt.tag) {
		the_run = r;
		tool_set_message_sink(message_to_queue);
	}
	/* A rank's stdio buffers a pipe by blocks: a terminal's worth of lines
	 * would come at exit. On a terminal (or asked) it gets one of its own. */
	r->out_via = !r->mpirun && (r->opt.tag > 0 || r->opt.unbuffered);
	r->use_pty = r->out_via && (r->opt.unbuffered || isatty(1));
	/* and a rank's progress on stderr reaches a terminal as it does without
	 * smddp-run: it sees a terminal, and its '\r' ends a piece */
	r->use_pty_err = !r->mpirun && r->opt.tag > 0 && isatty(2);
	r->have_ws = (r->use_pty && ioctl(1, TIOCGWINSZ, &r->ws) == 0) ||
	             (r->use_pty_err && ioctl(2, TIOCGWINSZ, &r->ws) == 0);
	return same;
}
