/* socket-int.h - what the files of the socket endpoint share (socket.c: sends, progress;
 * socket-conn.c: the control connections, one per pair both ways; socket-recv.c: matching,
 * early messages, reading; socket-long.c: long messages, pushed or by rendezvous;
 * socket-data.c: the data connections that carry their bytes). */
#ifndef SD_TRANSPORT_SOCKET_INT_H
#define SD_TRANSPORT_SOCKET_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "transport/netep.h"

#define NAME_MAGIC 0x534b5434u /* "SKT4": names carry the machine and its CPUs */
#define HELLO_MAGIC 0x534b4832u
#define HDR 24                 /* a control frame: tag, type << 56 | length, id */
#define PHDR 24                /* a piece on a data connection: id, offset, length | flags */
#define INBUF (256u << 10)     /* per incoming control connection */
#define DIRECT_MIN (16u << 10) /* an eager payload at least this long is read in place */
#define HEAD_READ 4096u        /* what one read takes between messages */
#define PIECE_MIN (128u << 10) /* a long message is cut into pieces at least this long */
#define MAX_NSOCKS 16
#define SINK (64u << 10)
#define NAME_CPUS 16           /* 64-bit words of CPUs in a name: the first 1024 */
#define SPIN_NS 10000000ull    /* how long an empty wait polls on, where it does (socket.c's
				* log says 10 ms; socket-cpus.c says why) */
#define SPIN_LEN (16u << 10)   /* nor within SPIN_NS of a message longer than this */
#define GAP_NS 1000000ull      /* polls this far apart: the rank was off its core */
#define BAD_WAITS 3            /* answered only after such a gap, in a row: stop polling on */
#define CALM_MIN_NS 50000000ull /* for this long, doubled while it recurs */
#define CALM_MAX_NS 1000000000ull
#define CLEAN_WAITS 1000       /* waits without a gap that forget it */

/* Control frames (the type in the length word's top byte). */
enum { F_EAGER, F_RTS, F_CTS, F_GONE, F_PUSH, F_CREDIT, F_MOVE, F_MOVED };
#define LEN_MASK ((1ull << 56) - 1)
#define PF_VOID (1ull << 63) /* a piece's flag: the sender gave the message up; no bytes */

struct name {
	uint32_t magic;
	uint32_t family;
	uint64_t cookie;
	uint16_t port;
	uint8_t addr[16];
	uint64_t machine;          /* boot_id's hash: ranks of one machine share its cores */
	uint64_t cpus[NAME_CPUS];  /* the CPUs the rank may run on */
};

struct hello {
	uint32_t magic;
	int32_t rank;
	uint64_t cookie;
	int32_t idx; /* 0: the control connection; 1..: a data connection */
	int32_t pad;
};

/* One send or receive, or a control frame of the endpoint's own (CTS,
 * GONE: no owner, kept). */
struct op {
	struct sd_freq *owner; /* NULL once forgotten */
	int is_send, peer, keep;
	uint64_t tag, ignore;
	char *buf;
	size_t len;
	int type;             /* send: the frame (F_*) */
	uint64_t id;          /* F_RTS, F_CTS, F_GONE: which long message */
	size_t wire;          /* bytes of payload after the header (F_EAGER: len) */
	size_t done;          /* bytes written, header included */
	char *own;            /* a forgotten send's copy of what is left */
	unsigned char hdr[HDR];
	int pieces;           /* a long send, once cleared: pieces not yet written (atomic) */
	int err;              /* a long send: the first failure of a piece */
	struct op *next;
};

/* A message that came before its receive (or a long one's announcement). */
struct early {
	int peer;
	uint64_t tag;
	char *data;
	size_t len, got; /* got < len: still arriving */
	int rts;         /* a long message: no data here, id names it */
	uint64_t id;
	struct xfer *xf; /* a long message sent at once (PUSH): its bytes arrive here */
	size_t credit;   /* what the sender gets back once this is taken */
	int err;
	struct op *taker; /* a receive posted while it arrives */
	struct early *next;
};

/* The receiving side of a long message, from its clear-to-send to its last
 * piece.  buf, cap and x change only under every incoming data
 * connection's lock and xmu (a forget); the rest under xmu. */
struct xfer {
	int peer;
	uint64_t id, tag;
	struct op *x;    /* the receive; NULL once forgotten or failed */
	struct early *e; /* or the early message it fills (PUSH unmatched) */
	char *buf;       /* NULL: a sink */
	size_t cap, len, left;
	int err;
	struct xfer *next;
};

/* A piece of a long send, queued on one data connection. */
struct piece {
	struct op *x;
	unsigned char hdr[PHDR];
	size_t off, len, done; /* done: header included */
	char *own;             /* forgotten mid-piece: the rest, copied */
	int is_void;
	struct piece *next;
};

/* A data connection: one way, to or from one peer, driven by a thread of
 * its own or by progress.  Its fields are under mu. */
struct dconn {
	struct sock *s;
	int fd, peer, idx, out;
	int connecting;
	int err, reported;
	int threaded, stop;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* out: the pieces to write */
	struct piece *head, *tail;
	size_t queued;
	/* in: the piece being read */
	unsigned char ph[PHDR];
	size_t phave;
	struct xfer *xf;
	size_t off, plen, got;
	int waiting; /* a piece whose header on the control connection is not read yet */
	char *sink;
	unsigned long pieces; /* pieces written or read, for the log and the tests */
	struct dconn *next; /* the list of them (sock's douts or dins) */
};

/* How this rank sends to one peer: over the control connection it opened,
 * or over the one the peer opened (borrowed: a TCP connection carries both
 * ways, and a small message's acknowledgement then rides on the answer
 * instead of being a packet of its own).  Where both opened one at once,
 * the higher rank moves to the lower rank's: F_MOVE is its last frame on
 * its own, F_MOVED its first on the other, and the lower rank reads past
 * F_MOVED only once it has read F_MOVE (the order of the frames). */
struct out {
	int fd;
	int borrowed;   /* fd is an incoming connection's (that in closes it) */
	struct in *self; /* own connection: the in that reads what the peer sends on it */
	struct in *to;   /* F_MOVE queued: the peer's connection, taken once it is written */
	int move_seen;  /* the peer's F_MOVE has been read */
	int connecting; /* connect() in flight, then the hello */
	int err;        /* errno it failed with */
	struct op *head, *tail;
	struct op *wait; /* long sends announced, waiting for their clear-to-send */
	uint64_t next_id;
	size_t credit;  /* bytes of long messages we may send before the peer asks */
	size_t owed;    /* credit taken back from the peer's messages, not yet returned */
	unsigned rr;    /* the data connection the next piece starts on */
	struct dconn *d[MAX_NSOCKS];
};

/* A connection a peer opened, to send to us (control until its hello
 * says otherwise). */
struct in {
	int fd;
	int peer; /* -1 until its hello */
	int err;
	int shared; /* fd is out[peer]'s own connection: closed there */
	int hold;   /* F_MOVED read before F_MOVE: nothing more is read until it comes */
	int kick;   /* read it again at the end of the pass (hold released) */
	int dead;   /* left for the end of the pass (moved from) */
	unsigned char *buf; /* INBUF: headers and small payloads */
	size_t lo, hi;      /* unread bytes are buf[lo, hi) */
	/* the message being read */
	int reading;
	uint64_t tag;
	size_t len, got;
	struct op *into;    /* its receive, or NULL */
	struct early *e;    /* or its early copy, or NULL (and into NULL): a sink */
	struct in *next;
};

struct sock {
	struct sd_fab base;
	int lfd;
	struct name me;
	int rank, npeers;
	struct name *peers;
	struct out *outs;  /* by peer */
	struct in *ins;
	int nins;
	struct op *posted, *posted_tail; /* receives not matched, in post order */
	struct early *early, *early_tail;
	uint64_t timeout_ns;
	char desc[128];
	char family[24];
	struct pollfd *pfd;
	size_t npfd;
	int (*news)(struct smddp_comm *c);
	/* long messages */
	int nsocks, threads;
	size_t long_min, credit;
	struct dconn *douts;      /* outgoing data connections, in peer order */
	struct dconn *dins;       /* incoming data connections */
	int ndins;
	pthread_mutex_t xmu;      /* the xfers */
	pthread_cond_t xcv;       /* a transfer was added (for a piece that came first) */
	struct xfer *xfers;
	pthread_mutex_t dmu;      /* done */
	struct op *done;          /* long sends whose last piece is written */
	int wake_fd;              /* an eventfd the threads write when something is done */
	int flag;                 /* something is done (atomic) */
	int spin;                 /* the ranks of this machine have a core each: polls keep it */
	uint64_t idle_since;      /* the first empty poll of this wait */
	uint64_t idle_last;       /* the last empty poll (0: a completion since) */
	uint64_t big_at;          /* when a message over SPIN_LEN was last posted */
	int gapped;               /* this wait's polls had a gap (socket.c's judge) */
	size_t queued;            /* control connections with bytes queued, at the last poll */
	int bad, clean;           /* waits in a row with and without one */
	uint64_t calm_until;      /* until then waits do not keep their core */
	uint64_t calm_for;
	/* the first failure of a pass, for progress to report */
	int fail_peer, fail_err, fail_send;
	/* What the lower files ask of the upper ones (set by socket.c at open;
	 * calls point one way: socket.c -> socket-conn.c -> socket-recv.c ->
	 * socket-long.c -> socket-data.c). */
	int (*ctl)(struct sock *s, int peer, int type, uint64_t id); /* queue a control frame */
	void (*peer_fail)(struct sock *s, int peer, int err, int send, int *got);
	void (*early_arrived)(struct sock *s, struct early *e, int err, int *got);
};

static inline struct sock *S(struct sd_fab *f)
{
	return (struct sock *)f;
}

static inline void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* An operation is over: tell its owner, if any, and free it. */
static inline void sd_sock_complete(struct op *o, int err, size_t len, uint64_t tag)
{
	struct sd_freq *r = o->owner;

	if (r) {
		if (!o->is_send) {
			r->len = len;
			r->tag = tag;
		}
		r->err = err;
		r->fc = NULL;
		r->done = 1;
	}
	free(o->own);
	free(o);
}

/* A control frame of the endpoint's own (CTS, GONE, MOVED...), not yet queued. */
static inline struct op *sd_sock_ctl_op(struct sock *s, int peer, int type, uint64_t id)
{
	struct op *x = calloc(1, sizeof(*x));

	(void)s;
	if (!x)
		return NULL;
	x->is_send = 1;
	x->peer = peer;
	x->keep = 1; /* a peer waits on it, whatever became of our call */
	x->type = type;
	x->id = id;
	put64(x->hdr, id);
	put64(x->hdr + 8, (uint64_t)type << 56);
	put64(x->hdr + 16, id);
	return x;
}

/* Notes the first failure of a pass (peer, errno, which way). */
static inline void sd_sock_failed(struct sock *s, int peer, int err, int send)
{
	if (!s->fail_peer) {
		s->fail_peer = peer + 1;
		s->fail_err = err;
		s->fail_send = send;
	}
}

/* Gives the peer back n bytes of credit, a quarter of it at a time (a
 * control frame per long message cost the medium sizes). */
static inline void sd_sock_give_credit(struct sock *s, int peer, size_t n)
{
	struct out *o = &s->outs[peer];

	o->owed += n;
	if (o->owed && o->owed >= s->credit / 4) {
		s->ctl(s, peer, F_CREDIT, o->owed);
		o->owed = 0;
	}
}

/* socket-conn.c */
/* Opens the connections to peer, or borrows its control connection to us;
 * 0, or -1 with the errno in its out. */
int sd_sock_connect(struct sock *s, int peer);
/* Our F_MOVE is written: sends to peer go over its connection from now on. */
void sd_sock_move_over(struct sock *s, int peer);
/* Reads in; where it ended, drops it and fails what depended on it. */
void sd_sock_pull_in(struct sock *s, struct in *in, int *got);
/* The readers of connections moved from, and those whose hold ended. */
void sd_sock_sweep(struct sock *s, int *got);

/* socket-cpus.c */
/* The machine and the CPUs of this rank, into its name. */
void sd_sock_cpus_mine(struct name *me);
/* 1 if the ranks on rank's machine (names[0..n)) are no more than the
 * CPUs they may run on together (*ranks, *cores: the counts). */
int sd_sock_cpus_spare(const struct name *names, int n, int rank, int *ranks, int *cores);

/* socket-recv.c */
int sd_sock_recv(struct smddp_comm *c, struct sd_fab *f, int peer, uint64_t tag, void *buf,
		 size_t len, struct sd_freq *r);
void sd_sock_unlink_posted(struct sock *s, struct op *x);
void sd_sock_accept_all(struct sock *s);
/* Reads what in has; 1 if anything moved, -1 when it closed or failed. */
int sd_sock_pull(struct sock *s, struct in *in, int *got);
#define PULL_GONE (-2)  /* in became a data connection (socket-data.c) */
#define PULL_MOVED (-3) /* the peer's F_MOVE: in ends, nothing failed */
void sd_sock_drop_in(struct sock *s, struct in *in, int *got);
void sd_sock_fail_from(struct sock *s, int peer, int err, int *got);
/* The bytes of e (a PUSH that found no receive) have all come (err). */
void sd_sock_early_arrived(struct sock *s, struct early *e, int err, int *got);
/* A long message announced to us was withdrawn (GONE). */
void sd_sock_rndv_gone(struct sock *s, int peer, uint64_t id, int *got);

/* socket-long.c */
/* SMDDP_SOCKET_LONG and _CREDIT, then the data connections' setup. */
int sd_sock_long_init(struct sock *s);
/* A long receive meets its announcement: a transfer, and the clear-to-send. */
int sd_sock_rndv_match(struct sock *s, struct op *x, int peer, uint64_t tag, uint64_t id,
		       size_t len);
/* A long message sent at once: its transfer, into the posted receive x or
 * (x NULL) into early memory. */
int sd_sock_push_match(struct sock *s, struct op *x, struct early *e, int peer, uint64_t tag,
		       uint64_t id, size_t len);
/* The clear-to-send for a long send of ours has come. */
int sd_sock_rndv_cleared(struct sock *s, int peer, uint64_t id, int *got);
/* Pieces of a long send of len bytes. */
int sd_sock_npieces(struct sock *s, size_t len);
/* Cuts a long send (cleared, or a PUSH) into pieces on the data connections. */
int sd_sock_data_send(struct sock *s, struct op *x, int push);
/* A long message withdrawn after its receive matched: that receive fails. */
void sd_sock_data_gone(struct sock *s, int peer, uint64_t id, int *got);
/* forget, cancel and a peer's failure */
void sd_sock_data_forget(struct sock *s, int *left);
int sd_sock_data_cancel(struct sock *s, struct op *x);
void sd_sock_data_fail(struct sock *s, int peer, int err, int *got);

/* socket-data.c */
int sd_sock_data_init(struct sock *s);
/* Opens the data connections to peer (after its control connection). */
void sd_sock_data_connect(struct sock *s, int peer, int (*open_fd)(struct sock *, int));
/* Queues p on dc (or, dc failed, ends it with dc's error). */
void sd_sock_data_queue(struct dconn *dc, struct piece *p);
/* Ends the pieces queued on dc with err (under dc->mu, or its thread ended). */
void sd_sock_data_drop(struct dconn *dc, int err);
/* A piece of x (or a PUSH's header) is over. */
void sd_sock_piece_done(struct sock *s, struct op *x, int err, int threaded);
/* The transfer of peer's long message id (under xmu). */
struct xfer *sd_sock_find_xfer(struct sock *s, int peer, uint64_t id);
/* An incoming connection's hello named a data connection: it leaves in's list. */
int sd_sock_data_adopt(struct sock *s, int fd, int peer, int idx);
/* The poll entries of the data connections progress drives, and their I/O. */
size_t sd_sock_data_pollfds(struct sock *s, struct pollfd *p);
void sd_sock_data_io(struct sock *s, const struct pollfd *p, size_t n);
/* Pieces that waited for their header, once the control connections are read
 * (their sockets are not polled meanwhile: it would not sleep). */
void sd_sock_data_retry(struct sock *s);
/* Completions and failures the data connections have left for us. */
void sd_sock_data_drain(struct sock *s, int *got);
int sd_sock_data_busy(struct sock *s);
size_t sd_sock_data_nfds(struct sock *s);
/* Stops the threads, closes the connections, cancels what is left. */
void sd_sock_data_close(struct sock *s);

#endif
