/* cmd/run/nodes-line.c - the parser of the per-node launchers' lines, apart from the sockets
 *
 * Every byte of a line may come from a stranger on the network (node 0
 * listens on a port anyone can reach), so the parser is strict and has no
 * state: a line is taken whole or refused, a value that does not fit is
 * refused rather than cut (a cut token would fail later, and in a more
 * confusing way), and no control character gets through to be printed on
 * someone's terminal. It is apart from nodes.c so that it can be fuzzed
 * without sockets (tests/fuzz/fuzz-nodes.c).
 */
#include "config.h"

#include <string.h>

#include "run/nodes-line.h"

static const struct {
	const char *name;
	enum nodes_verb verb;
} verbs[] = {
	{ "HELLO", NODES_HELLO }, { "JOIN", NODES_JOIN }, { "GO", NODES_GO },
	{ "ERR", NODES_ERR },     { "STOP", NODES_STOP }, { "FAIL", NODES_FAIL },
	{ "EXIT", NODES_EXIT },
};

/* A decimal in [-1000000, 2^30], the whole of S[0, N). */
static bool number(const char *s, size_t n, long *out)
{
	size_t i = 0;
	bool neg = false;
	long x = 0;
	if (n > 0 && s[0] == '-') {
		neg = true;
		i = 1;
	}
	if (i == n || n - i > 10)
		return false;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		x = x * 10 + (s[i] - '0');
	}
	if (neg)
		x = -x;
	if (x < -1000000 || x > (1L << 30))
		return false;
	*out = x;
	return true;
}

static bool hex64(const char *s, size_t n)
{
	if (n != NODES_HEX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* S[0, N) into OUT (OUTLEN with its '\0'): false when it does not fit or is empty. */
static bool text(const char *s, size_t n, char *out, size_t outlen)
{
	if (n == 0 || n >= outlen)
		return false;
	memcpy(out, s, n);
	out[n] = '\0';
	return true;
}

const char *nodes_parse_line(const char *line, struct nodes_msg *m)
{
	memset(m, 0, sizeof *m);
	m->v = m->node = m->nnodes = m->nproc = m->port = m->status = -1;

	size_t len = strlen(line);
	if (len >= NODES_LINE_MAX)
		return "line too long";
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
			return "control character";

	size_t vl = strcspn(line, " ");
	for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
		if (strlen(verbs[i].name) == vl && memcmp(line, verbs[i].name, vl) == 0)
			m->verb = verbs[i].verb;
	if (!m->verb)
		return "unknown message";

	const char *p = line + vl;
	while (*p) {
		p++;   /* the blank */
		size_t tl = strcspn(p, " ");
		const char *eq = memchr(p, '=', tl);
		if (!eq || eq == p)
			return "a field is not key=value";
		size_t kl = eq - p;
		const char *val = eq + 1;
		size_t n = tl - kl - 1;
		unsigned bit = 0;
		bool ok = true;

#define KEY(s) (kl == sizeof(s) - 1 && memcmp(p, s, kl) == 0)
		if (KEY("msg")) {
			if (m->have & NODES_F_MSG)
				return "msg twice";
			/* the free text: everything to the end, blanks and '=' too */
			n = strlen(val);
			memcpy(m->msg, val, n + 1);   /* fits: shorter than the line */
			m->have |= NODES_F_MSG;
			break;
		}
		if (KEY("v")) {
			bit = NODES_F_V;
			ok = number(val, n, &m->v);
		} else if (KEY("node")) {
			bit = NODES_F_NODE;
			ok = number(val, n, &m->node);
		} else if (KEY("nnodes")) {
			bit = NODES_F_NNODES;
			ok = number(val, n, &m->nnodes);
		} else if (KEY("nproc")) {
			bit = NODES_F_NPROC;
			ok = number(val, n, &m->nproc);
		} else if (KEY("port")) {
			bit = NODES_F_PORT;
			ok = number(val, n, &m->port);
		} else if (KEY("status")) {
			bit = NODES_F_STATUS;
			ok = number(val, n, &m->status);
		} else if (KEY("host")) {
			bit = NODES_F_HOST;
			ok = text(val, n, m->host, sizeof m->host);
		} else if (KEY("job")) {
			bit = NODES_F_JOB;
			ok = text(val, n, m->job, sizeof m->job);
		} else if (KEY("token")) {
			bit = NODES_F_TOKEN;
			ok = text(val, n, m->token, sizeof m->token);
		} else if (KEY("nonce")) {
			bit = NODES_F_NONCE;
			ok = hex64(val, n) && text(val, n, m->nonce, sizeof m->nonce);
		} else if (KEY("mac")) {
			bit = NODES_F_MAC;
			ok = (hex64(val, n) || (n == 1 && val[0] == '-')) &&
			     text(val, n, m->mac, sizeof m->mac);
			/* what the MAC covers ends here: nothing unsigned may follow */
			m->signed_len = (size_t)(p - 1 - line);
			if (ok && val[n])
				return "fields after mac";
		}
#undef KEY
		if (bit && (m->have & bit))
			return "a field twice";
		if (!ok)
			return "a field's value is malformed";
		m->have |= bit;
		p += tl;
	}
	return NULL;
}
