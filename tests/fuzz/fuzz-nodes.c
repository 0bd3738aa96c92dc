/* fuzz-nodes.c - smddp-run's per-node launcher lines (cmd/run/nodes-line.c):
 * every line of the input, as node 0 or a joiner would read it from a
 * stranger, and what the parser promises about a line it takes. */
#include <stdlib.h>
#include <string.h>

#include "run/nodes-line.h"

#include "fuzz.h"

/* What a taken line must hold; a broken promise aborts (a crash to libFuzzer). */
static void check(const char *line, const struct nodes_msg *m)
{
	size_t len = strlen(line);
	if (m->verb < NODES_HELLO || m->verb > NODES_EXIT)
		abort();
	if (strlen(m->host) >= sizeof m->host || strlen(m->job) >= sizeof m->job ||
	    strlen(m->token) >= sizeof m->token || strlen(m->msg) >= sizeof m->msg)
		abort();
	if ((m->have & NODES_F_HOST) && (!m->host[0] || strchr(m->host, ' ')))
		abort();
	if ((m->have & NODES_F_NONCE) && strlen(m->nonce) != NODES_HEX)
		abort();
	if (m->have & NODES_F_MAC) {
		/* what the MAC covers is the line before " mac=", and nothing follows */
		if (m->signed_len >= len || strncmp(line + m->signed_len, " mac=", 5) != 0 ||
		    strcmp(line + m->signed_len + 5, m->mac) != 0)
			abort();
		if (strcmp(m->mac, "-") != 0 && strlen(m->mac) != NODES_HEX)
			abort();
	}
	if ((m->have & NODES_F_MSG) && !strstr(line, m->msg))
		abort();
	for (const char *s = m->msg; *s; s++)   /* nothing for a terminal to obey */
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_text(data, size);
	struct nodes_msg *m = malloc(sizeof *m);
	if (!text || !m)
		abort();
	/* one call per line, as read_line() hands them out (the '\0' of a
	 * line with one inside ends it, as it does there) */
	for (char *line = text, *next; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (!nodes_parse_line(line, m))
			check(line, m);
	}
	free(m);
	free(text);
	return 0;
}
