/* cmd/run/nodes-dump.c - the flight recorders' dumps over the per-node launchers' channel */

/*
 * The lines are nodes.h's (DUMP, DUMPS). Node 0 hands each one it meets
 * while its ranks run to the reader that nodes_on_dump() set (the channel,
 * nodes.c, does); here the other nodes send theirs, and node 0, its own
 * ranks over, waits for what is still to come.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "run/nodes-int.h"

void nodes_on_dump(struct nodes *n, nodes_dump_fn fn, void *ctx)
{
	n->dump_fn = fn;
	n->dump_ctx = ctx;
}

int nodes_send_dump(struct nodes *n, const char *name, const char *line, int64_t until_ms)
{
	if (n->cfg.node_rank == 0 || n->npeers == 0 || n->peers[0].fd < 0 || sd_now_ms() >= until_ms)
		return -1;
	/* nodes_send_line waits up to a second per full socket buffer: node 0
	 * reads these as they come, also while its own ranks still run. */
	if (!name)
		return nodes_send_line(n->peers[0].fd, "DUMPS files=%s", line);
	return nodes_send_line(n->peers[0].fd, "DUMP file=%s msg=%s", name, line);
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
		if (all_in(n->dump_ctx) || sd_now_ms() >= until_ms || sig) {
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
			sig = nodes_stop_signal(sigfd);
		for (size_t i = 1; i < k; i++) {
			struct peer *p = nodes_peer_by_fd(n, pfd[i].fd);
			char line[LINE_MAX_LEN];
			bool eof = false;
			int got;

			if (!pfd[i].revents || !p)
				continue;
			while ((got = nodes_read_line(p, line, sizeof line, &eof)) == 1)
				if (!nodes_take_dump(n, p, line) && nodes_dump_verb(line, "EXIT"))
					p->done = true;
			if (got < 0)
				nodes_close_peer(p);
		}
	}
}
