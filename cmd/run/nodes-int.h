/* cmd/run/nodes-int.h - what nodes.c, the channel, shares with nodes-join.c and nodes-dump.c */
#ifndef SMDDP_RUN_NODES_INT_H
#define SMDDP_RUN_NODES_INT_H

/*
 * Private to nodes.c (the channel), nodes-join.c and nodes-dump.c; the rest
 * of smddp-run sees nodes.h only. The calls point one way: join and dump
 * use the channel's helpers below, the channel calls neither.
 */
#include <netinet/in.h>   /* INET6_ADDRSTRLEN */
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "clock/clock.h"
#include "common/tool.h"   /* TOOL_PRINTF */
#include "run/nodes.h"
#include "run/nodes-line.h"

#define LINE_MAX_LEN     NODES_LINE_MAX

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

/* Milliseconds from now (sd_now_ms()) to until, at most cap: a poll() timeout. */
static inline int ms_left(int64_t until, int cap)
{
	int64_t l = until - sd_now_ms();
	if (l < 0)
		return 0;
	return l > cap ? cap : (int)l;
}

/* ---- nodes.c: lines, peers, sockets ---------------------------------- */

void nodes_clean_line(char *line, size_t n);
int nodes_send_line(int fd, const char *fmt, ...) TOOL_PRINTF(2, 3);
int nodes_read_line(struct peer *p, char *line, size_t linelen, bool *eof);
void nodes_close_peer(struct peer *p);
void nodes_keepalive(int fd);
int nodes_stop_signal(int sigfd);
struct nodes *nodes_new(const struct nodes_config *cfg);
struct peer *nodes_add_peer(struct nodes *n, int fd);
struct peer *nodes_peer_by_fd(struct nodes *n, int fd);
int nodes_listen_on(long port);
void nodes_peer_addr(int fd, char *out, size_t outlen);
int nodes_connect_once(const char *addr, long port, int ms, char *err, size_t errlen);

/* ---- nodes.c: the dumps' lines, which the channel meets first --------- */

bool nodes_dump_verb(const char *line, const char *v);
bool nodes_take_dump(struct nodes *n, const struct peer *p, const char *line);

#endif /* SMDDP_RUN_NODES_INT_H */
