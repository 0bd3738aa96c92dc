/* fabric.c - the libfabric endpoint behind lib/transport/net/net.c: provider choice, registration, progress. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "base/checks.h"
#include "base/comm-types.h"
#include "clock/clock.h"
#include "config/param.h"
#include "transport/netep.h"
#include "util/wait.h"

#define FAB_API FI_VERSION(1, 9)

static int fab_progress(struct smddp_comm *c, struct sd_fab *base, int wait_ms, int *got);
static int fab_close(struct sd_fab *base);

struct fab {
	struct sd_fab base; /* first: the table's view */
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	fi_addr_t *addrs; /* comm rank -> address */
	int npeers;
	int mr_local;     /* the provider wants local buffers registered */
	int mr_endpoint;
	int cq_waits;     /* fi_cq_sread works */
	uint64_t patience_ns; /* how long a post may find the queue full */
	char desc[160];
	/* The provider's contexts: allocated in blocks that live as long as
	 * the endpoint, so a completion never points at freed memory. */
	struct fctx *free_ctx;
	struct fctx_block *blocks;
	int busy;
	int poisoned; /* a failed call left transfers the provider still holds */
	int (*news)(struct smddp_comm *c); /* asked while a post waits for room */
};

/* What the provider holds for one operation.  The context comes first: the
 * provider hands its address back as op_context. */
struct fctx {
	struct fi_context2 ctx;
	struct sd_freq *owner; /* NULL once forgotten */
	struct fid_mr *mr;
	struct fctx *next;     /* in the free list */
	int busy;
	int is_recv;
	int keep;
};

#define FCTX_BLOCK 256
struct fctx_block {
	struct fctx_block *next;
	struct fctx c[FCTX_BLOCK];
};

static struct fctx *ctx_get(struct fab *f)
{
	struct fctx *x = f->free_ctx;

	if (!x) {
		struct fctx_block *b = calloc(1, sizeof(*b));

		if (!b)
			return NULL;
		b->next = f->blocks;
		f->blocks = b;
		for (int i = FCTX_BLOCK - 1; i >= 0; i--) {
			b->c[i].next = f->free_ctx;
			f->free_ctx = &b->c[i];
		}
		x = f->free_ctx;
	}
	f->free_ctx = x->next;
	memset(x, 0, sizeof(*x));
	x->busy = 1;
	f->busy++;
	return x;
}

static void ctx_put(struct fab *f, struct fctx *x)
{
	if (x->mr)
		fi_close(&x->mr->fid);
	if (x->owner && x->owner->fc == x)
		x->owner->fc = NULL;
	x->mr = NULL;
	x->owner = NULL;
	x->busy = 0;
	x->next = f->free_ctx;
	f->free_ctx = x;
	f->busy--;
}

/* The provider names to try, in order, when nothing is asked for. */
static const char *const prov_order[] = {"efa", "verbs;ofi_rxm", "tcp;ofi_rxm", "tcp", NULL};

static struct fi_info *make_hints(const char *prov)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	h->caps = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				  FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->tx_attr->msg_order = FI_ORDER_SAS;
	h->rx_attr->msg_order = FI_ORDER_SAS;
	if (prov && *prov)
		h->fabric_attr->prov_name = strdup(prov);
	return h;
}

/* fi_getinfo for prov (NULL: any), bound to src_ip when given; the first
 * answer wins (libfabric orders them best first). */
static int try_getinfo(const char *prov, const char *src_ip, struct fi_info **out)
{
	struct fi_info *h = make_hints(prov);
	int ret;

	if (!h)
		return -FI_ENOMEM;
	if (src_ip && *src_ip)
		ret = fi_getinfo(FAB_API, src_ip, NULL, FI_SOURCE, h, out);
	else
		ret = fi_getinfo(FAB_API, NULL, NULL, 0, h, out);
	fi_freeinfo(h);
	return ret;
}

/* rxm over tcp receives eager messages straight into posted receives
 * (dynamic receive buffering), so an eager limit of 64 KiB instead of 16
 * costs no memory and spares the messages of mid-size collectives the
 * segmentation protocol: allreduce of 32 KiB-2 MiB between two hosts went
 * from 0.8-1.7x Open MPI to 1.6-2.2x.  Over verbs rxm wants the eager limit
 * equal to its buffer size, so hosts with RDMA devices are left alone, and
 * so is a user's own setting.  It must be set before libfabric starts its
 * providers (the first fi_getinfo of the process). */
static void tune_rxm(void)
{
	static int done;

	if (done++ || getenv("FI_OFI_RXM_EAGER_LIMIT") || sd_net_has_rdma())
		return;
	setenv("FI_OFI_RXM_EAGER_LIMIT", "65536", 0);
	SD_INFO(SD_SUB_NET, "FI_OFI_RXM_EAGER_LIMIT=65536 (no RDMA devices here; set it to change)");
}

static int choose(struct smddp_comm *c, const char *src_ip, struct fi_info **out)
{
	const char *want = *sd_param_str("SMDDP_FABRIC_PROVIDER") ? sd_param_str("SMDDP_FABRIC_PROVIDER")
								: getenv("FI_PROVIDER");
	int ret;

	tune_rxm();

	if (want && *want) {
		/* "tcp" is spelled "tcp;ofi_rxm" in RDM answers: try both. */
		char layered[64];

		ret = try_getinfo(want, src_ip, out);
		if (ret && !strchr(want, ';')) {
			snprintf(layered, sizeof(layered), "%s;ofi_rxm", want);
			ret = try_getinfo(layered, src_ip, out);
		}
		if (ret)
			return sd_comm_error(c, SMDDP_ENETWORK,
					     "libfabric provider \"%s\" (from %s) offers no reliable "
					     "tagged endpoint%s%s: %s; `fi_info -t FI_EP_RDM` lists those "
					     "that do",
					     want,
					     *sd_param_str("SMDDP_FABRIC_PROVIDER") ? "SMDDP_FABRIC_PROVIDER"
										: "FI_PROVIDER",
					     src_ip && *src_ip ? " on " : "", src_ip ? src_ip : "",
					     fi_strerror(-ret));
		return SMDDP_OK;
	}
	for (int i = 0; prov_order[i]; i++)
		if (try_getinfo(prov_order[i], src_ip, out) == 0)
			return SMDDP_OK;
	ret = try_getinfo(NULL, src_ip, out);
	if (ret)
		return sd_comm_error(c, SMDDP_ENETWORK,
				     "no libfabric provider offers a reliable tagged endpoint%s%s "
				     "(tried efa, verbs, tcp, then any): %s; check `fi_info -t "
				     "FI_EP_RDM` and the libfabric installation",
				     src_ip && *src_ip ? " on " : "", src_ip ? src_ip : "",
				     fi_strerror(-ret));
	return SMDDP_OK;
}

static int fab_open(struct smddp_comm *c, const char *src_ip, struct sd_fab **out)
{
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .size = 4096};
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	struct fab *f = calloc(1, sizeof(*f));
	int ret, rc;

	*out = NULL;
	if (!f)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	f->base.ops = &sd_ep_fabric;
	f->base.piece = 64u << 10; /* rxm's eager limit (netep.h) */
	f->base.chunk = 128u << 10;
	rc = choose(c, src_ip, &f->info);
	if (rc)
		goto fail;
	f->mr_local = (f->info->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
	f->mr_endpoint = (f->info->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0;
	snprintf(f->desc, sizeof(f->desc), "%s on %s", f->info->fabric_attr->prov_name,
		 f->info->domain_attr->name);
	rc = SMDDP_ENETWORK;
	SD_FI_CHECK_GOTO(fi_fabric(f->info->fabric_attr, &f->fabric, NULL), c, rc, fail, "fi_fabric");
	SD_FI_CHECK_GOTO(fi_domain(f->fabric, f->info, &f->domain, NULL), c, rc, fail, "fi_domain");
	/* A completion queue that can be slept on, if the provider has one. */
	cqa.wait_obj = FI_WAIT_UNSPEC;
	ret = fi_cq_open(f->domain, &cqa, &f->cq, NULL);
	if (ret) {
		cqa.wait_obj = FI_WAIT_NONE;
		ret = fi_cq_open(f->domain, &cqa, &f->cq, NULL);
	} else {
		f->cq_waits = 1;
	}
	if (ret) {
		rc = SD_FI_ERR(c, rc, ret, "fi_cq_open");
		goto fail;
	}
	SD_FI_CHECK_GOTO(fi_av_open(f->domain, &ava, &f->av, NULL), c, rc, fail, "fi_av_open");
	SD_FI_CHECK_GOTO(fi_endpoint(f->domain, f->info, &f->ep, NULL), c, rc, fail, "fi_endpoint");
	ret = fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_ep_bind(f->ep, &f->av->fid, 0);
	if (!ret)
		ret = fi_enable(f->ep);
	if (ret) {
		rc = SD_FI_ERR(c, rc, ret, "enabling the endpoint");
		goto fail;
	}
	SD_INFO(SD_SUB_NET, "libfabric %s, provider %s, domain %s, mr_mode 0x%x, %s completions",
		fi_tostr(&(uint32_t){fi_version()}, FI_TYPE_VERSION), f->info->fabric_attr->prov_name,
		f->info->domain_attr->name, (unsigned)f->info->domain_attr->mr_mode,
		f->cq_waits ? "blocking" : "polled");
	*out = &f->base;
	return SMDDP_OK;
fail:
	fab_close(&f->base);
	return rc;
}

static size_t fab_name(struct sd_fab *base, void *buf, size_t len)
{
	struct fab *f = (struct fab *)base;

	size_t n = len;

	if (fi_getname(&f->ep->fid, buf, &n) != 0)
		return 0;
	return n;
}

static const char *fab_describe(struct sd_fab *base)
{
	struct fab *f = (struct fab *)base;

	return f->desc;
}

static void fab_kind(struct sd_fab *base, struct sd_fab_kind *k)
{
	struct fab *f = (struct fab *)base;

	memset(k, 0, sizeof(*k));
	snprintf(k->prov, sizeof(k->prov), "%s", f->info->fabric_attr->prov_name);
	snprintf(k->domain, sizeof(k->domain), "%s", f->info->domain_attr->name);
	snprintf(k->format, sizeof(k->format), "%s",
		 fi_tostr(&f->info->addr_format, FI_TYPE_ADDR_FORMAT));
}

static int fab_insert(struct smddp_comm *c, struct sd_fab *base, const void *names, size_t stride, int n)
{
	struct fab *f = (struct fab *)base;

	f->addrs = calloc((size_t)n, sizeof(*f->addrs));
	if (!f->addrs)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	f->npeers = n;
	for (int r = 0; r < n; r++) {
		const char *p = (const char *)names + (size_t)r * stride;
		int ret = fi_av_insert(f->av, p + sizeof(uint32_t), 1, &f->addrs[r], 0, NULL);

		if (ret != 1)
			return sd_comm_error(c, SMDDP_ENETWORK,
					     "libfabric: rank %d's endpoint address was refused by "
					     "fi_av_insert (%s): do all ranks use the same provider? (%s "
					     "here)",
					     r, ret < 0 ? fi_strerror(-ret) : "not inserted", f->desc);
	}
	return SMDDP_OK;
}

static int reg(struct smddp_comm *c, struct fab *f, const void *buf, size_t len, uint64_t acc,
	       struct fctx *x, void **desc)
{
	struct fid_mr *mr;
	int ret;

	*desc = NULL;
	if (!f->mr_local || !len)
		return SMDDP_OK;
	ret = fi_mr_reg(f->domain, buf, len, acc, 0, 0, 0, &mr, NULL);
	if (!ret && f->mr_endpoint) {
		ret = fi_mr_bind(mr, &f->ep->fid, 0);
		if (!ret)
			ret = fi_mr_enable(mr);
		if (ret)
			fi_close(&mr->fid);
	}
	if (ret)
		return SD_FI_ERR(c, SMDDP_ENETWORK, ret, "registering memory");
	x->mr = mr;
	*desc = fi_mr_desc(mr);
	return SMDDP_OK;
}

static int peer_ok(struct smddp_comm *c, struct fab *f, int peer)
{
	if (peer < 0 || peer >= f->npeers)
		return sd_comm_error(c, SMDDP_EINTERNAL, "fabric: no rank %d (of %d)", peer,
				     f->npeers);
	return SMDDP_OK;
}

/* A post waiting for room in the provider's queue (or for the connection
 * to be made): what sd_wait's callbacks look at. */
struct qpost {
	struct smddp_comm *c;
	struct fab *f;
	int inject, is_send, peer;
	uint64_t tag;
	void *buf, *desc;
	size_t len;
	struct sd_freq *r;
	struct fctx *x;
	ssize_t ret; /* the post's answer, once not -FI_EAGAIN */
};

static ssize_t post_once(struct qpost *q)
{
	struct fab *f = q->f;

	if (q->inject)
		return fi_tinject(f->ep, q->buf, q->len, f->addrs[q->peer], q->tag);
	if (q->is_send)
		return fi_tsend(f->ep, q->buf, q->len, q->desc, f->addrs[q->peer], q->tag,
				&q->x->ctx);
	return fi_trecv(f->ep, q->buf, q->len, q->desc,
			q->peer >= 0 ? f->addrs[q->peer] : FI_ADDR_UNSPEC, q->tag, q->r->ignore,
			&q->x->ctx);
}

/* Try the post; while the queue is full, progress (which empties it). */
static int qpost_ready(void *arg, int *rc)
{
	struct qpost *q = arg;
	int got;

	q->ret = post_once(q);
	if (q->ret != -FI_EAGAIN)
		return SD_WAIT_DONE;
	*rc = fab_progress(q->c, &q->f->base, 0, &got);
	return *rc ? SD_WAIT_FAILED : SD_WAIT_NOT_YET;
}

static int qpost_sleep(void *arg, uint64_t ns, int *rc)
{
	struct qpost *q = arg;
	int got;

	(void)ns;
	*rc = fab_progress(q->c, &q->f->base, 1, &got);
	return *rc ? SD_WAIT_FAILED : SD_WAIT_NOT_YET;
}

/* Are the peers still there (sd_net_check_news of lib/transport/net/net.c)? */
static int qpost_health(void *arg)
{
	struct qpost *q = arg;
	int rc = sd_comm_cancelled(q->c);

	if (rc)
		return rc;
	return q->f->news ? q->f->news(q->c) : SMDDP_OK;
}

/* Post, progressing while the provider's queue is full: polls for 200 us,
 * then sleeps 1 ms at a time on the completion queue asking for news
 * before each sleep, for at most the patience (SMDDP_TIMEOUT by default).
 * q->ret: the post's answer. */
static int post_wait(struct qpost *q)
{
	struct smddp_comm *c = q->c;
	struct fab *f = q->f;
	struct sd_wait w = {
		.spin = INT_MAX,
		.yield_mask = ~0u,
		.spin_ns = 200000ull,
		.nap_ns = 1000000ull,
		.nap_max_ns = 1000000ull,
		.liveness_ns = 0,
		.timeout_ns = f->patience_ns ? f->patience_ns : c->timeout_ns,
		.ready = qpost_ready,
		.sleep = qpost_sleep,
		.health = qpost_health,
		.arg = q,
	};
	int rc = sd_wait(&w);

	if (w.expired)
		return sd_comm_error(c, SMDDP_ENETWORK,
				     "libfabric: the queue towards rank %d stayed full for %.1f s "
				     "(%s): that rank or its link is gone",
				     q->peer, (double)w.timeout_ns / 1e9, f->desc);
	return rc;
}

static void fab_on_wait(struct sd_fab *base, int (*news)(struct smddp_comm *c))
{
	struct fab *f = (struct fab *)base;

	f->news = news;
}

/* Post a send or a receive, progressing while the provider's queue is full. */
static int post(struct smddp_comm *c, struct fab *f, int is_send, int peer, uint64_t tag,
		void *buf, size_t len, struct sd_freq *r)
{
	struct qpost q;
	struct fctx *x;
	void *desc;
	ssize_t ret;

	if (f->poisoned)
		return sd_comm_error(c, SMDDP_ENETWORK,
				     "libfabric: the endpoint (%s) is unusable after a failed call left "
				     "transfers behind; destroy the communicator",
				     f->desc);
	if (peer >= 0 || is_send)
		SD_CHECK(peer_ok(c, f, peer));
	r->fab = &f->base;
	r->peer = peer;
	r->is_send = is_send;
	r->len = len;
	q = (struct qpost){.c = c, .f = f, .is_send = is_send, .peer = peer, .tag = tag,
			   .buf = buf, .len = len, .r = r};
	if (is_send && len <= f->info->tx_attr->inject_size) {
		/* Small: the provider copies it now and reports no completion
		 * (waiting for one costs a round trip). */
		q.inject = 1;
		SD_CHECK(post_wait(&q));
		ret = q.ret;
		if (ret)
			goto failed;
		r->done = 1;
		return SMDDP_OK;
	}
	x = ctx_get(f);
	if (!x)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	x->is_recv = !is_send;
	x->keep = r->keep;
	{
		int rc = reg(c, f, buf, len, is_send ? FI_SEND : FI_RECV, x, &desc);

		if (rc) {
			ctx_put(f, x);
			return rc;
		}
	}
	q.desc = desc;
	q.x = x;
	{
		int rc = post_wait(&q);

		if (rc) {
			ctx_put(f, x);
			return rc;
		}
	}
	ret = q.ret;
	if (ret) {
		ctx_put(f, x);
		goto failed;
	}
	x->owner = r;
	r->fc = x;
	return SMDDP_OK;
failed:
	return SD_FI_ERR(c, SMDDP_ENETWORK, ret, "%s %zu bytes %s rank %d",
			 is_send ? "sending" : "posting a receive of", len, is_send ? "to" : "from", peer);
}

static int fab_send(struct smddp_comm *c, struct sd_fab *base, int peer, uint64_t tag, const void *buf,
		size_t len, struct sd_freq *r)
{
	struct fab *f = (struct fab *)base;

	return post(c, f, 1, peer, tag, (void *)buf, len, r);
}

static int fab_recv(struct smddp_comm *c, struct sd_fab *base, int peer, uint64_t tag, void *buf,
		size_t len, struct sd_freq *r)
{
	struct fab *f = (struct fab *)base;

	return post(c, f, 0, peer, tag, buf, len, r);
}

/* Read up to 32 completions: the number read, 0 when none came, or a
 * negative libfabric error (-FI_EAVAIL: *bad holds the failed operation's
 * entry; its context has been released). */
static ssize_t reap(struct fab *f, int wait_ms, struct fi_cq_err_entry *bad, int *stale)
{
	struct fi_cq_tagged_entry e[32];
	ssize_t n;

	*stale = 0;
	if (wait_ms > 0 && f->cq_waits)
		n = fi_cq_sread(f->cq, e, 32, NULL, wait_ms);
	else
		n = fi_cq_read(f->cq, e, 32);
	if (n == -FI_EAGAIN || n == -FI_ETIMEDOUT || n == -FI_EINTR) {
		if (n == -FI_EAGAIN && wait_ms > 0 && !f->cq_waits) {
			struct timespec ts = {0, 200000};

			nanosleep(&ts, NULL);
		}
		return 0;
	}
	if (n == -FI_EAVAIL) {
		struct fctx *x;

		memset(bad, 0, sizeof(*bad));
		if (fi_cq_readerr(f->cq, bad, 0) < 0)
			return -FI_EIO;
		x = bad->op_context;
		if (x) {
			struct sd_freq *r = x->owner && x->owner->fc == x ? x->owner : NULL;

			if (r) {
				r->err = bad->err ? bad->err : FI_EIO;
				r->done = 1;
			}
			*stale = !r;
			/* Keep what the message needs; the context goes. */
			bad->op_context = r;
			ctx_put(f, x);
		}
		return -FI_EAVAIL;
	}
	if (n < 0)
		return n;
	for (ssize_t i = 0; i < n; i++) {
		struct fctx *x = e[i].op_context;
		struct sd_freq *r;

		if (!x)
			continue;
		/* A request reused for another operation is not this one's. */
		r = x->owner && x->owner->fc == x ? x->owner : NULL;
		if (r) {
			if (!r->is_send) {
				r->len = e[i].len;
				r->tag = e[i].tag;
			}
			r->done = 1;
		}
		ctx_put(f, x);
	}
	return n;
}

static int fab_notify(struct sd_fab *base, int peer, uint64_t tag, const void *buf, size_t len,
		  struct sd_freq *r)
{
	struct fab *f = (struct fab *)base;

	struct fctx *x;

	if (peer < 0 || peer >= f->npeers || f->poisoned)
		return -1;
	memset(r, 0, sizeof(*r));
	r->fab = &f->base;
	r->peer = peer;
	r->is_send = 1;
	r->len = len;
	if (f->mr_local)
		return -1; /* would need a registration: the bootstrap tells them too */
	x = ctx_get(f);
	if (!x)
		return -1;
	x->keep = 1;
	/* A connection not made yet answers EAGAIN until progress makes it:
	 * a little patience, bounded. */
	uint64_t until = sd_now_ns() + 30000000ull;
	ssize_t ret;

	while ((ret = fi_tsend(f->ep, (void *)buf, len, NULL, f->addrs[peer], tag, &x->ctx)) ==
		       -FI_EAGAIN &&
	       sd_now_ns() < until) {
		struct fi_cq_err_entry bad;
		int stale;

		reap(f, 0, &bad, &stale);
	}
	if (ret) {
		ctx_put(f, x);
		memset(r, 0, sizeof(*r));
		return -1;
	}
	x->owner = r;
	r->fc = x;
	return 0;
}

static int fab_poisoned(struct sd_fab *base)
{
	struct fab *f = (struct fab *)base;

	return f && f->poisoned;
}

static void fab_patience(struct sd_fab *base, uint64_t ns)
{
	struct fab *f = (struct fab *)base;

	f->patience_ns = ns;
}

static void fab_cancel(struct sd_fab *base, struct sd_freq *r)
{
	struct fab *f = (struct fab *)base;

	if (f && f->ep && !r->done && r->fc)
		fi_cancel(&f->ep->fid, &((struct fctx *)r->fc)->ctx);
}

static int fab_forget(struct sd_fab *base, int wait_ms)
{
	struct fab *f = (struct fab *)base;

	uint64_t until = sd_now_ns() + (uint64_t)wait_ms * 1000000ull;
	int left = 0;

	if (!f || !f->busy)
		return 0;
	for (struct fctx_block *b = f->blocks; b; b = b->next)
		for (int i = 0; i < FCTX_BLOCK; i++) {
			struct fctx *x = &b->c[i];

			if (!x->busy || x->keep)
				continue;
			if (x->owner)
				x->owner->fc = NULL;
			x->owner = NULL;
			if (x->is_recv)
				fi_cancel(&f->ep->fid, &x->ctx);
		}
	for (;;) {
		struct fi_cq_err_entry bad;
		int stale;

		left = 0;
		for (struct fctx_block *b = f->blocks; b; b = b->next)
			for (int i = 0; i < FCTX_BLOCK; i++)
				left += b->c[i].busy && !b->c[i].keep;
		if (!left || sd_now_ns() >= until)
			break;
		/* A kept operation that fails here has err set in its
		 * owner; the rest is not news. */
		reap(f, 1, &bad, &stale);
	}
	if (left) {
		/* They may still read or write their buffers whenever the
		 * endpoint progresses: it never does again, and the buffers the
		 * library owns are not freed (sd_fab_poisoned). */
		f->poisoned = 1;
		SD_INFO(SD_SUB_NET,
			"%d operations of a failed collective are still held by %s: the endpoint "
			"stops here",
			left, f->desc);
	}
	return left;
}

/* *got: completions read (a cancel, or a failure of an operation that a
 * failed collective left behind, counts as one: not news). */
static int fab_progress(struct smddp_comm *c, struct sd_fab *base, int wait_ms, int *got)
{
	struct fab *f = (struct fab *)base;

	struct fi_cq_err_entry ee;
	char buf[128];
	int stale;
	ssize_t n;

	*got = 0;
	if (f->poisoned)
		return SMDDP_ENETWORK; /* the reason is already in last_error */
	n = reap(f, wait_ms, &ee, &stale);

	if (n >= 0) {
		*got = (int)n;
		return SMDDP_OK;
	}
	if (n == -FI_EAVAIL) {
		struct sd_freq *r = ee.op_context;

		if (ee.err == FI_ECANCELED || stale) {
			*got = 1;
			return SMDDP_OK;
		}
		char who[32] = "a rank";

		if (r && r->peer >= 0)
			snprintf(who, sizeof(who), "rank %d", r->peer);
		return sd_comm_error(
			c, SMDDP_ENETWORK, "libfabric: %s %s failed: %s (%s)",
			r && r->is_send ? "sending to" : "receiving from", who, fi_strerror(ee.err),
			fi_cq_strerror(f->cq, ee.prov_errno, ee.err_data, buf, sizeof(buf)));
	}
	if (n == -FI_EIO)
		return sd_comm_error(c, SMDDP_ENETWORK, "libfabric: a transfer failed");
	return SD_FI_ERR(c, SMDDP_ENETWORK, n, "reading completions");
}

static int fab_close(struct sd_fab *base)
{
	struct fab *f = (struct fab *)base;

	if (!f)
		return 0;
	if (f->ep && f->busy) {
		/* Everything still posted goes first, bounded. */
		for (struct fctx_block *b = f->blocks; b; b = b->next)
			for (int i = 0; i < FCTX_BLOCK; i++)
				b->c[i].keep = 0;
		if (f->poisoned || fab_forget(&f->base, 200)) {
			/* libfabric 1.17's rxm can crash closing an endpoint
			 * whose sends wait on a broken connection: leave it
			 * to the end of the process (its sockets close then). */
			SD_WARN(SD_SUB_NET,
				"%d transfers towards lost peers never ended: the libfabric endpoint "
				"(%s) stays open until the process exits",
				f->busy, f->desc);
			return 1;
		}
	}
	if (f->ep)
		fi_close(&f->ep->fid);
	if (f->av)
		fi_close(&f->av->fid);
	if (f->cq)
		fi_close(&f->cq->fid);
	if (f->domain)
		fi_close(&f->domain->fid);
	if (f->fabric)
		fi_close(&f->fabric->fid);
	if (f->info)
		fi_freeinfo(f->info);
	while (f->blocks) {
		struct fctx_block *b = f->blocks;

		/* The endpoint is closed: the provider holds nothing now. */
		for (int i = 0; i < FCTX_BLOCK; i++)
			if (b->c[i].mr)
				fi_close(&b->c[i].mr->fid);
		f->blocks = b->next;
		free(b);
	}
	free(f->addrs);
	free(f);
	return 0;
}

const struct sd_ep_ops sd_ep_fabric = {
	.size = sizeof(struct sd_ep_ops),
	.name = "fabric",
	.open = fab_open,
	.name_of = fab_name,
	.describe = fab_describe,
	.kind = fab_kind,
	.insert = fab_insert,
	.send = fab_send,
	.recv = fab_recv,
	.notify = fab_notify,
	.patience = fab_patience,
	.on_wait = fab_on_wait,
	.cancel = fab_cancel,
	.forget = fab_forget,
	.poisoned = fab_poisoned,
	.progress = fab_progress,
	.close = fab_close,
};
