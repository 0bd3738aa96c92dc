/* test_bootstrap.h - what the parts of test_bootstrap share: a scenario's process
 * (struct ctx), its checks, the bootstrap helpers, and the scenarios the runner
 * starts (test_bootstrap.c). */
#ifndef TEST_BOOTSTRAP_H
#define TEST_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/bootstrap.h"
#include "clock/clock.h"

#define MS 1000000ull
#define SEC 1000000000ull
#define BIG (4u << 20)

struct ctx {
	const char *scen;
	int idx;   /* process number in the scenario */
	int nproc;
	const char *addr;
	char port[16];
	int bad;   /* failed checks in this process */
	char who[64];
};

/* Wire constants, restated here so that a change of the protocol is a
 * deliberate change of this test too. */
enum { W_HELLO = 1, W_REJECT = 2, W_WELCOME = 3, W_CHALLENGE = 10, W_AUTH = 11, W_VERSION = 2 };

void say(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define CHECK(c, cond, ...)                                                                  \
	do {                                                                                 \
		if (cond) {                                                                  \
			say((c), "ok   " __VA_ARGS__);                                       \
		} else {                                                                     \
			say((c), "FAIL " __VA_ARGS__);                                       \
			say((c), "     (%s:%d: %s)", __FILE__, __LINE__, #cond);            \
			(c)->bad++;                                                          \
		}                                                                            \
	} while (0)

void msleep(unsigned ms);
/* The bootstrap parameters of rank of size, rank 0 at c->addr:c->port. */
struct sd_boot_params params(struct ctx *c, int rank, int size, const char *token, unsigned deadline_ms);
/* sd_boot_join, checked: the handle, or NULL (counted bad). */
struct sd_boot *join(struct ctx *c, int rank, int size, unsigned deadline_ms);
/* An all-gather of len bytes a rank, every byte checked for its rank and offset. */
int gather_check(struct ctx *c, struct sd_boot *b, int rank, int size, size_t len, int round, int in_place);
/* Poll until something happens or ms pass; returns rc, *who, err, elapsed. */
int poll_for(struct sd_boot *b, unsigned ms, int *who, struct sd_err *err, uint64_t *took);
int contains(const char *s, const char *sub);

/* ---- the scenarios: each function is one process of its scenario ---- */
/* test_bootstrap_world.c: worlds that form, close and time out as they should */
void sc_size1(struct ctx *c);
void sc_world(struct ctx *c);
void sc_many(struct ctx *c);
void sc_close0(struct ctx *c);
void sc_late0(struct ctx *c);
void sc_no_rank0(struct ctx *c);
void sc_port_busy(struct ctx *c);
void sc_ipv6(struct ctx *c);
/* test_bootstrap_strangers.c: wrong tokens, strangers and raw peers at rank 0's port */
/* A raw client's handshake as rank of size with token (see there); its fd. */
int raw_join(struct ctx *c, uint32_t version, int32_t rank, int32_t size, const char *token, char *why,
	     size_t n, int *rank0_proved);
void sc_token(struct ctx *c);
void sc_strangers(struct ctx *c);
void sc_stranger_hello(struct ctx *c);
void sc_tokenless(struct ctx *c);
void sc_flood(struct ctx *c);
void sc_silent(struct ctx *c);
/* test_bootstrap_faults.c: ranks that die, abort, disagree or stall */
void sc_die_in_rendezvous(struct ctx *c);
void sc_kill3(struct ctx *c);
void sc_kill3_gather(struct ctx *c);
void sc_kill0(struct ctx *c);
void sc_kill0_gather(struct ctx *c);
void sc_abort2(struct ctx *c);
void sc_abort2_gather(struct ctx *c);
void sc_abort0(struct ctx *c);
void sc_mismatch(struct ctx *c);
void sc_gather_timeout(struct ctx *c);

#endif
