/* comm.c - communicator lifecycle: init from the environment, split, destroy, abort.
 *
 * smddp_init discovers rank and size (SMDDP_*, torchrun, Open MPI, Slurm,
 * else a single rank), meets the other ranks through the TCP bootstrap,
 * then rank 0 creates the communicator's shared segment, every rank maps it,
 * an out-of-band all-gather confirms that all did, and the segment's name is
 * unlinked.  A split does the same over its parent's own collectives.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/errors.h"
#include "bootstrap/bootstrap.h"
#include "clock/clock.h"
#include "coll/coll.h"
#include "coll/net.h"
#include "config/param.h"
#include "core/api.h"
#include "core/comm.h"
#include "core/said.h"
#include "core/trace.h"
#include "cuda/cuda.h"
#include "hash/fnv.h"
#include "topo/topo.h"
#include "transport/transport.h"

#define REC_NAME 64
#ifndef YIELD_SPIN
#define YIELD_SPIN 50
#endif
#define REC_MSG 184

/* What the segment's creator tells the others, and what each rank says back. */
struct seg_record {
	char name[REC_NAME];
	int32_t status;
	int32_t check_coll;        /* settings every rank must share (agree()) */
	uint64_t single_copy_min;
	char msg[REC_MSG];
};

/* ---- rank discovery --------------------------------------------------- */

static int env_int(struct smddp_comm *c, const char *name, int *out)
{
	const char *v = getenv(name);
	int64_t x;

	if (!v || !*v)
		return 1;
	if (sd_parse_int(v, &x) != 0 || x < 0 || x > 1 << 24) {
		return sd_comm_error(c, SMDDP_ECONFIG, "%s=\"%s\": expected a non-negative integer",
				     name, v) ? -1 : -1;
	}
	*out = (int)x;
	return 0;
}

static const struct {
	const char *rank, *size, *local_rank, *local_size, *who;
} rank_vars[] = {
	{"SMDDP_RANK", "SMDDP_WORLD_SIZE", "SMDDP_LOCAL_RANK", "SMDDP_LOCAL_WORLD_SIZE", "SMDDP"},
	{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "torchrun"},
	{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
	 "OMPI_COMM_WORLD_LOCAL_SIZE", "Open MPI"},
	{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", NULL, "Slurm"},
};

static int discover(struct smddp_comm *c)
{
	for (size_t i = 0; i < sizeof(rank_vars) / sizeof(rank_vars[0]); i++) {
		int rank = -1, size = -1, rc;

		rc = env_int(c, rank_vars[i].rank, &rank);
		if (rc < 0)
			return SMDDP_ECONFIG;
		if (rc > 0)
			continue;
		rc = env_int(c, rank_vars[i].size, &size);
		if (rc < 0)
			return SMDDP_ECONFIG;
		if (rc > 0)
			return sd_comm_error(c, SMDDP_ECONFIG,
					     "%s is set but %s is not: set both (or launch with smddp-run)",
					     rank_vars[i].rank, rank_vars[i].size);
		if (size < 1 || rank >= size)
			return sd_comm_error(c, SMDDP_ECONFIG,
					     "%s=%d and %s=%d: the rank must be below the size",
					     rank_vars[i].rank, rank, rank_vars[i].size, size);
		c->rank = rank;
		c->size = size;
		SD_INFO(SD_SUB_INIT, "rank %d of %d from %s variables", rank, size, rank_vars[i].who);
		return SMDDP_OK;
	}
	c->rank = 0;
	c->size = 1;
	SD_INFO(SD_SUB_INIT, "no rank variables (SMDDP_RANK, RANK, OMPI_COMM_WORLD_RANK, "
			     "SLURM_PROCID): running as a single rank");
	return SMDDP_OK;
}

static const char *first_env(const char *a, const char *b)
{
	const char *v = getenv(a);

	if (v && *v)
		return v;
	v = getenv(b);
	return v && *v ? v : NULL;
}

static void host_identity(char *buf, size_t len)
{
	const char *v = getenv("SMDDP_HOSTID");
	char host[64] = "localhost", boot[SD_BOOT_ID_LEN];

	if (v && *v) {
		snprintf(buf, len, "%s", v);
		return;
	}
	gethostname(host, sizeof(host) - 1);
	sd_boot_id(boot, sizeof(boot));
	snprintf(buf, len, "%s/%s", host, boot);
}

/* splitmix64's finaliser: agreed inputs give an agreed, well-spread uid. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void set_jobid(struct smddp_comm *c, uint64_t nonce)
{
	const char *v = getenv("SMDDP_JOB_ID");
	size_t n = 0;

	if (v) {
		for (; *v && n < 32; v++)
			if (isalnum((unsigned char)*v) || *v == '_' || *v == '-')
				c->jobid[n++] = *v;
	}
	c->jobid[n] = 0;
	if (!n)
		snprintf(c->jobid, sizeof(c->jobid), "n%012llx",
			 (unsigned long long)(nonce & 0xffffffffffffull));
}

static int read_tunables(struct smddp_comm *c)
{
	int64_t spin = sd_param_int("SMDDP_SPIN");
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	/* The registry has checked the ranges: timeout and liveness positive,
	 * the chunk from 4K. */
	c->timeout_ns = (uint64_t)sd_param_int("SMDDP_TIMEOUT") * 1000000000ull;
	c->timeout_from = "SMDDP_TIMEOUT";
	c->check_coll = (int)sd_param_int("SMDDP_CHECK_COLL");
	c->liveness_ns = (uint64_t)sd_param_int("SMDDP_LIVENESS_MS") * 1000000ull;
	c->chunk = ((size_t)sd_param_int("SMDDP_SHM_CHUNK") + 63) & ~(size_t)63;
	c->single_copy = (int)sd_param_int("SMDDP_SINGLE_COPY");
	c->single_copy_min = (size_t)sd_param_int("SMDDP_SINGLE_COPY_MIN");
	c->single_copy_ptracer = (int)sd_param_int("SMDDP_SINGLE_COPY_PTRACER");
	/* With a core per rank, poll (yielding every 16 polls to whatever else
	 * runs there: two ranks that the scheduler left on one core, where a
	 * pause can cost a hypervisor's exit, hand the core over in microseconds
	 * rather than tens); with more ranks than cores, every poll yields, so
	 * that the rank being waited for gets the core, and a short while later
	 * sleep on the futex. */
	if (spin < 0)
		spin = c->size <= ncpu ? 20000 : YIELD_SPIN;
	c->spin = (int)spin;
	c->yield_mask = c->size <= ncpu ? 15 : 0;
	return SMDDP_OK;
}

/* Create (leader) or map the communicator's segment.  Two gathers over
 * `via` (the bootstrap for the world, the parent's collectives for a split)
 * make every rank agree on the outcome, so that all fail together, naming
 * the rank that could not.  c is NULL on a rank that takes part without
 * joining (negative color); want says it should have joined (no memory). */
typedef int (*gather_fn)(struct smddp_comm *via, const void *mine, void *all, size_t len);

/* Settings that decide how many steps a call takes, read by each rank from
 * its own environment: ranks that differ would go out of step (one
 * compares calls and the other not, one reads peers' buffers and the
 * other stages), so a job whose ranks differ fails to start, on every
 * rank alike.  Splits inherit them, so this matters at init. */
static int agree(struct smddp_comm *c, const struct seg_record *all, int n)
{
	for (int r = 1; r < n; r++) {
		if (all[r].check_coll != all[0].check_coll)
			return sd_comm_error(c, SMDDP_EINVAL,
					     "SMDDP_CHECK_COLL is %d on rank %d but %d on rank 0: set "
					     "it the same on every rank (the ranks compare calls only "
					     "if all do)",
					     (int)all[r].check_coll, r, (int)all[0].check_coll);
		if (all[r].single_copy_min != all[0].single_copy_min)
			return sd_comm_error(c, SMDDP_EINVAL,
					     "SMDDP_SINGLE_COPY_MIN is %llu on rank %d but %llu on "
					     "rank 0: set it the same on every rank (it picks the "
					     "protocol of a call)",
					     (unsigned long long)all[r].single_copy_min, r,
					     (unsigned long long)all[0].single_copy_min);
	}
	return SMDDP_OK;
}

static int setup_segment(struct smddp_comm *c, int want, struct smddp_comm *via, int leader_via,
			 int is_leader, gather_fn gather, const int *members)
{
	struct seg_record mine, *all;
	int rc, lrc = SMDDP_OK;

	all = calloc((size_t)via->size, sizeof(*all));
	if (!all)
		return sd_comm_error(via, SMDDP_ENOMEM, "out of memory");
	memset(&mine, 0, sizeof(mine));
	if (c && is_leader) {
		lrc = c->tp->create(c, mine.name, sizeof(mine.name));
		mine.status = lrc;
		if (lrc)
			snprintf(mine.msg, sizeof(mine.msg), "%s", c->last_error);
	} else if (!c && want) {
		mine.status = SMDDP_ENOMEM;
		snprintf(mine.msg, sizeof(mine.msg), "out of memory");
	}
	mine.check_coll = via->check_coll;
	mine.single_copy_min = via->single_copy_min;
	rc = gather(via, &mine, all, sizeof(mine));
	if (rc)
		goto out;
	if (c && !lrc)
		lrc = agree(c, all, via->size);
	if (c && !lrc) {
		if (all[leader_via].status) {
			lrc = sd_comm_error(c, all[leader_via].status,
					    "the rank that creates the shared segment failed: %s",
					    all[leader_via].msg);
		} else {
			lrc = c->tp->attach(c, all[leader_via].name, is_leader);
		}
	}
	memset(&mine, 0, sizeof(mine));
	mine.status = (!c && want) ? SMDDP_ENOMEM : lrc;
	if (mine.status)
		snprintf(mine.msg, sizeof(mine.msg), "%s", c ? c->last_error : "out of memory");
	rc = gather(via, &mine, all, sizeof(mine));
	if (rc)
		goto out;
	if (c && !lrc) {
		for (int i = 0; i < c->size; i++) {
			int vr = members ? members[i] : i;

			if (all[vr].status && vr != via->rank) {
				lrc = sd_comm_error(c, all[vr].status,
						    "rank %d could not join the communicator: %s", i,
						    all[vr].msg);
				break;
			}
		}
	}
	/* Every member mapped the segment: now it can be used among them. */
	if (c && !lrc)
		lrc = c->tp->finish(c);
	rc = lrc;
out:
	/* Every member has mapped it (or given up): the name can go. */
	if (c && is_leader && c->tp_state)
		c->tp->unlink(c);
	if (rc && c && via != c && !c->last_error[0])
		snprintf(c->last_error, sizeof(c->last_error), "%s", via->last_error);
	free(all);
	return rc;
}

static int boot_gather(struct smddp_comm *c, const void *mine, void *all, size_t len)
{
	struct sd_err err;
	int rc;

	if (c->size == 1) {
		memcpy(all, mine, len);
		return SMDDP_OK;
	}
	rc = sd_boot_allgather(c->boot, mine, all, len, sd_now_ns() + c->timeout_ns, &err);
	if (rc)
		return sd_comm_error(c, rc, "%s", err.msg);
	return SMDDP_OK;
}

static int coll_gather(struct smddp_comm *c, const void *mine, void *all, size_t len)
{
	return sd_coll_allgather(c, mine, all, len, SMDDP_UINT8);
}

static void comm_free(struct smddp_comm *c, int clean)
{
	if (!c)
		return;
	sd_cuda_comm_free(c);
	if (c->net) {
		struct smddp_comm *node = sd_net_node(c, 0);

		/* The bootstrap, if any, is the job's now: closed with its
		 * last communicator. */
		sd_net_free(c, clean);
		if (node)
			node->boot = NULL;
		comm_free(node, clean);
		c->boot = NULL;
	}
	sd_trace_close(c);
	sd_rejoin_free(c);
	if (c->tp && c->tp_state)
		c->tp->detach(c);
	if (c->boot)
		sd_boot_close(c->boot, sd_boot_how(clean, c->failed));
	free(c->scratch);
	free((void *)c->names);
	free(c->pids);
	free(c);
}

static void inherit_tunables(struct smddp_comm *c, const struct smddp_comm *from)
{
	c->timeout_ns = from->timeout_ns;
	c->timeout_from = from->timeout_from;
	c->check_coll = from->check_coll;
	c->spin = from->spin;
	c->yield_mask = from->yield_mask;
	c->liveness_ns = from->liveness_ns;
	c->chunk = from->chunk;
	/* Asked for afresh: the parent's probe may have turned it off for
	 * ranks that are not in this communicator. */
	c->single_copy = (int)sd_param_int("SMDDP_SINGLE_COPY");
	c->single_copy_min = from->single_copy_min;
	c->single_copy_ptracer = from->single_copy_ptracer;
	memcpy(c->jobid, from->jobid, sizeof(c->jobid));
}

/* Collective over via: every rank of via calls it, c NULL where it joins
 * nothing (want 0) or could not allocate (want 1).  c's ranks on this host
 * get a shared-memory communicator of their own (its segment made like any
 * other's); where c spans hosts it also gets its fabric endpoint, and c
 * itself the net transport.  Where it does not (a split inside one host),
 * c is simply a shared-memory communicator.  vhost[v]: host of via's rank
 * v; members[i]: via's rank of c's rank i (NULL: the same). */
static int setup_spanning(struct smddp_comm *c, int want, struct smddp_comm *via,
			  gather_fn gather, const int *members, char (*vhost)[SD_HOSTID_MAX],
			  struct sd_job *job)
{
	struct smddp_comm *node = NULL, *seg = NULL;
	int *nm = NULL, nl = 0, spans = 0, rc, rc2;

#define V(i) (members ? members[i] : (i))
	if (c) {
		const char *mine = vhost[V(c->rank)];

		nm = calloc((size_t)c->size, sizeof(int));
		for (int i = 0; i < c->size; i++)
			spans |= strcmp(vhost[V(i)], mine) != 0;
		if (!nm) {
			/* Take part without joining: the others hear ENOMEM. */
		} else if (!spans) {
			seg = c;
			c->tp = &sd_transport_shm;
			for (int i = 0; i < c->size; i++)
				nm[i] = V(i);
		} else if ((node = calloc(1, sizeof(*node))) &&
			   (node->pids = calloc((size_t)c->size, sizeof(pid_t)))) {
			for (int i = 0; i < c->size; i++) {
				if (strcmp(vhost[V(i)], mine))
					continue;
				if (i == c->rank)
					node->rank = nl;
				node->pids[nl] = c->pids[i];
				nm[nl++] = V(i);
			}
			node->size = nl;
			/* Its messages name ranks as c does. */
			int *names = malloc((size_t)nl * sizeof(int));

			for (int i = 0, k = 0; names && i < c->size; i++)
				if (!strcmp(vhost[V(i)], mine))
					names[k++] = i;
			node->names = names;
			node->local_rank = node->rank;
			node->local_size = nl;
			node->tp = &sd_transport_shm;
			node->cancel = c->cancel; /* cancelling c cancels its node part */
			inherit_tunables(node, c);
			/* A local peer that keeps the others waiting inside a
			 * collective between hosts is usually waiting on the
			 * network itself: its SMDDP_TIMEOUT there must fire,
			 * and reach us, before ours here (which could only say
			 * that it did not arrive). */
			node->timeout_ns = c->timeout_ns + 2 * c->liveness_ns + 2000000000ull;
			seg = node;
		} else {
			free(node);
			node = NULL;
		}
	}
	rc = setup_segment(seg, want, via, seg ? nm[0] : 0, seg && seg->rank == 0, gather, nm);
	if (rc && c && node && node->last_error[0])
		snprintf(c->last_error, sizeof(c->last_error), "%s", node->last_error);
	/* The endpoints: everyone takes part, also where the above failed. */
	rc2 = sd_net_setup(c && spans && !rc ? c : NULL, node, via, gather, members, vhost, job,
			   job->ip, &sd_transport_net);
	if (!rc)
		rc = rc2;
	if (c && spans && !rc) {
		c->local_rank = node->rank;
		c->local_size = node->size;
		/* The world's host communicator also listens to the bootstrap,
		 * so that its waits hear of deaths on other hosts (and rank 0
		 * relays them) while it works inside the host.  Not closed
		 * with it: the job owns the channel. */
		if (c->is_world)
			node->boot = job->boot;
	} else if (node) {
		if (c && c->net) {
			sd_net_node(c, 1);
			sd_net_free(c, 0);
			c->tp = &sd_transport_shm;
		}
		if (node->tp_state)
			node->tp->abort(node);
		comm_free(node, 0);
	}
	free(nm);
	return rc;
#undef V
}

/* A topology given by the user (SMDDP_TOPO_FILE) replaces discovery:
 * sd_comm_init checks it first, so that a bad file fails there and not in
 * the middle of a job.  (Discovery itself costs ~0.4 s and is done only
 * when a choice needs it: NICs between hosts.) */
static int check_topo_file(void)
{
	const struct smddp_topo *topo;
	int rc;

	if (!*sd_param_str("SMDDP_TOPO_FILE"))
		return SMDDP_OK;
	rc = sd_topo_shared(&topo);
	if (rc) {
		sd_err_set(sd_init_err(), rc, "%s", smddp_topo_error());
		SD_WARN(SD_SUB_INIT, "%s", sd_init_err()->msg);
		return rc;
	}
	SD_INFO(SD_SUB_INIT, "topology: %d GPUs, %d NICs, %d NUMA nodes", smddp_topo_num_gpus(topo),
		smddp_topo_num_nics(topo), smddp_topo_num_numa(topo));
	return SMDDP_OK;
}

/* The rendezvous of c's ranks, for sd_comm_init: the TCP store of
 * lib/bootstrap/ for several ranks, this process alone for one.  Fills
 * peers and the nonce; *listen_fd (the socket of an id) is handed on to
 * sd_boot_init or closed, and -1 after either. */
static int join_rendezvous(struct smddp_comm *c, const struct sd_init_how *how, const char *hostid,
			   struct sd_boot_peer *peers, uint64_t *nonce, int *listen_fd)
{
	if (c->size > 1) {
		const char *addr = how ? how->addr : first_env("SMDDP_MASTER_ADDR", "MASTER_ADDR");
		const char *port = how ? how->port : first_env("SMDDP_MASTER_PORT", "MASTER_PORT");
		const char *token = how ? how->token : getenv("SMDDP_JOB_TOKEN");
		struct sd_boot_params bp;
		struct sd_err err;
		int rc;

		if (!addr || !port)
			return sd_comm_error(c, SMDDP_ECONFIG,
					     "%d ranks need a rendezvous point: set MASTER_ADDR and "
					     "MASTER_PORT (or SMDDP_MASTER_ADDR/SMDDP_MASTER_PORT) to "
					     "rank 0's address and a free port, or launch with smddp-run",
					     c->size);
		bp.rank = c->rank;
		bp.size = c->size;
		bp.addr = addr;
		bp.port = port;
		bp.token = token ? token : "";
		bp.allow_no_token = (int)sd_param_int("SMDDP_ALLOW_NO_TOKEN");
		bp.hostid = hostid;
		bp.deadline_ns = sd_now_ns() + c->timeout_ns;
		bp.listen_fd = *listen_fd;
		bp.key_differs = how ? how->key_differs : NULL;
		bp.gone = how ? how->gone : NULL;
		bp.gone_arg = how ? how->gone_arg : NULL;
		*listen_fd = -1; /* sd_boot_init's now, whatever happens */
		rc = sd_boot_init(&bp, &c->boot, peers, nonce, &err);
		return rc ? sd_comm_error(c, rc, "%s", err.msg) : SMDDP_OK;
	}
	snprintf(peers[0].hostid, sizeof(peers[0].hostid), "%s", hostid);
	peers[0].pid = getpid();
	*nonce = sd_now_ns() ^ ((uint64_t)getpid() << 40);
	if (*listen_fd >= 0) { /* an id for one rank: nobody will connect */
		close(*listen_fd);
		*listen_fd = -1;
	}
	return SMDDP_OK;
}

/* c's ranks are on several hosts (sd_comm_init): the transport between
 * hosts over the world's bootstrap channel (libfabric's endpoint, or
 * libsmddp's sockets in a build without libfabric). */
static int join_hosts(struct smddp_comm *c, const struct sd_boot_peer *peers)
{
	char (*vhost)[SD_HOSTID_MAX] = calloc((size_t)c->size, SD_HOSTID_MAX);
	struct sd_job *job = calloc(1, sizeof(*job));
	int rc;

	if (!vhost || !job) {
		free(vhost);
		free(job);
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	}
	for (int q = 0; q < c->size; q++)
		memcpy(vhost[q], peers[q].hostid, SD_HOSTID_MAX);
	job->boot = c->boot;
	sd_net_boot_ip(c->boot, job->ip, sizeof(job->ip));
	rc = setup_spanning(c, 1, c, boot_gather, NULL, vhost, job);
	free(vhost);
	if (!job->refs)
		free(job);
	return rc;
}

/* Both ways in: smddp_init (how == NULL: everything from the environment)
 * and smddp_comm_init_rank (rank, size and rendezvous given). */
int sd_comm_init(struct smddp_comm **out, const struct sd_init_how *how)
{
	struct smddp_comm *c = NULL;
	struct sd_boot_peer *peers = NULL;
	char hostid[SD_HOSTID_MAX], trace_id[48] = "0";
	uint64_t nonce = 0;
	/* The socket of smddp_comm_init_rank's id: ours to close until
	 * sd_boot_init takes it, whatever happens. */
	int rc, listen_fd = how ? how->listen_fd : -1, spans = 0, trace_rank, trace_size;

	sd_err_clear(sd_init_err());
	if (!out) {
		rc = sd_err_set(sd_init_err(), SMDDP_EINVAL, "smddp_init: comm is NULL");
		goto out;
	}
	*out = NULL;
	sd_log_init();
	sd_check_signals();
	rc = sd_params_load(sd_init_err());
	if (rc) {
		SD_WARN(SD_SUB_CONFIG, "%s", sd_init_err()->msg);
		goto out;
	}
	rc = check_topo_file();
	if (rc)
		goto out;
	c = calloc(1, sizeof(*c));
	if (!c) {
		rc = sd_err_set(sd_init_err(), SMDDP_ENOMEM, "smddp_init: out of memory");
		goto out;
	}
	c->is_world = 1;
	c->cancel = &c->cancelled;
	c->serial = sd_api_serial();
	c->tp = &sd_transport_shm;
	c->cur.coll = SD_COLL_INIT;
	c->rank = -1;
	if (how) {
		c->rank = how->rank;
		c->size = how->size;
	} else {
		rc = discover(c);
		if (rc)
			goto fail;
	}
	if (!how || !how->parent) /* a shrink's log lines keep the job's rank */
		sd_log_set_rank(c->rank);
	trace_rank = c->rank;
	trace_size = c->size;
	if (how && how->parent)
		inherit_tunables(c, how->parent); /* a shrink: the parent's settings */
	else
		read_tunables(c);
	if (how && how->timeout_ns) {
		c->timeout_ns = how->timeout_ns;
		c->timeout_from = "the communicator's timeout_ms";
	}
	c->pids = calloc((size_t)c->size, sizeof(*c->pids));
	peers = calloc((size_t)c->size, sizeof(*peers));
	if (!c->pids || !peers) {
		rc = sd_comm_error(c, SMDDP_ENOMEM, "out of memory for %d ranks", c->size);
		goto fail;
	}
	host_identity(hostid, sizeof(hostid));
	rc = join_rendezvous(c, how, hostid, peers, &nonce, &listen_fd);
	if (rc)
		goto fail;
	for (int r = 0; r < c->size; r++)
		c->pids[r] = peers[r].pid;
	if (!how || !how->parent) /* a shrink keeps its parent's (inherit_tunables) */
		set_jobid(c, nonce);
	c->uid = mix64(nonce); /* rank 0's, the same on every rank */
	if (how && how->parent) {
		/* Its records name the job's ranks as the parent's do. */
		snprintf(trace_id, sizeof(trace_id), "%s.shrink%d", sd_trace_id(how->parent),
			 how->parent->shrinks + 1);
		trace_rank = sd_trace_world_rank(how->parent, &trace_size);
	}
	if (c->size > 1) {
		/* Ready for a shrink of this one: a shrink's key comes from the
		 * job's (or the id's) token, never from another shrink's key. */
		const char *token = how ? (how->parent ? sd_rejoin_token(how->parent) : how->token)
					: getenv("SMDDP_JOB_TOKEN");

		/* the host identity as a number: equal on one host */
		rc = sd_rejoin_setup(c, c, NULL, token ? token : "",
				     sd_fnv1a_str(SD_FNV1A_BASIS, hostid), boot_gather);
		if (rc)
			goto fail;
	}
	for (int r = 1; r < c->size && !spans; r++)
		spans = strcmp(peers[r].hostid, peers[0].hostid) != 0;
	if (spans) {
		rc = join_hosts(c, peers);
	} else {
		c->local_rank = c->rank;
		c->local_size = c->size;
		rc = setup_segment(c, 1, c, 0, c->rank == 0, boot_gather, NULL);
	}
	if (rc)
		goto fail;
	memset(&c->cur, 0, sizeof(c->cur));
	sd_trace_open(c, trace_id, trace_rank, trace_size);
	if (spans)
		SD_INFO(SD_SUB_INIT, "communicator ready: rank %d of %d (local %d of %d), "
				     "job %s, several hosts",
			c->rank, c->size, c->local_rank, c->local_size, c->jobid);
	else
		SD_INFO(SD_SUB_INIT, "communicator ready: rank %d of %d, job %s, shared memory, "
				     "spin %d",
			c->rank, c->size, c->jobid, c->spin);
	*out = c;
	goto out;
fail:
	/* c's failures went to c->last_error: the init error reads them. */
	sd_err_set(sd_init_err(), rc, "%s", c->last_error);
	c->failed = rc;
	if (c->tp_state)
		c->tp->abort(c);
	comm_free(c, 0);
out:
	if (listen_fd >= 0)
		close(listen_fd);
	free(peers);
	return rc;
}

SD_EXPORT int smddp_init(struct smddp_comm **out)
{
	return sd_comm_init(out, NULL);
}

struct split_rec {
	int32_t color, key;
	uint64_t seq; /* the split's call number on this rank */
};

/* timeout_ns: the new communicator's deadline, 0: the parent's. */
static int comm_split(struct smddp_comm *comm, int color, int key, uint64_t timeout_ns,
		      struct smddp_comm **out)
{
	struct split_rec mine = {color, key, 0}, *all = NULL;
	struct smddp_comm *c = NULL;
	int *members = NULL, n = 0, rc;

	if (comm)
		sd_api_async_forget(comm);
	if (!out)
		return comm ? sd_comm_error(comm, SMDDP_EINVAL, "smddp_comm_split: out is NULL")
			    : SMDDP_EINVAL;
	*out = NULL;
	rc = sd_api_enter(comm, SD_COLL_SPLIT, 0, 0, 0, 0, 0);
	if (rc) {
		if (comm && !comm->failed) { /* a mismatch (SMDDP_CHECK_COLL) */
			sd_trace_end(comm, rc);
			if (rc != SMDDP_EINVAL)
				sd_trace_failed(comm, rc);
		}
		return rc;
	}
	all = calloc((size_t)comm->size, sizeof(*all));
	members = calloc((size_t)comm->size, sizeof(*members));
	if (!all || !members) {
		/* Cannot even take part: the others will see this rank time out. */
		rc = sd_comm_error(comm, SMDDP_ENOMEM, "out of memory");
		goto out;
	}
	mine.seq = comm->cur.seq;
	SD_CHECK_GOTO(sd_coll_allgather(comm, &mine, all, sizeof(mine), SMDDP_UINT8), rc, out);
	if (color >= 0) {
		/* Members of my color by key, then parent rank: insertion sort
		 * is stable, and n is small. */
		for (int r = 0; r < comm->size; r++) {
			int j;

			if (all[r].color != color)
				continue;
			for (j = n; j > 0 && all[members[j - 1]].key > all[r].key; j--)
				members[j] = members[j - 1];
			members[j] = r;
			n++;
		}
		c = calloc(1, sizeof(*c));
		if (c && !(c->pids = calloc((size_t)n, sizeof(*c->pids)))) {
			free(c);
			c = NULL;
		}
	}
	if (c) {
		c->cancel = &c->cancelled;
		c->serial = sd_api_serial();
		/* What every member knows alike: the parent, the color, and the
		 * call number of the split on its first member (ranks' own
		 * numbers may differ after a rank-local error). */
		c->uid = mix64(comm->uid ^ mix64(all[members[0]].seq ^
						  mix64((uint64_t)(uint32_t)color)));
		c->tp = comm->tp;
		c->size = n;
		for (int i = 0; i < n; i++) {
			c->pids[i] = comm->pids[members[i]];
			if (members[i] == comm->rank)
				c->rank = i;
		}
		c->local_rank = c->rank;
		c->local_size = n;
		inherit_tunables(c, comm);
		if (timeout_ns) {
			c->timeout_ns = timeout_ns;
			c->timeout_from = "the communicator's timeout_ms";
		}
	}
	/* Ready for a shrink of the new one (every rank of the parent takes
	 * part, as in the set-up below). */
	if (comm->rejoin_at) {
		rc = sd_rejoin_setup(c, comm, members, sd_rejoin_token(comm),
				     comm->rejoin_at[comm->rank].host, coll_gather);
		if (rc) {
			comm_free(c, 0);
			c = NULL;
			goto out;
		}
	}
	if (comm->net)
		rc = setup_spanning(c, color >= 0, comm, coll_gather, members, sd_net_hosts(comm),
				    sd_net_job(comm));
	else
		rc = setup_segment(c, color >= 0, comm, c ? members[0] : 0, c && c->rank == 0,
				   coll_gather, members);
	if (!rc && color >= 0 && !c)
		rc = sd_comm_error(comm, SMDDP_ENOMEM, "out of memory for the new communicator");
	if (rc) {
		if (c) {
			if (c->last_error[0])
				snprintf(comm->last_error, sizeof(comm->last_error), "%s",
					 c->last_error);
			if (c->tp_state)
				c->tp->abort(c);
			comm_free(c, 0);
		}
		goto out;
	}
	SD_INFO(SD_SUB_INIT, "split: color %d key %d -> rank %d of %d", color, key,
		c ? c->rank : -1, c ? c->size : 0);
	if (c && comm->trace) {
		/* The same name on every member: the parent's, the split's
		 * call number there, the color. */
		char id[48];
		int wsize = 0, wrank = sd_trace_world_rank(comm, &wsize);

		snprintf(id, sizeof(id), "%s.%llu.%d", sd_trace_id(comm),
			 (unsigned long long)comm->cur.seq, color);
		sd_trace_open(c, id, wrank, wsize);
	}
	*out = c;
out:
	/* Not sd_api_leave: a failed split leaves the parent usable, unless
	 * it was cancelled: then it breaks, and the peers are told. */
	if (rc && sd_comm_cancelled(comm)) {
		comm->failed = rc;
		sd_cuda_abort(comm);
	}
	sd_trace_end(comm, rc);
	if (rc && rc != SMDDP_EINVAL)
		sd_trace_failed(comm, rc);
	memset(&comm->cur, 0, sizeof(comm->cur));
	free(all);
	free(members);
	return rc;
}

SD_EXPORT int smddp_comm_split(struct smddp_comm *comm, int color, int key, struct smddp_comm **out)
{
	return comm_split(comm, color, key, 0, out);
}

SD_EXPORT int smddp_comm_split_config(struct smddp_comm *comm, int color, int key,
				      const struct smddp_config *config, struct smddp_comm **out)
{
	uint64_t timeout_ns = 0;

	/* Checked on each rank before the split, as out is. */
	if (comm && config && config->size < sizeof(size_t))
		return sd_comm_error(comm, SMDDP_EINVAL,
				     "smddp_comm_split_config: config->size is %zu: set it to "
				     "sizeof(struct smddp_config)",
				     config->size);
	if (comm && config &&
	    config->size >= offsetof(struct smddp_config, timeout_ms) + sizeof(int)) {
		if (config->timeout_ms < 0)
			return sd_comm_error(comm, SMDDP_EINVAL,
					     "smddp_comm_split_config: timeout_ms %d is negative",
					     config->timeout_ms);
		timeout_ns = (uint64_t)config->timeout_ms * 1000000ull;
	}
	return comm_split(comm, color, key, timeout_ns, out);
}

SD_EXPORT int smddp_comm_destroy(struct smddp_comm *comm)
{
	int rc = SMDDP_OK;

	if (!comm)
		return SMDDP_EINVAL;
	if (!comm->failed) {
		rc = sd_api_enter(comm, SD_COLL_DESTROY, 0, 0, 0, 0, 0);
		if (!rc)
			rc = comm->tp->barrier(comm);
	}
	sd_trace_end(comm, rc);
	if (rc && !comm->failed && rc != SMDDP_EINVAL) {
		comm->failed = rc;
		sd_trace_failed(comm, rc);
	}
	if (comm->failed) {
		sd_cuda_stop(comm);
		comm->tp->abort(comm);
	}
	comm_free(comm, rc == SMDDP_OK && !comm->failed);
	return rc;
}

SD_EXPORT int smddp_comm_release(struct smddp_comm *comm)
{
	int rc;

	if (!comm)
		return SMDDP_EINVAL;
	/* Broken already: the call that broke it returned the failure. */
	if (comm->failed)
		return smddp_comm_abort(comm);
	/* Cancelled, and no call failed on it yet: it leaves as broken too,
	 * not with the clean close, and says so. */
	if ((rc = sd_comm_cancelled(comm))) {
		sd_err_set(sd_init_err(), rc, "%s", comm->last_error);
		smddp_comm_abort(comm);
		return rc;
	}
	/* Every call of this rank has returned, so no peer still needs this
	 * rank's memory or messages: the clean close (BYE) tells them not to
	 * take the closing connections as a death. */
	rc = sd_cuda_collect(comm, 1);
	if (!rc)
		rc = comm->failed;
	if (rc) {
		/* Queued work failed and no call returned it: this is the
		 * last chance, and comm is gone after it, so its sentence goes
		 * where smddp_last_error(NULL) finds it. */
		sd_err_set(sd_init_err(), rc, "%s", comm->last_error);
		smddp_comm_abort(comm);
		return rc;
	}
	comm_free(comm, 1);
	return SMDDP_OK;
}

SD_EXPORT int smddp_comm_abort(struct smddp_comm *comm)
{
	if (!comm)
		return SMDDP_EINVAL;
	/* The GPU proxy first (its call fails at once): the transport and the
	 * bootstrap are then this thread's alone. */
	sd_cuda_stop(comm);
	if (comm->tp_state || comm->net)
		comm->tp->abort(comm);
	if (comm->boot) {
		/* A rank that aborts after a failure passes its cause on, so
		 * that the peers that hear only of this abort still name the
		 * root cause. */
		char why[sizeof(comm->last_error) + 32];

		if (comm->failed && comm->failed != SMDDP_EABORTED && comm->last_error[0])
			snprintf(why, sizeof(why), "smddp_comm_abort after: %s", comm->last_error);
		else
			snprintf(why, sizeof(why), "smddp_comm_abort");
		sd_boot_abort(comm->boot, why);
	}
	comm_free(comm, 0);
	return SMDDP_OK;
}

SD_EXPORT int smddp_comm_cancel(struct smddp_comm *comm)
{
	if (!comm)
		return SMDDP_EINVAL;
	/* One store, no lock: the waits read it at their health checks
	 * (every SMDDP_LIVENESS_MS while they sleep), the calls at entry. */
	__atomic_store_n(&comm->cancelled, 1, __ATOMIC_RELEASE);
	return SMDDP_OK;
}

SD_EXPORT int smddp_comm_rank(const struct smddp_comm *comm)
{
	return comm ? comm->rank : -1;
}

SD_EXPORT int smddp_comm_size(const struct smddp_comm *comm)
{
	return comm ? comm->size : -1;
}

SD_EXPORT int smddp_comm_local_rank(const struct smddp_comm *comm)
{
	return comm ? comm->local_rank : -1;
}

SD_EXPORT int smddp_comm_local_size(const struct smddp_comm *comm)
{
	return comm ? comm->local_size : -1;
}

SD_EXPORT const char *smddp_last_error(const struct smddp_comm *comm)
{
	const char *said;

	if (!comm)
		return sd_init_err()->msg;
	said = sd_api_async_said(comm);
	return said ? said : comm->last_error;
}
