/* cmd/run/nodes.c - the launchers' own rendezvous in smddp-run's per-node mode: the channel */

/*
 * Design. In per-node mode (--nnodes N --node-rank I, as torchrun) every
 * node runs its own smddp-run, and nobody reaches the other hosts: there is
 * no ssh. The launchers still have to act as one job, so node 0's launcher
 * listens on a TCP port of its own (--launcher-port, by default the ranks'
 * port + 1) and the others connect to it:
 *
 *   join     0 -> node I   HELLO v=2 nonce=N0        (at once, to every connection)
 *            node I -> 0   JOIN v=2 node=I nnodes=N nproc=L port=P host=H job=ID
 *                               nonce=N1 mac=M1      (M1: "-" without a token)
 *            0 -> node I   GO job=ID mac=M0          (once all N-1 have joined)
 *                          GO job=ID token=T         (the same, when node 0 made T)
 *                          ERR status=S msg=...      (this one disagrees: refused)
 *                          STOP status=S msg=...     (node 0 gave up waiting)
 *   run      node I -> 0   FAIL status=S msg=...     (its first failure)
 *            0 -> node I   STOP status=S msg=...     (a failure anywhere: stop)
 *   end      node I -> 0   DUMP file=NAME msg=LINE   (one line of its ranks' dump NAME)
 *                          DUMPS files=K             (its K dumps are sent)
 *                          EXIT status=S             (its ranks are over)
 *
 * One text line per message, fields "key=value" without blanks, the free
 * text last; nodes-line.c parses them, strictly, but for DUMP and DUMPS,
 * which node 0 hands whole to the reader of the dumps (run/trace.c). No
 * rank starts before every node has joined, so a node that never comes is
 * named by node 0 after --join-timeout instead of leaving the other ranks
 * hanging in their rendezvous; and the job id (and the token, when node 0
 * made it) reach every node with GO. The dumps come after a node's ranks
 * are over, before its EXIT; node 0 takes them as they come, also while
 * its own ranks still run, and then waits for the rest (bounded: trace.c).
 *
 * During the run the connections stay open, with TCP keepalive, so that a
 * launcher killed, or a host gone, is noticed: node 0 then stops the job
 * everywhere, and a node that loses node 0 stops its own ranks.
 *
 * The files, by concern: this one is the channel (the lines, the sockets,
 * and while the ranks run FAIL, EXIT and STOP, and handing node 0 the DUMP
 * lines it meets); nodes-join.c admits the launchers (HELLO, JOIN, GO, ERR:
 * the challenge, the proof of the job token, the checks, and how often a
 * refusal is told), and its design comment says how; nodes-dump.c sends
 * the dumps and has node 0 wait for them. Both call into this file
 * (nodes-int.h), never it into them, nor they into each other.
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/signalfd.h>
#include <sys/socket.h>

#include "run/nodes-int.h"

/* ---- lines ------------------------------------------------------------ */

/* One line, and nothing the peer's parser refuses (a host name or a
 * message may hold anything). */
void nodes_clean_line(char *line, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (line[i] == '\n' || line[i] == '\r' || line[i] == '\t')
			line[i] = ' ';
		else if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
			line[i] = '?';
}

/* Sends one line; small enough to fit an idle socket's buffer at once. */
TOOL_PRINTF(2, 3) int nodes_send_line(int fd, const char *fmt, ...)
{
	char line[LINE_MAX_LEN];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	if ((size_t)n > sizeof line - 2)
		n = (int)sizeof line - 2;
	nodes_clean_line(line, (size_t)n);
	line[n++] = '\n';
	for (int off = 0; off < n;) {
		ssize_t w = send(fd, line + off, n - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			if (poll(&p, 1, 1000) <= 0)
				return -1;
			continue;
		}
		if (w <= 0)
			return -1;
		off += w;
	}
	return 0;
}

/* Reads what is there. Returns 1 with a line in LINE (without '\n'), 0 when
 * nothing whole is there yet, -1 on EOF or error (or a line too long). */
int nodes_read_line(struct peer *p, char *line, size_t linelen, bool *eof)
{
	for (;;) {
		char *nl = memchr(p->buf, '\n', p->len);
		if (nl) {
			size_t n = nl - p->buf;
			size_t c = n < linelen - 1 ? n : linelen - 1;
			memcpy(line, p->buf, c);
			line[c] = '\0';
			memmove(p->buf, nl + 1, p->len - n - 1);
			p->len -= n + 1;
			return 1;
		}
		if (*eof)
			return -1;
		if (p->len == sizeof p->buf)
			return -1;
		ssize_t r = recv(p->fd, p->buf + p->len, sizeof p->buf - p->len, MSG_DONTWAIT);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return 0;
		if (r <= 0) {
			*eof = true;
			continue;   /* hand out what is whole, then -1 */
		}
		p->len += r;
	}
}

void nodes_close_peer(struct peer *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
}

/* A dead host is noticed within about a minute, not hours. */
void nodes_keepalive(int fd)
{
	int on = 1, idle = 10, intvl = 5, cnt = 6;
	unsigned int user_ms = 45000;
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof user_ms);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

/* A signal from the signalfd that ends the wait, or 0. */
int nodes_stop_signal(int sigfd)
{
	struct signalfd_siginfo si[16];
	int stop = 0;
	for (;;) {
		ssize_t n = read(sigfd, si, sizeof si);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return stop;
		for (size_t i = 0; i < (size_t)n / sizeof si[0]; i++) {
			int s = (int)si[i].ssi_signo;
			if (!stop && (s == SIGINT || s == SIGTERM || s == SIGHUP || s == SIGQUIT))
				stop = s;
		}
	}
}

struct nodes *nodes_new(const struct nodes_config *cfg)
{
	struct nodes *n = calloc(1, sizeof *n);
	if (!n)
		return NULL;
	n->cfg = *cfg;
	snprintf(n->host, sizeof n->host, "%s", cfg->host && *cfg->host ? cfg->host : "?");
	for (char *h = n->host; *h; h++)   /* one field of a line: no blanks */
		if ((unsigned char)*h <= ' ' || *h == 0x7f)
			*h = '?';
	n->cfg.host = n->host;
	n->cfg.master_addr = NULL;   /* not kept: the caller's string */
	n->cfg.job_id = n->cfg.token = NULL;
	snprintf(n->addr, sizeof n->addr, "%s%s%s:%ld", strchr(cfg->master_addr, ':') ? "[" : "",
	         cfg->master_addr, strchr(cfg->master_addr, ':') ? "]" : "", cfg->launcher_port);
	return n;
}

struct peer *nodes_add_peer(struct nodes *n, int fd)
{
	/* a closed connection's place first: a port scanner must not grow us */
	for (size_t i = 0; i < n->npeers; i++) {
		struct peer *p = &n->peers[i];
		if (p->fd < 0 && p->node < 0 && !p->done) {
			memset(p, 0, sizeof *p);
			p->fd = fd;
			p->node = -1;
			snprintf(p->host, sizeof p->host, "?");
			return p;
		}
	}
	if (n->npeers == n->cap) {
		size_t cap = n->cap ? n->cap * 2 : 8;
		struct peer *np = realloc(n->peers, cap * sizeof *np);
		if (!np)
			return NULL;
		n->peers = np;
		n->cap = cap;
	}
	struct peer *p = &n->peers[n->npeers++];
	memset(p, 0, sizeof *p);
	p->fd = fd;
	p->node = -1;
	snprintf(p->host, sizeof p->host, "?");
	return p;
}

/* ---- the sockets -------------------------------------------------------- */

int nodes_listen_on(long port)
{
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
	                           .sin6_addr = IN6ADDR_ANY_INIT };
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
	                          .sin_addr.s_addr = htonl(INADDR_ANY) };
	int on = 1, off = 0;
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
		if (bind(fd, (struct sockaddr *)&a6, sizeof a6) == 0 && listen(fd, 128) == 0)
			return fd;
		int e = errno;
		close(fd);
		if (e != EAFNOSUPPORT && e != EADDRNOTAVAIL) {
			errno = e;
			return -1;
		}
	}
	/* no IPv6 here */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
	if (bind(fd, (struct sockaddr *)&a4, sizeof a4) == 0 && listen(fd, 128) == 0)
		return fd;
	int e = errno;
	close(fd);
	errno = e;
	return -1;
}

void nodes_peer_addr(int fd, char *out, size_t outlen)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	snprintf(out, outlen, "?");
	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
		return;
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
			inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], out, outlen);
		else
			inet_ntop(AF_INET6, &s6->sin6_addr, out, outlen);
	} else if (ss.ss_family == AF_INET) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, outlen);
	}
}

/* One attempt to connect to node 0, within MS. -1 with ERR set. */
int nodes_connect_once(const char *addr, long port, int ms, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char service[16];
	snprintf(service, sizeof service, "%ld", port);
	int gai = getaddrinfo(addr, service, &hints, &res);
	if (gai != 0) {
		snprintf(err, errlen, "cannot resolve '%s': %s", addr, gai_strerror(gai));
		return -1;
	}
	int fd = -1;
	for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		if (errno == EINPROGRESS) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			int e = 0;
			socklen_t el = sizeof e;
			int r;
			while ((r = poll(&p, 1, ms)) < 0 && errno == EINTR)
				;
			if (r == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0)
				break;
			errno = r == 0 ? ETIMEDOUT : e ? e : errno;
		}
		snprintf(err, errlen, "%s", strerror(errno));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

/* ---- while the ranks run ------------------------------------------------ */

size_t nodes_pollfds(const struct nodes *n, struct pollfd *pfd, size_t max)
{
	size_t k = 0;
	for (size_t i = 0; i < n->npeers && k < max; i++)
		if (n->peers[i].fd >= 0)
			pfd[k++] = (struct pollfd){ .fd = n->peers[i].fd, .events = POLLIN };
	return k;
}

struct peer *nodes_peer_by_fd(struct nodes *n, int fd)
{
	for (size_t i = 0; i < n->npeers; i++)
		if (n->peers[i].fd == fd)
			return &n->peers[i];
	return NULL;
}

/* LINE's first word is V. (The dumps' own, so that they stay apart from
 * the parsing of the other messages.) */
bool nodes_dump_verb(const char *line, const char *v)
{
	size_t n = strlen(v);
	return strncmp(line, v, n) == 0 && (line[n] == ' ' || line[n] == '\0');
}

/* Node 0: a line of the dumps protocol (nodes.h) goes to its reader. Here,
 * in the channel, since nodes_io() meets these lines while the ranks run
 * (nodes_wait_dumps() then takes the rest): so the calls point one way. */
bool nodes_take_dump(struct nodes *n, const struct peer *p, const char *line)
{
	if (n->cfg.node_rank != 0 ||
	    !(nodes_dump_verb(line, "DUMP") || nodes_dump_verb(line, "DUMPS")))
		return false;
	if (n->dump_fn)
		n->dump_fn(n->dump_ctx, p->node, line);
	return true;
}

/* Node 0: every node but SKIP stops. */
static void broadcast_stop(struct nodes *n, const struct peer *skip, int status, const char *why)
{
	n->stopping = true;
	for (size_t i = 0; i < n->npeers; i++) {
		struct peer *p = &n->peers[i];
		if (p->fd >= 0 && p != skip && !p->done)
			nodes_send_line(p->fd, "STOP status=%d msg=%s", status, why);
	}
}

bool nodes_io(struct nodes *n, const struct pollfd *pfd, size_t count, int *status,
              char *why, size_t whylen)
{
	bool event = false;
	for (size_t i = 0; i < count; i++) {
		if (!pfd[i].revents)
			continue;
		struct peer *p = nodes_peer_by_fd(n, pfd[i].fd);
		if (!p)
			continue;
		char line[LINE_MAX_LEN], msg[LINE_MAX_LEN];
		bool eof = false;
		int got;
		while ((got = nodes_read_line(p, line, sizeof line, &eof)) == 1) {
			struct nodes_msg m;
			if (nodes_take_dump(n, p, line))
				continue;
			if (nodes_parse_line(line, &m))
				continue;   /* not ours: the peers proved themselves, so a bug */
			int st = m.have & NODES_F_STATUS ? (int)m.status : 1;
			if (st < 0 || st > 255)
				st = 1;
			snprintf(msg, sizeof msg, "%s", m.have & NODES_F_MSG ? m.msg : "");
			if (n->cfg.node_rank == 0) {
				if (m.verb == NODES_EXIT)
					p->done = true;
				if (n->stopping || !(m.verb == NODES_FAIL || (m.verb == NODES_EXIT && st != 0)))
					continue;
				if (!msg[0])
					snprintf(msg, sizeof msg, "node %d (host %s): its ranks ended with status %d",
					         p->node, p->host, st);
				broadcast_stop(n, p, st, msg);
				if (!event) {
					event = true;
					*status = st;
					snprintf(why, whylen, "%s", msg);
				}
			} else if (m.verb == NODES_STOP && !n->stopping && !n->done_sent) {
				n->stopping = true;
				event = true;
				*status = st;
				snprintf(why, whylen, "%s", msg[0] ? msg : "node 0 says stop");
			}
		}
		if (got < 0) {
			nodes_close_peer(p);
			if (n->cfg.node_rank == 0 && !p->done && !n->stopping) {
				snprintf(msg, sizeof msg, "the launcher of node %d (host %s, %s) went away "
				         "without a word: killed, or its host is down", p->node, p->host,
				         p->addr);
				broadcast_stop(n, p, 1, msg);
				if (!event) {
					event = true;
					*status = 1;
					snprintf(why, whylen, "%s", msg);
				}
			} else if (n->cfg.node_rank != 0 && !n->stopping && !n->done_sent) {
				n->stopping = true;
				event = true;
				*status = 1;
				snprintf(why, whylen, "lost node 0's launcher at %s: killed, or its host is "
				         "down", n->addr);
			}
		}
	}
	return event;
}

void nodes_failed(struct nodes *n, int status, const char *why)
{
	char msg[LINE_MAX_LEN];
	snprintf(msg, sizeof msg, "node %d (host %s): %s", n->cfg.node_rank, n->host, why);
	if (n->cfg.node_rank == 0) {
		if (!n->stopping)
			broadcast_stop(n, NULL, status, msg);
		return;
	}
	if (n->failed_sent || n->stopping || n->npeers == 0 || n->peers[0].fd < 0)
		return;
	n->failed_sent = true;
	nodes_send_line(n->peers[0].fd, "FAIL status=%d msg=%s", status, msg);
}

void nodes_done(struct nodes *n, int status)
{
	if (n->cfg.node_rank == 0 || n->done_sent)
		return;
	n->done_sent = true;
	if (n->npeers && n->peers[0].fd >= 0)
		nodes_send_line(n->peers[0].fd, "EXIT status=%d", status);
}

bool nodes_waiting(const struct nodes *n)
{
	if (n->cfg.node_rank != 0 || n->stopping)
		return false;
	for (size_t i = 0; i < n->npeers; i++)
		if (n->peers[i].fd >= 0 && n->peers[i].node >= 0 && !n->peers[i].done)
			return true;
	return false;
}

void nodes_free(struct nodes *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->npeers; i++)
		nodes_close_peer(&n->peers[i]);
	free(n->peers);
	free(n);
}
