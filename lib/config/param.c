/* param.c - the parameter registry: every tunable, its default, its source.
 *
 * Each parameter is declared once, in the table below, with its type,
 * default, accepted range and help, so that it can be listed and documented
 * (man 7 smddp) from one place.  sd_params_load() fills in the values once
 * per process (pthread_once): defaults, then the config file (config.c),
 * then the environment, so that the environment wins.  After that the table
 * is read-only and readers need no lock; the accessors run the load
 * themselves when nobody has yet, so a value is never read half-loaded.
 *
 * Env-only parameters (key NULL) are not stored: they describe the job
 * (rank, rendezvous) rather than tune the library, are read by whoever needs
 * them straight from the environment, and are only validated here.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/sd.h"
#include "config/sd_config.h"
#include "text/editdist.h"

/* SMDDP_DEBUG* are read by log.c before the registry exists; a bad value
 * in the environment is a warning there, so it is not an error here. */
#define F_LOG 1u

struct param {
	struct sd_param_info info;
	int64_t min, max;   /* INT and SIZE */
	const char *expect; /* the reason given for a bad value */
	int (*check)(const char *text); /* extra check for STR; 0 = fine */
	unsigned flags;
	/* Filled in by load_once(), read-only afterwards. */
	char *text;
	int64_t ival;
	const char *source;
};

static int check_subsys(const char *text)
{
	unsigned mask;

	return sd_log_parse_subsys(text, &mask, NULL, 0);
}

static int check_auto_bool(const char *text)
{
	int b;

	return strcasecmp(text, "auto") == 0 || sd_parse_bool(text, &b) == 0 ? 0 : -1;
}

static int check_job_id(const char *text)
{
	size_t n = strlen(text);

	/* It becomes part of /dev/shm names (comm.c keeps 32 of these). */
	if (n > 32 || strspn(text, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				   "0123456789_-") != n)
		return -1;
	return 0;
}

#define TUNE(n, k, t, d, ch, lo, hi, ex, ck, fl, h)                                         \
	{                                                                                   \
		.info = {.name = n, .key = k, .type = t, .def = d, .choices = ch, .help = h}, \
		.min = lo, .max = hi, .expect = ex, .check = ck, .flags = fl                  \
	}
#define ENVONLY(n, t, lo, hi, ex, ck, h) TUNE(n, NULL, t, "", NULL, lo, hi, ex, ck, 0, h)

static struct param params[] = {
	TUNE("SMDDP_TIMEOUT", "timeout", SD_PARAM_INT, "600", NULL, 1, INT32_MAX,
	     "expected a positive integer (seconds)", NULL, 0,
	     "seconds any wait may last before SMDDP_ETIMEDOUT"),
	TUNE("SMDDP_CHECK_COLL", "check_coll", SD_PARAM_BOOL, "0", NULL, 0, 1, NULL, NULL, 0,
	     "verify every collective's arguments across ranks (SMDDP_EMISMATCH)"),
	TUNE("SMDDP_DEBUG", "debug", SD_PARAM_ENUM, "WARN", "NONE|WARN|INFO|TRACE", 0, 0,
	     "expected one of NONE, WARN, INFO, TRACE", NULL, F_LOG,
	     "log level: NONE (or OFF), WARN, INFO or TRACE"),
	TUNE("SMDDP_DEBUG_SUBSYS", "debug_subsys", SD_PARAM_STR, "ALL", NULL, 0, 0,
	     "expected a comma-separated list of INIT, BOOT, SHM, COLL, CONFIG, ENV, NET, ALL "
	     "(a leading ^ excludes them)",
	     check_subsys, F_LOG,
	     "subsystems whose INFO and TRACE lines are shown: a comma-separated list of "
	     "INIT, BOOT, SHM, COLL, CONFIG, ENV, NET, ALL; a leading ^ shows all but those"),
	TUNE("SMDDP_DEBUG_FILE", "debug_file", SD_PARAM_STR, "", NULL, 0, 0, NULL, NULL, F_LOG,
	     "write log lines to this file (appending; %h is the host name, %p the pid) "
	     "instead of stderr"),
	TUNE("SMDDP_SHM_CHUNK", "shm_chunk", SD_PARAM_SIZE, "512K", NULL, 4096, INT32_MAX,
	     "expected a size from 4K to 2G, like 512K or 4M", NULL, 0,
	     "bytes per rank of each pipelined shared-memory step"),
	TUNE("SMDDP_SPIN", "spin", SD_PARAM_INT, "-1", NULL, -1, INT32_MAX,
	     "expected -1 or a non-negative integer (polls)", NULL, 0,
	     "polls before sleeping in a wait; -1 picks by ranks per core"),
	TUNE("SMDDP_LIVENESS_MS", "liveness_ms", SD_PARAM_INT, "50", NULL, 1, INT32_MAX,
	     "expected a positive integer (milliseconds)", NULL, 0,
	     "milliseconds between checks for dead peers while asleep"),
	TUNE("SMDDP_SINGLE_COPY", "single_copy", SD_PARAM_BOOL, "1", NULL, 0, 1, NULL, NULL, 0,
	     "large messages: read peers' buffers directly (process_vm_readv), one copy "
	     "instead of two through shared memory; used only where every rank may read every "
	     "other (else staged through shared memory, logged at INFO)"),
	TUNE("SMDDP_SINGLE_COPY_MIN", "single_copy_min", SD_PARAM_SIZE, "256K", NULL, 0,
	     INT64_MAX, "expected a size like 256K or 1M", NULL, 0,
	     "bytes per rank from which a collective takes the single-copy path (an "
	     "allgather: from half of it in all)"),
	TUNE("SMDDP_SHM_ALGO", "shm_algo", SD_PARAM_ENUM, "auto", "auto|single|staged", 0, 0,
	     "expected one of auto, single, staged", NULL, 0,
	     "allreduce, reduce, allgather, reduce_scatter, alltoall (from 4M) and broadcast from "
	     "SMDDP_SINGLE_COPY_MIN inside a node: single (read and write the peers' buffers "
	     "directly), staged (through shared memory) or auto (rank 0 times both per size "
	     "and takes the faster, trying the other now and then); rank 0's setting counts"),
	TUNE("SMDDP_CUDA_ASYNC", "cuda_async", SD_PARAM_STR, "auto", NULL, 0, 0,
	     "expected auto, 1 or 0", check_auto_bool, 0,
	     "1: device-memory calls return as soon as they are queued, the stream waiting on "
	     "the GPU (cuStreamWaitValue32); 0: a call returns when its collective is done; "
	     "auto: 1 unless other ranks of the node share the GPU without MPS"),
	TUNE("SMDDP_CUDA_FAST", "cuda_fast", SD_PARAM_SIZE, "1M", NULL, 0, (int64_t)16 << 20,
	     "expected a size from 0 to 16M, like 1M", NULL, 0,
	     "bytes per peer of the largest collective on device memory (one node, calls "
	     "queued; all but sends and receives) whose kernels meet their peers through memory "
	     "mapped once, with no host work but the launch; 0: every call takes the proxy's "
	     "path"),
	TUNE("SMDDP_CUDA_DIRECT", "cuda_direct", SD_PARAM_BOOL, "1", NULL, 0, 1, NULL, NULL, 0,
	     "1: a collective on device memory (one node, calls queued) larger than "
	     "SMDDP_CUDA_FAST runs on kernels that read and write the peers' buffers through "
	     "CUDA IPC mappings made once per allocation, with no host work but the launch; "
	     "0: it takes the proxy's path"),
	TUNE("SMDDP_CUDA_STREAM", "cuda_stream", SD_PARAM_BOOL, "1", NULL, 0, 1, NULL, NULL, 0,
	     "1: an allreduce, allgather or reduce_scatter on device memory between hosts over "
	     "a flat ring copies to and from host memory in pieces, overlapped with the "
	     "network; 0: in whole chunks, each copied up, moved, then copied down; the same "
	     "on every rank"),
	TUNE("SMDDP_CUDA_STREAM_CHUNK", "cuda_stream_chunk", SD_PARAM_SIZE, "16M", NULL, 0,
	     (int64_t)256 << 20, "expected a size from 0 to 256M, like 16M", NULL, 0,
	     "bytes of data of the largest chunk of a streamed call between hosts "
	     "(SMDDP_CUDA_STREAM): a call up to this size is one chunk, one host collective "
	     "with its copies overlapped piece by piece; 0: chunks of a quarter of the call, up "
	     "to 4 MiB; the same on every rank (pinned staging memory: twice the larger of "
	     "this and 4 MiB)"),
	TUNE("SMDDP_BOOT_ADDR", "boot_addr", SD_PARAM_STR, "", NULL, 0, 0, NULL, NULL, 0,
	     "address of this host that smddp_get_unique_id() puts in the id for the other "
	     "ranks to connect to (default: the route's to MASTER_ADDR, else the first "
	     "non-loopback IPv4 interface that is up)"),
	TUNE("SMDDP_ALLOW_NO_TOKEN", "allow_no_token", SD_PARAM_BOOL, "0", NULL, 0, 1, NULL, NULL, 0,
	     "rank 0 without SMDDP_JOB_TOKEN admits tokenless ranks from other hosts too (a trusted "
	     "network only); 0: from loopback only"),
	TUNE("SMDDP_SINGLE_COPY_PTRACER", "single_copy_ptracer", SD_PARAM_BOOL, "1", NULL, 0, 1, NULL,
	     NULL, 0,
	     "under Yama ptrace_scope 1, let single copy allow any process of this user to ptrace "
	     "this one (PR_SET_PTRACER_ANY) while a communicator uses it; 0: never (single copy "
	     "then stays off there)"),
	TUNE("SMDDP_TOPO_FILE", "topo_file", SD_PARAM_STR, "", NULL, 0, 0, NULL, NULL, 0,
	     "topology JSON (smddp-topo --json) to use instead of discovering this node"),
	TUNE("SMDDP_ALGO", "algo", SD_PARAM_ENUM, "auto", "auto|hier|ring|rd", 0, 0,
	     "expected one of auto, hier, ring, rd", NULL, 0,
	     "algorithm between hosts: auto (hierarchical where every host has the same number "
	     "of ranks, else flat; recursive doubling up to SMDDP_NET_RD_MAX, ring above), "
	     "hier, ring (flat ring over all ranks) or rd (flat recursive doubling)"),
	TUNE("SMDDP_FABRIC_PROVIDER", "fabric_provider", SD_PARAM_STR, "", NULL, 0, 0, NULL, NULL,
	     0,
	     "libfabric provider between hosts, e.g. efa, verbs or tcp (else FI_PROVIDER, else "
	     "the first of efa, verbs, tcp that is present)"),
	TUNE("SMDDP_NET_TRANSPORT", "net_transport", SD_PARAM_ENUM, "auto", "auto|fabric|socket",
	     0, 0, NULL, NULL, 0,
	     "between hosts: fabric (libfabric: EFA, verbs, tcp), socket (TCP sockets of "
	     "libsmddp's own), or auto (socket on hosts without RDMA devices unless a libfabric "
	     "provider is asked for, else fabric)"),
	TUNE("SMDDP_SOCKET_NSOCKS", "socket_nsocks", SD_PARAM_INT, "0", NULL, 0, 16,
	     "expected 0 (automatic) to 16 (connections)", NULL, 0,
	     "socket transport: data connections per peer and direction that a long message is "
	     "spread over; 0: automatic (2 with threads, else 1)"),
	TUNE("SMDDP_SOCKET_THREADS", "socket_threads", SD_PARAM_ENUM, "auto", "auto|0|1", 0, 0,
	     NULL, NULL, 0,
	     "socket transport: a thread per data connection, which moves the bytes of long "
	     "messages on cores of its own (1), or the caller's progress polls them (0); auto: "
	     "threads on hosts with 4 cores or more"),
	TUNE("SMDDP_SOCKET_LONG", "socket_long", SD_PARAM_SIZE, "128K", NULL, 1, 1 << 30,
	     "expected a size from 1 to 1G, like 128K", NULL, 0,
	     "socket transport: messages this long and longer go over the data connections, read "
	     "in place; shorter ones go on the control connection"),
	TUNE("SMDDP_SOCKET_CREDIT", "socket_credit", SD_PARAM_SIZE, "4M", NULL, 0, 1 << 30,
	     "expected a size from 0 to 1G, like 4M", NULL, 0,
	     "socket transport: bytes of long messages a rank may send to a peer before the peer "
	     "has posted their receives (kept in memory there until then); a long message beyond "
	     "that waits for its receive (rendezvous); 0: every long message waits"),
	TUNE("SMDDP_NET_CHUNK", "net_chunk", SD_PARAM_SIZE, "128K", NULL, 4096, 1 << 30,
	     "expected a size from 4K to 1G, like 128K", NULL, 0,
	     "bytes per pipelined message between hosts"),
	TUNE("SMDDP_NET_RD_MAX", "net_rd_max", SD_PARAM_SIZE, "64K", NULL, 0, INT64_MAX,
	     "expected a size like 64K", NULL, 0,
	     "allreduce between hosts: largest message (bytes) for recursive doubling"),
	TUNE("SMDATAPARALLEL_OPTIMIZE_SDP", "optimize_sdp", SD_PARAM_BOOL, "0", NULL, 0, 1, NULL,
	     NULL, 0,
	     "accepted for compatibility with SageMaker's library (its AllGather switch); "
	     "libsmddp always uses its optimised AllGather, so this changes nothing"),
	TUNE("SMDDP_TRACE_ENTRIES", "trace_entries", SD_PARAM_INT, "256", NULL, 0, 1 << 20,
	     "expected 0 to 1048576 (calls)", NULL, 0,
	     "flight recorder: the last calls each communicator remembers (rounded up to a "
	     "power of two); 0: none"),
	TUNE("SMDDP_TRACE_DIR", "trace_dir", SD_PARAM_STR, "", NULL, 0, 0, NULL, NULL, 0,
	     "flight recorder: directory where each rank writes its last calls "
	     "(smddp-trace.<job>.<rank>.jsonl) when a call fails or on smddp_comm_dump(); "
	     "unset: never written (smddp-run sets it)"),
	TUNE("SMDDP_TRACE_SIGNAL", "trace_signal", SD_PARAM_BOOL, "0", NULL, 0, 1, NULL, NULL, 0,
	     "flight recorder: SIGUSR1 writes it too (to SMDDP_TRACE_DIR), unless the program "
	     "handles SIGUSR1 itself"),

	ENVONLY("SMDDP_CONFIG", SD_PARAM_STR, 0, 0, NULL, NULL,
		"the JSON config file to read instead of /etc/smddp.json; empty or /dev/null: none"),
	ENVONLY("SMDDP_RANK", SD_PARAM_INT, 0, INT32_MAX,
		"expected a non-negative integer (this process's rank)", NULL,
		"this process's rank, 0 to SMDDP_WORLD_SIZE-1 (before RANK, OMPI_COMM_WORLD_RANK, "
		"SLURM_PROCID)"),
	ENVONLY("SMDDP_WORLD_SIZE", SD_PARAM_INT, 1, INT32_MAX,
		"expected a positive integer (number of ranks)", NULL,
		"number of ranks in the job (before WORLD_SIZE, OMPI_COMM_WORLD_SIZE, "
		"SLURM_NTASKS)"),
	ENVONLY("SMDDP_LOCAL_RANK", SD_PARAM_INT, 0, INT32_MAX,
		"expected a non-negative integer (rank on this host)", NULL,
		"this process's rank among those on its host"),
	ENVONLY("SMDDP_LOCAL_WORLD_SIZE", SD_PARAM_INT, 1, INT32_MAX,
		"expected a positive integer (ranks on this host)", NULL,
		"number of ranks on this host"),
	ENVONLY("SMDDP_MASTER_ADDR", SD_PARAM_STR, 0, 0, NULL, NULL,
		"host name or address of rank 0's rendezvous store (else MASTER_ADDR)"),
	ENVONLY("SMDDP_MASTER_PORT", SD_PARAM_INT, 1, 65535,
		"expected a TCP port number from 1 to 65535", NULL,
		"TCP port of rank 0's rendezvous store (else MASTER_PORT); required with more than "
		"one rank"),
	ENVONLY("SMDDP_JOB_TOKEN", SD_PARAM_STR, 0, 0, NULL, NULL,
		"secret every rank proves it knows at the rendezvous (smddp-run and "
		"smddp_get_unique_id() make one); unset: rank 0 admits ranks only over loopback"),
	ENVONLY("SMDDP_JOB_ID", SD_PARAM_STR, 0, 0,
		"expected at most 32 letters, digits, '_' or '-'", check_job_id,
		"names this job's shared-memory segments, /dev/shm/smddp-JOBID-*"),
	ENVONLY("SMDDP_HOSTID", SD_PARAM_STR, 0, 0, NULL, NULL,
		"test-only: overrides this host's identity, to make ranks of one machine look "
		"like several hosts"),
	/* Read by the tools, not the library: listed so that they are documented
	 * and not reported as unknown. */
	ENVONLY("SMDDP_MPIRUN", SD_PARAM_STR, 0, 0, NULL, NULL,
		"smddp-run: the mpirun program to launch across hosts with (else mpirun on PATH)"),
	ENVONLY("SMDDP_SM_CONFIG_DIR", SD_PARAM_STR, 0, 0, NULL, NULL,
		"smddp-run: where SageMaker's resourceconfig.json and hyperparameters.json are "
		"(else /opt/ml/input/config)"),
	ENVONLY("SMDDP_CHECK_AZ_S3_ENDPOINT", SD_PARAM_STR, 0, 0, NULL, NULL,
		"smddp-check-az: the S3 endpoint URL asked for a bucket's region (tests)"),
};

#define NPARAMS (sizeof(params) / sizeof(params[0]))

static pthread_once_t load_ctl = PTHREAD_ONCE_INIT;
static int load_rc;
static struct sd_err load_err;
static int load_warned;
static char *config_path; /* the file that was read, if any */

static struct param *find(const char *name)
{
	if (name == NULL)
		return NULL;
	for (size_t i = 0; i < NPARAMS; i++)
		if (strcmp(params[i].info.name, name) == 0)
			return &params[i];
	return NULL;
}

/* Checks text against p.  On success sets *canon (malloc'd, the value as
 * stored) and *ival; on failure returns SMDDP_ECONFIG with the reason in why. */
static int check_value(const struct param *p, const char *text, char **canon, int64_t *ival,
		       struct sd_err *why)
{
	int64_t v = 0;
	const char *c = text;
	int ok = 1;

	switch (p->info.type) {
	case SD_PARAM_INT:
		ok = sd_parse_int(text, &v) == 0 && v >= p->min && v <= p->max;
		break;
	case SD_PARAM_BOOL: {
		int b;

		ok = sd_parse_bool(text, &b) == 0;
		v = b;
		c = ok ? (b ? "1" : "0") : text;
		break;
	}
	case SD_PARAM_SIZE: {
		uint64_t u;

		ok = sd_parse_size(text, &u) == 0 && u <= INT64_MAX && (int64_t)u >= p->min &&
		     (int64_t)u <= p->max;
		v = ok ? (int64_t)u : 0;
		break;
	}
	case SD_PARAM_ENUM: {
		const char *s = p->info.choices;
		size_t tl = strlen(text);

		ok = 0;
		/* OFF is NONE's other name, as in log.c. */
		if (strcmp(p->info.name, "SMDDP_DEBUG") == 0 && strcasecmp(text, "OFF") == 0) {
			text = "NONE";
			tl = 4;
		}
		while (s != NULL && *s != '\0') {
			size_t l = strcspn(s, "|");

			if (l == tl && strncasecmp(s, text, l) == 0) {
				*canon = strndup(s, l);
				ok = 1;
				break;
			}
			s += l + (s[l] == '|');
		}
		if (ok) {
			if (*canon == NULL)
				goto nomem;
			*ival = 0;
			return SMDDP_OK;
		}
		break;
	}
	case SD_PARAM_STR:
		ok = p->check == NULL || p->check(text) == 0;
		break;
	}
	if (!ok) {
		const char *ex = p->expect;

		if (ex == NULL)
			ex = p->info.type == SD_PARAM_BOOL ? "expected 1/0, true/false, yes/no or on/off"
			     : p->info.type == SD_PARAM_SIZE ? "expected a size like 512K or 4M"
			     : p->info.type == SD_PARAM_INT	 ? "expected an integer"
								 : "invalid value";
		return sd_err_set(why, SMDDP_ECONFIG, "%s", ex);
	}
	*canon = strdup(c);
	if (*canon == NULL)
		goto nomem;
	*ival = v;
	return SMDDP_OK;
nomem:
	return sd_err_set(why, SMDDP_ECONFIG, "out of memory");
}

static void store(struct param *p, char *canon, int64_t ival, const char *source)
{
	if (p->text != NULL && p->text != p->info.def)
		free(p->text);
	p->text = canon;
	p->ival = ival;
	p->source = source;
}

/* The registry's side of sd_config_read(): the config file's values go
 * through the same checks as the environment's. */
static int set_config(const struct sd_param_info *info, const char *text, struct sd_err *why)
{
	struct param *p = find(info ? info->name : NULL);
	char *canon = NULL;
	int64_t v;

	if (p == NULL || p->info.key == NULL)
		return sd_err_set(why, SMDDP_ECONFIG,
				  "cannot be set in a config file; set it in the environment");
	if (check_value(p, text, &canon, &v, why) != SMDDP_OK)
		return SMDDP_ECONFIG;
	store(p, canon, v, "config");
	return SMDDP_OK;
}

const struct sd_config_registry *sd_param_registry(void)
{
	static const struct sd_config_registry reg = {
		.count = sd_param_count,
		.at = sd_param_at,
		.set = set_config,
	};

	return &reg;
}

static int set_defaults(void)
{
	for (size_t i = 0; i < NPARAMS; i++) {
		struct param *p = &params[i];
		struct sd_err why;
		char *canon = NULL;
		int64_t v = 0;

		p->text = (char *)p->info.def;
		p->ival = 0;
		p->source = "default";
		if (p->info.key == NULL || p->info.type == SD_PARAM_STR)
			continue;
		if (check_value(p, p->info.def, &canon, &v, &why) != SMDDP_OK)
			return sd_err_set(&load_err, SMDDP_EINTERNAL,
					  "internal error: default %s=\"%s\": %s", p->info.name,
					  p->info.def, why.msg);
		free(canon);
		p->ival = v;
	}
	return SMDDP_OK;
}

static int load_env(void)
{
	for (size_t i = 0; i < NPARAMS; i++) {
		struct param *p = &params[i];
		const char *v = getenv(p->info.name);
		struct sd_err why;
		char *canon = NULL;
		int64_t iv;

		if (v == NULL || *v == '\0') /* empty is unset */
			continue;
		if (check_value(p, v, &canon, &iv, &why) != SMDDP_OK) {
			if (p->flags & F_LOG) {
				/* log.c has said so already, and carries on. */
				if (p->info.type == SD_PARAM_STR) {
					canon = strdup(v);
					if (canon != NULL)
						store(p, canon, 0, "env");
				}
				continue;
			}
			return sd_err_set(&load_err, SMDDP_ECONFIG, "%s=\"%s\": %s", p->info.name, v,
					  why.msg);
		}
		if (p->info.key == NULL) {
			free(canon); /* validated only: read from the environment when needed */
			continue;
		}
		store(p, canon, iv, "env");
	}
	return SMDDP_OK;
}

extern char **environ;

/* A misspelt variable would otherwise be ignored without a word.  Every
 * SMDDP_ variable the library or its tools read is in the table above. */
static void warn_unknown_env(void)
{
	for (char **e = environ; e != NULL && *e != NULL; e++) {
		char name[128], hint[160] = "";
		size_t n = strcspn(*e, "="), best = 3;

		if (strncmp(*e, "SMDDP_", 6) != 0 || n >= sizeof(name))
			continue;
		memcpy(name, *e, n);
		name[n] = '\0';
		if (find(name) != NULL)
			continue;
		for (size_t i = 0; i < NPARAMS; i++) {
			size_t d = sd_text_edit_distance(name, params[i].info.name);

			if (d < best) {
				best = d;
				snprintf(hint, sizeof(hint), " (did you mean %s?)", params[i].info.name);
			}
		}
		SD_WARN(SD_SUB_ENV, "%s is not a libsmddp variable and is ignored%s; see smddp(7)",
			name, hint);
	}
}

static void log_loaded(void)
{
	const struct param *dbg = find("SMDDP_DEBUG"), *sub = find("SMDDP_DEBUG_SUBSYS"),
			   *file = find("SMDDP_DEBUG_FILE");

	/* Logging read the environment itself; the file's settings apply now. */
	if (strcmp(dbg->source, "config") == 0 || strcmp(sub->source, "config") == 0 ||
	    strcmp(file->source, "config") == 0)
		sd_log_reconfigure(strcmp(dbg->source, "config") == 0 ? dbg->text : NULL,
				   strcmp(sub->source, "config") == 0 ? sub->text : NULL,
				   strcmp(file->source, "config") == 0 ? file->text : NULL);

	if (config_path != NULL)
		SD_INFO(SD_SUB_CONFIG, "read config file %s", config_path);
	for (size_t i = 0; i < NPARAMS; i++) {
		const struct param *p = &params[i];

		if (p->info.key == NULL || strcmp(p->source, "default") == 0)
			continue;
		if (strcmp(p->source, "env") == 0)
			SD_INFO(SD_SUB_ENV, "%s=%s (from the environment; default %s)", p->info.name,
				p->text, *p->info.def ? p->info.def : "\"\"");
		else
			SD_INFO(SD_SUB_CONFIG, "%s=%s (key \"%s\" of %s; default %s)", p->info.name,
				p->text, p->info.key, config_path ? config_path : "the config file",
				*p->info.def ? p->info.def : "\"\"");
	}
}

static void load_once(void)
{
	const char *cfg = getenv("SMDDP_CONFIG");
	int rc;

	rc = set_defaults();
	if (rc != SMDDP_OK)
		goto out;
	if (cfg == NULL || (*cfg != '\0' && strcmp(cfg, "/dev/null") != 0)) {
		const char *path = cfg ? cfg : "/etc/smddp.json";
		int found;

		rc = sd_config_read(path, cfg != NULL, sd_param_registry(), &found, &load_err);
		if (rc != SMDDP_OK)
			goto out;
		if (found)
			config_path = strdup(path);
	}
	rc = load_env();
	if (rc != SMDDP_OK)
		goto out;
	log_loaded();
	warn_unknown_env();
out:
	load_rc = rc;
}

int sd_params_load(struct sd_err *err)
{
	pthread_once(&load_ctl, load_once);
	if (load_rc != SMDDP_OK)
		return sd_err_set(err, load_rc, "%s", load_err.msg);
	sd_err_clear(err);
	return SMDDP_OK;
}

/* For the accessors: load if nobody has, and say so once if that failed
 * (a caller that wanted the error would have called sd_params_load()). */
static void ensure_loaded(void)
{
	pthread_once(&load_ctl, load_once);
	if (load_rc != SMDDP_OK && !__atomic_exchange_n(&load_warned, 1, __ATOMIC_RELAXED))
		SD_WARN(SD_SUB_CONFIG, "%s", load_err.msg);
}

static struct param *lookup(const char *name, const char *fn)
{
	struct param *p = find(name);

	if (p == NULL)
		SD_WARN(SD_SUB_CONFIG, "%s(\"%s\"): no such parameter (a bug in libsmddp)", fn,
			name ? name : "(null)");
	return p;
}

int64_t sd_param_int(const char *name)
{
	struct param *p = lookup(name, __func__);
	int64_t v;

	if (p == NULL)
		return 0;
	if (p->info.type != SD_PARAM_INT && p->info.type != SD_PARAM_BOOL &&
	    p->info.type != SD_PARAM_SIZE) {
		SD_WARN(SD_SUB_CONFIG, "sd_param_int(\"%s\"): not a number (a bug in libsmddp)",
			name);
		return 0;
	}
	if (p->info.key == NULL) {
		const char *e = getenv(name);

		return e != NULL && sd_parse_int(e, &v) == 0 ? v : 0;
	}
	ensure_loaded();
	return p->ival;
}

const char *sd_param_str(const char *name)
{
	struct param *p = lookup(name, __func__);
	const char *e;

	if (p == NULL)
		return "";
	if (p->info.key == NULL) {
		e = getenv(name);
		return e != NULL ? e : "";
	}
	ensure_loaded();
	return p->text != NULL ? p->text : "";
}

const char *sd_param_source(const char *name)
{
	struct param *p = lookup(name, __func__);
	const char *e;

	if (p == NULL)
		return "unknown";
	if (p->info.key == NULL) {
		e = getenv(name);
		return e != NULL && *e != '\0' ? "env" : "default";
	}
	ensure_loaded();
	return p->source != NULL ? p->source : "default";
}

size_t sd_param_count(void)
{
	return NPARAMS;
}

const struct sd_param_info *sd_param_at(size_t i)
{
	return i < NPARAMS ? &params[i].info : NULL;
}

/* ---- parsers ------------------------------------------------------------- */

int sd_parse_int(const char *s, int64_t *out)
{
	char *end;
	long long v;

	/* strtoll would skip leading blanks: strict means none. */
	if (s == NULL || *s == '\0' || !(*s == '-' || *s == '+' || (*s >= '0' && *s <= '9')))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0')
		return -1;
	if (end == s + 1 && (*s == '-' || *s == '+'))
		return -1;
	*out = v;
	return 0;
}

int sd_parse_bool(const char *s, int *out)
{
	static const char *const yes[] = {"1", "true", "yes", "on"};
	static const char *const no[] = {"0", "false", "no", "off"};

	if (s == NULL)
		return -1;
	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = 1;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

int sd_parse_size(const char *s, uint64_t *out)
{
	static const struct {
		const char *suffix;
		unsigned shift;
	} units[] = {
		{"", 0},   {"K", 10},	{"KiB", 10}, {"M", 20},	 {"MiB", 20},
		{"G", 30}, {"GiB", 30}, {"T", 40},   {"TiB", 40},
	};
	uint64_t v = 0;
	const char *p = s;

	if (s == NULL || *p < '0' || *p > '9')
		return -1; /* no sign, no blanks, at least one digit */
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(p, units[i].suffix) != 0)
			continue;
		if (units[i].shift > 0 && v > (UINT64_MAX >> units[i].shift))
			return -1;
		*out = v << units[i].shift;
		return 0;
	}
	return -1;
}
