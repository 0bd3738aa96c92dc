/* channel.c - the bootstrap's event loop: admission of ranks by rank 0, incoming frames, poll (design: bootstrap.c). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock/clock.h"
#include "hash/sha256.h"
#include "util/sd.h"
#include "bootstrap/wire.h"

/* ---- rank 0: hellos from strangers ------------------------------------- */

static void reject(struct sd_boot *b, struct conn *c, const char *reason, int claimed)
{
	struct frame *f = sd_boot_frame_str(F_REJECT, 0, 0, 0, 0, reason);
	uint64_t now = sd_now_ns();
	char claim[40] = "";

	if (claimed >= 0)
		snprintf(claim, sizeof(claim), " (it says it is rank %d)", claimed);
	/* A port scan or a flood of strangers must not flood the log: a few
	 * lines per window, then one that counts what was left out. */
	if (now - b->warn_window >= WARN_WINDOW_NS) {
		if (b->unwarned)
			SD_WARN(SD_SUB_BOOT, "%d more rejected connection(s) not logged (at most %d lines per %llu s)",
				b->unwarned, WARN_PER_WINDOW, WARN_WINDOW_NS / 1000000000ull);
		b->warn_window = now;
		b->warned = 0;
		b->unwarned = 0;
	}
	if (b->warned < WARN_PER_WINDOW) {
		b->warned++;
		SD_WARN(SD_SUB_BOOT, "rejected connection from %s: %s%s%s", c->addr, reason, claim,
			b->warned == WARN_PER_WINDOW ? " (more in the next seconds are counted, not logged)" : "");
	} else {
		b->unwarned++;
		SD_TRACE(SD_SUB_BOOT, "rejected connection from %s: %s%s", c->addr, reason, claim);
	}
	snprintf(b->last_reject, sizeof(b->last_reject), "%s from %s", reason, c->addr);
	if (f) {
		/* A few hundred bytes into an empty socket buffer: fits at once. */
		(void)sd_boot_conn_send(c, f);
		sd_boot_frame_unref(f);
	}
	sd_boot_conn_close(c);
}

void sd_boot_refuse_pending(struct sd_boot *b, const char *why)
{
	for (int i = 0; i < b->npending; i++)
		if (b->pending[i]->fd >= 0 && b->pending[i]->rank < 0)
			reject(b, b->pending[i], why, b->pending[i]->challenged ? b->pending[i]->claim_rank : -1);
}

/* HELLO from a stranger: check the form, then challenge it.  Nothing
 * about the job is said before it has answered (on_auth). */
static void on_hello(struct sd_boot *b, struct conn *c, const uint8_t *p, uint32_t len)
{
	struct rd r = {p, len, 0, 0};
	const uint8_t *magic = sd_boot_rdbytes(&r, 8);
	uint32_t version = sd_boot_rd32(&r);
	int32_t rank = (int32_t)sd_boot_rd32(&r), size = (int32_t)sd_boot_rd32(&r);
	const uint8_t *cn = sd_boot_rdbytes(&r, NONCE_LEN);
	char why[300];
	struct frame *f;

	if (b->refuse_why) {
		reject(b, c, b->refuse_why, -1);
		return;
	}
	if (!magic || memcmp(magic, HELLO_MAGIC, 8)) {
		reject(b, c, "bad magic: not a libsmddp rank (is something else using MASTER_PORT?)", -1);
		return;
	}
	if (version != PROTO_VERSION) {
		snprintf(why, sizeof(why), "protocol version %u differs from rank 0's %u (mixed libsmddp versions?)",
			 version, PROTO_VERSION);
		reject(b, c, why, (int)rank);
		return;
	}
	if (!cn || r.off != r.n) {
		reject(b, c, "malformed hello", -1);
		return;
	}
	if (!b->token[0] && !b->allow_no_token && !c->loopback) {
		snprintf(why, sizeof(why),
			 "rank 0 has no job token and admits ranks without one only from this host (loopback): "
			 "set SMDDP_JOB_TOKEN to the same secret on every rank (smddp-run does), or "
			 "SMDDP_ALLOW_NO_TOKEN=1 on rank 0 where the network is trusted");
		reject(b, c, why, (int)rank);
		return;
	}
	f = sd_boot_frame_new(F_CHALLENGE, 2 * NONCE_LEN);
	if (!f || sd_boot_random_fill(c->snonce, NONCE_LEN) < 0) {
		sd_boot_frame_unref(f);
		reject(b, c, "rank 0 has no random numbers for the challenge (getrandom failed)", (int)rank);
		return;
	}
	memcpy(c->cnonce, cn, NONCE_LEN);
	c->claim_rank = rank;
	c->claim_size = size;
	c->challenged = 1;
	memcpy(f->data + 8, c->snonce, NONCE_LEN);
	sd_boot_admission_mac(b->token, "rank 0", c->cnonce, c->snonce, rank, size, f->data + 8 + NONCE_LEN);
	(void)sd_boot_conn_send(c, f);
	sd_boot_frame_unref(f);
}

/* AUTH from a challenged stranger: the proof, then the checks of a rank. */
static void on_auth(struct sd_boot *b, struct conn *c, const uint8_t *p, uint32_t len)
{
	struct rd r = {p, len, 0, 0};
	const uint8_t *mac = sd_boot_rdbytes(&r, SD_SHA256_LEN);
	int32_t pid = (int32_t)sd_boot_rd32(&r), rank = c->claim_rank, size = c->claim_size;
	uint8_t want[SD_SHA256_LEN];
	char hostid[SD_HOSTID_MAX], why[400];

	if (!mac || sd_boot_rdstr(&r, hostid, SD_HOSTID_MAX - 1) < 0 || r.off != r.n) {
		reject(b, c, "malformed answer to the challenge", -1);
		return;
	}
	sd_boot_admission_mac(b->token, "rank", c->cnonce, c->snonce, rank, size, want);
	if (!sd_memeq_ct(want, mac, SD_SHA256_LEN)) {
		if (b->key_differs == sd_boot_job_token_differs)
			snprintf(why, sizeof(why), "wrong job token (%s)", b->key_differs);
		else
			snprintf(why, sizeof(why), "wrong key: %s", b->key_differs);
		reject(b, c, why, (int)rank);
		/* A stranger with the wrong token is kept out and the job waits
		 * for the right rank; in a shrink it is a survivor that
		 * disagrees, who will never come right: all fail now. */
		if (b->key_differs != sd_boot_job_token_differs)
			sd_boot_fail(b, SMDDP_EMISMATCH, (int)rank, "the rank that says it is rank %d has "
				     "another key: %s", (int)rank, b->key_differs);
		return;
	}
	if (size != b->size) {
		snprintf(why, sizeof(why), "world size %d differs from rank 0's %d (WORLD_SIZE differs between ranks)",
			 (int)size, b->size);
		reject(b, c, why, (int)rank);
		return;
	}
	if (rank < 1 || rank >= b->size) {
		snprintf(why, sizeof(why), "rank %d is out of range 1..%d", (int)rank, b->size - 1);
		reject(b, c, why, (int)rank);
		return;
	}
	if (b->conns[rank]) {
		snprintf(why, sizeof(why),
			 "rank %d is already connected from %s (duplicate rank: two processes with the same RANK?)",
			 (int)rank, b->conns[rank]->addr);
		reject(b, c, why, (int)rank);
		return;
	}
	c->rank = rank;
	c->limit_ns = 0;
	b->conns[rank] = c;
	b->ids[rank].pid = pid;
	snprintf(b->ids[rank].hostid, SD_HOSTID_MAX, "%s", hostid);
	SD_TRACE(SD_SUB_BOOT, "rank %d (pid %d on %s) admitted from %s", (int)rank, (int)pid, hostid, c->addr);
}

/* A rank's side: rank 0's CHALLENGE.  Check its proof, then answer. */
static void on_challenge(struct sd_boot *b, struct conn *c, const uint8_t *p, uint32_t len)
{
	const char *token = b->token ? b->token : "";
	size_t hl = strlen(b->hostid);
	uint8_t want[SD_SHA256_LEN];
	struct frame *f;

	if (len != 2 * NONCE_LEN) {
		sd_boot_conn_lost(b, c, 0, "bad CHALLENGE");
		return;
	}
	sd_boot_admission_mac(token, "rank 0", b->cnonce, p, b->rank, b->size, want);
	if (!sd_memeq_ct(want, p + NONCE_LEN, SD_SHA256_LEN)) {
		if (b->key_differs != sd_boot_job_token_differs)
			sd_boot_fail(b, SMDDP_EMISMATCH, 0,
			     "rank 0 at %s and rank %d have different keys: %s", b->where, b->rank,
			     b->key_differs);
		else
			sd_boot_fail(b, SMDDP_ECONFIG, 0,
			     "rank 0 at %s and rank %d have different job tokens: rank 0's answer to the challenge "
			     "does not match this rank's SMDDP_JOB_TOKEN%s (set the same token on every rank, or is "
			     "another job using MASTER_PORT?)",
			     b->where, b->rank, token[0] ? "" : " (this rank has none)");
		sd_boot_conn_close(c);
		return;
	}
	f = sd_boot_frame_new(F_AUTH, SD_SHA256_LEN + 4 + 4 + hl);
	if (!f) {
		sd_boot_fail(b, SMDDP_ENOMEM, 0, "out of memory");
		sd_boot_conn_close(c);
		return;
	}
	sd_boot_admission_mac(token, "rank", b->cnonce, p, b->rank, b->size, f->data + 8);
	sd_boot_put32(f->data + 8 + SD_SHA256_LEN, (uint32_t)getpid());
	sd_boot_put32(f->data + 12 + SD_SHA256_LEN, (uint32_t)hl);
	memcpy(f->data + 16 + SD_SHA256_LEN, b->hostid, hl);
	(void)sd_boot_conn_send(c, f);
	sd_boot_frame_unref(f);
	b->authed = 1;
}

/* ---- incoming frames --------------------------------------------------- */

/* Largest payload acceptable for a frame of this type on this connection;
 * 0 with c->why set when the type itself is wrong here. */
static uint32_t frame_limit(struct sd_boot *b, struct conn *c, uint32_t type)
{
	if (b->rank == 0 && c->rank < 0) {
		if (type == (c->challenged ? F_AUTH : F_HELLO))
			return HELLO_MAX;
		if (c->challenged)
			snprintf(c->why, sizeof(c->why), "unexpected frame type %u (%s) in answer to the challenge",
				 type, sd_boot_type_name(type));
		else
			snprintf(c->why, sizeof(c->why), "bad magic: not a libsmddp rank (is something else using "
							 "MASTER_PORT?)");
		return 0;
	}
	switch (type) {
	case F_CHALLENGE:
		if (b->rank != 0 && !b->ready && !b->authed)
			return 2 * NONCE_LEN;
		break;
	case F_WELCOME:
		if (b->rank != 0 && !b->ready && b->authed)
			return 12 + (uint32_t)b->size * (8 + SD_HOSTID_MAX - 1);
		break;
	case F_REJECT:
		if (b->rank != 0 && !b->ready)
			return SMALL_MAX;
		break;
	case F_GIVEUP: /* rendezvous, or an all-gather rank 0 timed out on */
		if (b->rank != 0)
			return SMALL_MAX;
		break;
	case F_GATHER:
		if (b->rank == 0 && b->ready)
			return BIG_MAX;
		break;
	case F_RESULT:
		if (b->rank != 0 && b->ready)
			return BIG_MAX;
		break;
	case F_DEATH: /* also during the rendezvous: a rank that said hello died */
		if (b->rank != 0)
			return SMALL_MAX;
		break;
	case F_ABORT:
	case F_BYE:
		return SMALL_MAX;
	case F_NOTE:
		if (b->ready)
			return SMALL_MAX;
		break;
	}
	snprintf(c->why, sizeof(c->why), "unexpected frame type %u (%s)", type, sd_boot_type_name(type));
	return 0;
}

static void on_welcome(struct sd_boot *b, struct conn *c, const uint8_t *p, uint32_t len, uint64_t *nonce)
{
	struct rd r = {p, len, 0, 0};
	const uint8_t *n = sd_boot_rdbytes(&r, 8);
	int32_t size = (int32_t)sd_boot_rd32(&r);

	if (!n || size != b->size) {
		sd_boot_conn_lost(b, c, 0, "bad WELCOME");
		return;
	}
	*nonce = sd_boot_get64(n);
	for (int i = 0; i < b->size; i++) {
		b->ids[i].pid = (int32_t)sd_boot_rd32(&r);
		if (sd_boot_rdstr(&r, b->ids[i].hostid, SD_HOSTID_MAX - 1) < 0)
			break;
	}
	if (r.bad || r.off != r.n) {
		sd_boot_conn_lost(b, c, 0, "bad WELCOME");
		return;
	}
	b->ready = 1;
}

/* Returns 1 when reading from c must stop (closed or failed). */
static int on_frame(struct sd_boot *b, struct conn *c, uint32_t type, uint8_t **payload, uint32_t len,
		    uint64_t *nonce)
{
	const uint8_t *p = *payload;
	struct rd r = {p, len, 0, 0};
	char reason[REASON_MAX + 1], name[100];

	SD_TRACE(SD_SUB_BOOT, "recv %s (%u bytes) from %s", sd_boot_type_name(type), len, sd_boot_conn_name(c, name, sizeof(name)));
	if (b->rank == 0 && c->rank < 0) {
		if (c->challenged)
			on_auth(b, c, p, len);
		else
			on_hello(b, c, p, len);
		return 1; /* one frame at a time from a stranger */
	}
	switch (type) {
	case F_CHALLENGE:
		on_challenge(b, c, p, len);
		return c->fd < 0;
	case F_WELCOME:
		on_welcome(b, c, p, len, nonce);
		return c->fd < 0;
	case F_REJECT:
		if (sd_boot_rdstr(&r, reason, REASON_MAX) < 0)
			snprintf(reason, sizeof(reason), "(malformed reason)");
		/* In a shrink every refusal is a disagreement of the survivors. */
		sd_boot_fail(b, b->key_differs != sd_boot_job_token_differs ? SMDDP_EMISMATCH : SMDDP_ECONFIG, 0,
			     "rank 0 at %s refused rank %d: %s", b->where, b->rank, reason);
		sd_boot_conn_close(c);
		return 1;
	case F_GIVEUP: {
		int code = (int)sd_boot_rd32(&r);

		if (sd_boot_rdstr(&r, reason, REASON_MAX) < 0 || code <= 0 || code > SMDDP_EINTERNAL) {
			sd_boot_conn_lost(b, c, 0, "bad GIVEUP");
			return 1;
		}
		if (b->ready)
			sd_boot_fail(b, code, 0, "rank 0 gave up: %s", reason);
		else
			sd_boot_fail(b, code, 0, "rank 0 at %s gave up the rendezvous: %s", b->where, reason);
		sd_boot_conn_close(c);
		return 1;
	}
	case F_GATHER:
	case F_RESULT:
		if (c->stash) {
			/* The previous one was not taken: this rank runs ahead of its peers. */
			sd_boot_conn_lost(b, c, 0, "two all-gather frames without a round between them");
			return 1;
		}
		c->stash = *payload;
		c->stash_len = len;
		*payload = NULL;
		return 0;
	case F_DEATH: {
		int32_t dead = (int32_t)sd_boot_rd32(&r);
		char note[NOTE_MAX + 60];

		if (r.bad || dead < 1 || dead >= b->size || dead == b->rank) {
			sd_boot_conn_lost(b, c, 0, "bad DEATH");
			return 1;
		}
		/* the dead rank's note, if it left one with rank 0 */
		if (r.off < r.n && sd_boot_rdstr(&r, reason, REASON_MAX) > 0)
			sd_boot_keep_note(b, dead, reason);
		if (b->ready && sd_boot_note_words(b, dead, note, sizeof(note))[0])
			sd_boot_fail(b, SMDDP_EPEER, dead, "rank %d (pid %d on %s) left%s: rank 0 saw its connection close",
			     (int)dead, (int)b->ids[dead].pid, sd_boot_host_of(b, dead), note);
		else if (b->ready)
			sd_boot_fail(b, SMDDP_EPEER, dead,
			     "rank %d (pid %d on %s) died or was killed: rank 0 saw its connection close", (int)dead,
			     (int)b->ids[dead].pid, sd_boot_host_of(b, dead));
		else
			sd_boot_fail(b, SMDDP_EPEER, dead,
			     "rank %d died or was killed during the rendezvous: rank 0 at %s saw its connection "
			     "close",
			     (int)dead, b->where);
		return 0;
	}
	case F_ABORT: {
		int32_t who = (int32_t)sd_boot_rd32(&r);

		if (sd_boot_rdstr(&r, reason, REASON_MAX) < 0 || who < 0 || who >= b->size) {
			sd_boot_conn_lost(b, c, 0, "bad ABORT");
			return 1;
		}
		if (b->rank == 0) {
			struct frame *f;

			who = c->rank; /* trust the connection, not the claim */
			sd_boot_fail(b, SMDDP_EABORTED, who, "rank %d (pid %d on %s) aborted: %s", (int)who,
			     (int)b->ids[who].pid, sd_boot_host_of(b, who), reason);
			f = sd_boot_frame_str(F_ABORT, 1, who, 0, 0, reason);
			if (f) {
				sd_boot_broadcast(b, f, who);
				sd_boot_frame_unref(f);
			}
		} else {
			sd_boot_fail(b, SMDDP_EABORTED, who, "rank %d (pid %d on %s) aborted: %s", (int)who,
			     (int)b->ids[who].pid, sd_boot_host_of(b, who), reason);
		}
		return 0;
	}
	case F_NOTE: {
		int32_t who = (int32_t)sd_boot_rd32(&r);

		if (sd_boot_rdstr(&r, reason, REASON_MAX) < 0 || who < 0 || who >= b->size) {
			sd_boot_conn_lost(b, c, 0, "bad NOTE");
			return 1;
		}
		/* trust the connection, not the claim: rank 0 hears a rank's
		 * own note (and passes it on with its death, if it dies), the
		 * others rank 0's */
		sd_boot_keep_note(b, b->rank == 0 ? c->rank : 0, reason);
		return 0;
	}
	case F_BYE:
		c->bye = 1;
		return 0;
	}
	sd_boot_conn_lost(b, c, 0, "unexpected frame");
	return 1;
}

/* Read what the socket has, frame by frame.  Problems end in sd_boot_conn_lost()
 * (or, for a stranger, reject()). */
static void conn_read(struct sd_boot *b, struct conn *c, uint64_t *nonce)
{
	for (int budget = 64; c->fd >= 0 && budget > 0; budget--) {
		uint8_t *dst;
		size_t want;
		ssize_t n;

		if (c->hdr_got < 8) {
			dst = c->hdr + c->hdr_got;
			want = 8 - c->hdr_got;
		} else {
			if (c->in_got == c->in_cap && c->in_got < c->len) {
				size_t cap = c->in_cap ? c->in_cap * 2 : 65536;
				uint8_t *in;

				if (cap > c->len)
					cap = c->len;
				in = realloc(c->in, cap);
				if (!in) {
					sd_boot_conn_lost(b, c, ENOMEM, NULL);
					return;
				}
				c->in = in;
				c->in_cap = cap;
			}
			dst = c->in + c->in_got;
			want = c->in_cap - c->in_got;
		}
		if (want) {
			n = recv(c->fd, dst, want, MSG_DONTWAIT);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				return;
			if (n <= 0) {
				int e = n < 0 ? errno : 0;

				if (c->rank < 0 && b->rank == 0) {
					if (c->challenged && n == 0) {
						char why[400];

						if (b->key_differs == sd_boot_job_token_differs)
							snprintf(why, sizeof(why),
								 "closed without answering the challenge: its job token "
								 "(SMDDP_JOB_TOKEN) differs from rank 0's, or it is no "
								 "rank of this job");
						else
							snprintf(why, sizeof(why),
								 "closed without answering the challenge: its key "
								 "differs (%s)", b->key_differs);
						reject(b, c, why, c->claim_rank);
						/* In a shrink: a survivor found that our key
						 * differs from its own (as on_auth) */
						if (b->key_differs != sd_boot_job_token_differs)
							sd_boot_fail(b, SMDDP_EMISMATCH, c->claim_rank,
								     "the rank that says it is rank %d has "
								     "another key: %s", c->claim_rank,
								     b->key_differs);
					}
					else if (c->hdr_got || n < 0)
						reject(b, c, n < 0 ? strerror(e) : "closed before completing its hello",
						       -1);
					else {
						SD_INFO(SD_SUB_BOOT, "connection from %s closed without a word",
							c->addr);
						sd_boot_conn_close(c);
					}
				} else if (e == ECONNRESET && c->bye) {
					sd_boot_conn_lost(b, c, 0, NULL);
				} else {
					sd_boot_conn_lost(b, c, e, NULL);
				}
				return;
			}
			if (c->hdr_got < 8) {
				c->hdr_got += (size_t)n;
				if (c->hdr_got < 8)
					continue;
				c->type = sd_boot_get32(c->hdr);
				c->len = sd_boot_get32(c->hdr + 4);
				uint32_t lim = frame_limit(b, c, c->type);
				if (lim && c->len > lim)
					snprintf(c->why, sizeof(c->why), "announced a %s frame of %u bytes (limit %u)",
						 sd_boot_type_name(c->type), c->len, lim);
				if (!lim || c->len > lim) {
					if (c->rank < 0 && b->rank == 0)
						reject(b, c, c->why, -1);
					else
						sd_boot_conn_lost(b, c, 0, c->why);
					return;
				}
				c->in_got = 0;
				c->in_cap = 0;
				c->in = NULL;
				if (c->len)
					continue;
			} else {
				c->in_got += (size_t)n;
				if (c->in_got < c->len)
					continue;
			}
		}
		/* A whole frame. */
		uint8_t *payload = c->in;
		c->in = NULL;
		c->in_cap = 0;
		c->hdr_got = 0;
		int stop = on_frame(b, c, c->type, &payload, c->len, nonce);
		free(payload);
		if (stop)
			return;
	}
}

/* ---- the event loop ---------------------------------------------------- */

static int grow_poll(struct sd_boot *b, int need)
{
	if (need <= b->pcap)
		return 0;
	struct pollfd *pfd = realloc(b->pfd, (size_t)need * sizeof(*pfd));
	if (!pfd)
		return -1;
	b->pfd = pfd;
	struct conn **pc = realloc(b->pconn, (size_t)need * sizeof(*pc));
	if (!pc)
		return -1;
	b->pconn = pc;
	b->pcap = need;
	return 0;
}

static void accept_strangers(struct sd_boot *b, uint64_t now)
{
	while (b->npending < PENDING_MAX) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(b->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct conn *c;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				/* Out of descriptors, say: the connection stays in the backlog
				 * and poll() says so again at once; do not spin on it. */
				SD_WARN(SD_SUB_BOOT, "accept on %s: %s", b->where, strerror(errno));
				sd_boot_sleep_ns(10 * MS);
			}
			return;
		}
		c = sd_boot_conn_new(fd);
		if (!c) {
			close(fd);
			return;
		}
		sd_boot_set_nodelay(fd);
		sd_boot_fmt_sockaddr(c->addr, sizeof(c->addr), (struct sockaddr *)&ss, sl);
		c->loopback = sd_boot_is_loopback((struct sockaddr *)&ss);
		c->limit_ns = now + HELLO_LIMIT_NS;
		b->pending[b->npending++] = c;
		SD_TRACE(SD_SUB_BOOT, "connection from %s", c->addr);
	}
}

/* One poll() over everything, waiting at most until deadline, then handle
 * what is ready.  Never fails: trouble is recorded on the connections and
 * in b->failed. */
void sd_boot_pump(struct sd_boot *b, uint64_t deadline, uint64_t *nonce)
{
	int n = 0, timeout;
	uint64_t now;

	if (grow_poll(b, b->size + b->npending + 1) < 0) {
		sd_boot_sleep_ns(MS);
		return;
	}
	for (int r = 0; r < b->size; r++) {
		struct conn *c = b->conns[r];

		if (!c || c->fd < 0)
			continue;
		b->pfd[n] = (struct pollfd){c->fd, POLLIN | (c->out_head ? POLLOUT : 0), 0};
		b->pconn[n++] = c;
	}
	for (int i = 0; i < b->npending; i++) {
		struct conn *c = b->pending[i];

		b->pfd[n] = (struct pollfd){c->fd, POLLIN | (c->out_head ? POLLOUT : 0), 0};
		b->pconn[n++] = c;
		if (c->limit_ns < deadline)
			deadline = c->limit_ns;
	}
	if (b->lfd >= 0 && b->npending < PENDING_MAX) { /* full: the backlog waits, no spinning */
		b->pfd[n] = (struct pollfd){b->lfd, POLLIN, 0};
		b->pconn[n++] = NULL;
	}
	timeout = sd_boot_ms_until(deadline);
	if (poll(b->pfd, (nfds_t)n, timeout) < 0) {
		if (errno != EINTR)
			sd_boot_sleep_ns(MS);
		return;
	}
	now = sd_now_ns();
	for (int i = 0; i < n; i++) {
		struct conn *c = b->pconn[i];
		short re = b->pfd[i].revents;

		if (!re)
			continue;
		if (!c) {
			accept_strangers(b, now);
			continue;
		}
		int werr = 0;

		if (c->fd >= 0 && (re & POLLOUT) && sd_boot_conn_flush(c) < 0)
			werr = errno;
		/* Read first: what the peer said before it went (an ABORT) counts. */
		if (c->fd >= 0 && (werr || (re & (POLLIN | POLLHUP | POLLERR))))
			conn_read(b, c, nonce);
		if (c->fd >= 0 && werr) {
			if (c->rank < 0 && b->rank == 0)
				reject(b, c, strerror(werr), -1);
			else
				sd_boot_conn_lost(b, c, werr, NULL);
		}
	}
	/* Strangers: drop those closed or promoted to ranks, time out the slow. */
	int k = 0;
	for (int i = 0; i < b->npending; i++) {
		struct conn *c = b->pending[i];

		if (c->fd >= 0 && c->rank < 0 && now >= c->limit_ns)
			reject(b, c,
			       c->challenged ? "did not answer the challenge within 5 s"
					     : "sent no complete hello within 5 s",
			       c->challenged ? c->claim_rank : -1);
		if (c->rank >= 0)
			continue;
		if (c->fd < 0) {
			sd_boot_conn_free(c);
			continue;
		}
		b->pending[k++] = c;
	}
	b->npending = k;
}

int sd_boot_output_pending(struct sd_boot *b)
{
	for (int r = 0; r < b->size; r++)
		if (b->conns[r] && b->conns[r]->fd >= 0 && b->conns[r]->out_head)
			return 1;
	return 0;
}

/* Push queued frames out for at most wait_ns, reading nothing (used on the
 * way out, and by abort). */
void sd_boot_drain_output(struct sd_boot *b, uint64_t wait_ns)
{
	uint64_t deadline = sd_now_ns() + wait_ns;

	for (;;) {
		int n = 0;

		if (grow_poll(b, b->size) < 0)
			return;
		for (int r = 0; r < b->size; r++) {
			struct conn *c = b->conns[r];

			if (c && c->fd >= 0 && c->out_head) {
				if (sd_boot_conn_flush(c) < 0) {
					sd_boot_conn_drop_output(c);
					continue;
				}
				if (c->out_head) {
					b->pfd[n] = (struct pollfd){c->fd, POLLOUT, 0};
					b->pconn[n++] = c;
				}
			}
		}
		if (!n || sd_now_ns() >= deadline)
			return;
		if (poll(b->pfd, (nfds_t)n, sd_boot_ms_until(deadline)) < 0 && errno != EINTR)
			return;
	}
}
