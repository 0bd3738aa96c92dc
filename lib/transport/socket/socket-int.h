/* socket-int.h - what the files of the socket endpoint share (socket.c: connections, sends,
 * progress; socket-recv.c: matching, early messages, reading). */
#ifndef SD_TRANSPORT_SOCKET_INT_H
#define SD_TRANSPORT_SOCKET_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "transport/netep.h"

#define NAME_MAGIC 0x534b5431u /* "SKT1" */
#define HELLO_MAGIC 0x534b4831u
#define HDR 16
#define INBUF (256u << 10)     /* per incoming connection */
#define DIRECT_MIN (16u << 10) /* a payload at least this long is read in place */
#define HEAD_READ 4096u        /* what one read takes between messages */

struct name {
	uint32_t magic;
	uint32_t family;
	uint64_t cookie;
	uint16_t port;
	uint8_t addr[16];
};

struct hello {
	uint32_t magic;
	int32_t rank;
	uint64_t cookie;
};

/* One send or receive. */
struct op {
	struct sd_freq *owner; /* NULL once forgotten */
	int is_send, peer, keep;
	uint64_t tag, ignore;
	char *buf;
	size_t len;
	size_t done;          /* send: bytes written, header included */
	char *own;            /* a forgotten send's copy of what is left */
	unsigned char hdr[HDR];
	struct op *next;
};

/* A message that came before its receive. */
struct early {
	int peer;
	uint64_t tag;
	char *data;
	size_t len, got; /* got < len: still arriving */
	struct op *taker; /* a receive posted while it arrives */
	struct early *next;
};

/* A connection this rank opened, to send to one peer. */
struct out {
	int fd;
	int connecting; /* connect() in flight, then the hello */
	int err;        /* errno it failed with */
	struct op *head, *tail;
};

/* A connection a peer opened, to send to us. */
struct in {
	int fd;
	int peer; /* -1 until its hello */
	int err;
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
	char desc[96];
	char family[24];
	struct pollfd *pfd;
	size_t npfd;
	int (*news)(struct smddp_comm *c);
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

/* socket-recv.c */
int sd_sock_recv(struct smddp_comm *c, struct sd_fab *f, int peer, uint64_t tag, void *buf,
		 size_t len, struct sd_freq *r);
void sd_sock_unlink_posted(struct sock *s, struct op *x);
void sd_sock_accept_all(struct sock *s);
/* Reads what in has; 1 if anything moved, -1 when it closed or failed. */
int sd_sock_pull(struct sock *s, struct in *in, int *got);
void sd_sock_drop_in(struct sock *s, struct in *in, int *got);

#endif
