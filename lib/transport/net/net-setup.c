/* net-setup.c - the transport between hosts: endpoints, addresses and the agreement at set-up, teardown.
 *
 * Collective over the communicator that creates it (the world's
 * bootstrap, or a parent's algorithms through a gather callback): every
 * rank opens its endpoint (lib/transport/fabric/ or socket/, by
 * SMDDP_NET_TRANSPORT), the ranks trade addresses and check that all
 * opened the same kind, and only once all agree that all are ready does c
 * get c->net and the caller's transport table.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "clock/clock.h"
#include "config/param.h"
#include "transport/net/net-int.h"
#include "transport/transport.h"
#include "util/wait.h"

const char *const sd_net_algo_names[] = {"auto", "hier", "ring", "rd"};

/* ---- set-up ------------------------------------------------------------- */

struct addr_rec {
	int32_t status;
	uint32_t len;
	char name[SD_FAB_NAME_MAX];
	char msg[240];
	struct sd_fab_kind kind;
	char ip[48]; /* what the endpoint was bound to */
};

/* The address this host's fabric endpoint binds to: the local end of a
 * bootstrap connection, which is the address the peers' routes lead to.
 * A dual-stack listener (rank 0 of a unique id listens on "::") sees IPv4
 * peers as IPv4-mapped IPv6 (::ffff:a.b.c.d); libfabric would take that
 * for an IPv6 address and open another domain, of another address format,
 * than its peers', so it is spelled as the IPv4 address it is.  Loopback
 * is taken only when no connection has another address: a host with
 * several ranks may have some of them meet rank 0 over lo. */
void sd_net_boot_ip(struct sd_boot *b, char *buf, size_t len)
{
	int fds[64], n = sd_boot_fds(b, fds, 64);

	buf[0] = 0;
	for (int i = 0; i < n; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct in_addr v4;
		int loop;

		if (getsockname(fds[i], (struct sockaddr *)&ss, &sl))
			continue;
		if (ss.ss_family == AF_INET6) {
			struct in6_addr *a6 = &((struct sockaddr_in6 *)&ss)->sin6_addr;

			if (IN6_IS_ADDR_V4MAPPED(a6)) {
				memcpy(&v4, &a6->s6_addr[12], sizeof(v4));
				loop = (ntohl(v4.s_addr) >> 24) == 127;
				if (!loop || !buf[0])
					inet_ntop(AF_INET, &v4, buf, (socklen_t)len);
			} else {
				loop = IN6_IS_ADDR_LOOPBACK(a6);
				if (!loop || !buf[0])
					inet_ntop(AF_INET6, a6, buf, (socklen_t)len);
			}
		} else if (ss.ss_family == AF_INET) {
			v4 = ((struct sockaddr_in *)&ss)->sin_addr;
			loop = (ntohl(v4.s_addr) >> 24) == 127;
			if (!loop || !buf[0])
				inet_ntop(AF_INET, &v4, buf, (socklen_t)len);
		} else {
			continue;
		}
		if (!loop)
			return;
	}
}

/* SMDDP_NET_TRANSPORT: libfabric where it has more than TCP to offer (or
 * was asked for by provider), else our sockets when auto (they are as
 * fast as its tcp provider or faster at every size: docs/PERFORMANCE.md);
 * NULL: fabric asked for in a build without libfabric. */
static const struct sd_ep_ops *endpoint_ops(void)
{
	const char *t = sd_param_str("SMDDP_NET_TRANSPORT");

	if (!strcmp(t, "socket"))
		return &sd_ep_socket;
#ifdef HAVE_LIBFABRIC
	if (!strcmp(t, "fabric"))
		return &sd_ep_fabric;
	if (*sd_param_str("SMDDP_FABRIC_PROVIDER") || getenv("FI_PROVIDER"))
		return &sd_ep_fabric;
	return sd_net_has_rdma() ? &sd_ep_fabric : &sd_ep_socket;
#else
	return strcmp(t, "fabric") ? &sd_ep_socket : NULL;
#endif
}

static int parse_algo(void)
{
	const char *a = sd_param_str("SMDDP_ALGO");

	for (int i = 0; i < 4; i++)
		if (!strcmp(a, sd_net_algo_names[i]))
			return i;
	return ALGO_AUTO;
}

/* One round of set-up: every rank of via says how it fared (mine->status,
 * with last_error as the message), and each member of c takes the first
 * failure of a fellow member as its own.  Returns the gather's failure, or
 * 0 with *lrc updated. */
static int agree(struct smddp_comm *c, struct smddp_comm *via, sd_gather_fn gather,
		 const int *members, struct addr_rec *mine, struct addr_rec *all, int *lrc,
		 const char *what)
{
	int rc;

	mine->status = c ? *lrc : 0;
	if (mine->status)
		snprintf(mine->msg, sizeof(mine->msg), "%s", c->last_error);
	rc = gather(via, mine, all, sizeof(*mine));
	if (rc || !c || *lrc)
		return rc;
	for (int r = 0; r < c->size && !*lrc; r++) {
		struct addr_rec *a = &all[members ? members[r] : r];

		if (a->status)
			*lrc = sd_comm_error(c, a->status, "rank %d could not %s: %s", r, what,
					     a->msg);
	}
	return SMDDP_OK;
}

/* Every rank must have opened the same provider with the same address
 * format, or the addresses cannot be inserted (or worse, are read as
 * something else).  Each rank chose alone, from its own environment and
 * the address it reaches rank 0 by, so this is where a difference shows;
 * all ranks compare the same table with rank 0's choice and so fail with
 * the same sentence, naming who chose what. */
static int same_kind(struct smddp_comm *c, const struct addr_rec *all, const int *members)
{
	const struct addr_rec *z = &all[members ? members[0] : 0];

	for (int r = 1; r < c->size; r++) {
		const struct addr_rec *a = &all[members ? members[r] : r];

		if (!strcmp(a->kind.prov, z->kind.prov) && !strcmp(a->kind.format, z->kind.format))
			continue;
		return sd_comm_error(c, SMDDP_ENETWORK,
				     "the ranks opened different libfabric endpoints: rank 0 %s "
				     "(%s, domain %s, bound to %s), rank %d %s (%s, domain %s, bound "
				     "to %s); all must use one provider and address format: set "
				     "SMDDP_NET_TRANSPORT and SMDDP_FABRIC_PROVIDER (or FI_PROVIDER) "
				     "alike on every rank, and let the ranks meet over one address "
				     "family (SMDDP_BOOT_ADDR, "
				     "MASTER_ADDR; FI_TCP_IFACE for tcp)",
				     z->kind.prov, z->kind.format, z->kind.domain, z->ip, r,
				     a->kind.prov, a->kind.format, a->kind.domain, a->ip);
	}
	return SMDDP_OK;
}

int sd_net_setup(struct smddp_comm *c, struct smddp_comm *node, struct smddp_comm *via,
		 sd_gather_fn gather, const int *members, char (*vhost)[SD_HOSTID_MAX],
		 struct sd_job *job, const char *src_ip, const struct sd_transport_ops *tp)
{
	struct addr_rec *all = calloc((size_t)via->size, sizeof(*all)), mine;
	struct sd_net *n = NULL;
	int rc, lrc = SMDDP_OK;

	if (!all)
		return sd_comm_error(via, SMDDP_ENOMEM, "out of memory");
	memset(&mine, 0, sizeof(mine));
	if (c) {
		n = calloc(1, sizeof(*n));
		if (n) {
			n->hosts = calloc((size_t)c->size, sizeof(*n->hosts));
			n->world = calloc((size_t)c->size, sizeof(int));
			n->all = calloc((size_t)c->size, sizeof(int));
			n->descs = calloc((size_t)c->size, sizeof(*n->descs));
		}
		if (!n || !n->hosts || !n->world || !n->all || !n->descs) {
			lrc = sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
		} else {
			c->net = n;
			n->node = node;
			n->algo = parse_algo();
			n->rd_max = (size_t)sd_param_int("SMDDP_NET_RD_MAX");
			for (int r = 0; r < c->size; r++) {
				n->all[r] = r;
				/* World ranks: the world's set-up goes through the
				 * world itself; a split's through its parent. */
				n->world[r] = via != c && via->net
						       ? via->net->world[members ? members[r] : r]
						       : (members ? members[r] : r);
				memcpy(n->hosts[r], vhost[members ? members[r] : r], SD_HOSTID_MAX);
			}
			const struct sd_ep_ops *ops = endpoint_ops();

			lrc = ops ? ops->open(c, src_ip, &n->fab)
				  : sd_comm_error(c, SMDDP_EUNSUPPORTED,
						  "SMDDP_NET_TRANSPORT=fabric, but this build of "
						  "libsmddp has no libfabric (install libfabric-dev "
						  "and rebuild); unset it, or set socket or auto, "
						  "for libsmddp's own TCP sockets");
			if (!lrc) {
				sd_fab_on_wait(n->fab, sd_net_check_news);
				/* The endpoint's chunk, unless the user chose one
				 * (every rank has the same kind: same_kind below). */
				int user_chunk = strcmp(sd_param_source("SMDDP_NET_CHUNK"),
							"default") != 0;

				n->chunk = user_chunk ? (size_t)sd_param_int("SMDDP_NET_CHUNK")
						      : n->fab->chunk;
				n->chunk_min = user_chunk ? n->chunk : NET_CHUNK_MIN;
				n->slots = malloc(2 * NSLOTS * n->chunk);
				if (!n->slots)
					lrc = sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
			}
		}
		if (!lrc) {
			mine.len = (uint32_t)sd_fab_name(n->fab, mine.name, sizeof(mine.name));
			if (!mine.len)
				lrc = sd_comm_error(c, SMDDP_ENETWORK,
						    "libfabric: the endpoint has no name (fi_getname)");
			sd_fab_kind(n->fab, &mine.kind);
			snprintf(mine.ip, sizeof(mine.ip), "%s", src_ip && *src_ip ? src_ip : "any");
		}
	}
	rc = agree(c, via, gather, members, &mine, all, &lrc, "open its fabric endpoint");
	if (rc)
		goto out;
	if (c && !lrc)
		lrc = same_kind(c, all, members);
	if (c && !lrc) {
		if (!lrc) {
			/* Compact the members' records for the address vector. */
			struct addr_rec *m = calloc((unsigned)c->size, sizeof(*m));

			if (!m) {
				lrc = sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
			} else {
				for (int r = 0; r < c->size; r++) {
					struct addr_rec *a = &all[members ? members[r] : r];

					m[r].len = a->len;
					memcpy(m[r].name, a->name, sizeof(a->name));
				}
				lrc = sd_fab_insert(c, n->fab, &m->len, sizeof(*m), c->size);
				free(m);
			}
		}
		if (!lrc) {
			/* The layout: hosts in order of first rank. */
			int *node_of = calloc((size_t)c->size, sizeof(int)), nn = 0;

			if (!node_of) {
				lrc = sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
			} else {
				for (int r = 0; r < c->size; r++) {
					int q;

					for (q = 0; q < r && strcmp(n->hosts[q], n->hosts[r]); q++)
						;
					node_of[r] = q < r ? node_of[q] : nn++;
				}
				n->nnodes = nn;
				n->L = c->size / nn;
				n->hier = c->size % nn == 0;
				for (int r = 0; n->hier && r < c->size; r++)
					n->hier = node_of[r] == r / n->L;
				free(node_of);
				if (n->hier) {
					n->rail = calloc((size_t)nn, sizeof(int));
					if (!n->rail)
						lrc = sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
					for (int m = 0; n->rail && m < nn; m++)
						n->rail[m] = m * n->L + c->rank % n->L;
				}
			}
		}
		n->abort_req.keep = 1; /* outlives any failed collective */
		if (!lrc)
			lrc = sd_fab_recv(c, n->fab, -1, sd_fab_tag(SD_TAG_KIND_ABORT, 0, 0, 0),
					  n->abort_in, sizeof(n->abort_in), &n->abort_req);
	}
	/* Everyone agrees that everyone is ready before the first message. */
	memset(&mine, 0, sizeof(mine));
	rc = agree(c, via, gather, members, &mine, all, &lrc, "join");
	if (rc)
		goto out;
	rc = lrc;
	if (c && !rc) {
		n->job = job;
		job->refs++;
		c->tp = tp;
		SD_INFO(SD_SUB_NET,
			"rank %d of %d spans %d hosts (%s), %d per host, %s; %s; chunks of %zu bytes "
			"(at least %zu)",
			c->rank, c->size, n->nnodes, sd_fab_describe(n->fab), n->hier ? n->L : -1,
			n->hier ? "hierarchical collectives" : "uneven hosts: flat collectives",
			sd_net_algo_names[n->algo], n->chunk, n->chunk_min);
	}
out:
	free(all);
	return rc;
}

char (*sd_net_hosts(struct smddp_comm *c))[SD_HOSTID_MAX]
{
	return c->net->hosts;
}

struct sd_job *sd_net_job(struct smddp_comm *c)
{
	return c->net->job;
}

size_t sd_net_chunk(const struct smddp_comm *c)
{
	return c->net ? c->net->chunk : 0;
}

int sd_net_poisoned(struct smddp_comm *c)
{
	return c->net && c->net->fab && sd_fab_poisoned(c->net->fab);
}

struct smddp_comm *sd_net_node(struct smddp_comm *c, int forget)
{
	struct smddp_comm *node = c->net->node;

	if (forget)
		c->net->node = NULL;
	return node;
}

void sd_net_free(struct smddp_comm *c, int clean)
{
	struct sd_net *n = c->net;

	if (!n)
		return;
	int left_open = 0;

	if (n->fab) {
		sd_fab_cancel(n->fab, &n->abort_req);
		left_open = sd_fab_close(n->fab);
	}
	if (n->job && --n->job->refs == 0) {
		sd_boot_close(n->job->boot, sd_boot_how(clean, c->failed));
		free(n->job);
	}
	free(n->abort_sends);
	free(n->hosts);
	free(n->world);
	free(n->all);
	free(n->rail);
	if (!left_open) { /* else the provider may still use them (and n's notices) */
		free(n->descs);
		free(n->slots);
		free(n->bounces);
		free(n);
	}
	c->net = NULL;
}
