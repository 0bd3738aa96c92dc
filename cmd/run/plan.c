/* cmd/run/plan.c - what runs where: host lists, the plan, the job's id and token */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "common/tool.h"
#include "hash/fnv.h"
#include "run/launch.h"
#include "run/run.h"

/* ---- host lists --------------------------------------------------------- */

struct hostlist {
	struct strv names;
	long slots[MAX_HOSTS];  /* 0: not given */
};

static void hostlist_add(struct hostlist *hl, const char *name, long slots, const char *where)
{
	if (!valid_host(name))
		tool_usage_error("%s: invalid host name '%s': expected letters, digits, '.', '-' "
		                 "and '_'", where, name);
	if (strv_has(&hl->names, name))
		tool_usage_error("%s: host '%s' is given twice", where, name);
	if (hl->names.n >= MAX_HOSTS)
		tool_usage_error("%s: more than %d hosts", where, MAX_HOSTS);
	hl->slots[hl->names.n] = slots;
	strv_add(&hl->names, name);
}

/* "h1:8,h2:8" or "h1,h2". */
static void parse_hosts_arg(const char *arg, struct hostlist *hl)
{
	char *copy = xstrdup(arg), *save = NULL;
	char where[64];
	snprintf(where, sizeof where, "--hosts");
	if (!*arg || arg[0] == ',' || arg[strlen(arg) - 1] == ',' || strstr(arg, ",,"))
		tool_usage_error("malformed host list '%s': an empty host name; expected "
		                 "HOST[:N],HOST[:N]...", arg);
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		long slots = 0;
		char *colon = strchr(tok, ':');
		if (colon) {
			*colon = '\0';
			if (strchr(colon + 1, ':'))
				tool_usage_error("malformed host list '%s': '%s:%s': IPv6 addresses are "
				                 "not supported; use a host name", arg, tok, colon + 1);
			if (tool_parse_long(colon + 1, 1, MAX_NPROC, &slots) < 0)
				tool_usage_error("malformed host list '%s': '%s:%s': expected a number of "
				                 "ranks from 1 to %d after ':'", arg, tok, colon + 1,
				                 MAX_NPROC);
		}
		hostlist_add(hl, tok, slots, where);
	}
	free(copy);
}

/* Open MPI's hostfile: "HOST [slots=N] [max_slots=M]", '#' comments. */
static void parse_hostfile(const char *path, struct hostlist *hl)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
	char line[4096], where[4200];
	int lineno = 0;

	if (!f) {
		tool_warn_errno("cannot open hostfile '%s'", path);
		exit(TOOL_EXIT_USAGE);
	}
	while (fgets(line, sizeof line, f)) {
		lineno++;
		snprintf(where, sizeof where, "%s:%d", path, lineno);
		line[strcspn(line, "#\n")] = '\0';
		char *save = NULL, *host = strtok_r(line, " \t\r", &save);
		if (!host)
			continue;
		long slots = 0;
		for (char *kv; (kv = strtok_r(NULL, " \t\r", &save));) {
			long v;
			const char *val = strchr(kv, '=');
			if (!val || tool_parse_long(val + 1, 1, MAX_NPROC, &v) < 0 ||
			    (strncmp(kv, "slots=", 6) != 0 && strncmp(kv, "max_slots=", 10) != 0 &&
			     strncmp(kv, "max-slots=", 10) != 0))
				tool_usage_error("%s: malformed hostfile entry '%s': expected "
				                 "'HOST slots=N' (N from 1 to %d)", where, kv, MAX_NPROC);
			if (strncmp(kv, "slots=", 6) == 0)
				slots = v;
		}
		hostlist_add(hl, host, slots, where);
	}
	if (ferror(f)) {
		tool_warn_errno("cannot read hostfile '%s'", path);
		exit(TOOL_EXIT_USAGE);
	}
	if (f != stdin)
		fclose(f);
	if (hl->names.n == 0)
		tool_usage_error("hostfile '%s' names no host", path);
}

/* ---- the plan: what runs where ------------------------------------------ */

/* The plan from the command line (and SageMaker's configuration). */
void make_plan(const struct options *o, struct plan *p)
{
	memset(p, 0, sizeof *p);
	p->netif = o->netif;
	p->master_port = o->master_port;

	if (o->nnodes > 1) {
		/* One smddp-run per node, each told its place: torchrun's way. */
		int gpus;
		p->kind = PLAN_LOCAL;
		p->form = "per-node";
		p->nnodes = (int)o->nnodes;
		p->node_rank = (int)o->node_rank;
		p->ppn = o->nproc ? o->nproc : (gpus = count_gpus()) > 0 ?
		         (gpus > MAX_NPROC ? MAX_NPROC : gpus) : 1;
		if ((size_t)p->nnodes * (size_t)p->ppn > (size_t)1 << 24)
			tool_usage_error("too many ranks: %d nodes x %ld", p->nnodes, p->ppn);
		p->master_addr = xstrdup(o->master_addr);
		if (!p->master_port)
			p->master_port = DEFAULT_PORT;
		return;
	}
	if (o->hosts || o->hostfile) {
		static struct hostlist hl;
		if (o->hosts)
			parse_hosts_arg(o->hosts, &hl);
		else
			parse_hostfile(o->hostfile, &hl);
		p->kind = PLAN_MPIRUN;
		p->form = "hosts";
		p->hosts = hl.names;
		p->ppn = o->nproc;
		if (!p->ppn) {
			long s = hl.slots[0];
			for (size_t i = 1; i < hl.names.n; i++)
				if (hl.slots[i] != s)
					tool_usage_error("hosts with different rank counts (%s:%ld, %s:%ld): "
					                 "give -n N to run N ranks on each",
					                 hl.names.v[0], s, hl.names.v[i], hl.slots[i]);
			if (!s) {
				int gpus = count_gpus();
				s = gpus > 0 ? (gpus > MAX_NPROC ? MAX_NPROC : gpus) : 1;
			}
			p->ppn = s;
		}
	} else if (slurm_wanted(o)) {
		slurm_plan(o, p);
	} else if (o->sagemaker == 1 || (o->sagemaker < 0 && sm_detect())) {
		sagemaker_plan(o, p);
	} else {
		int gpus;
		p->kind = PLAN_LOCAL;
		p->form = "local";
		p->node_rank = 0;
		p->ppn = o->nproc ? o->nproc : (gpus = count_gpus()) > 0 ?
		         (gpus > MAX_NPROC ? MAX_NPROC : gpus) : 1;
		p->master_addr = xstrdup(o->master_addr ? o->master_addr : "127.0.0.1");
		return;
	}
	if (p->hosts.n * (size_t)p->ppn > (size_t)1 << 24)
		tool_usage_error("too many ranks: %zu hosts x %ld", p->hosts.n, p->ppn);
	p->master_addr = xstrdup(o->master_addr ? o->master_addr : p->hosts.n ? p->hosts.v[0]
	                                                                       : "127.0.0.1");
	/* Every host must agree on the port without talking: a fixed default. */
	if (!p->master_port)
		p->master_port = DEFAULT_PORT;
}

/* The variables set beyond the rank variables: --env, the network
 * interface, EFA. An explicit --env wins over what smddp-run would set;
 * EFA settings also yield to the inherited environment. */
void plan_env(const struct options *o, struct plan *p)
{
	for (size_t i = 0; i < o->envs.n; i++) {
		const char *e = o->envs.v[i];
		size_t n = strcspn(e, "=");
		char *name = strndup(e, n);
		if (!name)
			out_of_memory();
		if (e[n])
			envv_set(&p->env, name, e + n + 1, true);
		if (!strv_has(&p->fwd, name))
			strv_take(&p->fwd, name);
		else
			free(name);
	}
	if (p->netif) {
		envv_set(&p->env, "NCCL_SOCKET_IFNAME", p->netif, false);
		envv_set(&p->env, "GLOO_SOCKET_IFNAME", p->netif, false);
	}
	/* --unbuffered: Python's own buffering too, unless the user decided */
	if (o->unbuffered && !getenv("PYTHONUNBUFFERED") && !strv_has(&p->fwd, "PYTHONUNBUFFERED"))
		envv_set(&p->env, "PYTHONUNBUFFERED", "1", false);
	/* The PSM libraries that some libfabric builds link (Debian's) catch
	 * SIGTERM, SIGINT, SIGSEGV, SIGBUS, SIGILL and SIGABRT at load and exit
	 * from the handler: a stopped rank then exits 1 or hangs.  Off, as
	 * Open MPI turns them off, unless the user decided. */
	static const char *const psm[] = { "IPATH_NO_BACKTRACE", "HFI_NO_BACKTRACE" };
	for (int i = 0; i < 2; i++)
		if (!getenv(psm[i]) && !strv_has(&p->fwd, psm[i]))
			envv_set(&p->env, psm[i], "1", false);
	int rdma = efa_rdma(p->instance_type);
	if (rdma >= 0) {
		static const char *const efa[][2] = {
			{ "FI_PROVIDER", "efa" }, { "RDMAV_FORK_SAFE", "1" },
			{ "FI_EFA_USE_DEVICE_RDMA", "1" },
		};
		for (int i = 0; i < (rdma ? 3 : 2); i++)
			if (!getenv(efa[i][0]) && !strv_has(&p->fwd, efa[i][0]))
				envv_set(&p->env, efa[i][0], efa[i][1], false);
	}
}

/* Where this launcher's ranks sit in the job. Local plans fork this host's
 * ranks here (SageMaker's torch_distributed: one smddp-run per host, the
 * node rank from the host's place in the sorted host list); the mpirun plan
 * runs mpirun as its single child, and each rank's wrapper
 * (--rank-wrapper) derives its place from OMPI_COMM_WORLD_*. */
void job_layout(const struct plan *p, struct layout *l)
{
	if (p->kind == PLAN_MPIRUN || p->kind == PLAN_SRUN) {
		l->nnodes = 1;
		l->node_rank = 0;
		l->local_size = 1;
		return;
	}
	l->nnodes = p->nnodes ? p->nnodes : p->hosts.n > 1 ? (int)p->hosts.n : 1;
	l->node_rank = p->node_rank;
	l->local_size = (int)p->ppn;
}

/* ---- job identity and rendezvous ------------------------------------- */

static int random_bytes(unsigned char *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = getrandom(buf + got, n - got, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		got += r;
	}
	return 0;
}

int random_hex(char *out, size_t nhex)
{
	unsigned char b[64];
	static const char digits[] = "0123456789abcdef";
	size_t nb = (nhex + 1) / 2;
	if (nb > sizeof b || random_bytes(b, nb) < 0)
		return -1;
	for (size_t i = 0; i < nhex; i++)
		out[i] = digits[(b[i / 2] >> (i % 2 ? 0 : 4)) & 0xf];
	out[nhex] = '\0';
	return 0;
}

/* The job id as the library puts it in /dev/shm names: its letters, digits,
 * '_' and '-', at most 32 of them (lib/core/comm.c, set_jobid()). */
void shm_job_id(const char *id, char *out, size_t outlen)
{
	size_t n = 0;
	for (; *id && n < 32 && n + 1 < outlen; id++)
		if ((*id >= 'a' && *id <= 'z') || (*id >= 'A' && *id <= 'Z') ||
		    (*id >= '0' && *id <= '9') || *id == '_' || *id == '-')
			out[n++] = *id;
	out[n] = '\0';
}

/* The low end of the kernel's ephemeral port range (32768 where unread). */
static int ephemeral_low(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	int lo = 0, hi = 0;

	if (f) {
		if (fscanf(f, "%d %d", &lo, &hi) != 2)
			lo = 0;
		fclose(f);
	}
	return lo > 4096 && lo <= 65535 ? lo : 32768;
}

/* Whether PORT on AI's address can be bound now (bind, close). */
static int port_free(const struct addrinfo *ai, int port)
{
	struct sockaddr_storage ss;
	int fd, ok;

	if (ai->ai_addrlen > sizeof ss)
		return 0;
	memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
	if (ss.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
	else if (ss.ss_family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
	else
		return 0;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	ok = bind(fd, (struct sockaddr *)&ss, ai->ai_addrlen) == 0;
	close(fd);
	return ok;
}

/* A free TCP port on ADDR (or, when ADDR is not local, on any address).
 * The port is closed again before the store binds it, so one the kernel
 * hands out (the ephemeral range: bind to port 0, a connect's own end)
 * may be taken by any connection in between, as a torch store's bind
 * found (EADDRINUSE) under a loaded test suite.  So first a random free
 * port below that range, which only an explicit bind can take; then
 * port 0's. */
int pick_free_port(const char *addr)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	int family = AF_INET;
	int port = -1;

	if (getaddrinfo(addr, "0", &hints, &res) == 0) {
		int lo = ephemeral_low(), base = lo / 2;

		for (int i = 0; i < 64 && port < 0; i++) {
			uint32_t r = 0;

			if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
				break;
			int p = base + (int)(r % (uint32_t)(lo - base));

			if (port_free(res, p))
				port = p;
		}
		for (struct addrinfo *ai = res; ai && port < 0; ai = ai->ai_next) {
			family = ai->ai_family;
			int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (fd < 0)
				continue;
			struct sockaddr_storage ss;
			socklen_t len = sizeof ss;
			if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
			    getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
				port = ntohs(ss.ss_family == AF_INET6
				             ? ((struct sockaddr_in6 *)&ss)->sin6_port
				             : ((struct sockaddr_in *)&ss)->sin_port);
			close(fd);
		}
		freeaddrinfo(res);
	}
	if (port < 0) {
		struct sockaddr_storage ss = { .ss_family = family };
		socklen_t len = family == AF_INET6 ? sizeof(struct sockaddr_in6)
		                                   : sizeof(struct sockaddr_in);
		int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0) {
			if (bind(fd, (struct sockaddr *)&ss, len) == 0 &&
			    getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
				port = ntohs(family == AF_INET6
				             ? ((struct sockaddr_in6 *)&ss)->sin6_port
				             : ((struct sockaddr_in *)&ss)->sin_port);
			close(fd);
		}
	}
	return port;
}

/* NHEX hex digits that every host of PLAN computes alike from SALT, the
 * hosts and the port (FNV-1a, 64 bits per 16 digits). An identifier that
 * keeps two jobs' shared memory and logs apart, never a secret: anyone who
 * knows the host names computes it too (the job token is not made this
 * way; see shared_token()). */
void shared_identity(const struct plan *p, const char *salt, char *out, size_t nhex)
{
	static const char digits[] = "0123456789abcdef";
	char port[16];
	snprintf(port, sizeof port, "%ld", p->master_port);
	for (size_t block = 0; block * 16 < nhex; block++) {
		uint64_t h = SD_FNV1A_BASIS ^ (block * 0x9e3779b97f4a7c15ull);
		const char *parts[3] = { salt, port, p->master_addr };
		for (size_t i = 0; i < 3 + p->hosts.n; i++) {
			h = sd_fnv1a_str(h, i < 3 ? parts[i] : p->hosts.v[i - 3]);
			h = sd_fnv1a(h, "\n", 1);
		}
		for (size_t k = 0; k < 16 && block * 16 + k < nhex; k++)
			out[block * 16 + k] = digits[(h >> (60 - 4 * k)) & 0xf];
	}
	out[nhex] = '\0';
}

/* The token of a job whose hosts each start their own ranks: SMDDP_JOB_TOKEN
 * as given, the same on every host.  Such hosts share nothing secret that
 * a token could be derived from (host names, ports and the job name are
 * known outside the job), so without one the ranks run without: then
 * libsmddp's rank 0 refuses ranks of other hosts, saying to set a token,
 * unless SMDDP_ALLOW_NO_TOKEN=1 (inherited by the ranks).  Programs that
 * do not rendezvous through libsmddp's environment (the PyTorch backend
 * makes its own token; NCCL, TensorFlow) are not concerned.  0, or an
 * exit status. */
int shared_token(struct run *r, const char *token)
{
	r->token[0] = '\0';
	if (token) {
		size_t tl = strlen(token), k;
		for (k = 0; k < tl && token[k] > ' ' && token[k] < 0x7f; k++)
			;
		if (tl < 8 || tl >= sizeof r->token || k < tl) {
			tool_warn("SMDDP_JOB_TOKEN: expected 8 to %zu printable characters without "
			          "blanks, the same on every host", sizeof r->token - 1);
			return TOOL_EXIT_USAGE;
		}
		strcpy(r->token, token);
	}
	return 0;
}
