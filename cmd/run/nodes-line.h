/* cmd/run/nodes-line.h - one line of the per-node launchers' protocol, parsed (cmd/run/nodes.c) */
#ifndef SMDDP_RUN_NODES_LINE_H
#define SMDDP_RUN_NODES_LINE_H

#include <stdbool.h>
#include <stddef.h>

#define NODES_PROTO      2      /* the launcher protocol this smddp-run speaks */
#define NODES_LINE_MAX   2048   /* one line, with its '\0' */
#define NODES_ID_MAX     64     /* job id, with its '\0' */
#define NODES_TOKEN_MAX  257    /* job token, with its '\0' */
#define NODES_HOST_MAX   256    /* host name, with its '\0' */
#define NODES_HEX        64     /* a nonce or a MAC (32 bytes), in lower-case hex */

enum nodes_verb {
	NODES_HELLO = 1,        /* 0 -> I: the challenge */
	NODES_JOIN,             /* I -> 0: who I am, and the answer */
	NODES_GO,               /* 0 -> I: start, with node 0's proof */
	NODES_ERR,              /* 0 -> I: refused */
	NODES_STOP,             /* 0 -> I: stop now */
	NODES_FAIL,             /* I -> 0: my ranks failed */
	NODES_EXIT,             /* I -> 0: my ranks are over */
};

/* Which fields a line had (struct nodes_msg's have). */
enum {
	NODES_F_V = 1u << 0, NODES_F_NODE = 1u << 1, NODES_F_NNODES = 1u << 2,
	NODES_F_NPROC = 1u << 3, NODES_F_PORT = 1u << 4, NODES_F_STATUS = 1u << 5,
	NODES_F_HOST = 1u << 6, NODES_F_JOB = 1u << 7, NODES_F_TOKEN = 1u << 8,
	NODES_F_NONCE = 1u << 9, NODES_F_MAC = 1u << 10, NODES_F_MSG = 1u << 11,
};

struct nodes_msg {
	enum nodes_verb verb;
	unsigned have;          /* NODES_F_* */
	long v, node, nnodes, nproc, port, status;   /* -1 when absent */
	char host[NODES_HOST_MAX];
	char job[NODES_ID_MAX];         /* "-": none */
	char token[NODES_TOKEN_MAX];    /* "-": none */
	char nonce[NODES_HEX + 1];
	char mac[NODES_HEX + 1];        /* "-": none */
	char msg[NODES_LINE_MAX];       /* free text, the rest of the line */
	size_t signed_len;      /* with a mac: it covers the line's first signed_len bytes */
};

/* Parses LINE (one line, without its '\n'): "VERB key=value ... [mac=M]
 * [msg=free text]", fields separated by one blank, each known key at most
 * once, numbers decimal, nonces and MACs 64 lower-case hex digits; "mac"
 * comes last if at all, "msg" takes the rest of the line.
 * Unknown keys are skipped (a later version may add some). NULL with *M
 * filled, or a short reason why the line is malformed; never reads past
 * LINE's '\0'. Which fields a verb needs is the caller's business. */
const char *nodes_parse_line(const char *line, struct nodes_msg *m);

#endif /* SMDDP_RUN_NODES_LINE_H */
