/* wire.h - the bootstrap's insides, shared by its files and by nothing else:
 * frames and connections (wire.c), the event loop and the admission of
 * ranks (channel.c), the rendezvous and the calls after it (bootstrap.c).
 * The design is described at the top of bootstrap.c. */
#ifndef SD_BOOTSTRAP_WIRE_H
#define SD_BOOTSTRAP_WIRE_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "bootstrap/bootstrap.h"
#include "hash/sha256.h"
#include "util/sd.h"

/* How long a rank waits for rank 0 past its own deadline (see its uses). */
#define HUB_GRACE_NS (3ull * 1000000000ull)
#define PROTO_VERSION 2
#define HELLO_MAGIC "SMDDPB1" /* 8 bytes with the NUL */
#define TOKEN_MAX 256
#define HELLO_MAX 1024               /* largest hello a stranger may announce */
#define SMALL_MAX 2048               /* REJECT, GIVEUP, DEATH, ABORT, BYE, NOTE */
#define NOTE_MAX 400                 /* a rank's note as peers keep it */
#define REASON_MAX 1024              /* reason strings inside frames */
#define BIG_MAX (1u << 30)           /* GATHER, RESULT, WELCOME */
#define HELLO_LIMIT_NS (5ull * 1000000000ull)
#define PENDING_MAX 256              /* connections that have not said hello yet */
#define MS 1000000ull
#define NONCE_LEN 32
#define WARN_WINDOW_NS (10ull * 1000000000ull)
#define WARN_PER_WINDOW 10           /* rejected-connection WARN lines per window */

enum frame_type {
	F_HELLO = 1,   /* magic, version, rank, size, client nonce */
	F_REJECT = 2,  /* reason */
	F_WELCOME = 3, /* nonce, size, {pid, hostid} per rank */
	F_GIVEUP = 4,  /* rank 0 gives up the rendezvous: result code, reason */
	F_GATHER = 5,  /* seq, bytes */
	F_RESULT = 6,  /* seq, concatenation */
	F_DEATH = 7,   /* rank[, its note] */
	F_ABORT = 8,   /* rank, reason */
	F_BYE = 9,     /* clean close follows */
	F_CHALLENGE = 10, /* server nonce, rank 0's MAC */
	F_AUTH = 11,   /* the rank's MAC, pid, hostid */
	F_NOTE = 12,   /* rank, its last error of its own: a rank's to rank 0, rank 0's to all */
};

/* A frame ready to send, shared by the queues of several connections. */
struct frame {
	int ref;
	uint32_t type;
	size_t len; /* header included */
	uint8_t data[];
};

struct oseg {
	struct oseg *next;
	struct frame *f;
	size_t off;
};

struct conn {
	int fd;           /* -1 once closed */
	int rank;         /* rank at the far end; -1 while a stranger (rank 0 side) */
	int bye;          /* the far end said BYE: its close is not a death */
	uint64_t limit_ns; /* stranger: time to complete the hello */
	char addr[80];    /* far end, numeric "a.b.c.d:port" or "[v6]:port" */
	/* rank 0's side of the admission of a stranger */
	int loopback;     /* it connected from a loopback address */
	int challenged;   /* CHALLENGE sent: AUTH expected next */
	int32_t claim_rank, claim_size;
	uint8_t cnonce[NONCE_LEN], snonce[NONCE_LEN];
	/* input: one frame at a time, read straight into its buffer */
	uint8_t hdr[8];
	size_t hdr_got;
	uint32_t type, len;
	uint8_t *in;      /* grows with what arrives, not with what is announced */
	size_t in_got, in_cap;
	/* a GATHER (rank 0) or RESULT (others) that arrived before it was wanted */
	uint8_t *stash;
	size_t stash_len;
	/* output */
	struct oseg *out_head, *out_tail;
	char why[160]; /* protocol error found while reading */
};

struct sd_boot {
	int rank, size;
	int ready;            /* rendezvous done */
	char where[300];      /* rank 0's "ADDR:PORT" */
	struct conn **conns;  /* by rank; on ranks > 0 only conns[0] */
	struct sd_boot_peer *ids;
	uint64_t seq;         /* all-gathers done */
	/* rank 0 during rendezvous */
	int lfd;
	struct conn **pending;
	int npending;
	const char *token;
	const char *key_differs; /* sd_boot_params' (not NULL) */
	const char *refuse_why;  /* rank 0, a failed shrink: every hello gets this */
	int allow_no_token;
	char last_reject[300];
	/* rejected-connection WARN lines: at most WARN_PER_WINDOW per window */
	uint64_t warn_window;
	int warned, unwarned;
	/* ranks > 0 during rendezvous */
	const char *hostid;
	uint8_t cnonce[NONCE_LEN];
	int authed;           /* AUTH sent */
	/* every rank's last error of its own (sd_boot_note), "" if none;
	 * NULL until the first note */
	char (*notes)[NOTE_MAX];
	/* sticky failure */
	int failed;
	int fail_rank;
	char fail_err[512];
	/* all-gather out of step after a timeout */
	int ag_broken;
	char ag_err[512];
	/* poll scratch */
	struct pollfd *pfd;
	struct conn **pconn;
	int pcap;
};

/* A reader of a received frame's payload: a short read sets bad. */
struct rd {
	const uint8_t *p;
	size_t n, off;
	int bad;
};

/* The default of sd_boot_params.key_differs. */
extern const char sd_boot_job_token_differs[];

/* ---- wire.c: helpers, frames, connections ---- */
void sd_boot_admission_mac(const char *token, const char *label, const uint8_t *cnonce, const uint8_t *snonce,
			  int32_t rank, int32_t size, uint8_t out[SD_SHA256_LEN]);
void sd_boot_broadcast(struct sd_boot *b, struct frame *f, int except);
void sd_boot_conn_close(struct conn *c);
void sd_boot_conn_drop_output(struct conn *c);
int sd_boot_conn_flush(struct conn *c);
void sd_boot_conn_free(struct conn *c);
void sd_boot_conn_lost(struct sd_boot *b, struct conn *c, int err, const char *proto);
const char *sd_boot_conn_name(const struct conn *c, char *buf, size_t n);
struct conn *sd_boot_conn_new(int fd);
int sd_boot_conn_send(struct conn *c, struct frame *f);
/* Records the channel's first failure (sticky). */
void sd_boot_fail(struct sd_boot *b, int rc, int rank, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
void sd_boot_fmt_sockaddr(char *out, size_t n, const struct sockaddr *sa, socklen_t salen);
struct frame *sd_boot_frame_new(uint32_t type, size_t paylen);
struct frame *sd_boot_frame_str(uint32_t type, int has_rank, int32_t rank, int has_code, int code, const char *s);
void sd_boot_frame_unref(struct frame *f);
uint32_t sd_boot_get32(const uint8_t *p);
uint64_t sd_boot_get64(const uint8_t *p);
const char *sd_boot_host_of(struct sd_boot *b, int r);
/* " after an error of its own (its last: NOTE)" when rank r left a note, else "". */
const char *sd_boot_note_words(struct sd_boot *b, int r, char *buf, size_t n);
void sd_boot_keep_note(struct sd_boot *b, int r, const char *note);
int sd_boot_is_loopback(const struct sockaddr *sa);
int sd_boot_ms_until(uint64_t deadline);
void sd_boot_put32(uint8_t *p, uint32_t v);
int sd_boot_random_fill(void *buf, size_t len);
uint32_t sd_boot_rd32(struct rd *r);
const uint8_t *sd_boot_rdbytes(struct rd *r, size_t len);
int sd_boot_rdstr(struct rd *r, char *out, size_t max);
void sd_boot_set_nodelay(int fd);
void sd_boot_sleep_ns(uint64_t ns);
const char *sd_boot_type_name(uint32_t t);
void sd_boot_fmt_ranks(char *out, size_t n, const uint8_t *missing, int size);
void sd_boot_fmt_where(char *out, size_t n, const char *addr, const char *port);
uint64_t sd_boot_left_ns(uint64_t deadline);
void sd_boot_put64(uint8_t *p, uint64_t v);
uint64_t sd_boot_random64(void);
int sd_boot_report_fail(struct sd_boot *b, int *rank, struct sd_err *err);
double sd_boot_span(uint64_t deadline, uint64_t start);

/* ---- channel.c: the event loop ---- */
/* Moves frames until deadline (0: what is ready now); nonce: a WELCOME's. */
void sd_boot_drain_output(struct sd_boot *b, uint64_t wait_ns);
int sd_boot_output_pending(struct sd_boot *b);
/* Rank 0: every connection not admitted yet is refused, with why. */
void sd_boot_refuse_pending(struct sd_boot *b, const char *why);
void sd_boot_pump(struct sd_boot *b, uint64_t deadline, uint64_t *nonce);

#endif
