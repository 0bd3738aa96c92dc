/* cmd/run/nodes.c - the launchers' own rendezvous in smddp-run's per-node mode */

/*
 * Design. In per-node mode (--nnodes N --node-rank I, as torchrun) every
 * node runs its own smddp-run, and nobody reaches the other hosts: there is
 * no ssh. The launchers still have to act as one job, so node 0's launcher
 * listens on a TCP port of its own (--launcher-port, by default the ranks'
 * port + 1) and the others connect to it:
 *
 *   join     node I -> 0   JOIN v=1 node=I nnodes=N nproc=L port=P host=H job=ID token=T
 *            0 -> node I   GO job=ID token=T         (once all N-1 have joined)
 *                          ERR status=S msg=...      (this one disagrees: refused)
 *                          STOP status=S msg=...     (node 0 gave up waiting)
 *   run      node I -> 0   FAIL status=S msg=...     (its first failure)
 *                          EXIT status=S             (its ranks are over)
 *            0 -> node I   STOP status=S msg=...     (a failure anywhere: stop)
 *
 * One text line per message, fields "key=value" without blanks, the free
 * text last. No rank starts before every node has joined, so a node that
 * never comes is named by node 0 after --join-timeout instead of leaving
 * the other ranks hanging in their rendezvous; and the job id and token,
 * made by node 0 unless the user gives them, reach every node with GO.
 *
 * The token travels in clear, as it does in the ranks' own rendezvous: it
 * keeps jobs apart and strangers out of a job that sets SMDDP_JOB_TOKEN on
 * every node (node 0 then refuses a launcher without it), not a listener on
 * the wire. Node 0 stops listening once everyone has joined.
 *
 * During the run the connections stay open, with TCP keepalive, so that a
 * launcher killed, or a host gone, is noticed: node 0 then stops the job
 * everywhere, and a node that loses node 0 stops its own ranks.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>

#include "common/tool.h"
#include "run/nodes.h"

#define LINE_MAX_LEN     2048
#define MAX_PENDING      64      /* connections that have not said who they are */
#define CONNECT_TRY_MS   3000    /* one connection attempt */
#define RETRY_MS         250     /* between attempts */
#define GO_MARGIN_MS     10000   /* a joined node waits this much past node 0's deadline */

struct peer {
	int fd;                 /* -1: closed */
	int node;               /* -1: has not joined */
	bool done;              /* sent EXIT */
	char host[256];
	char addr[INET6_ADDRSTRLEN];
	char buf[LINE_MAX_LEN];
	size_t len;
};

struct nodes {
	struct nodes_config cfg;
	char host[256];
	char addr[300];         /* node 0's, as "ADDR:PORT", for messages */
	struct peer *peers;     /* node 0: the other launchers; else [0] is node 0 */
	size_t npeers, cap;
	bool stopping;          /* a STOP went out (node 0) or came (other nodes) */
	bool failed_sent, done_sent;
	char job_id[NODES_ID_MAX];
	char token[NODES_TOKEN_MAX];
	nodes_dump_fn dump_fn;  /* node 0: where DUMP and DUMPS lines go */
	void *dump_ctx;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int ms_left(int64_t until, int cap)
{
	int64_t l = until - now_ms();
	if (l < 0)
		return 0;
	return l > cap ? cap : (int)l;
}

static void random_hex(char *out, size_t nhex)
{
	static const char digits[] = "0123456789abcdef";
	unsigned char b[64];
	size_t nb = (nhex + 1) / 2, got = 0;
	while (got < nb) {
		ssize_t r = getrandom(b + got, nb - got, 0);
		if (r < 0 && errno != EINTR) {
			/* no entropy source at all: time and pid, still unique enough
			 * to keep two jobs apart */
			uint64_t x = (uint64_t)now_ms() * 6364136223846793005ull ^ (uint64_t)getpid();
			for (; got < nb; got++, x = x * 6364136223846793005ull + 1442695040888963407ull)
				b[got] = (unsigned char)(x >> 56);
		} else if (r > 0) {
			got += r;
		}
	}
	for (size_t i = 0; i < nhex; i++)
		out[i] = digits[(b[i / 2] >> (i % 2 ? 0 : 4)) & 0xf];
	out[nhex] = '\0';
}

/* ---- lines ------------------------------------------------------------ */

/* Sends one line; small enough to fit an idle socket's buffer at once. */
TOOL_PRINTF(2, 3) static int send_line(int fd, const char *fmt, ...)
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
	for (int i = 0; i < n; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
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

/* The value of KEY in LINE ("... key=value ..."), into OUT; "msg" takes the
 * rest of the line. false when absent. */
static bool field(const char *line, const char *key, char *out, size_t outlen)
{
	size_t kl = strlen(key);
	for (const char *p = line; (p = strstr(p, key)); p += kl) {
		if ((p != line && p[-1] != ' ') || p[kl] != '=')
			continue;
		const char *v = p + kl + 1;
		size_t n = strcmp(key, "msg") == 0 ? strlen(v) : strcspn(v, " ");
		if (n >= outlen)
			n = outlen - 1;
		memcpy(out, v, n);
		out[n] = '\0';
		return true;
	}
	return false;
}

static long field_long(const char *line, const char *key, long dflt)
{
	char v[32];
	long x;
	if (!field(line, key, v, sizeof v) || tool_parse_long(v, -1000000, 1L << 30, &x) < 0)
		return dflt;
	return x;
}

static bool verb(const char *line, const char *v)
{
	size_t n = strlen(v);
	return strncmp(line, v, n) == 0 && (line[n] == ' ' || line[n] == '\0');
}

/* Reads what is there. Returns 1 with a line in LINE (without '\n'), 0 when
 * nothing whole is there yet, -1 on EOF or error (or a line too long). */
static int read_line(struct peer *p, char *line, size_t linelen, bool *eof)
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

static void close_peer(struct peer *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
}

/* A dead host is noticed within about a minute, not hours. */
static void keepalive(int fd)
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
static int stop_signal(int sigfd)
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

static struct nodes *nodes_new(const struct nodes_config *cfg)
{
	struct nodes *n = calloc(1, sizeof *n);
	if (!n)
		return NULL;
	n->cfg = *cfg;
	snprintf(n->host, sizeof n->host, "%s", cfg->host ? cfg->host : "?");
	n->cfg.host = n->host;
	n->cfg.master_addr = NULL;   /* not kept: the caller's string */
	n->cfg.job_id = n->cfg.token = NULL;
	snprintf(n->addr, sizeof n->addr, "%s%s%s:%ld", strchr(cfg->master_addr, ':') ? "[" : "",
	         cfg->master_addr, strchr(cfg->master_addr, ':') ? "]" : "", cfg->launcher_port);
	return n;
}

static struct peer *add_peer(struct nodes *n, int fd)
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

/* ---- node 0 ------------------------------------------------------------- */

static int listen_on(long port)
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

static void peer_addr(int fd, char *out, size_t outlen)
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

static bool token_equal(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;
	for (size_t i = 0; i < NODES_TOKEN_MAX; i++)
		d |= (unsigned char)(i < la ? a[i] : 0) ^ (unsigned char)(i < lb ? b[i] : 0);
	return d == 0;
}

/* Checks a JOIN; on refusal, says why to both sides and returns its status. */
static int check_join(struct nodes *n, struct peer *p, const char *line, struct peer **slots)
{
	const struct nodes_config *c = &n->cfg;
	char host[256], job[NODES_ID_MAX + 8], token[NODES_TOKEN_MAX + 8], why[1024];
	long v = field_long(line, "v", -1), node = field_long(line, "node", -1);
	long nnodes = field_long(line, "nnodes", -1), nproc = field_long(line, "nproc", -1);
	long port = field_long(line, "port", -1);

	if (!field(line, "host", host, sizeof host))
		snprintf(host, sizeof host, "?");
	snprintf(p->host, sizeof p->host, "%s", host);
	if (!field(line, "job", job, sizeof job))
		snprintf(job, sizeof job, "-");
	if (!field(line, "token", token, sizeof token))
		snprintf(token, sizeof token, "-");

	why[0] = '\0';
	if (v != 1)
		snprintf(why, sizeof why, "a launcher on %s (host %s) speaks another protocol: "
		         "run the same smddp-run version on every node", p->addr, host);
	else if (nnodes != c->nnodes)
		snprintf(why, sizeof why, "node %ld (host %s, %s) was started with --nnodes %ld, "
		         "node 0 (host %s) with --nnodes %d: give every node the same", node, host,
		         p->addr, nnodes, n->host, c->nnodes);
	else if (nproc != c->nproc)
		snprintf(why, sizeof why, "node %ld (host %s, %s) runs %ld rank%s, node 0 (host %s) "
		         "%ld: give every node the same --nproc-per-node", node, host, p->addr, nproc,
		         nproc == 1 ? "" : "s", n->host, c->nproc);
	else if (port != c->master_port)
		snprintf(why, sizeof why, "node %ld (host %s, %s) was given --master-port %ld, node 0 "
		         "(host %s) %ld: give every node the same", node, host, p->addr, port, n->host,
		         c->master_port);
	else if (node < 1 || node >= c->nnodes)
		snprintf(why, sizeof why, "a launcher on %s (host %s) says it is node %ld: node 0 is "
		         "host %s, and the others are 1 to %d", p->addr, host, node, n->host,
		         c->nnodes - 1);
	else if (slots[node])
		snprintf(why, sizeof why, "node rank %ld is given twice: to host %s (%s), which "
		         "joined first, and to host %s (%s)", node, slots[node]->host,
		         slots[node]->addr, host, p->addr);
	else if (strcmp(job, "-") != 0 && strcmp(job, n->job_id) != 0)
		snprintf(why, sizeof why, "node %ld (host %s, %s) belongs to job '%s', node 0 (host "
		         "%s) to job '%s' (SMDDP_JOB_ID or --rdzv-id): are these launchers of one "
		         "job?", node, host, p->addr, job, n->host, n->job_id);
	else if (c->token_given && strcmp(token, "-") == 0)
		snprintf(why, sizeof why, "node %ld (host %s, %s) has no job token but node 0 "
		         "(host %s) has: set the same SMDDP_JOB_TOKEN on every node", node, host,
		         p->addr, n->host);
	else if (c->token_given && !token_equal(token, n->token))
		snprintf(why, sizeof why, "node %ld (host %s, %s) presented a wrong job token: "
		         "SMDDP_JOB_TOKEN differs between the nodes", node, host, p->addr);
	else if (!c->token_given && strcmp(token, "-") != 0)
		snprintf(why, sizeof why, "node %ld (host %s, %s) has a job token (SMDDP_JOB_TOKEN) "
		         "but node 0 (host %s) has none: set it on every node or on none", node,
		         host, p->addr, n->host);
	if (!why[0]) {
		p->node = (int)node;
		slots[node] = p;
		return 0;
	}
	tool_warn("refused a launcher: %s", why);
	send_line(p->fd, "ERR status=2 msg=%s", why);
	close_peer(p);
	return 2;
}

static int join_as_node0(struct nodes *n, int sigfd)
{
	const struct nodes_config *c = &n->cfg;
	int64_t until = now_ms() + (int64_t)(c->join_timeout_s * 1000 + 0.5);
	struct peer **slots = calloc(c->nnodes, sizeof *slots);
	struct pollfd *pfd = calloc(2 + MAX_PENDING + c->nnodes, sizeof *pfd);
	struct peer **who = calloc(2 + MAX_PENDING + c->nnodes, sizeof *who);
	int joined = 0, rc = 1, sig = 0;

	int lfd = listen_on(c->launcher_port);
	if (!slots || !pfd || !who || lfd < 0) {
		if (lfd < 0)
			tool_warn_errno("node 0: cannot listen on port %ld for the other nodes' "
			                "launchers%s", c->launcher_port,
			                errno == EADDRINUSE ? " (another job on this host? give "
			                "--launcher-port, the same on every node)" : "");
		else
			tool_warn("out of memory");
		goto out;
	}

	while (joined < c->nnodes - 1) {
		if (now_ms() >= until)
			break;
		nfds_t np = 0;
		pfd[np] = (struct pollfd){ .fd = sigfd, .events = POLLIN };
		who[np++] = NULL;
		pfd[np] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		who[np++] = NULL;
		size_t pending = 0;
		for (size_t i = 0; i < n->npeers; i++) {
			if (n->peers[i].fd < 0)
				continue;
			pending += n->peers[i].node < 0;
			pfd[np] = (struct pollfd){ .fd = n->peers[i].fd, .events = POLLIN };
			who[np++] = &n->peers[i];
		}
		if (pending >= MAX_PENDING)
			pfd[1].events = 0;
		int ready = poll(pfd, np, ms_left(until, 1000));
		if (ready < 0 && errno != EINTR) {
			tool_warn_errno("poll");
			goto out;
		}
		if (ready <= 0)
			continue;
		if (pfd[0].revents && (sig = stop_signal(sigfd)))
			goto out;
		if (pfd[1].revents & POLLIN) {
			int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
			if (fd >= 0) {
				/* peers may move: the slots point into the array */
				struct peer *old = n->peers;
				struct peer *p = add_peer(n, fd);
				if (!p) {
					close(fd);
				} else {
					if (old && old != n->peers)
						for (int k = 0; k < c->nnodes; k++)
							if (slots[k])
								slots[k] = n->peers + (slots[k] - old);
					keepalive(fd);
					peer_addr(fd, p->addr, sizeof p->addr);
				}
				continue;   /* the poll set refers to the old array */
			}
		}
		for (nfds_t i = 2; i < np; i++) {
			struct peer *p = who[i];
			if (!pfd[i].revents || p->fd < 0)
				continue;
			char line[LINE_MAX_LEN];
			bool eof = false;
			int got;
			while ((got = read_line(p, line, sizeof line, &eof)) == 1) {
				if (p->node < 0 && verb(line, "JOIN")) {
					if (check_join(n, p, line, slots) == 0) {
						joined++;
						if (isatty(2))   /* progress, on a terminal only */
							tool_warn("node %d of %d (host %s, %s) joined", p->node,
							          c->nnodes, p->host, p->addr);
					}
				}
				if (p->fd < 0)
					break;
			}
			if (got < 0 && p->fd >= 0) {
				if (p->node >= 0) {
					tool_warn("node %d (host %s, %s) left before the job started; waiting "
					          "for another launcher as node %d", p->node, p->host, p->addr,
					          p->node);
					slots[p->node] = NULL;
					p->node = -1;
					joined--;
				}
				close_peer(p);
			}
		}
	}

	if (joined < c->nnodes - 1) {
		char missing[512] = "";
		size_t off = 0;
		int nmiss = 0;
		for (int k = 1; k < c->nnodes; k++)
			if (!slots[k]) {
				nmiss++;
				if (off < sizeof missing - 16)
					off += snprintf(missing + off, sizeof missing - off, "%s%d",
					                off ? ", " : "", k);
			}
		char why[1024];
		snprintf(why, sizeof why, "node%s %s of %d did not join within %g s (--join-timeout): "
		         "no smddp-run --node-rank %s reached port %ld of host %s", nmiss > 1 ? "s" : "",
		         missing, c->nnodes, c->join_timeout_s, nmiss > 1 ? "N" : missing,
		         c->launcher_port, n->host);
		tool_warn("%s", why);
		/* also to those whose JOIN was not read yet: they came too late */
		for (size_t i = 0; i < n->npeers; i++)
			if (n->peers[i].fd >= 0)
				send_line(n->peers[i].fd, "STOP status=1 msg=%s", why);
		rc = 1;
		goto out;
	}
	/* everyone is here: the others go, the pending strangers go away */
	for (size_t i = 0; i < n->npeers; i++) {
		struct peer *p = &n->peers[i];
		if (p->fd >= 0 && p->node < 0)
			close_peer(p);
		else if (p->fd >= 0 && send_line(p->fd, "GO job=%s token=%s", n->job_id, n->token) < 0)
			tool_warn("node %d (host %s): cannot tell it to start", p->node, p->host);
	}
	rc = 0;
out:
	if (sig) {
		/* Ctrl-C on node 0: the nodes that came go too, and say why */
		for (size_t i = 0; i < n->npeers; i++)
			if (n->peers[i].fd >= 0)
				send_line(n->peers[i].fd, "STOP status=%d msg=node 0 (host %s) got "
				          "signal %d (%s) before the job started", 128 + sig, n->host, sig,
				          strsignal(sig));
	}
	if (lfd >= 0)
		close(lfd);
	free(slots);
	free(pfd);
	free(who);
	return sig ? -sig : rc;
}

/* ---- the other nodes -------------------------------------------------- */

/* One attempt to connect to node 0, within MS. -1 with ERR set. */
static int connect_once(const char *addr, long port, int ms, char *err, size_t errlen)
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

static void sleep_watching(int sigfd, int ms, int *sig)
{
	struct pollfd p = { .fd = sigfd, .events = POLLIN };
	if (poll(&p, 1, ms) > 0)
		*sig = stop_signal(sigfd);
}

static int join_as_other(struct nodes *n, const struct nodes_config *cfg, int sigfd)
{
	const struct nodes_config *c = &n->cfg;
	int64_t until = now_ms() + (int64_t)(c->join_timeout_s * 1000 + 0.5);
	char err[512] = "no attempt";
	int fd = -1, sig = 0;

	while (fd < 0) {
		if (now_ms() >= until) {
			tool_warn("node %d: node 0's launcher at %s did not answer within %g s "
			          "(--join-timeout): %s; start smddp-run --node-rank 0 there, or check "
			          "--master-addr and --launcher-port", c->node_rank, n->addr,
			          c->join_timeout_s, err);
			return 1;
		}
		fd = connect_once(cfg->master_addr, c->launcher_port, ms_left(until, CONNECT_TRY_MS),
		                  err, sizeof err);
		if (fd < 0) {
			sleep_watching(sigfd, ms_left(until, RETRY_MS), &sig);
			if (sig)
				return -sig;
		}
	}
	keepalive(fd);
	struct peer *p = add_peer(n, fd);
	if (!p) {
		close(fd);
		tool_warn("out of memory");
		return 1;
	}
	p->node = 0;
	peer_addr(fd, p->addr, sizeof p->addr);
	snprintf(p->host, sizeof p->host, "%s", cfg->master_addr);
	if (send_line(fd, "JOIN v=1 node=%d nnodes=%d nproc=%ld port=%ld host=%s job=%s token=%s",
	              c->node_rank, c->nnodes, c->nproc, c->master_port, n->host,
	              cfg->job_id ? cfg->job_id : "-", cfg->token ? cfg->token : "-") < 0) {
		tool_warn_errno("node %d: cannot talk to node 0's launcher at %s", c->node_rank,
		                n->addr);
		return 1;
	}

	/* Node 0 decides: GO when all are here, STOP when it gives up (by its
	 * own deadline, which ends before ours: it was running when we came). */
	int64_t joined_at = now_ms();
	int64_t go_until = joined_at + (int64_t)(c->join_timeout_s * 1000 + 0.5) + GO_MARGIN_MS;
	if (go_until < until + GO_MARGIN_MS)
		go_until = until + GO_MARGIN_MS;
	for (;;) {
		if (now_ms() >= go_until) {
			tool_warn("node %d: joined node 0's launcher at %s, which in %.0f s neither "
			          "started the job nor gave up (--join-timeout differs between the "
			          "nodes?)", c->node_rank, n->addr, (double)(go_until - joined_at) / 1000);
			return 1;
		}
		struct pollfd pf[2] = { { .fd = sigfd, .events = POLLIN }, { .fd = fd, .events = POLLIN } };
		int ready = poll(pf, 2, ms_left(go_until, 1000));
		if (ready <= 0)
			continue;
		if (pf[0].revents && (sig = stop_signal(sigfd)))
			return -sig;
		if (!pf[1].revents)
			continue;
		char line[LINE_MAX_LEN], msg[LINE_MAX_LEN];
		bool eof = false;
		int got;
		while ((got = read_line(p, line, sizeof line, &eof)) == 1) {
			if (verb(line, "GO")) {
				if (!field(line, "job", n->job_id, sizeof n->job_id) ||
				    !field(line, "token", n->token, sizeof n->token)) {
					tool_warn("node %d: node 0's launcher at %s sent a malformed start",
					          c->node_rank, n->addr);
					return 1;
				}
				return 0;
			}
			if (verb(line, "ERR") || verb(line, "STOP")) {
				if (!field(line, "msg", msg, sizeof msg))
					snprintf(msg, sizeof msg, "no reason given");
				tool_warn("node %d: node 0's launcher at %s %s: %s", c->node_rank, n->addr,
				          verb(line, "ERR") ? "refused this one" : "gave up", msg);
				int st = (int)field_long(line, "status", 1);
				return st > 0 && st < 256 ? st : 1;
			}
		}
		if (got < 0) {
			tool_warn("node %d: node 0's launcher at %s closed the connection before the "
			          "job started", c->node_rank, n->addr);
			return 1;
		}
	}
}

int nodes_join(const struct nodes_config *cfg, int sigfd, struct nodes **out,
               char job_id[NODES_ID_MAX], char token[NODES_TOKEN_MAX])
{
	struct nodes *n = nodes_new(cfg);
	int rc;

	*out = NULL;
	if (!n) {
		tool_warn("out of memory");
		return 1;
	}
	if (cfg->node_rank == 0) {
		if (cfg->job_id)
			snprintf(n->job_id, sizeof n->job_id, "%s", cfg->job_id);
		else
			random_hex(n->job_id, 12);
		if (cfg->token)
			snprintf(n->token, sizeof n->token, "%s", cfg->token);
		else
			random_hex(n->token, 32);
		if (isatty(2))
			tool_warn("node 0 of %d: waiting for the other nodes' launchers on port %ld (at "
			          "most %g s)", cfg->nnodes, cfg->launcher_port, cfg->join_timeout_s);
		rc = join_as_node0(n, sigfd);
	} else {
		rc = join_as_other(n, cfg, sigfd);
	}
	if (rc != 0) {
		nodes_free(n);
		return rc;
	}
	snprintf(job_id, NODES_ID_MAX, "%s", n->job_id);
	snprintf(token, NODES_TOKEN_MAX, "%s", n->token);
	*out = n;
	return 0;
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

static struct peer *peer_by_fd(struct nodes *n, int fd)
{
	for (size_t i = 0; i < n->npeers; i++)
		if (n->peers[i].fd == fd)
			return &n->peers[i];
	return NULL;
}

/* LINE's first word is V. (The dumps' own, so that they stay apart from
 * the parsing of the other messages.) */
static bool dump_verb(const char *line, const char *v)
{
	size_t n = strlen(v);
	return strncmp(line, v, n) == 0 && (line[n] == ' ' || line[n] == '\0');
}

/* Node 0: a line of the dumps protocol (nodes.h) goes to its reader. */
static bool take_dump(struct nodes *n, const struct peer *p, const char *line)
{
	if (n->cfg.node_rank != 0 || !(dump_verb(line, "DUMP") || dump_verb(line, "DUMPS")))
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
			send_line(p->fd, "STOP status=%d msg=%s", status, why);
	}
}

bool nodes_io(struct nodes *n, const struct pollfd *pfd, size_t count, int *status,
              char *why, size_t whylen)
{
	bool event = false;
	for (size_t i = 0; i < count; i++) {
		if (!pfd[i].revents)
			continue;
		struct peer *p = peer_by_fd(n, pfd[i].fd);
		if (!p)
			continue;
		char line[LINE_MAX_LEN], msg[LINE_MAX_LEN];
		bool eof = false;
		int got;
		while ((got = read_line(p, line, sizeof line, &eof)) == 1) {
			if (take_dump(n, p, line))
				continue;
			int st = (int)field_long(line, "status", 1);
			if (st < 0 || st > 255)
				st = 1;
			if (!field(line, "msg", msg, sizeof msg))
				msg[0] = '\0';
			if (n->cfg.node_rank == 0) {
				if (verb(line, "EXIT"))
					p->done = true;
				if (n->stopping || !(verb(line, "FAIL") || (verb(line, "EXIT") && st != 0)))
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
			} else if (verb(line, "STOP") && !n->stopping && !n->done_sent) {
				n->stopping = true;
				event = true;
				*status = st;
				snprintf(why, whylen, "%s", msg[0] ? msg : "node 0 says stop");
			}
		}
		if (got < 0) {
			close_peer(p);
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
	send_line(n->peers[0].fd, "FAIL status=%d msg=%s", status, msg);
}

void nodes_done(struct nodes *n, int status)
{
	if (n->cfg.node_rank == 0 || n->done_sent)
		return;
	n->done_sent = true;
	if (n->npeers && n->peers[0].fd >= 0)
		send_line(n->peers[0].fd, "EXIT status=%d", status);
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
		close_peer(&n->peers[i]);
	free(n->peers);
	free(n);
}

/* ---- the flight recorders' dumps (nodes.h) ----------------------------- */

void nodes_on_dump(struct nodes *n, nodes_dump_fn fn, void *ctx)
{
	n->dump_fn = fn;
	n->dump_ctx = ctx;
}

int nodes_send_dump(struct nodes *n, const char *name, const char *line, int64_t until_ms)
{
	if (n->cfg.node_rank == 0 || n->npeers == 0 || n->peers[0].fd < 0 || now_ms() >= until_ms)
		return -1;
	/* send_line waits up to a second per full socket buffer: node 0
	 * reads these as they come, also while its own ranks still run. */
	if (!name)
		return send_line(n->peers[0].fd, "DUMPS files=%s", line);
	return send_line(n->peers[0].fd, "DUMP file=%s msg=%s", name, line);
}

int nodes_wait_dumps(struct nodes *n, int sigfd, int64_t until_ms, bool (*all_in)(void *ctx))
{
	struct pollfd *pfd;
	size_t max = n->npeers + 1;
	int sig = 0;

	if (n->cfg.node_rank != 0 || !n->dump_fn || !(pfd = calloc(max, sizeof *pfd)))
		return 0;
	for (;;) {
		size_t k = 0;

		/* a node gone says nothing more (told again each round: the
		 * reader takes it once) */
		for (size_t i = 0; i < n->npeers; i++)
			if (n->peers[i].fd < 0 && n->peers[i].node > 0)
				n->dump_fn(n->dump_ctx, n->peers[i].node, NULL);
		if (all_in(n->dump_ctx) || now_ms() >= until_ms || sig) {
			free(pfd);
			return sig;
		}
		pfd[k++] = (struct pollfd){ .fd = sigfd, .events = POLLIN };
		k += nodes_pollfds(n, pfd + k, max - k);
		int ready = poll(pfd, k, ms_left(until_ms, 1000));
		if (ready < 0 && errno != EINTR) {
			free(pfd);
			return 0;
		}
		if (ready <= 0)
			continue;
		if (pfd[0].revents)
			sig = stop_signal(sigfd);
		for (size_t i = 1; i < k; i++) {
			struct peer *p = peer_by_fd(n, pfd[i].fd);
			char line[LINE_MAX_LEN];
			bool eof = false;
			int got;

			if (!pfd[i].revents || !p)
				continue;
			while ((got = read_line(p, line, sizeof line, &eof)) == 1)
				if (!take_dump(n, p, line) && dump_verb(line, "EXIT"))
					p->done = true;
			if (got < 0)
				close_peer(p);
		}
	}
}
