/* conf-case.c - conformance: buffers with guards, the bookkeeping of a case (its FAIL and ok
 * lines, the tallies) and the checks common to every case.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include <smddp/smddp.h>

#include "conformance.h"

#define GUARD 64
#define MAX_FAILED 30    /* failing cases printed in all */

/* ---- buffers with guards -------------------------------------------------- */

static unsigned char guard_byte(size_t k) { return (unsigned char)(0xa5 ^ (k * 29)); }
static unsigned char poison_byte(size_t k) { return (unsigned char)(0x5a ^ (k * 13)); }

/* Buffers start 0, 8, 16 or 24 bytes past a 32-byte boundary in turn (any
 * element stays aligned to its size): vector code must cope with each, and
 * send and receive buffers are rarely aligned alike. */
static __thread unsigned n_allocs;

void gbuf_alloc(struct gbuf *b, size_t len)
{
	size_t k;
	unsigned char *p;

	b->len = len;
	b->base = aligned_alloc(64, (len + 2 * GUARD + 24 + 63) / 64 * 64);
	if (!b->base) {
		fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", world_rank, len);
		exit(1);
	}
	b->front = GUARD + 8 * (n_allocs++ % 4);
	for (k = 0; k < b->front; k++)
		b->base[k] = guard_byte(k);
	p = b->base + b->front;
	for (k = 0; k < GUARD; k++)
		p[len + k] = guard_byte(k + GUARD);
	for (k = 0; k < len; k++)
		p[k] = poison_byte(k);
}

void *gbuf_ptr(struct gbuf *b) { return b->base + b->front; }

void gbuf_free(struct gbuf *b)
{
	free(b->base);
	b->base = NULL;
}

/* ---- case bookkeeping ----------------------------------------------------- */

void case_begin(struct kase *k, const char *comm_name, int coll, int dt, int op, int root,
		int inplace, size_t count)
{
	k->comm_name = comm_name;
	k->coll = coll;
	k->dt = dt;
	k->op = op;
	k->root = root;
	k->inplace = inplace;
	k->count = count;
	k->nbad = 0;
}

static const char *place_name(int inplace)
{
	static const char *const n[] = {"out-of-place", "in-place", "in-place(recv=send+rank*count)",
					"mixed(odd ranks in place)"};
	return n[inplace];
}

static void case_desc(const struct kase *k, char *s, size_t n)
{
	char root[32] = "";

	if (k->coll == C_BROADCAST || k->coll == C_REDUCE)
		snprintf(root, sizeof(root), " root %d", k->root);
	snprintf(s, n, "%s %s dtype %s%s%s count %zu%s %s", k->comm_name, coll_names[k->coll],
		 k->dt >= 0 ? dtype_names[k->dt] : "-", k->op >= 0 ? " op " : "",
		 k->op >= 0 ? op_names[k->op] : "", k->count, root, place_name(k->inplace));
}

void bad(struct kase *k, const char *fmt, ...)
{
	char desc[256], msg[512];
	va_list ap;

	if (k->nbad == 0)
		n_fail++;
	k->nbad++;
	if (k->nbad > MAX_SHOWN || n_fail > MAX_FAILED)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	case_desc(k, desc, sizeof(desc));
	printf("FAIL rank %d: %s: %s\n", world_rank, desc, msg);
	fflush(stdout);
}

void case_end(struct kase *k)
{
	if (k->nbad == 0) {
		n_pass++;
		if (verbose) {
			char desc[256];
			case_desc(k, desc, sizeof(desc));
			printf("ok rank %d: %s\n", world_rank, desc);
		}
	} else if (k->nbad > MAX_SHOWN && n_fail <= MAX_FAILED) {
		printf("FAIL rank %d: ... %d wrong elements in all in this case\n", world_rank, k->nbad);
	}
}

/* A call failed: the communicator is unusable from here on, so stop. */
void die_rc(struct kase *k, int rc, struct smddp_comm *comm)
{
	char desc[256];

	case_desc(k, desc, sizeof(desc));
	printf("FAIL rank %d: %s: returned %s (%d): %s\n", world_rank, desc, rc_name(rc), rc,
	       smddp_last_error(comm));
	printf("SUMMARY rank %d: stopped after %ld passed, %ld failed\n", world_rank, n_pass,
	       n_fail + 1);
	fflush(stdout);
	exit(1);
}

void check_guards(struct kase *k, struct gbuf *b, const char *which)
{
	unsigned char *p = b->base + b->front;
	size_t j;

	for (j = 0; j < b->front; j++) {
		if (b->base[j] != guard_byte(j)) {
			bad(k, "%s guard byte %zd before the buffer overwritten (0x%02x)", which,
			    (ssize_t)j - (ssize_t)b->front, b->base[j]);
			return;
		}
	}
	for (j = 0; j < GUARD; j++) {
		if (p[b->len + j] != guard_byte(j + GUARD)) {
			bad(k, "%s guard byte %zu after the end of the buffer overwritten (0x%02x)",
			    which, j, p[b->len + j]);
			return;
		}
	}
}

/* Bytes [from, to) of b still hold the poison. */
void check_poison(struct kase *k, struct gbuf *b, size_t from, size_t to, const char *which)
{
	size_t j;

	for (j = from; j < to; j++) {
		if (b->base[b->front + j] != poison_byte(j)) {
			bad(k, "%s byte %zu was written but must not be", which, j);
			return;
		}
	}
}

/* ---- single checks outside a case (API, identities, lifecycle) ----------- */

void check_true(const char *what, int ok, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!ok) {
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		n_fail++;
		printf("FAIL rank %d: %s: %s\n", world_rank, what, msg);
	} else {
		n_pass++;
	}
}
