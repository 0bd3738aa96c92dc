/* cmd/run/nodes-join.c - the per-node launchers' admission: challenge, proof, checks */

/*
 * Node 0 admits the other nodes' launchers (HELLO, JOIN, GO in nodes.c's
 * table); a joiner admits node 0 in turn.
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
 * told on stderr at most WARN_BURST per WARN_WINDOW_MS. A joiner checks M0
 * and refuses a node 0 that cannot prove the token (a stranger posing as
 * node 0 would otherwise start its ranks). The
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
 * joined. The lines after GO (FAIL, DUMP, DUMPS, EXIT, STOP) are not
 * authenticated: they travel on the connections that were, and taking over
 * a TCP connection is beyond what this defends against.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>

#include "hash/sha256.h"
#include "run/nodes-int.h"

#define MAX_PENDING      64      /* connections that have not said who they are */
#define CONNECT_TRY_MS   3000    /* one connection attempt */
#define RETRY_MS         250     /* between attempts */
#define GO_MARGIN_MS     10000   /* a joined node waits this much past node 0's deadline */
#define HELLO_MIN_MS     5000    /* a joiner waits at least this much for node 0's HELLO */
#define ANSWER_MS        10000   /* node 0 waits this much for a JOIN after its HELLO */
#define WARN_BURST       5       /* refusals told on stderr per WARN_WINDOW_MS ... */
#define WARN_WINDOW_MS   10000   /* ... so that a scanner or a retrying node cannot flood it */

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
			uint64_t x = (uint64_t)sd_now_ms() * 6364136223846793005ull ^ (uint64_t)getpid();
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
	int64_t t = sd_now_ms();
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

/* ---- node 0 ------------------------------------------------------------- */

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
	nodes_send_line(p->fd, "ERR status=2 msg=%s", why);
	nodes_close_peer(p);
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
			nodes_send_line(p->fd, "STOP status=%d msg=%s", status, why);
		else
			nodes_send_line(p->fd, "STOP status=%d msg=node 0 stopped before this launcher "
			          "proved the job token", status);
	}
}

/* GO: with a token given, node 0's proof, and no token (the node has it);
 * else the token node 0 made, which the node cannot have. */
static int send_go(struct nodes *n, const struct peer *p)
{
	char go[NODES_ID_MAX + 16], mac[NODES_HEX + 1];
	if (!n->cfg.token_given)
		return nodes_send_line(p->fd, "GO job=%s token=%s", n->job_id, n->token);
	snprintf(go, sizeof go, "GO job=%s", n->job_id);
	line_mac(n->token, "go", p->nonce0, p->nonce1, go, strlen(go), mac);
	return nodes_send_line(p->fd, "%s mac=%s", go, mac);
}

/* A connection that took the challenge and holds its place in silence
 * goes, so that MAX_PENDING of them cannot lock the launchers out until
 * the deadline. */
static void drop_silent(struct nodes *n)
{
	for (size_t i = 0; i < n->npeers; i++) {
		struct peer *p = &n->peers[i];
		if (p->fd >= 0 && p->node < 0 && sd_now_ms() - p->since >= ANSWER_MS) {
			warn_limited(n, "node 0: closed a connection from %s that did not answer "
			             "the challenge within %d s", p->addr, ANSWER_MS / 1000);
			nodes_close_peer(p);
		}
	}
}

/* A new connection on node 0's port: it gets the challenge before
 * anything else, since nothing of the job goes to a connection that has
 * not answered it.  1: a connection was taken (n->peers may have moved,
 * and slots with it); 0: none; -1: a failure that ends the join. */
static int accept_launcher(struct nodes *n, int lfd, struct peer **slots)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return 0;
	/* peers may move: the slots point into the array */
	struct peer *old = n->peers;
	struct peer *p = nodes_add_peer(n, fd);
	if (!p) {
		close(fd);
		return 1;
	}
	if (old && old != n->peers)
		for (int k = 0; k < n->cfg.nnodes; k++)
			if (slots[k])
				slots[k] = n->peers + (slots[k] - old);
	nodes_keepalive(fd);
	nodes_peer_addr(fd, p->addr, sizeof p->addr);
	p->since = sd_now_ms();
	if (!random_nonce(p->nonce0)) {
		tool_warn_errno("node 0: no random numbers for the challenge (getrandom)");
		nodes_close_peer(p);
		return -1;
	}
	if (nodes_send_line(fd, "HELLO v=%d nonce=%s", NODES_PROTO, p->nonce0) < 0)
		nodes_close_peer(p);
	return 1;
}

/* What a connection said: its JOIN, checked (check_join), or its leaving.
 * Returns the change in the number of nodes joined (1, -1 or 0). */
static int read_launcher(struct nodes *n, struct peer *p, struct peer **slots)
{
	char line[LINE_MAX_LEN];
	bool eof = false;
	int got, joined = 0;
	while ((got = nodes_read_line(p, line, sizeof line, &eof)) == 1) {
		if (p->node >= 0)
			continue;   /* a joined node has nothing to say before GO */
		struct nodes_msg m;
		const char *bad = nodes_parse_line(line, &m);
		if (bad || m.verb != NODES_JOIN) {
			/* not a launcher: a scanner, a health check, a typo'd port */
			warn_limited(n, "node 0: closed a connection from %s that is no "
			             "launcher: its first line is not a JOIN (%s)", p->addr,
			             bad ? bad : "another message");
			nodes_close_peer(p);
			break;
		}
		if (check_join(n, p, &m, line, slots) == 0) {
			joined++;
			if (isatty(2))   /* progress, on a terminal only */
				tool_warn("node %d of %d (host %s, %s) joined", p->node,
				          n->cfg.nnodes, p->host, p->addr);
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
		nodes_close_peer(p);
	}
	return joined;
}

/* The deadline passed: say which nodes did not join (and which
 * connections never answered), here and to every launcher connected. */
static void report_missing(struct nodes *n, struct peer **slots)
{
	const struct nodes_config *c = &n->cfg;
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
}

static int join_as_node0(struct nodes *n, int sigfd)
{
	const struct nodes_config *c = &n->cfg;
	int64_t until = sd_now_ms() + (int64_t)(c->join_timeout_s * 1000 + 0.5);
	struct peer **slots = calloc(c->nnodes, sizeof *slots);
	struct pollfd *pfd = calloc(2 + MAX_PENDING + c->nnodes, sizeof *pfd);
	struct peer **who = calloc(2 + MAX_PENDING + c->nnodes, sizeof *who);
	int joined = 0, rc = 1, sig = 0;

	int lfd = nodes_listen_on(c->launcher_port);
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
		if (sd_now_ms() >= until)
			break;
		drop_silent(n);
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
		if (pfd[0].revents && (sig = nodes_stop_signal(sigfd)))
			goto out;
		if (pfd[1].revents & POLLIN) {
			int a = accept_launcher(n, lfd, slots);
			if (a < 0)
				goto out;
			if (a > 0)
				continue;   /* the poll set refers to the old array */
		}
		for (nfds_t i = 2; i < np; i++)
			if (pfd[i].revents && who[i]->fd >= 0)
				joined += read_launcher(n, who[i], slots);
	}

	if (joined < c->nnodes - 1) {
		report_missing(n, slots);
		rc = 1;
		goto out;
	}
	/* everyone is here: the others go, the pending strangers go away */
	for (size_t i = 0; i < n->npeers; i++) {
		struct peer *p = &n->peers[i];
		if (p->fd >= 0 && p->node < 0)
			nodes_close_peer(p);
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

static void sleep_watching(int sigfd, int ms, int *sig)
{
	struct pollfd p = { .fd = sigfd, .events = POLLIN };
	if (poll(&p, 1, ms) > 0)
		*sig = nodes_stop_signal(sigfd);
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
	int64_t until = sd_now_ms() + (int64_t)(c->join_timeout_s * 1000 + 0.5);
	char err[512] = "no attempt";
	int fd = -1, sig = 0;

	while (fd < 0) {
		if (sd_now_ms() >= until) {
			tool_warn("node %d: node 0's launcher at %s did not answer within %g s "
			          "(--join-timeout): %s; start smddp-run --node-rank 0 there, or check "
			          "--master-addr and --launcher-port", c->node_rank, n->addr,
			          c->join_timeout_s, err);
			return 1;
		}
		fd = nodes_connect_once(cfg->master_addr, c->launcher_port, ms_left(until, CONNECT_TRY_MS),
		                  err, sizeof err);
		if (fd < 0) {
			sleep_watching(sigfd, ms_left(until, RETRY_MS), &sig);
			if (sig)
				return -sig;
		}
	}
	nodes_keepalive(fd);
	struct peer *p = nodes_add_peer(n, fd);
	if (!p) {
		close(fd);
		tool_warn("out of memory");
		return 1;
	}
	p->node = 0;
	nodes_peer_addr(fd, p->addr, sizeof p->addr);
	snprintf(p->host, sizeof p->host, "%s", cfg->master_addr);

	/* Node 0 challenges at once (HELLO); then JOIN with our answer, and
	 * node 0 decides: GO, with its own proof, when all are here; STOP when
	 * it gives up (by its own deadline, which ends before ours: it was
	 * running when we came). A node 0 that never challenges is an older
	 * smddp-run (v1 waited for the JOIN) or no launcher at all. */
	int64_t connected_at = sd_now_ms();
	int64_t hello_until = until > connected_at + HELLO_MIN_MS ? until : connected_at + HELLO_MIN_MS;
	int64_t joined_at = 0, go_until = 0;
	bool sent_join = false;
	char nonce1[NODES_HEX + 1];
	for (;;) {
		int64_t deadline = sent_join ? go_until : hello_until;
		if (sd_now_ms() >= deadline && !sent_join) {
			tool_warn("node %d: node 0's launcher at %s took the connection but sent no "
			          "challenge within %.0f s: an older smddp-run there (use the same "
			          "smddp-run version on every node), or not smddp-run at all (check "
			          "--master-addr and --launcher-port)", c->node_rank, n->addr,
			          (double)(hello_until - connected_at) / 1000);
			return 1;
		}
		if (sd_now_ms() >= deadline) {
			tool_warn("node %d: joined node 0's launcher at %s, which in %.0f s neither "
			          "started the job nor gave up (--join-timeout differs between the "
			          "nodes?)", c->node_rank, n->addr, (double)(go_until - joined_at) / 1000);
			return 1;
		}
		struct pollfd pf[2] = { { .fd = sigfd, .events = POLLIN }, { .fd = fd, .events = POLLIN } };
		int ready = poll(pf, 2, ms_left(deadline, 1000));
		if (ready <= 0)
			continue;
		if (pf[0].revents && (sig = nodes_stop_signal(sigfd)))
			return -sig;
		if (!pf[1].revents)
			continue;
		char line[LINE_MAX_LEN];
		bool eof = false;
		int got;
		while ((got = nodes_read_line(p, line, sizeof line, &eof)) == 1) {
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
				nodes_clean_line(join, strlen(join));   /* what we sign is what goes */
				if (cfg->token)
					line_mac(cfg->token, "join", m.nonce, nonce1, join, strlen(join), mac);
				snprintf(p->nonce0, sizeof p->nonce0, "%s", m.nonce);
				if (nodes_send_line(fd, "%s mac=%s", join, mac) < 0) {
					tool_warn_errno("node %d: cannot talk to node 0's launcher at %s",
					                c->node_rank, n->addr);
					return 1;
				}
				sent_join = true;
				joined_at = sd_now_ms();
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
