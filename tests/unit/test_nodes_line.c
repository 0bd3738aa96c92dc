/* test_nodes_line.c - nodes_parse_line(), smddp-run's per-node launcher lines: what it takes and what it refuses. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "run/nodes-line.h"
#include "check.h"


#define N64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* LINE is refused, with WHY (NULL: any reason). */
static void refused(const char *line, const char *why)
{
	struct nodes_msg m;
	const char *got = nodes_parse_line(line, &m);
	if (!got || (why && strcmp(got, why) != 0)) {
		FAIL("'%s': %s, not refused (%s)", line, got ? got : "taken", why ? why : "any");
	}
}

static const struct nodes_msg *taken(const char *line)
{
	static struct nodes_msg m;
	const char *got = nodes_parse_line(line, &m);
	if (got) {
		FAIL("'%s' refused: %s", line, got);
	}
	return &m;
}

#define EXPECT(what, cond) CHECK(cond, "%s", what)

int main(void)
{
	const struct nodes_msg *m;
	char line[4096];

	m = taken("HELLO v=2 nonce=" N64);
	EXPECT("HELLO", m->verb == NODES_HELLO && m->v == 2 && strcmp(m->nonce, N64) == 0);
	EXPECT("HELLO", m->have == (NODES_F_V | NODES_F_NONCE) && m->node == -1);

	const char *join = "JOIN v=2 node=1 nnodes=2 nproc=8 port=29500 host=node-b job=- nonce=" N64 " mac=" N64;
	m = taken(join);
	EXPECT("JOIN", m->verb == NODES_JOIN && m->node == 1 && m->nnodes == 2 && m->nproc == 8);
	EXPECT("JOIN", m->port == 29500 && strcmp(m->host, "node-b") == 0 && strcmp(m->job, "-") == 0);
	/* the MAC covers what is before " mac=" */
	EXPECT("JOIN mac", m->signed_len == strlen(join) - strlen(" mac=" N64));
	m = taken("JOIN v=2 node=1 nonce=" N64 " mac=-");
	EXPECT("JOIN without token", strcmp(m->mac, "-") == 0);

	/* v1, so that node 0 can say "older smddp-run" */
	m = taken("JOIN v=1 node=3 nnodes=4 nproc=2 port=1 host=h job=- token=feedbeef00112233");
	EXPECT("v1", m->v == 1 && m->node == 3 && strcmp(m->token, "feedbeef00112233") == 0);

	/* msg takes the rest; a "key=" in it is text, not a field */
	m = taken("STOP msg=rank 3 exited status=7 node=9 mac=x");
	EXPECT("msg", m->verb == NODES_STOP && m->status == -1 && m->node == -1 && !(m->have & NODES_F_MAC));
	EXPECT("msg", strcmp(m->msg, "rank 3 exited status=7 node=9 mac=x") == 0);
	m = taken("ERR status=2 msg=");
	EXPECT("empty msg", m->status == 2 && (m->have & NODES_F_MSG) && m->msg[0] == '\0');
	m = taken("EXIT status=0");
	EXPECT("EXIT", m->verb == NODES_EXIT && m->status == 0);
	m = taken("FAIL status=137 future=field msg=x");
	EXPECT("unknown keys are skipped", m->verb == NODES_FAIL && m->status == 137);
	m = taken("GO job=abc token=0f1e2d3c");
	EXPECT("GO", m->verb == NODES_GO && strcmp(m->job, "abc") == 0);

	refused("", "unknown message");
	refused("GET / HTTP/1.0", "unknown message");
	refused("JOINED v=2", "unknown message");
	refused("join v=2", "unknown message");
	refused("EXIT  status=0", "a field is not key=value");
	refused("EXIT status=0 ", "a field is not key=value");
	refused("EXIT =0", "a field is not key=value");
	refused("EXIT status", "a field is not key=value");
	refused("EXIT status=0 status=1", "a field twice");
	refused("EXIT status=x", "a field's value is malformed");
	refused("EXIT status=", "a field's value is malformed");
	refused("EXIT status=-", "a field's value is malformed");
	refused("EXIT status=99999999999", "a field's value is malformed");
	refused("EXIT status=1073741825", "a field's value is malformed");
	refused("JOIN v=2 host=", "a field's value is malformed");
	refused("HELLO v=2 nonce=0123", "a field's value is malformed");
	refused("HELLO v=2 nonce=" "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
	        "a field's value is malformed");
	refused("GO job=a mac=" N64 " token=t", "fields after mac");
	refused("GO job=a mac=" N64 " msg=x", "fields after mac");
	refused("GO job=a mac=xyz", "a field's value is malformed");
	refused("ERR status=2 msg=\033[2Jgotcha", "control character");
	refused("ERR\tstatus=2", NULL);
	/* a job id or token that does not fit is refused, not cut */
	snprintf(line, sizeof line, "GO job=%0*d", NODES_ID_MAX, 0);
	refused(line, "a field's value is malformed");
	snprintf(line, sizeof line, "GO job=%0*d", NODES_ID_MAX - 1, 0);
	taken(line);
	snprintf(line, sizeof line, "GO job=a token=%0*d", NODES_TOKEN_MAX, 0);
	refused(line, "a field's value is malformed");
	memset(line, 'a', sizeof line - 1);
	memcpy(line, "ERR msg=", 8);
	line[NODES_LINE_MAX] = '\0';
	refused(line, "line too long");
	line[NODES_LINE_MAX - 1] = '\0';
	taken(line);

	return check_done("test_nodes_line");
}
