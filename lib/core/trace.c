/* trace.c - the flight recorder: each communicator's last calls, dumped as JSON lines on failure.
 *
 * Every communicator made by smddp_init, smddp_comm_init_rank or
 * smddp_comm_split keeps a ring of its last SMDDP_TRACE_ENTRIES calls
 * (rounded up to a power of two), filled at the one entry of every
 * collective (api.c: api_enter, sd_api_leave): two reads of the time stamp
 * counter and a few stores per call (about 25 ns), no lock (a communicator
 * is used by one thread at a time, smddp.h), no allocation and no system
 * call.
 *
 * With SMDDP_TRACE_DIR set, the rings are written there on a failure, on
 * smddp_comm_dump() and, with SMDDP_TRACE_SIGNAL=1, on SIGUSR1: one file
 * per process and job, smddp-trace.<job>.<world rank>.jsonl, holding every
 * communicator of the process.  The writer is async-signal-safe (open,
 * write, rename and close on a stack buffer, and mkdir for a directory
 * that does not exist yet; no stdio, no malloc, no lock),
 * because a rank stuck outside the library (the usual culprit of a hang)
 * can only be asked through a signal.  A file is written under a temporary
 * name and renamed, so that a reader never sees half of one and two dumps
 * at once (a failure and a signal) do not mix.
 *
 * Recorders are found through a fixed table of atomic pointers, so that the
 * signal handler needs no lock; sd_trace_close() clears its slot, then
 * waits until no dump is running before the memory goes.  A dump from a
 * signal may read an entry while its owner writes it: the file then shows
 * that entry half updated, which is the price of never blocking the owner.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "config/param.h"
#include "core/said.h"
#include "core/trace.h"

#define SLOTS 64
#define ID_MAX 48
#define WAITED_MAX 8

enum { ST_STARTED = 1, ST_DONE, ST_QUEUED, ST_FAILED };

struct entry {
	uint64_t seq, count;
	uint64_t start, end; /* ticks(); end 0: not ended */
	int32_t coll, dtype, op, root;
	int32_t state, result, mem, nwaited;
	int32_t waited[WAITED_MAX];
};

struct sd_trace {
	char id[ID_MAX];
	char job[64];
	char path[1024];   /* the file, "" when SMDDP_TRACE_DIR is unset */
	int rank, size, world_rank, world_size;
	int slot;          /* in slots[], -1: not registered */
	uint64_t mask;     /* capacity - 1 */
	_Atomic uint64_t head; /* calls recorded so far */
	int open;          /* the last entry has begun and not ended */
	struct entry *ring;
	/* Whom the call in progress waits for (c->waited_on, set by the
	 * transports' waits), read by a dump while it is open: a rank that
	 * hangs is usually dumped by a signal before its wait fails. */
	const struct smddp_comm *comm;
};

static struct sd_trace *_Atomic slots[SLOTS];
static atomic_int dumping;
static _Atomic unsigned tmp_serial;
static char host[128] = "?";
static atomic_int sig_installed;
static pthread_once_t process_once = PTHREAD_ONCE_INIT;

static const char *const result_names[] = {
	"SMDDP_OK",	    "SMDDP_EINVAL",    "SMDDP_ENOMEM",	     "SMDDP_ESYSTEM",
	"SMDDP_ETIMEDOUT",  "SMDDP_EPEER",     "SMDDP_EMISMATCH",    "SMDDP_EUNSUPPORTED",
	"SMDDP_ECUDA",	    "SMDDP_ENETWORK",  "SMDDP_EABORTED",     "SMDDP_ECONFIG",
	"SMDDP_EINTERNAL",
};
static const char *const state_names[] = {"?", "started", "done", "queued", "failed"};

static int64_t wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The hot path reads the time stamp counter (10 ns) rather than the clock
 * (25 ns through the vDSO, twice per call), where the kernel itself keeps
 * time by it (clocksource "tsc": constant rate, synchronised between
 * cores); a dump turns ticks into wall time by the line through two
 * (counter, clock) pairs, the first taken when the process made its first
 * recorder.  Elsewhere, ticks are the clock's microseconds. */
static int use_tsc;
static uint64_t tsc0;
static int64_t us0;

static inline uint64_t ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	if (use_tsc)
		return __rdtsc();
#endif
	return (uint64_t)wall_us();
}

static void ticks_init(void)
{
#if defined(__x86_64__) || defined(__i386__)
	char src[32] = "";
	int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
		      O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		ssize_t n = read(fd, src, sizeof(src) - 1);

		src[n > 0 ? n : 0] = 0;
		close(fd);
	}
	use_tsc = !strcmp(src, "tsc\n");
	if (use_tsc) {
		tsc0 = __rdtsc();
		us0 = wall_us();
	}
#endif
}

static void process_init(void)
{
	gethostname(host, sizeof(host) - 1);
	ticks_init();
}

/* Wall time of ticks t, in microseconds (async-signal-safe). */
static int64_t ticks_us(uint64_t t, uint64_t tsc_now, int64_t us_now)
{
	if (!use_tsc || !t)
		return (int64_t)t;
	if (tsc_now <= tsc0)
		return us0;
	return us0 + (int64_t)((double)(int64_t)(t - tsc0) * (double)(us_now - us0) /
			       (double)(tsc_now - tsc0));
}

/* ---- the hot path ------------------------------------------------------ */

void sd_trace_begin(struct smddp_comm *c)
{
	struct sd_trace *t = c->trace;
	struct entry *e;
	uint64_t h;

	if (!t)
		return;
	h = atomic_load_explicit(&t->head, memory_order_relaxed);
	e = &t->ring[h & t->mask];
	e->state = ST_STARTED;
	e->seq = c->cur.seq;
	e->coll = c->cur.coll;
	e->count = c->cur.count;
	e->dtype = c->cur.dtype;
	e->op = c->cur.op;
	e->root = c->cur.root;
	e->mem = c->cur.mem;
	e->result = 0;
	e->nwaited = 0;
	e->end = 0;
	e->start = ticks();
	/* Published after the fields: a dump from a signal reads up to head. */
	atomic_store_explicit(&t->head, h + 1, memory_order_release);
	t->open = 1;
}

void sd_trace_end(struct smddp_comm *c, int rc)
{
	struct sd_trace *t = c->trace;
	struct entry *e;

	if (!t || !t->open)
		return;
	t->open = 0;
	e = &t->ring[(atomic_load_explicit(&t->head, memory_order_relaxed) - 1) & t->mask];
	e->end = ticks();
	e->result = rc;
	if (rc) {
		int n = c->nwaited_on < WAITED_MAX ? c->nwaited_on : WAITED_MAX;

		for (int i = 0; i < n; i++)
			e->waited[i] = c->waited_on[i];
		e->nwaited = n;
	}
	/* A device call has only been handed to its stream: the recorder does
	 * not see it finish there (SMDDP_CUDA_ASYNC). */
	e->state = rc ? ST_FAILED : e->mem ? ST_QUEUED : ST_DONE;
}

/* ---- lifecycle --------------------------------------------------------- */

static void on_signal(int sig)
{
	int saved = errno;

	(void)sig;
	sd_trace_dump("signal");
	errno = saved;
}

/* Once per process, and only over the default action: a program's own
 * SIGUSR1 handler stays.  The stopping signals wait for the dump, so that
 * a launcher's SIGTERM right after SIGUSR1 does not cut the file short. */
static void install_signal(void)
{
	struct sigaction old, sa;

	if (atomic_exchange(&sig_installed, 1))
		return;
	if (sigaction(SIGUSR1, NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
	    (old.sa_flags & SA_SIGINFO)) {
		SD_WARN(SD_SUB_INIT, "SMDDP_TRACE_SIGNAL=1, but the program handles SIGUSR1 "
				     "itself: the flight recorder leaves it alone");
		return;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGTERM);
	sigaddset(&sa.sa_mask, SIGINT);
	sigaddset(&sa.sa_mask, SIGHUP);
	sigaddset(&sa.sa_mask, SIGQUIT);
	if (sigaction(SIGUSR1, &sa, NULL) == 0)
		SD_INFO(SD_SUB_INIT, "flight recorder: SIGUSR1 writes it to SMDDP_TRACE_DIR");
}

void sd_trace_open(struct smddp_comm *c, const char *id, int world_rank, int world_size)
{
	int64_t n = sd_param_int("SMDDP_TRACE_ENTRIES");
	const char *dir = sd_param_str("SMDDP_TRACE_DIR");
	struct sd_trace *t;
	uint64_t cap = 1;

	c->trace = NULL;
	if (n <= 0)
		return;
	while (cap < (uint64_t)n)
		cap <<= 1;
	t = calloc(1, sizeof(*t));
	if (!t || !(t->ring = calloc(cap, sizeof(*t->ring)))) {
		free(t);
		SD_INFO(SD_SUB_INIT, "flight recorder: out of memory for %llu entries: none",
			(unsigned long long)cap);
		return;
	}
	t->mask = cap - 1;
	snprintf(t->id, sizeof(t->id), "%s", id);
	snprintf(t->job, sizeof(t->job), "%s", c->jobid);
	t->rank = SD_RANK_NAME(c, c->rank);
	t->size = c->size;
	t->world_rank = world_rank;
	t->world_size = world_size;
	t->slot = -1;
	t->comm = c;
	if (*dir)
		snprintf(t->path, sizeof(t->path), "%s/smddp-trace.%s.%d.jsonl", dir, t->job,
			 world_rank);
	pthread_once(&process_once, process_init);
	for (int i = 0; i < SLOTS; i++) {
		struct sd_trace *none = NULL;

		if (atomic_compare_exchange_strong(&slots[i], &none, t)) {
			t->slot = i;
			break;
		}
	}
	if (t->slot < 0)
		SD_INFO(SD_SUB_INIT, "flight recorder: more than %d communicators; communicator "
				     "%s is recorded but not dumped", SLOTS, id);
	c->trace = t;
	if (*dir && sd_param_int("SMDDP_TRACE_SIGNAL"))
		install_signal();
}

void sd_trace_close(struct smddp_comm *c)
{
	struct sd_trace *t = c->trace;

	if (!t)
		return;
	c->trace = NULL;
	if (t->slot >= 0) {
		atomic_store(&slots[t->slot], NULL);
		/* A dump that found it before the store may still read it. */
		while (atomic_load(&dumping))
			sched_yield();
	}
	free(t->ring);
	free(t);
}

const char *sd_trace_id(const struct smddp_comm *c)
{
	return c->trace ? c->trace->id : NULL;
}

int sd_trace_world_rank(const struct smddp_comm *c, int *world_size)
{
	if (!c->trace)
		return -1;
	*world_size = c->trace->world_size;
	return c->trace->world_rank;
}

/* ---- the writer: async-signal-safe ------------------------------------- */

struct out {
	int fd, err;
	size_t n;
	char buf[4096];
};

static void flush_out(struct out *o)
{
	size_t off = 0;

	while (off < o->n && !o->err) {
		ssize_t w = write(o->fd, o->buf + off, o->n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			o->err = w < 0 ? errno : EIO;
			break;
		}
		off += (size_t)w;
	}
	o->n = 0;
}

static void put_n(struct out *o, const char *s, size_t len)
{
	while (len) {
		size_t k = sizeof(o->buf) - o->n;

		if (k > len)
			k = len;
		memcpy(o->buf + o->n, s, k);
		o->n += k;
		s += k;
		len -= k;
		if (o->n == sizeof(o->buf))
			flush_out(o);
	}
}

static void put(struct out *o, const char *s)
{
	put_n(o, s, strlen(s));
}

static void put_u64(struct out *o, uint64_t v)
{
	char d[24];
	int i = (int)sizeof(d);

	do {
		d[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put_n(o, d + i, sizeof(d) - (size_t)i);
}

static void put_i64(struct out *o, int64_t v)
{
	if (v < 0) {
		put(o, "-");
		put_u64(o, (uint64_t)0 - (uint64_t)v);
	} else {
		put_u64(o, (uint64_t)v);
	}
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void put_str(struct out *o, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	put(o, "\"");
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\') {
			char e[2] = {'\\', (char)ch};

			put_n(o, e, 2);
		} else if (ch < 0x20) {
			char e[6] = {'\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15]};

			put_n(o, e, 6);
		} else {
			put_n(o, (const char *)&ch, 1);
		}
	}
	put(o, "\"");
}

static void put_key(struct out *o, const char *key)
{
	put(o, ",\"");
	put(o, key);
	put(o, "\":");
}

static int has_op(int coll)
{
	return coll == SD_COLL_ALLREDUCE || coll == SD_COLL_REDUCE_SCATTER ||
	       coll == SD_COLL_REDUCE;
}

static int has_root(int coll)
{
	return coll == SD_COLL_BROADCAST || coll == SD_COLL_REDUCE || coll == SD_COLL_GATHER ||
	       coll == SD_COLL_SCATTER;
}

static int has_data(int coll)
{
	return coll != SD_COLL_BARRIER && coll != SD_COLL_SPLIT && coll != SD_COLL_DESTROY;
}

/* The clock now, against which a dump converts ticks. */
struct now {
	uint64_t tsc;
	int64_t us;
};

static void put_entry(struct out *o, const struct sd_trace *t, const struct entry *e,
		      const struct now *now)
{
	int state = e->state >= ST_STARTED && e->state <= ST_FAILED ? e->state : 0;
	const char *name;

	put(o, "{\"comm\":");
	put_str(o, t->id);
	put_key(o, "seq");
	put_u64(o, e->seq);
	put_key(o, "coll");
	put_str(o, sd_coll_name(e->coll));
	if (has_data(e->coll)) {
		put_key(o, "count");
		put_u64(o, e->count);
		name = smddp_dtype_name(e->dtype);
		put_key(o, "dtype");
		put_str(o, name ? name : "?");
	}
	if (has_op(e->coll)) {
		name = smddp_op_name(e->op);
		put_key(o, "op");
		put_str(o, name ? name : "?");
	}
	if (has_root(e->coll)) {
		put_key(o, "root");
		put_i64(o, e->root);
	}
	put_key(o, "mem");
	put_str(o, e->mem ? "device" : "host");
	put_key(o, "state");
	put_str(o, state_names[state]);
	if (state == ST_FAILED) {
		put_key(o, "result");
		put_i64(o, e->result);
		put_key(o, "error");
		put_str(o, e->result > 0 && e->result <= SMDDP_EINTERNAL ? result_names[e->result]
									 : "?");
	}
	if (e->nwaited > 0 && e->nwaited <= WAITED_MAX) {
		put_key(o, "waited_on");
		put(o, "[");
		for (int i = 0; i < e->nwaited; i++) {
			if (i)
				put(o, ",");
			put_i64(o, e->waited[i]);
		}
		put(o, "]");
	}
	put_key(o, "start_us");
	put_i64(o, ticks_us(e->start, now->tsc, now->us));
	if (e->end) {
		put_key(o, "end_us");
		put_i64(o, ticks_us(e->end, now->tsc, now->us));
	}
	put(o, "}\n");
}

static void put_comm(struct out *o, const struct sd_trace *t, const struct now *now)
{
	uint64_t head = atomic_load_explicit(&t->head, memory_order_acquire);
	uint64_t cap = t->mask + 1, n = head < cap ? head : cap;

	put(o, "{\"comm\":");
	put_str(o, t->id);
	put_key(o, "comm_rank");
	put_i64(o, t->rank);
	put_key(o, "comm_size");
	put_i64(o, t->size);
	put_key(o, "calls");
	put_u64(o, head);
	put_key(o, "entries");
	put_u64(o, n);
	put(o, "}\n");
	for (uint64_t k = head - n; k < head; k++) {
		const struct entry *e = &t->ring[k & t->mask];
		struct entry cur;

		/* The call in progress: whom it waits for so far (a torn read
		 * at worst, like the entry itself). */
		if (k + 1 == head && t->open && !e->end && !e->nwaited && t->comm->nwaited_on > 0) {
			int nw = t->comm->nwaited_on;

			cur = *e;
			cur.nwaited = nw < WAITED_MAX ? nw : WAITED_MAX;
			for (int i = 0; i < cur.nwaited; i++)
				cur.waited[i] = t->comm->waited_on[i];
			e = &cur;
		}
		put_entry(o, t, e, now);
	}
}

/* "PATH.tmp.PID.SERIAL", built without stdio. */
static int tmp_name(char *buf, size_t len, const char *path)
{
	struct out o = {.fd = -1};
	size_t pl = strlen(path);

	put(&o, ".tmp.");
	put_i64(&o, getpid());
	put(&o, ".");
	put_u64(&o, atomic_fetch_add(&tmp_serial, 1));
	if (pl + o.n + 1 > len)
		return -1;
	memcpy(buf, path, pl);
	memcpy(buf + pl, o.buf, o.n);
	buf[pl + o.n] = 0;
	return 0;
}

/* SMDDP_TRACE_DIR, when it does not exist yet: made at the first dump
 * (its last component, 0700), so that a launcher can name one per host
 * without leaving an empty one behind every job that had nothing to say
 * (smddp-run through mpirun).  0, or -1 with errno. */
static int make_dir(const char *path)
{
	char dir[1024];
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	if (!n || n >= sizeof(dir)) {
		errno = ENOENT;
		return -1;
	}
	memcpy(dir, path, n);
	dir[n] = 0;
	return mkdir(dir, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

/* One file: the recorders of slots[first..] whose path is that of first. */
static int write_file(const struct sd_trace *first, int from, const char *why)
{
	struct out o = {.fd = -1};
	struct now now = {ticks(), wall_us()};
	char tmp[1100];
	int saved;

	if (tmp_name(tmp, sizeof(tmp), first->path) != 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	unlink(tmp); /* a leftover of a process that had this pid */
	o.fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (o.fd < 0 && errno == ENOENT && make_dir(first->path) == 0)
		o.fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (o.fd < 0)
		return -1;
	put(&o, "{\"smddp_trace\":1");
	put_key(&o, "rank");
	put_i64(&o, first->world_rank);
	put_key(&o, "nranks");
	put_i64(&o, first->world_size);
	put_key(&o, "host");
	put_str(&o, host);
	put_key(&o, "pid");
	put_i64(&o, getpid());
	put_key(&o, "job");
	put_str(&o, first->job);
	put_key(&o, "reason");
	put_str(&o, why);
	put_key(&o, "time_us");
	put_i64(&o, now.us);
	put(&o, "}\n");
	for (int i = from; i < SLOTS; i++) {
		struct sd_trace *t = atomic_load(&slots[i]);

		if (t && !strcmp(t->path, first->path))
			put_comm(&o, t, &now);
	}
	flush_out(&o);
	if (o.err) {
		close(o.fd);
		unlink(tmp);
		errno = o.err;
		return -1;
	}
	if (close(o.fd) != 0 || rename(tmp, first->path) != 0) {
		saved = errno;
		unlink(tmp);
		errno = saved;
		return -1;
	}
	return 0;
}

int sd_trace_dump(const char *why)
{
	int rc = 0, err = 0;

	atomic_fetch_add(&dumping, 1);
	for (int i = 0; i < SLOTS; i++) {
		struct sd_trace *t = atomic_load(&slots[i]);
		int seen = 0;

		if (!t || !t->path[0])
			continue;
		for (int j = 0; j < i && !seen; j++) {
			struct sd_trace *u = atomic_load(&slots[j]);

			seen = u && !strcmp(u->path, t->path);
		}
		if (!seen && write_file(t, i, why) != 0) {
			rc = -1;
			err = errno;
		}
	}
	atomic_fetch_sub(&dumping, 1);
	if (rc)
		errno = err;
	return rc;
}

void sd_trace_failed(struct smddp_comm *c, int rc)
{
	struct sd_trace *t = c->trace;

	if (!t || !t->path[0])
		return;
	if (sd_trace_dump(rc == SMDDP_ETIMEDOUT ? "timeout" : "error") != 0)
		SD_WARN(SD_SUB_COLL, "flight recorder: cannot write %s: %s (SMDDP_TRACE_DIR)",
			t->path, strerror(errno));
	else
		SD_INFO(SD_SUB_COLL, "flight recorder written to %s", t->path);
}

SD_EXPORT int smddp_comm_dump(struct smddp_comm *comm)
{
	struct sd_trace *t;

	if (!comm)
		return SMDDP_EINVAL;
	sd_api_async_forget(comm);
	t = comm->trace;
	if (!t)
		return sd_comm_error(comm, SMDDP_ECONFIG,
				     "smddp_comm_dump: the flight recorder is off "
				     "(SMDDP_TRACE_ENTRIES=0, or no memory for it)");
	if (!t->path[0])
		return sd_comm_error(comm, SMDDP_ECONFIG,
				     "smddp_comm_dump: SMDDP_TRACE_DIR is not set: set it to a "
				     "directory for the dumps");
	if (sd_trace_dump("request") != 0)
		return sd_comm_error(comm, SMDDP_ESYSTEM, "smddp_comm_dump: cannot write %s: %s",
				     t->path, strerror(errno));
	return SMDDP_OK;
}
