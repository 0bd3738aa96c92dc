/* cmd/run/nodes.c - the launchers' own rendezvous in smddp-run's per-node mode */

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
 *                          EXIT status=S             (its ranks are over)
 *            0 -> node I   STOP status=S msg=...     (a failure anywhere: stop)
 *
 * One text line per message, fields "key=value" without blanks, the free
 * text last; nodes-line.c parses them, strictly. No rank starts before
 * every node has joined, so a node that never comes is named by node 0
 * after --join-timeout instead of leaving the other ranks hanging in their
 * rendezvous; and the job id (and the token, when node 0 made it) reach
 * every node with GO.
 *
 * Admission (protocol v2), as the ranks' rendezvous does it
 * (lib/bootstrap/bootstrap.c). With SMDDP_JOB_TOKEN on every node the
 * token never travels: N0 and N1 are fresh random nonces (32 bytes, hex),
 *   M1 = HMAC-SHA-256(token, "smddp-nodes-2 join" N0 N1 JOIN-line-before-mac)
 *   M0 = HMAC-SHA-256(token, "smddp-nodes-2 go"   N0 N1 "GO job=ID")
 * (lib/hash/sha256.c). Node 0 checks M1, in constant time, before any
 * field that concerns the job, so a launcher without the token learns
 * nothing of it (its id, node 0's sizes and ports, the other hosts): only
 * that it was refused, and, if it has no token at all, node 0's host name
 * (in the one line that tells it to set SMDDP_JOB_TOKEN). When node 0
 * gives up before GO, an unproved connection is not told why. A
 * connection that has not answered within ANSWER_MS is closed, so that
 * MAX_PENDING silent ones cannot lock the launchers out, and refusals are
 * told on stderr at most WARN_BURST per WARN_WINDOW_MS. A joiner checks M0 and refuses a node 0 that cannot prove the
 * token (a stranger posing as node 0 would otherwise start its ranks). The
 * labels differ, so neither MAC can be reflected; the nonces are fresh, so
 * neither replayed. What a joiner sends in its JOIN (its own host name,
 * sizes and job id, never the token) does reach a node 0 that has not
 * proved itself yet: that is the price of a two-message handshake, and
 * none of it is secret.
 *
 * Without SMDDP_JOB_TOKEN node 0 makes the token, and it has to reach the
 * other nodes, in clear, in GO, after they joined. That keeps concurrent
 * jobs apart and a stray launcher (a wrong --master-addr, another job's
 * node) out, not a listener on the wire, who reads the token and can then
 * join the ranks' rendezvous: on a network you do not trust, set
 * SMDDP_JOB_TOKEN (smddp(7)). Node 0 stops listening once everyone has
 * joined. The lines after GO (FAIL, EXIT, STOP) are not authenticated:
 * they travel on the connections that were, and taking over a TCP
 * connection is beyond what this defends against.
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
#include "hash/sha256.h"
#include "run/nodes.h"
#include "run/nodes-line.h"

#define LINE_MAX_LEN     NODES_LINE_MAX
#define MAX_PENDING      64      /* connections that have not said who they are */
#define CONNECT_TRY_MS   3000    /* one connection attempt */
#define RETRY_MS         250     /* between attempts */
#define GO_MARGIN_MS     10000   /* a joined node waits this much past node 0's deadline */
#define HELLO_MIN_MS     5000    /* a joiner waits at least this much for node 0's HELLO */
#define ANSWER_MS        10000   /* node 0 waits this much for a JOIN after its HELLO */
#define WARN_BURST       5       /* refusals told on stderr per WARN_WINDOW_MS ... */
#define WARN_WINDOW_MS   10000   /* ... so that a scanner or a retrying node cannot flood it */

struct peer {
	int fd;                 /* -1: closed */
	int node;               /* -1: has not joined */
	bool done;              /* sent EXIT */
	int64_t since;          /* node 0: when it connected */
	char nonce0[NODES_HEX + 1];   /* node 0's challenge to it ("" before HELLO) */
	char nonce1[NODES_HEX + 1];   /* its own, from its JOIN */
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
	int64_t warn_since;     /* the current window of refusal warnings */
	int warned, unshown;    /* in it: told, and not told */
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

/* A nonce for the challenge: from the kernel's random numbers only (a
 * guessable one could be answered in advance). false without them. */
static bool random_nonce(char out[NODES_HEX + 1])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char b[NODES_HEX / 2];
	size_t got = 0;
	while (got < sizeof b) {
		ssize_t r = getrandom(b + got, sizeof b - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		got += r;
	}
	for (size_t i = 0; i < NODES_HEX; i++)
		out[i] = digits[(b[i / 2] >> (i % 2 ? 0 : 4)) & 0xf];
	out[NODES_HEX] = '\0';
	return true;
}

/* HMAC-SHA-256 keyed by TOKEN over LABEL (with its '\0'), both nonces and
 * TEXT[0, LEN), in hex. */
static void line_mac(const char *token, const char *label, const char *n0, const char *n1,
                     const char *text, size_t len, char out[NODES_HEX + 1])
{
	static const char digits[] = "0123456789abcdef";
	struct sd_hmac_sha256 m;
	uint8_t d[SD_SHA256_LEN];
	sd_hmac_sha256_init(&m, token, strlen(token));
	sd_hmac_sha256_update(&m, "smddp-nodes-2 ", 14);
	sd_hmac_sha256_update(&m, label, strlen(label) + 1);
	sd_hmac_sha256_update(&m, n0, NODES_HEX);
	sd_hmac_sha256_update(&m, n1, NODES_HEX);
	sd_hmac_sha256_update(&m, text, len);
	sd_hmac_sha256_final(&m, d);
	for (size_t i = 0; i < NODES_HEX; i++)
		out[i] = digits[(d[i / 2] >> (i % 2 ? 0 : 4)) & 0xf];
	out[NODES_HEX] = '\0';
}

/* Whether MAC (64 hex, from the peer) is the one expected, in constant time. */
static bool mac_ok(const char *want, const char *mac)
{
	return strlen(mac) == NODES_HEX && sd_memeq_ct(want, mac, NODES_HEX);
}

/* A refusal or a stranger, on stderr: at most WARN_BURST per window, then
 * how many were not shown. */
TOOL_PRINTF(2, 3) static void warn_limited(struct nodes *n, const char *fmt, ...)
{
	int64_t t = now_ms();
	if (t - n->warn_since >= WARN_WINDOW_MS) {
		if (n->unshown)
			tool_warn("(%d more refused connection%s not shown)", n->unshown,
			          n->unshown == 1 ? "" : "s");
		n->warn_since = t;
		n->warned = n->unshown = 0;
	}
	if (n->warned >= WARN_BURST) {
		n->unshown++;
		return;
	}
	n->warned++;
	char msg[LINE_MAX_LEN];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	tool_warn("%s", msg);
}

/* ---- lines ------------------------------------------------------------ */

/* One line, and nothing the peer's parser refuses (a host name or a
 * message may hold anything). */
static void clean_line(char *line, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (line[i] == '\n' || line[i] == '\r' || line[i] == '\t')
			line[i] = ' ';
		else if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
			line[i] = '?';
}

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
	clean_line(line, (size_t)n);
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

/* Checks a JOIN (M, parsed from LINE): first the proof of the token, then
 * the rest, so that a launcher without the token is told nothing of the
 * job. On refusal, says why to both sides and returns its status. */
static int check_join(struct nodes *n, struct peer *p, const struct nodes_msg *m,
                      const char *line, struct peer **slots)
{
	const struct nodes_config *c = &n->cfg;
	const unsigned need = NODES_F_V | NODES_F_NODE | NODES_F_NNODES | NODES_F_NPROC |
	                      NODES_F_PORT | NODES_F_HOST | NODES_F_NONCE | NODES_F_MAC;
	char why[1024];
	long v = m->v, node = m->node, nnodes = m->nnodes, nproc = m->nproc, port = m->port;
	const char *host = m->have & NODES_F_HOST ? m->host : "?";
	const char *job = m->have & NODES_F_JOB ? m->job : "-";
	bool has_mac = (m->have & NODES_F_MAC) && strcmp(m->mac, "-") != 0;
	/* v1 sent the token itself */
	bool has_token = has_mac || ((m->have & NODES_F_TOKEN) && strcmp(m->token, "-") != 0);

	snprintf(p->host, sizeof p->host, "%s", host);
	why[0] = '\0';
	if (v >= 1 && v < NODES_PROTO)
		snprintf(why, sizeof why, "node %ld (host %s, %s) runs an older smddp-run (launcher "
		         "protocol v%ld, node 0 speaks v%d): use the same smddp-run version on every "
		         "node", node, host, p->addr, v, NODES_PROTO);
	else if (v > NODES_PROTO)
		snprintf(why, sizeof why, "node %ld (host %s, %s) runs a newer smddp-run (launcher "
		         "protocol v%ld, node 0 speaks v%d): use the same smddp-run version on every "
		         "node", node, host, p->addr, v, NODES_PROTO);
	else if (v != NODES_PROTO)
		snprintf(why, sizeof why, "a launcher on %s (host %s) speaks another protocol: "
		         "run the same smddp-run version on every node", p->addr, host);
	else if ((m->have & need) != need || strcmp(m->nonce, p->nonce0) == 0)
		snprintf(why, sizeof why, "a launcher on %s (host %s) sent a malformed JOIN: is it "
		         "smddp-run, of the same version?", p->addr, host);
	else if (c->token_given && !has_mac)
		snprintf(why, sizeof why, "node %ld (host %s, %s) has no job token but node 0 "
		         "(host %s) has: set the same SMDDP_JOB_TOKEN on every node", node, host,
		         p->addr, n->host);
	else if (!c->token_given && has_token)
		snprintf(why, sizeof why, "node %ld (host %s, %s) has a job token (SMDDP_JOB_TOKEN) "
		         "but node 0 (host %s) has none: set it on every node or on none", node,
		         host, p->addr, n->host);
	if (!why[0] && c->token_given) {
		char want[NODES_HEX + 1];
		line_mac(n->token, "join", p->nonce0, m->nonce, line, m->signed_len, want);
		if (!mac_ok(want, m->mac))
			snprintf(why, sizeof why, "node %ld (host %s, %s) presented a wrong job token: "
			         "SMDDP_JOB_TOKEN differs between the nodes", node, host, p->addr);
	}
	/* from here on the launcher has proved the token, or there is none */
	if (why[0])
		;
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
	if (!why[0]) {
		p->node = (int)node;
		snprintf(p->nonce1, sizeof p->nonce1, "%s", m->nonce);
		slots[node] = p;
		return 0;
	}
	warn_limited(n, "refused a launcher: %s", why);
	send_line(p->fd, "ERR status=2 msg=%s", why);
	close_peer(p);
	return 2;
}

/* Before GO: STOP to every connection. With a token, one that has not
 * proved it learns only that node 0 stopped: the reason names hosts,
 * sizes and ports, which are the job's. */
static void stop_joining(struct nodes *n, int status, const char *why)
{
	for (size_t i = 0; i < n->npeers; i++) {
		const struct peer *p = &n->peers[i];
		if (p->fd < 0)
			continue;
		if (p->node >= 0 || !n->cfg.token_given)
			send_line(p->fd, "STOP status=%d msg=%s", status, why);
		else
			send_line(p->fd, "STOP status=%d msg=node 0 stopped before this launcher "
			          "proved the job token", status);
	}
}

/* GO: with a token given, node 0's proof, and no token (the node has it);
 * else the token node 0 made, which the node cannot have. */
static int send_go(struct nodes *n, const struct peer *p)
{
	char go[NODES_ID_MAX + 16], mac[NODES_HEX + 1];
	if (!n->cfg.token_given)
		return send_line(p->fd, "GO job=%s token=%s", n->job_id, n->token);
	snprintf(go, sizeof go, "GO job=%s", n->job_id);
	line_mac(n->token, "go", p->nonce0, p->nonce1, go, strlen(go), mac);
	return send_line(p->fd, "%s mac=%s", go, mac);
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
		/* a connection that took the challenge and holds its place in
		 * silence goes, so that MAX_PENDING of them cannot lock the
		 * launchers out until the deadline */
		for (size_t i = 0; i < n->npeers; i++) {
			struct peer *p = &n->peers[i];
			if (p->fd >= 0 && p->node < 0 && now_ms() - p->since >= ANSWER_MS) {
				warn_limited(n, "node 0: closed a connection from %s that did not answer "
				             "the challenge within %d s", p->addr, ANSWER_MS / 1000);
				close_peer(p);
			}
		}
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
					p->since = now_ms();
					/* the challenge, before anything else: nothing of the
					 * job goes to a connection that has not answered it */
					if (!random_nonce(p->nonce0)) {
						tool_warn_errno("node 0: no random numbers for the challenge "
						                "(getrandom)");
						close_peer(p);
						goto out;
					}
					if (send_line(fd, "HELLO v=%d nonce=%s", NODES_PROTO, p->nonce0) < 0)
						close_peer(p);
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
				if (p->node >= 0)
					continue;   /* a joined node has nothing to say before GO */
				struct nodes_msg m;
				const char *bad = nodes_parse_line(line, &m);
				if (bad || m.verb != NODES_JOIN) {
					/* not a launcher: a scanner, a health check, a typo'd port */
					warn_limited(n, "node 0: closed a connection from %s that is no "
					             "launcher: its first line is not a JOIN (%s)", p->addr,
					             bad ? bad : "another message");
					close_peer(p);
					break;
				}
				if (check_join(n, p, &m, line, slots) == 0) {
					joined++;
					if (isatty(2))   /* progress, on a terminal only */
						tool_warn("node %d of %d (host %s, %s) joined", p->node,
						          c->nnodes, p->host, p->addr);
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
		/* connections that took the challenge and never answered: a
		 * launcher that is stuck, or not a launcher */
		char silent[256] = "";
		int nsilent = 0;
		for (size_t i = 0; i < n->npeers; i++)
			if (n->peers[i].fd >= 0 && n->peers[i].node < 0 && nsilent++ == 0)
				snprintf(silent, sizeof silent, "%s", n->peers[i].addr);
		char why[1024];
		int off2 = snprintf(why, sizeof why, "node%s %s of %d did not join within %g s "
		                    "(--join-timeout): no smddp-run --node-rank %s reached port %ld of "
		                    "host %s", nmiss > 1 ? "s" : "", missing, c->nnodes,
		                    c->join_timeout_s, nmiss > 1 ? "N" : missing, c->launcher_port,
		                    n->host);
		if (nsilent && off2 > 0 && (size_t)off2 < sizeof why)
			snprintf(why + off2, sizeof why - off2, " (%d connection%s, from %s%s, took the "
			         "challenge but never answered it)", nsilent, nsilent == 1 ? "" : "s",
			         silent, nsilent > 1 ? " and others" : "");
		tool_warn("%s", why);
		/* also to those whose JOIN was not read yet: they came too late */
		stop_joining(n, 1, why);
		rc = 1;
		goto out;
	}
	/* everyone is here: the others go, the pending strangers go away */
	for (size_t i = 0; i < n->npeers; i++) {
		struct peer *p = &n->peers[i];
		if (p->fd >= 0 && p->node < 0)
			close_peer(p);
		else if (p->fd >= 0 && send_go(n, p) < 0)
			tool_warn("node %d (host %s): cannot tell it to start", p->node, p->host);
	}
	rc = 0;
out:
	if (sig) {
		/* Ctrl-C on node 0: the nodes that came go too, and say why */
		char why[512];
		snprintf(why, sizeof why, "node 0 (host %s) got signal %d (%s) before the job "
		         "started", n->host, sig, strsignal(sig));
		stop_joining(n, 128 + sig, why);
	}
	if (n->unshown)
		tool_warn("(%d more refused connection%s not shown)", n->unshown,
		          n->unshown == 1 ? "" : "s");
	n->unshown = 0;
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

/* Node 0's GO (M, parsed from LINE): with our own token, node 0 must prove
 * it knows it too; else GO brings the token node 0 made. 0, or the exit
 * status after saying why. */
static int take_go(struct nodes *n, const struct nodes_config *cfg, const struct peer *p,
                   const char *nonce1, const struct nodes_msg *m, const char *line)
{
	const struct nodes_config *c = &n->cfg;
	if (!(m->have & NODES_F_JOB) || strcmp(m->job, "-") == 0) {
		tool_warn("node %d: node 0's launcher at %s sent a malformed start (no job id)",
		          c->node_rank, n->addr);
		return 1;
	}
	if (cfg->token) {
		char want[NODES_HEX + 1];
		bool proved = false;
		if ((m->have & NODES_F_MAC) && !(m->have & NODES_F_TOKEN)) {
			line_mac(cfg->token, "go", p->nonce0, nonce1, line, m->signed_len, want);
			proved = mac_ok(want, m->mac);
		}
		if (!proved) {
			tool_warn("node %d: node 0's launcher at %s could not prove that it knows the "
			          "job token: refused it (is it smddp-run's node 0 of this job, with the "
			          "same SMDDP_JOB_TOKEN?)", c->node_rank, n->addr);
			return 2;
		}
		snprintf(n->token, sizeof n->token, "%s", cfg->token);
	} else {
		if (!(m->have & NODES_F_TOKEN) || strcmp(m->token, "-") == 0) {
			tool_warn("node %d: node 0's launcher at %s sent a malformed start (no job "
			          "token)", c->node_rank, n->addr);
			return 1;
		}
		snprintf(n->token, sizeof n->token, "%s", m->token);
	}
	snprintf(n->job_id, sizeof n->job_id, "%s", m->job);
	return 0;
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

	/* Node 0 challenges at once (HELLO); then JOIN with our answer, and
	 * node 0 decides: GO, with its own proof, when all are here; STOP when
	 * it gives up (by its own deadline, which ends before ours: it was
	 * running when we came). A node 0 that never challenges is an older
	 * smddp-run (v1 waited for the JOIN) or no launcher at all. */
	int64_t connected_at = now_ms();
	int64_t hello_until = until > connected_at + HELLO_MIN_MS ? until : connected_at + HELLO_MIN_MS;
	int64_t joined_at = 0, go_until = 0;
	bool sent_join = false;
	char nonce1[NODES_HEX + 1];
	for (;;) {
		int64_t deadline = sent_join ? go_until : hello_until;
		if (now_ms() >= deadline && !sent_join) {
			tool_warn("node %d: node 0's launcher at %s took the connection but sent no "
			          "challenge within %.0f s: an older smddp-run there (use the same "
			          "smddp-run version on every node), or not smddp-run at all (check "
			          "--master-addr and --launcher-port)", c->node_rank, n->addr,
			          (double)(hello_until - connected_at) / 1000);
			return 1;
		}
		if (now_ms() >= deadline) {
			tool_warn("node %d: joined node 0's launcher at %s, which in %.0f s neither "
			          "started the job nor gave up (--join-timeout differs between the "
			          "nodes?)", c->node_rank, n->addr, (double)(go_until - joined_at) / 1000);
			return 1;
		}
		struct pollfd pf[2] = { { .fd = sigfd, .events = POLLIN }, { .fd = fd, .events = POLLIN } };
		int ready = poll(pf, 2, ms_left(deadline, 1000));
		if (ready <= 0)
			continue;
		if (pf[0].revents && (sig = stop_signal(sigfd)))
			return -sig;
		if (!pf[1].revents)
			continue;
		char line[LINE_MAX_LEN];
		bool eof = false;
		int got;
		while ((got = read_line(p, line, sizeof line, &eof)) == 1) {
			struct nodes_msg m;
			const char *bad = nodes_parse_line(line, &m);
			if (bad) {
				tool_warn("node %d: node 0's launcher at %s sent a malformed line (%s): is it "
				          "smddp-run, of the same version?", c->node_rank, n->addr, bad);
				return 1;
			}
			if (m.verb == NODES_ERR || m.verb == NODES_STOP) {
				tool_warn("node %d: node 0's launcher at %s %s: %s", c->node_rank, n->addr,
				          m.verb == NODES_ERR ? "refused this one" : "gave up",
				          m.have & NODES_F_MSG ? m.msg : "no reason given");
				return m.status > 0 && m.status < 256 ? (int)m.status : 1;
			}
			if (m.verb == NODES_HELLO && !sent_join) {
				if (m.v != NODES_PROTO || !(m.have & NODES_F_NONCE)) {
					tool_warn("node %d: node 0's launcher at %s speaks launcher protocol "
					          "v%ld, this smddp-run v%d: use the same smddp-run version on "
					          "every node", c->node_rank, n->addr, m.v, NODES_PROTO);
					return 2;
				}
				if (!random_nonce(nonce1)) {
					tool_warn_errno("node %d: no random numbers for the challenge (getrandom)",
					                c->node_rank);
					return 1;
				}
				char join[LINE_MAX_LEN], mac[NODES_HEX + 1] = "-";
				snprintf(join, sizeof join, "JOIN v=%d node=%d nnodes=%d nproc=%ld port=%ld "
				         "host=%s job=%s nonce=%s", NODES_PROTO, c->node_rank, c->nnodes,
				         c->nproc, c->master_port, n->host, cfg->job_id ? cfg->job_id : "-",
				         nonce1);
				clean_line(join, strlen(join));   /* what we sign is what goes */
				if (cfg->token)
					line_mac(cfg->token, "join", m.nonce, nonce1, join, strlen(join), mac);
				snprintf(p->nonce0, sizeof p->nonce0, "%s", m.nonce);
				if (send_line(fd, "%s mac=%s", join, mac) < 0) {
					tool_warn_errno("node %d: cannot talk to node 0's launcher at %s",
					                c->node_rank, n->addr);
					return 1;
				}
				sent_join = true;
				joined_at = now_ms();
				go_until = joined_at + (int64_t)(c->join_timeout_s * 1000 + 0.5) + GO_MARGIN_MS;
				if (go_until < until + GO_MARGIN_MS)
					go_until = until + GO_MARGIN_MS;
				continue;
			}
			if (m.verb == NODES_GO && sent_join)
				return take_go(n, cfg, p, nonce1, &m, line);
			if (m.verb == NODES_GO || m.verb == NODES_HELLO) {
				tool_warn("node %d: node 0's launcher at %s sent %s out of turn: is it "
				          "smddp-run, of the same version?", c->node_rank, n->addr,
				          m.verb == NODES_GO ? "GO" : "HELLO");
				return 2;
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
			struct nodes_msg m;
			if (take_dump(n, p, line))
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
