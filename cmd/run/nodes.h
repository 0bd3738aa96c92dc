/* cmd/run/nodes.h - the launchers' own rendezvous in smddp-run's per-node mode */
#ifndef SMDDP_RUN_NODES_H
#define SMDDP_RUN_NODES_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "run/nodes-line.h"   /* NODES_ID_MAX, NODES_TOKEN_MAX */

struct nodes_config {
	int nnodes;             /* > 1 */
	int node_rank;          /* 0 listens, the others connect */
	long nproc;             /* ranks per node: every node must agree */
	const char *master_addr;   /* node 0's address */
	long master_port;       /* the ranks' rendezvous port: every node must agree */
	long launcher_port;     /* node 0's launcher listens here */
	double join_timeout_s;  /* how long node 0 waits for the others, and they for it */
	const char *host;       /* this host's name, for messages */
	const char *job_id;     /* NULL: node 0 makes one, the others take it */
	const char *token;      /* NULL: node 0 makes one, the others take it */
	bool token_given;       /* job_id/token came from the user (SMDDP_JOB_TOKEN) */
};

struct nodes;

/* Brings the launchers of every node together before any rank starts: node
 * 0 waits for nodes 1..N-1 (each checked: same job, sizes and token), then
 * tells them to go, with the job id and token. Watches SIGFD, a signalfd:
 * SIGINT, SIGTERM, SIGHUP or SIGQUIT end the wait. Returns 0 with *OUT,
 * JOB_ID and TOKEN set; -SIG after such a signal; else the exit status
 * (1: a node did not come in time; 2: the nodes disagree), after saying why
 * on stderr. */
int nodes_join(const struct nodes_config *cfg, int sigfd, struct nodes **out,
               char job_id[NODES_ID_MAX], char token[NODES_TOKEN_MAX]);

/* While the ranks run: the connections to poll (POLLIN), appended to PFD
 * (at most MAX); returns how many. */
size_t nodes_pollfds(const struct nodes *n, struct pollfd *pfd, size_t max);

/* Reads what the other launchers said, for the COUNT entries from
 * nodes_pollfds(). Returns true, with STATUS and WHY, once: when the job
 * must stop because of another node (a rank failed there, its launcher went
 * away, or node 0 said stop). */
bool nodes_io(struct nodes *n, const struct pollfd *pfd, size_t count, int *status,
              char *why, size_t whylen);

/* This node failed first (as far as it knows): STATUS is its exit status,
 * WHY a sentence such as "rank 3 exited with status 5". Node 0 tells every
 * node to stop; another node tells node 0, which tells the rest. */
void nodes_failed(struct nodes *n, int status, const char *why);

/* This node's ranks are over, with STATUS. */
void nodes_done(struct nodes *n, int status);

/* Node 0: whether some other node's ranks still run (and nobody failed). */
bool nodes_waiting(const struct nodes *n);

void nodes_free(struct nodes *n);

/* ---- the flight recorders' dumps, gathered on node 0 (run/trace.c) ----
 *
 *   node I -> 0   DUMP file=NAME msg=LINE   (one line of its dump file NAME)
 *                 DUMPS files=K             (no more: sent before EXIT)
 *
 * Node 0 hands each such line to FN with the sender's node number, whether
 * it is read while the ranks run or in nodes_wait_dumps(); LINE NULL: that
 * node went away. */
typedef void (*nodes_dump_fn)(void *ctx, int node, const char *line);
void nodes_on_dump(struct nodes *n, nodes_dump_fn fn, void *ctx);

/* Another node: one line of dump file NAME, or the end (NAME NULL, LINE
 * the count). 0, or -1 when node 0 is gone or does not take it within
 * UNTIL_MS (monotonic, as now_ms). */
int nodes_send_dump(struct nodes *n, const char *name, const char *line, int64_t until_ms);

/* Node 0, its ranks over: reads the other nodes until ALL_IN(CTX) says
 * everything came, UNTIL_MS passes, or a stopping signal arrives on SIGFD
 * (returned then, else 0). */
int nodes_wait_dumps(struct nodes *n, int sigfd, int64_t until_ms, bool (*all_in)(void *ctx));

#endif /* SMDDP_RUN_NODES_H */
