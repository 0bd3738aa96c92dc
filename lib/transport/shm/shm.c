/* shm.c - intra-node transport: one shared-memory segment per communicator.
 *
 * Layout: a header page, then one control block per rank (two cache lines:
 * barrier epoch, futex doorbell, sleeping flag, abort flag, descriptor), then
 * the data slots: for each rank two halves of `half` bytes, then each rank's
 * two staging halves for point to point (p2p.c).
 *
 * Waiting (the loop of lib/util/wait.c, calling back barrier_ready,
 * barrier_sleep and check_health here): a rank polls the words it waits on
 * a bounded number of times (SMDDP_SPIN; few when ranks outnumber cores),
 * then sleeps on its own doorbell futex.  A rank that publishes progress rings the doorbell of every
 * sleeper.  Sleeping and publishing follow the Dekker pattern: the sleeper
 * sets `sleeping`, fences, re-checks, then waits on the doorbell value read
 * before; the publisher stores its progress, fences, then reads `sleeping`.
 * Either the sleeper sees the progress or the publisher sees the sleeper.
 *
 * Liveness: while asleep a rank wakes every SMDDP_LIVENESS_MS and asks, for
 * each rank it still waits for, whether that process has ended (pidfd, which
 * also reports a zombie) or aborted, and whether the deadline (SMDDP_TIMEOUT)
 * passed.  The world communicator also polls its bootstrap sockets.
 *
 * Names are /smddp-JOBID-RANDOM: per job and per communicator, mode 0600,
 * unlinked as soon as every rank has attached.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/checks.h"
#include "base/comm-types.h"
#include "bootstrap/bootstrap.h"
#include "clock/clock.h"
#include "transport/transport.h"
#include "transport/shm/shm.h"

/* Header page, control blocks, point-to-point channels and their eager
 * slots, data slots, staging halves. */
static size_t layout(int nranks, size_t half, size_t *ctl_off, size_t *data_off)
{
	size_t page = 4096, pairs = (size_t)nranks * (size_t)nranks;
	size_t chans = pairs * sizeof(struct p2p_chan);
	size_t eager = pairs * P2P_NDESC * sd_shm_eager_bytes(nranks);

	*ctl_off = page;
	*data_off = (*ctl_off + (size_t)nranks * sizeof(struct shm_ctl) + chans + eager + page - 1) /
		    page * page;
	return *data_off + (size_t)nranks * 2 * (half + sd_shm_stage_half(half));
}

static int open_pidfds(struct smddp_comm *c, struct shm_state *s)
{
	s->pidfd = malloc(sizeof(int) * (size_t)c->size);
	if (!s->pidfd)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	for (int r = 0; r < c->size; r++) {
		s->pidfd[r] = -1;
		if (r == c->rank)
			continue;
#ifdef SYS_pidfd_open
		s->pidfd[r] = (int)syscall(SYS_pidfd_open, c->pids[r], 0);
#endif
		/* Without pidfds (old kernel, foreign pid namespace) kill(pid, 0)
		 * still tells a vanished process, if not a zombie. */
	}
	return SMDDP_OK;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Map the pages of [p, p + len) into this process now. */
static void populate(void *p, size_t len)
{
	long sz = sysconf(_SC_PAGESIZE);
	uintptr_t pg = sz > 0 ? (uintptr_t)sz : 4096;
	uintptr_t a = (uintptr_t)p & ~(pg - 1), e = ((uintptr_t)p + len + pg - 1) & ~(pg - 1);

	if (madvise((void *)a, e - a, MADV_POPULATE_WRITE) == 0)
		return;
	for (uintptr_t x = a; x < e; x += pg)
		(void)*(volatile char *)x;
}

/* This rank's eager slots, those it sends from and those it receives in:
 * mapped lazily, each of the first P2P_NDESC messages over P2P_TINY bytes
 * on a channel would take a page fault on both ends. */
static void populate_eager(struct smddp_comm *c, struct shm_state *s)
{
	size_t span = P2P_NDESC * s->eager;

	for (int q = 0; q < c->size; q++) {
		populate(sd_shm_eager(s, c->size, c->rank, q, 0), span);
		if (q != c->rank)
			populate(sd_shm_eager(s, c->size, q, c->rank, 0), span);
	}
}

static int map_segment(struct smddp_comm *c, struct shm_state *s, int fd, size_t len)
{
	size_t ctl_off, data_off;

	s->base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (s->base == MAP_FAILED) {
		s->base = NULL;
		return SD_SYS_ERR(c, SMDDP_ESYSTEM, "cannot map shared memory %s (%zu bytes)", s->name,
				  len);
	}
	s->len = len;
	layout(c->size, s->half, &ctl_off, &data_off);
	s->hdr = s->base;
	s->ctl = (struct shm_ctl *)((char *)s->base + ctl_off);
	s->chan = (struct p2p_chan *)(s->ctl + c->size);
	s->eager = sd_shm_eager_bytes(c->size);
	s->eager_base = (char *)(s->chan + (size_t)c->size * (size_t)c->size);
	s->data = (char *)s->base + data_off;
	s->stage_half = sd_shm_stage_half(s->half);
	s->stage = s->data + (size_t)c->size * 2 * s->half;
	s->p2p = calloc((size_t)c->size, sizeof(*s->p2p));
	if (!s->p2p)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	populate_eager(c, s);
	/* The slots too: every rank's halves, which each staged step reads
	 * or writes, else the first calls of a size take a page fault per
	 * 4 KiB of them on every rank (and SMDDP_SHM_ALGO=auto would time
	 * the faults). */
	populate(s->data, (size_t)c->size * 2 * s->half);
	return SMDDP_OK;
}

int sd_shm_create(struct smddp_comm *c, char *name, size_t namelen)
{
	struct shm_state *s;
	uint64_t rnd = 0;
	size_t ctl_off, data_off, len;
	int fd = -1, rc;

	s = calloc(1, sizeof(*s));
	if (!s)
		return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
	c->tp_state = s;
	s->half = c->chunk;
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = (uint64_t)getpid() << 32 ^ sd_now_ns();
	snprintf(s->name, sizeof(s->name), "/smddp-%s-%016llx", c->jobid, (unsigned long long)rnd);
	len = layout(c->size, s->half, &ctl_off, &data_off);
	fd = SD_RETRY_EINTR(shm_open(s->name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
	if (fd < 0)
		return SD_SYS_ERR(c, SMDDP_ESYSTEM, "cannot create shared memory %s", s->name);
	s->owner = 1;
	/* Reserve the pages now: a full /dev/shm must be an error here, not a
	 * SIGBUS in the middle of a collective. */
	rc = posix_fallocate(fd, 0, (off_t)len);
	if (rc != 0) {
		close(fd);
		shm_unlink(s->name);
		s->owner = 0;
		return sd_comm_error(c, SMDDP_ESYSTEM,
				     "cannot reserve %zu bytes of shared memory in /dev/shm: %s "
				     "(make /dev/shm larger, e.g. docker --shm-size, or lower SMDDP_SHM_CHUNK)",
				     len, strerror(rc));
	}
	rc = map_segment(c, s, fd, len);
	close(fd);
	if (rc)
		return rc;
	s->hdr->total = len;
	s->hdr->half = s->half;
	s->hdr->nranks = (uint32_t)c->size;
	atomic_thread_fence(memory_order_release);
	s->hdr->magic = SHM_MAGIC;
	snprintf(name, namelen, "%s", s->name);
	SD_INFO(SD_SUB_SHM, "created %s: %d ranks x 2 x %zu bytes", s->name, c->size, s->half);
	return SMDDP_OK;
}

int sd_shm_attach(struct smddp_comm *c, const char *name, int leader)
{
	struct shm_state *s = ST(c);
	struct stat st;
	size_t ctl_off, data_off, len;
	int fd, rc;

	if (!leader) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return sd_comm_error(c, SMDDP_ENOMEM, "out of memory");
		c->tp_state = s;
		s->half = c->chunk;
		snprintf(s->name, sizeof(s->name), "%s", name);
		len = layout(c->size, s->half, &ctl_off, &data_off);
		fd = SD_RETRY_EINTR(shm_open(s->name, O_RDWR | O_CLOEXEC, 0));
		if (fd < 0)
			return SD_SYS_ERR(c, SMDDP_ESYSTEM, "cannot open shared memory %s", s->name);
		if (fstat(fd, &st) != 0 || (size_t)st.st_size != len) {
			close(fd);
			return sd_comm_error(c, SMDDP_EMISMATCH,
					     "shared memory %s has %lld bytes, expected %zu: do all ranks "
					     "use the same SMDDP_SHM_CHUNK?",
					     s->name, (long long)st.st_size, len);
		}
		rc = map_segment(c, s, fd, len);
		close(fd);
		if (rc)
			return rc;
		if (s->hdr->magic != SHM_MAGIC || s->hdr->nranks != (uint32_t)c->size ||
		    s->hdr->half != s->half)
			return sd_comm_error(c, SMDDP_EMISMATCH,
					     "shared memory %s was made for %u ranks of %llu bytes, "
					     "this rank expects %d of %zu (same SMDDP_SHM_CHUNK everywhere?)",
					     s->name, s->hdr->nranks, (unsigned long long)s->hdr->half,
					     c->size, s->half);
	}
	s->ctl[c->rank].pid = getpid();
	s->ctl[c->rank].probe = SHM_MAGIC ^ (uint64_t)getpid();
	s->ctl[c->rank].probe_addr = (uintptr_t)&s->ctl[c->rank].probe;
	return open_pidfds(c, s);
}

void sd_shm_unlink_seg(struct smddp_comm *c)
{
	struct shm_state *s = ST(c);

	if (s && s->owner) {
		shm_unlink(s->name);
		s->owner = 0;
	}
}

static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

/* Wake rank r if it sleeps: the caller stored what r waits for first
 * (seq_cst), so either r sees it or this sees r asleep. */
void sd_shm_wake(struct smddp_comm *c, int r)
{
	struct shm_state *s = ST(c);

	if (atomic_load_explicit(&s->ctl[r].sleeping, memory_order_seq_cst)) {
		atomic_fetch_add_explicit(&s->ctl[r].bell, 1, memory_order_seq_cst);
		futex(&s->ctl[r].bell, FUTEX_WAKE, 1, NULL);
	}
}

/* Sleep on this rank's doorbell for at most ns, unless it moved on from
 * bell (read before the caller's last look at what it waits for). */
void sd_shm_sleep(struct smddp_comm *c, uint32_t bell, uint64_t ns)
{
	struct shm_ctl *me = &ST(c)->ctl[c->rank];
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
			      .tv_nsec = (long)(ns % 1000000000ull)};

	futex(&me->bell, FUTEX_WAIT, bell, &ts);
	atomic_store_explicit(&me->sleeping, 0, memory_order_relaxed);
}

static void ring_sleepers(struct smddp_comm *c)
{
	for (int r = 0; r < c->size; r++)
		if (r != c->rank)
			sd_shm_wake(c, r);
}

static int peer_gone(struct smddp_comm *c, struct shm_state *s, int r)
{
	if (r == c->rank)
		return 0;
	if (s->pidfd[r] >= 0) {
		struct pollfd p = {.fd = s->pidfd[r], .events = POLLIN};

		return poll(&p, 1, 0) > 0;
	}
	return kill(c->pids[r], 0) != 0 && errno == ESRCH;
}

int sd_shm_peer_gone(struct smddp_comm *c, int r)
{
	return peer_gone(c, ST(c), r);
}

#define GAVE_UP " gave up after: "

/* Which of check_health's passes names an aborted rank whose reason is
 * m: 0 an explicit abort (no reason), 1 a failure of its own, 2 one it
 * passes on from another rank. */
static int abort_pass(const char *m)
{
	return !m[0] ? 0 : strstr(m, GAVE_UP) ? 2 : 1;
}

/* Rank r has left the communicator (its aborted flag is set): say why, in
 * its own words when it gave up after a failure of its own. */
int sd_shm_report_left(struct smddp_comm *c, int r)
{
	struct shm_ctl *p = &ST(c)->ctl[r];

	if (!p->abort_msg[0])
		return sd_comm_error(c, SMDDP_EABORTED,
				     "rank %d (pid %d) aborted the communicator (smddp_comm_abort)",
				     SD_RANK_NAME(c, r), (int)c->pids[r]);
	return sd_comm_error(c, p->abort_rc, "rank %d (pid %d)" GAVE_UP "%.300s",
			     SD_RANK_NAME(c, r), (int)c->pids[r], p->abort_msg);
}

/* What the rendezvous channel has heard of a failed rank of the job (rank
 * 0 passes it on), as this communicator's failure; SMDDP_OK when nothing.
 * Only from the thread that waits in this transport: the channel is its. */
int sd_shm_boot_news(struct smddp_comm *c)
{
	struct sd_err err;
	int rc;

	if (!c->boot)
		return SMDDP_OK;
	rc = sd_boot_poll(c->boot, NULL, &err);
	return rc ? sd_comm_error(c, rc, "%s", err.msg) : SMDDP_OK;
}

/* A barrier being waited for: what sd_wait's callbacks look at. */
struct bwait {
	struct smddp_comm *c;
	struct shm_ctl *ctl; /* the ranks' control blocks: one load from a poll */
	uint64_t target;     /* the epoch every rank must reach */
	int r, n;            /* ranks below r have arrived, of n */
	uint64_t cancel_seen; /* when this wait first saw a cancel it kept waiting through */
};

/* The ranks that have not reached target, for the flight recorder
 * (smddp-trace names them) and for messages: "1,3" (16 at most). */
static int missing_ranks(struct smddp_comm *c, uint64_t target, char *missing, size_t len)
{
	struct shm_state *s = ST(c);
	size_t off = 0;
	int nmissing = 0;

	missing[0] = 0;
	c->nwaited_on = 0;
	for (int r = 0; r < c->size; r++) {
		if (atomic_load_explicit(&s->ctl[r].arrive, memory_order_acquire) >= target)
			continue;
		if (c->nwaited_on < (int)(sizeof(c->waited_on) / sizeof(c->waited_on[0])))
			c->waited_on[c->nwaited_on++] = SD_RANK_NAME(c, r);
		if (nmissing < 16 && off < len - 16)
			off += (size_t)snprintf(missing + off, len - off, "%s%d",
						nmissing ? "," : "", SD_RANK_NAME(c, r));
		nmissing++;
	}
	return nmissing;
}

/* Called while asleep: is any rank we still need dead or aborted, has the
 * bootstrap channel heard of a failure?  (The deadline is sd_wait's.) */
static int check_peers(struct smddp_comm *c, uint64_t target, int boot);

static int check_health(struct smddp_comm *c, uint64_t target)
{
	return check_peers(c, target, 1);
}

/* ... and with boot 0 without the bootstrap's channel (which belongs to
 * the thread that waits in this transport). */
static int check_peers(struct smddp_comm *c, uint64_t target, int boot)
{
	struct shm_state *s = ST(c);
	char missing[256], note[400];

	/* Root causes first: a rank that died, then one that left and says
	 * why (aborted, or gave up after its own failure), then what the
	 * bootstrap heard; sd_wait's deadline comes last. */
	missing_ranks(c, target, missing, sizeof(missing));
	for (int r = 0; r < c->size; r++) {
		if (atomic_load_explicit(&s->ctl[r].arrive, memory_order_acquire) >= target)
			continue;
		if (atomic_load_explicit(&s->ctl[r].aborted, memory_order_acquire) == 0 &&
		    peer_gone(c, s, r))
			return sd_comm_error(c, SMDDP_EPEER,
					     "rank %d (pid %d) is gone%s: its process ended "
					     "(killed, crashed or exited without "
					     "smddp_comm_destroy) before it reached this step",
					     SD_RANK_NAME(c, r), (int)c->pids[r],
					     sd_shm_note_words(c, r, note, sizeof(note)));
	}
	/* An explicit abort (no message) is the cause; then a rank that gave
	 * up after a failure of its own, before one that passes on another's
	 * (its message says who gave up first). */
	for (int pass = 0; pass < 3; pass++) {
		for (int r = 0; r < c->size; r++) {
			if (!atomic_load_explicit(&s->ctl[r].aborted, memory_order_acquire))
				continue;
			if (abort_pass(s->ctl[r].abort_msg) == pass)
				return sd_shm_report_left(c, r);
		}
	}
	return boot ? sd_shm_boot_news(c) : SMDDP_OK;
}

/* The transport's health op: check_health over every peer, as if this
 * rank waited for all of them (its own abort is not a peer's failure). */
int sd_shm_health(struct smddp_comm *c)
{
	struct shm_state *s = ST(c);

	/* Once this rank has aborted, its own flag would be named. */
	if (!s || !s->ctl || atomic_load_explicit(&s->ctl[c->rank].aborted, memory_order_acquire))
		return SMDDP_OK;
	return check_peers(c, UINT64_MAX, 0);
}

/* Inlined into sd_wait()'s first polls: the poll of the hot path. */
static inline __attribute__((always_inline)) int barrier_ready(void *arg, int *rc)
{
	struct bwait *b = arg;
	struct shm_ctl *ctl = b->ctl;
	uint64_t target = b->target;
	int r = b->r, n = b->n;

	/* Relaxed, with one acquire fence once all have arrived (it pairs
	 * with every seq_cst arrival read before it): an acquire load per
	 * poll would also make the compiler reload b's fields every poll. */
	while (r < n && atomic_load_explicit(&ctl[r].arrive, memory_order_relaxed) >= target)
		r++;
	b->r = r;
	if (r < n)
		return SD_WAIT_NOT_YET;
	/* Not `aborted` above: it shares a line with what the peers write
	 * every call (addresses, descriptors), and polling it costs a miss
	 * per poll; barrier_sleep looks. */
	atomic_thread_fence(memory_order_acquire);
	/* Everyone arrived, but a rank that gave up waiting here (or earlier)
	 * before we came left without completing: this rank must not report
	 * success alone. */
	for (int q = 0; q < n; q++)
		if (atomic_load_explicit(&ctl[q].aborted, memory_order_acquire) &&
		    atomic_load_explicit(&ctl[q].done, memory_order_relaxed) < target) {
			*rc = check_health(b->c, target);
			return *rc ? SD_WAIT_FAILED : SD_WAIT_DONE;
		}
	return SD_WAIT_DONE;
}

/* Dekker with the publisher (the top of this file): sleeping is set before
 * the last look at what we wait for, the doorbell read before both. */
static int barrier_sleep(void *arg, uint64_t ns, int *rc)
{
	struct bwait *b = arg;
	struct shm_ctl *me = &b->ctl[b->c->rank], *p = &b->ctl[b->r];
	uint32_t bell = atomic_load_explicit(&me->bell, memory_order_seq_cst);

	(void)rc;
	atomic_store_explicit(&me->sleeping, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&p->arrive, memory_order_seq_cst) >= b->target) {
		atomic_store_explicit(&me->sleeping, 0, memory_order_relaxed);
		return SD_WAIT_NOT_YET;
	}
	if (atomic_load_explicit(&p->aborted, memory_order_relaxed)) {
		/* The rank waited for left: ask why at once. */
		atomic_store_explicit(&me->sleeping, 0, memory_order_relaxed);
		return SD_WAIT_LOOK;
	}
	sd_shm_sleep(b->c, bell, ns);
	return SD_WAIT_NOT_YET;
}

/* The longest a cancelled barrier waits for peers that may still write
 * into this rank's buffers (as an aborted device call waits for its
 * kernels, cuda/move.c). */
#define CANCEL_GRACE_NS 10000000000ull

static int barrier_health(void *arg)
{
	struct bwait *b = arg;
	struct smddp_comm *c = b->c;

	/* smddp_comm_cancel ends the call's first barrier at once: no peer has
	 * this call's buffers yet.  Past it, peers that single-copy into this
	 * rank's receive buffer may still be writing: wait for them to arrive
	 * (or fail) for at most the grace, so that the caller does not free
	 * or reuse memory they write into. */
	if (sd_comm_cancel_asked(c)) {
		uint64_t now = sd_now_ns(), grace = CANCEL_GRACE_NS;

		if (grace > c->timeout_ns)
			grace = c->timeout_ns;
		if (!b->cancel_seen)
			b->cancel_seen = now;
		if (b->target == ST(c)->call_first || now - b->cancel_seen >= grace)
			return sd_comm_cancelled(c);
	}
	return check_health(c, b->target);
}

/* The wait of this communicator's shm: SMDDP_SPIN polls, then the
 * doorbell, health every SMDDP_LIVENESS_MS, SMDDP_TIMEOUT. */
void sd_shm_wait_init(struct smddp_comm *c, struct sd_wait *w)
{
	*w = (struct sd_wait){
		.spin = c->spin,
		.yield_mask = c->yield_mask,
		.liveness_ns = c->liveness_ns,
		.timeout_ns = c->timeout_ns,
	};
}

int sd_shm_barrier(struct smddp_comm *c)
{
	struct shm_state *s = ST(c);
	struct bwait b = {.c = c, .ctl = s->ctl, .target = ++s->epoch, .n = c->size};
	struct sd_wait w;
	int rc;

	if (c->cur.coll != s->call_coll || c->cur.seq != s->call_seq || !c->cur.seq) {
		s->call_coll = c->cur.coll;
		s->call_seq = c->cur.seq;
		s->call_first = b.target;
	}
	atomic_store_explicit(&s->ctl[c->rank].arrive, b.target, memory_order_seq_cst);
	ring_sleepers(c);
	sd_shm_wait_init(c, &w);
	w.ready = barrier_ready;
	w.sleep = barrier_sleep;
	w.health = barrier_health;
	w.arg = &b;
	rc = sd_wait(&w);
	if (rc == SMDDP_OK) {
		/* Kept here and published only at abort: a store to the line
		 * the peers poll costs every call. */
		s->done_epoch = b.target;
	} else if (w.expired) {
		char missing[256];
		int nmissing = missing_ranks(c, b.target, missing, sizeof(missing));

		rc = sd_comm_error(c, SMDDP_ETIMEDOUT,
				   "waited %.0f s (%s) for rank(s) %s%s of %d, "
				   "which did not arrive: are they stuck, or calling a "
				   "different collective?",
				   (double)(sd_now_ns() - w.start) / 1e9, c->timeout_from, missing,
				   nmissing > 16 ? ",..." : "", c->size);
	}
	return rc;
}

static int xfer_once(pid_t pid, void *local, uintptr_t remote, size_t len, int write, size_t *got)
{
	struct iovec l = {.iov_base = local, .iov_len = len};
	struct iovec r = {.iov_base = (void *)remote, .iov_len = len};
	ssize_t n = write ? SD_RETRY_EINTR(process_vm_writev(pid, &l, 1, &r, 1, 0))
			  : SD_RETRY_EINTR(process_vm_readv(pid, &l, 1, &r, 1, 0));

	if (n < 0)
		return -1;
	*got = (size_t)n;
	return 0;
}

static int read_once(pid_t pid, void *dst, uintptr_t src, size_t len, size_t *got)
{
	return xfer_once(pid, dst, src, len, 0, got);
}

/* Bytes per process_vm_readv: a transfer of up to PEER_XFER_ONE is one
 * call (a call costs microseconds); a longer one goes in calls of
 * PEER_XFER_MAX, as one huge call pins every page of both sides at once
 * and copies at half the speed of calls of a few hundred KiB (3.4 against
 * 5 GB/s for 64 MiB on the CI machine). */
#define PEER_XFER_ONE (4u << 20)
#define PEER_XFER_MAX (512 * 1024)

static int peer_xfer(struct smddp_comm *c, int r, void *local, uintptr_t remote, size_t len,
		     int write)
{
	size_t step = len <= PEER_XFER_ONE ? len : PEER_XFER_MAX;

	while (len) {
		size_t got = 0;

		if (xfer_once(c->pids[r], local, remote, len < step ? len : step, write, &got) != 0 ||
		    got == 0) {
			int e = got == 0 && errno == 0 ? EFAULT : errno;

			/* A peer that failed may have freed the buffer (EFAULT)
			 * or exited (ESRCH): its own reason comes first. */
			if (atomic_load_explicit(&ST(c)->ctl[r].aborted, memory_order_seq_cst))
				return sd_shm_report_left(c, r);
			if (e == ESRCH)
				return sd_comm_error(c, SMDDP_EPEER,
						     "rank %d (pid %d) died while this rank %s its "
						     "buffer",
						     SD_RANK_NAME(c, r), (int)c->pids[r],
						     write ? "wrote" : "read");
			return sd_comm_error(c, SMDDP_ESYSTEM,
					     "cannot %s %zu bytes of rank %d's buffer at %#lx: %s "
					     "(did rank %d pass a buffer shorter than count?)",
					     write ? "write" : "read", len, SD_RANK_NAME(c, r),
					     (unsigned long)remote, strerror(e), SD_RANK_NAME(c, r));
		}
		local = (char *)local + got;
		remote += got;
		len -= got;
	}
	return SMDDP_OK;
}

int sd_shm_peer_read(struct smddp_comm *c, int r, void *dst, uintptr_t src, size_t len)
{
	return peer_xfer(c, r, dst, src, len, 0);
}

int sd_shm_peer_write(struct smddp_comm *c, int r, uintptr_t dst, const void *src, size_t len)
{
	return peer_xfer(c, r, (void *)src, dst, len, 1);
}

void sd_shm_put_addrs(struct smddp_comm *c, const void *a, const void *b)
{
	struct shm_ctl *me = &ST(c)->ctl[c->rank];

	me->addr[0] = (uintptr_t)a;
	me->addr[1] = (uintptr_t)b;
}

void sd_shm_get_addrs(struct smddp_comm *c, int r, uintptr_t *a, uintptr_t *b)
{
	struct shm_ctl *p = &ST(c)->ctl[r];

	*a = p->addr[0];
	*b = p->addr[1];
}

/* Single copy needs every rank to read every other's memory: the kernel
 * allows it to the same user unless Yama's ptrace_scope, a seccomp filter
 * (containers) or a capability rule says no.  Try it on a known word, tell
 * the others, and use it only if all could. */
int sd_shm_finish(struct smddp_comm *c)
{
	struct shm_state *s = ST(c);
	int ok = 1, rc;

	if (c->single_copy && c->size > 1) {
		/* Under Yama ptrace_scope 1 only: see ptracer.c and smddp(7). */
		s->ptracer = sd_shm_ptracer_hold(c->single_copy_ptracer);
		/* Yama (scope 1) checks the reader against the target's
		 * ptracer when it reads: everybody sets it, then everybody
		 * reads. */
		SD_CHECK(sd_shm_barrier(c));
		for (int r = 0; r < c->size && ok; r++) {
			uint64_t v = 0;
			size_t got = 0;

			if (r == c->rank)
				continue;
			/* Read the word, and write the same value back: single
			 * copy writes peers' buffers too. */
			if (read_once(c->pids[r], &v, s->ctl[r].probe_addr, sizeof(v), &got) != 0 ||
			    got != sizeof(v) || v != s->ctl[r].probe ||
			    xfer_once(c->pids[r], &v, s->ctl[r].probe_addr, sizeof(v), 1, &got) != 0 ||
			    got != sizeof(v)) {
				SD_INFO(SD_SUB_SHM,
					"single copy off: cannot read rank %d's memory (%s); large "
					"messages are staged through shared memory",
					r, got ? "wrong value" : strerror(errno));
				ok = 0;
			}
		}
	} else {
		ok = c->size > 1 ? 0 : 1;
	}
	s->ctl[c->rank].cma_ok = ok;
	rc = sd_shm_barrier(c);
	if (rc)
		return rc; /* sd_shm_detach gives the ptracer back */
	for (int r = 0; r < c->size; r++)
		if (!s->ctl[r].cma_ok)
			ok = 0;
	if (c->single_copy && !ok && c->size > 1)
		SD_INFO(SD_SUB_SHM, "single copy off for this communicator: some rank cannot "
				    "read its peers");
	c->single_copy = ok && c->single_copy;
	/* Every rank has probed (the barrier above): nobody reads us for this
	 * communicator any more unless single copy is on. */
	if (!c->single_copy && s->ptracer) {
		sd_shm_ptracer_release();
		s->ptracer = 0;
	}
	/* Nobody reads cma_ok again until the next communicator: no barrier. */
	return SMDDP_OK;
}

size_t sd_shm_half_bytes(struct smddp_comm *c)
{
	return ST(c)->half;
}

void *sd_shm_slot(struct smddp_comm *c, int r, int h)
{
	struct shm_state *s = ST(c);

	return s->data + ((size_t)r * 2 + (size_t)h) * s->half;
}

void *sd_shm_tiny(struct smddp_comm *c, int r, int h)
{
	return ST(c)->ctl[r].tiny[h];
}

void *sd_shm_hint(struct smddp_comm *c, int r, int h)
{
	return ST(c)->ctl[r].hint[h];
}

void sd_shm_put_desc(struct smddp_comm *c, const void *desc, size_t len)
{
	memcpy(ST(c)->ctl[c->rank].desc, desc, len < DESC_MAX ? len : DESC_MAX);
}

void sd_shm_get_desc(struct smddp_comm *c, int r, void *desc, size_t len)
{
	memcpy(desc, ST(c)->ctl[r].desc, len < DESC_MAX ? len : DESC_MAX);
}

void sd_shm_abort(struct smddp_comm *c)
{
	struct shm_state *s = ST(c);

	if (!s || !s->ctl)
		return;
	/* Peers read the reason once `aborted` is set: written once, never
	 * rewritten under them; a later abort only rings again. */
	if (!__atomic_exchange_n(&s->abort_claimed, 1, __ATOMIC_ACQ_REL)) {
		s->ctl[c->rank].abort_rc = c->failed ? c->failed : SMDDP_EABORTED;
		snprintf(s->ctl[c->rank].abort_msg, sizeof(s->ctl[c->rank].abort_msg), "%s",
			 c->failed ? c->last_error : "");
		atomic_store_explicit(&s->ctl[c->rank].done, s->done_epoch, memory_order_relaxed);
		atomic_store_explicit(&s->ctl[c->rank].aborted, 1, memory_order_seq_cst);
	}
	for (int r = 0; r < c->size; r++) {
		if (r == c->rank)
			continue;
		atomic_fetch_add_explicit(&s->ctl[r].bell, 1, memory_order_seq_cst);
		futex(&s->ctl[r].bell, FUTEX_WAKE, 1, NULL);
	}
}

void sd_shm_note(struct smddp_comm *c, const char *why)
{
	struct shm_state *s = ST(c);

	if (s && s->ctl)
		snprintf(s->ctl[c->rank].note, sizeof(s->ctl[c->rank].note), "%s", why);
}

const char *sd_shm_note_words(struct smddp_comm *c, int r, char *buf, size_t n)
{
	const char *note = ST(c)->ctl[r].note;

	if (!note[0])
		return "";
	snprintf(buf, n, " after an error of its own (its last: %.*s)",
		 (int)sizeof(ST(c)->ctl[r].note), note);
	return buf;
}

void sd_shm_detach(struct smddp_comm *c)
{
	struct shm_state *s = ST(c);

	if (!s)
		return;
	sd_shm_unlink_seg(c);
	if (s->ptracer)
		sd_shm_ptracer_release();
	if (s->pidfd) {
		for (int r = 0; r < c->size; r++)
			if (s->pidfd[r] >= 0)
				close(s->pidfd[r]);
		free(s->pidfd);
	}
	free(s->p2p);
	if (s->base)
		munmap(s->base, s->len);
	free(s);
	c->tp_state = NULL;
}
