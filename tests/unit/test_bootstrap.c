/* test_bootstrap.c - multi-process tests of the TCP rendezvous and out-of-band channel.
 *
 * Each scenario forks its processes (ranks, impostors, strangers) on
 * 127.0.0.1 with a fresh port; every child runs under alarm() and says
 * what it checks; the parent reaps every child, kills the stragglers of a
 * scenario past its time limit, and fails when any child failed.  The one
 * slow scenario (a stranger that stays silent for the whole 5 s hello limit)
 * runs in the background while the others run.
 *
 * This file: the helpers and the runner; the scenarios are in
 * test_bootstrap_world.c, test_bootstrap_strangers.c and
 * test_bootstrap_faults.c.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/sd.h"
#include "bootstrap/bootstrap.h"
#include "test_bootstrap.h"

void say(struct ctx *c, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = snprintf(line, sizeof(line), "[%s %s] ", c->scen, c->who);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	printf("%s\n", line);
	fflush(stdout);
}

void msleep(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

struct sd_boot_params params(struct ctx *c, int rank, int size, const char *token, unsigned deadline_ms)
{
	static char hostid[SD_HOSTID_MAX];
	struct sd_boot_params p;

	snprintf(hostid, sizeof(hostid), "host-%d", rank);
	p.rank = rank;
	p.size = size;
	p.addr = c->addr;
	p.port = c->port;
	p.token = token;
	p.allow_no_token = 0;
	p.hostid = hostid;
	p.deadline_ns = sd_now_ns() + deadline_ms * MS;
	p.listen_fd = -1;
	return p;
}

/* Rendezvous as rank/size and check what every rank must agree on. */
struct sd_boot *join(struct ctx *c, int rank, int size, unsigned deadline_ms)
{
	struct sd_boot_params p = params(c, rank, size, "job-secret", deadline_ms);
	struct sd_boot_peer *peers = calloc((size_t)size, sizeof(*peers));
	struct sd_boot *b = NULL;
	uint64_t nonce = 0;
	struct sd_err err = {""};
	int rc, ok = 1;

	snprintf(c->who, sizeof(c->who), "rank %d/%d", rank, size);
	rc = sd_boot_init(&p, &b, peers, &nonce, &err);
	CHECK(c, rc == SMDDP_OK && b, "rendezvous succeeds (rc %d: %s)", rc, err.msg);
	if (rc) {
		free(peers);
		return NULL;
	}
	for (int r = 0; r < size; r++) {
		char want[32];

		snprintf(want, sizeof(want), "host-%d", r);
		if (strcmp(peers[r].hostid, want) || peers[r].pid <= 0)
			ok = 0;
	}
	CHECK(c, ok, "peers[] has every rank's host id and a pid");
	CHECK(c, peers[rank].pid == getpid(), "peers[self].pid is my pid");

	/* Everyone has the same nonce and the same table. */
	struct {
		uint64_t nonce;
		int32_t pid;
		int32_t pad;
	} mine = {nonce, getpid(), 0}, *all = calloc((size_t)size, sizeof(mine));
	rc = sd_boot_allgather(b, &mine, all, sizeof(mine), sd_now_ns() + 10 * SEC, &err);
	CHECK(c, rc == SMDDP_OK, "all-gather of nonce and pid (rc %d: %s)", rc, err.msg);
	if (rc == SMDDP_OK) {
		ok = 1;
		for (int r = 0; r < size; r++)
			if (all[r].nonce != nonce || all[r].pid != peers[r].pid)
				ok = 0;
		CHECK(c, ok, "nonce %016llx is the same on every rank, pids match the table",
		      (unsigned long long)nonce);
	}
	free(all);
	free(peers);
	return b;
}

/* All-gather of len bytes with a pattern that depends on rank, round and offset. */
int gather_check(struct ctx *c, struct sd_boot *b, int rank, int size, size_t len, int round, int in_place)
{
	uint8_t *all = malloc((size_t)size * len + 1), *mine = in_place ? all + (size_t)rank * len : malloc(len + 1);
	struct sd_err err = {""};
	size_t bad = 0;
	int rc;

	for (size_t i = 0; i < len; i++)
		mine[i] = (uint8_t)(rank * 131 + i * 7 + (size_t)round * 13);
	rc = sd_boot_allgather(b, len ? mine : NULL, len ? all : NULL, len, sd_now_ns() + 10 * SEC, &err);
	if (rc == SMDDP_OK)
		for (int r = 0; r < size; r++)
			for (size_t i = 0; i < len; i++)
				bad += all[(size_t)r * len + i] != (uint8_t)(r * 131 + i * 7 + (size_t)round * 13);
	CHECK(c, rc == SMDDP_OK && bad == 0, "all-gather #%d of %zu bytes%s: rc %d, %zu wrong bytes %s", round, len,
	      in_place ? " (in place)" : "", rc, bad, err.msg);
	if (!in_place)
		free(mine);
	free(all);
	return rc;
}

/* Poll until something happens or ms pass; returns rc, *who, err, elapsed. */
int poll_for(struct sd_boot *b, unsigned ms, int *who, struct sd_err *err, uint64_t *took)
{
	uint64_t t0 = sd_now_ns(), end = t0 + ms * MS;
	int rc;

	do {
		int fds[16], n = sd_boot_fds(b, fds, 16);
		struct pollfd pf[16];

		for (int i = 0; i < n; i++)
			pf[i] = (struct pollfd){fds[i], POLLIN, 0};
		rc = sd_boot_poll(b, who, err);
		if (rc)
			break;
		poll(pf, (nfds_t)n, 10);
	} while (sd_now_ns() < end);
	*took = sd_now_ns() - t0;
	return rc;
}

int contains(const char *s, const char *sub)
{
	return s && strstr(s, sub) != NULL;
}

/* ---- the runner --------------------------------------------------------- */

static int total_bad;

static int free_port(int family, char *port, size_t n)
{
	struct sockaddr_storage ss = {0};
	socklen_t sl = family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	int fd = socket(family, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	ss.ss_family = (sa_family_t)family;
	if (family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else
		((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
	if (bind(fd, (struct sockaddr *)&ss, sl) || getsockname(fd, (struct sockaddr *)&ss, &sl)) {
		close(fd);
		return -1;
	}
	snprintf(port, n, "%d",
		 ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port : ((struct sockaddr_in6 *)&ss)->sin6_port));
	close(fd);
	return 0;
}

struct run {
	const char *name;
	int nproc;
	pid_t pids[64];
	int alive;
	uint64_t end;
	unsigned killmask; /* processes that kill themselves */
};

static struct run bg; /* the slow scenario, reaped by whoever waits */

static void start(struct run *r, const char *name, int nproc, void (*fn)(struct ctx *), const char *addr,
		  unsigned limit_s, unsigned killmask)
{
	struct ctx c = {0};

	c.scen = name;
	c.nproc = nproc;
	c.addr = addr;
	if (free_port(strchr(addr, ':') ? AF_INET6 : AF_INET, c.port, sizeof(c.port))) {
		printf("[%s] FAIL cannot find a free port\n", name);
		total_bad++;
		r->alive = 0;
		return;
	}
	/* Under a sanitizer every process runs several times slower:
	 * make check-sanitize stretches the scenarios' limits alike. */
	const char *scale = getenv("TEST_TIME_SCALE");
	if (scale && atoi(scale) > 1)
		limit_s *= (unsigned)atoi(scale);
	printf("[%s] %d process(es) on %s port %s\n", name, nproc, addr, c.port);
	fflush(stdout);
	r->name = name;
	r->nproc = nproc;
	r->killmask = killmask;
	r->end = sd_now_ns() + limit_s * SEC;
	r->alive = 0;
	for (int i = 0; i < nproc; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			alarm(limit_s);
			c.idx = i;
			snprintf(c.who, sizeof(c.who), "process %d", i);
			fn(&c);
			fflush(stdout);
			_exit(c.bad ? 1 : 0);
		}
		r->pids[i] = pid;
		if (pid > 0)
			r->alive++;
	}
}

/* Reap every child of r; kill those past the limit. */
static void finish(struct run *r)
{
	while (r->alive > 0) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);
		int i;

		if (pid <= 0) {
			if (sd_now_ns() > r->end + 2 * SEC) {
				for (i = 0; i < r->nproc; i++)
					if (r->pids[i] > 0) {
						printf("[%s] FAIL process %d still running past the limit: killed\n",
						       r->name, i);
						kill(r->pids[i], SIGKILL);
						waitpid(r->pids[i], NULL, 0);
						r->pids[i] = 0;
						r->alive--;
						total_bad++;
					}
				break;
			}
			msleep(5);
			continue;
		}
		for (i = 0; i < r->nproc && r->pids[i] != pid; i++)
			;
		if (i == r->nproc) {
			/* A child of the background run: keep its status there. */
			for (i = 0; i < bg.nproc && bg.pids[i] != pid; i++)
				;
			if (i < bg.nproc) {
				bg.pids[i] = 0;
				bg.alive--;
				if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
					printf("[%s] FAIL process %d ended with status 0x%x\n", bg.name, i, st);
					total_bad++;
				}
			}
			continue;
		}
		r->pids[i] = 0;
		r->alive--;
		if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && (r->killmask & (1u << i)))
			continue;
		if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			printf("[%s] FAIL process %d ended with %s %d\n", r->name, i,
			       WIFSIGNALED(st) ? "signal" : "exit status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			total_bad++;
		}
	}
	fflush(stdout);
}

static void run(const char *name, int nproc, void (*fn)(struct ctx *), const char *addr, unsigned limit_s,
		unsigned killmask)
{
	struct run r = {0};
	uint64_t t0 = sd_now_ns();

	start(&r, name, nproc, fn, addr, limit_s, killmask);
	finish(&r);
	printf("[%s] done in %.2f s\n", name, (double)(sd_now_ns() - t0) / 1e9);
}

static int have_ipv6(void)
{
	char port[16];

	return free_port(AF_INET6, port, sizeof(port)) == 0;
}

int main(void)
{
	uint64_t t0 = sd_now_ns();

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_DFL); /* the library must not raise it */
	printf("test_bootstrap: rendezvous and out-of-band channel over loopback TCP\n");
	fflush(stdout);

	/* The slow one first, in the background. */
	start(&bg, "silent-5s", 3, sc_silent, "127.0.0.1", 12, 0);

	run("size-1", 1, sc_size1, "127.0.0.1", 5, 0);
	run("world-2", 2, sc_world, "127.0.0.1", 15, 0);
	run("world-3", 3, sc_world, "127.0.0.1", 15, 0);
	run("world-8", 8, sc_world, "127.0.0.1", 15, 0);
	run("world-48", 48, sc_many, "127.0.0.1", 15, 0);
	run("close-rank0-first", 3, sc_close0, "127.0.0.1", 5, 0);
	run("wrong-token", 3, sc_token, "127.0.0.1", 6, 0);
	run("strangers", 12, sc_strangers, "127.0.0.1", 6, 0);
	run("stranger-hello", 3, sc_stranger_hello, "127.0.0.1", 6, 0);
	run("tokenless-loopback", 2, sc_tokenless, "127.0.0.1", 6, 0);
	{
		static char ip[64];

		sd_boot_local_addr(ip, sizeof(ip));
		if (strcmp(ip, "127.0.0.1")) {
			run("tokenless-remote", 2, sc_tokenless, ip, 6, 0);
			run("tokenless-allowed", 2, sc_tokenless, ip, 6, 0);
		} else {
			printf("[tokenless-remote] skipped: no address here but loopback\n");
		}
	}
	run("flood", 3, sc_flood, "127.0.0.1", 8, 0);
	run("death-in-rendezvous", 3, sc_die_in_rendezvous, "127.0.0.1", 6, 0);
	run("rank0-late", 4, sc_late0, "127.0.0.1", 6, 0);
	run("no-rank0", 1, sc_no_rank0, "127.0.0.1", 5, 0);
	run("port-busy", 1, sc_port_busy, "127.0.0.1", 5, 0);
	run("kill-rank3", 4, sc_kill3, "127.0.0.1", 6, 1u << 3);
	run("kill-rank3-in-allgather", 4, sc_kill3_gather, "127.0.0.1", 8, 1u << 3);
	run("kill-rank0", 3, sc_kill0, "127.0.0.1", 6, 1u << 0);
	run("kill-rank0-in-allgather", 3, sc_kill0_gather, "127.0.0.1", 8, 1u << 0);
	run("abort-rank2", 4, sc_abort2, "127.0.0.1", 6, 0);
	run("abort-rank2-in-allgather", 4, sc_abort2_gather, "127.0.0.1", 6, 0);
	run("abort-rank0", 3, sc_abort0, "127.0.0.1", 6, 0);
	run("mismatch", 3, sc_mismatch, "127.0.0.1", 6, 0);
	run("allgather-timeout", 3, sc_gather_timeout, "127.0.0.1", 6, 0);
	if (have_ipv6())
		run("ipv6", 3, sc_ipv6, "::1", 6, 0);
	else
		printf("[ipv6] skipped: no IPv6 loopback here\n");

	finish(&bg);
	printf("test_bootstrap: %s (%d failure(s)) in %.1f s\n", total_bad ? "FAIL" : "PASS", total_bad,
	       (double)(sd_now_ns() - t0) / 1e9);
	return total_bad ? 1 : 0;
}
