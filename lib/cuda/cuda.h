/* cuda.h - the device-memory path of the collectives (lib/cuda/), as lib/core sees it.
 *
 * Built into every libsmddp; without --with-cuda the functions are inline
 * no-ops and the core refuses device memory as before.
 */
#ifndef SD_CUDA_CUDA_H
#define SD_CUDA_CUDA_H

#include <stddef.h>

struct smddp_comm;
struct sd_p2p_op;
struct sd_err;

/* One collective call as the API received it (buffers already classified as
 * device memory by the caller; stream NULL means CUDA's legacy default
 * stream). */
struct sd_cuda_call {
	int coll; /* enum sd_coll */
	const void *sendbuf;
	void *recvbuf;
	size_t count;
	int dtype, op, root;
	void *stream;
};

/* Does inject, the value of CUDA_INJECTION64_PATH (NULL when unset), load
 * NVIDIA compute-sanitizer?  (sanitizer.c, in every build: the rule is
 * unit-tested without CUDA.)  SMDDP_CUDA_ASYNC=auto is then blocking. */
int sd_cuda_sanitizer(const char *inject);

#ifdef HAVE_CUDA
/* Host thread, comm entered (sd_api_enter's checks done, count > 0):
 * checks the device buffers (device, size, kind of allocation) and queues
 * the call on the communicator's proxy, stream-ordered: returns as soon as
 * the stream is told to wait for it (or, in the blocking mode, once done).
 * On one node the ranks' buffers are mapped by CUDA IPC (proxy.c, move.c);
 * on several hosts the call is staged through pinned host memory and the
 * host algorithms (staged.c).  SMDDP_EINVAL (bad buffer) queues nothing. */
int sd_cuda_enqueue(struct smddp_comm *c, const struct sd_cuda_call *call);
/* Host thread, comm drained (sd_cuda_collect(c, 1)): a batch of sends and
 * receives whose buffers are device memory, by CUDA IPC between the ranks
 * of a host and through host copies between hosts, ordered on stream
 * (p2p.c); returns when done. */
int sd_cuda_p2p(struct smddp_comm *c, struct sd_p2p_op *ops, int n, void *stream);
/* Host thread, before anything else on comm: the error an earlier queued
 * call met (moved into c->last_error; sticky ones also into c->failed),
 * else 0.  With drain, first waits until the proxy has finished every
 * queued call, so that the caller may use the transport itself. */
int sd_cuda_collect(struct smddp_comm *c, int drain);
/* Any thread: the error a queued call met (sticky or one-off), 0 when none,
 * with its sentence copied into err; nothing is consumed. */
int sd_cuda_async_error(struct smddp_comm *c, struct sd_err *err);
/* Host thread: how device collectives return on c (SMDDP_CUDA_QUEUED,
 * _BLOCKING, or _UNDECIDED before SMDDP_CUDA_ASYNC=auto has decided). */
int sd_cuda_mode(const struct smddp_comm *c);
/* Host thread, a call failed with rc (its words in c->last_error) and the
 * communicator is to break: first the calls queued before it run to their
 * end (SMDDP_TIMEOUT + 30 s at most), so that the peers fail in this call,
 * not in an earlier good one.  Returns the failure to report: rc, or an
 * earlier queued call's met meanwhile (its words then in c->last_error),
 * or the drain's timeout. */
int sd_cuda_settle(struct smddp_comm *c, int rc);
/* Host thread: c has failed (c->failed, c->last_error): tell the peers
 * through the transport, now or, while the GPU proxy may be inside a call
 * between hosts (whose endpoint is one thread's), through the proxy. */
void sd_cuda_abort(struct smddp_comm *c);
/* Host thread, comm drained, SMDDP_CHECK_COLL: this rank refuses call k on
 * its buffers (host memory with a stream, or both kinds), which takes
 * device call number call.  Where the peers run such a call on kernels
 * that meet their peers themselves (one node, queued: fast.c, direct.c),
 * no host barrier meets them: the refusal is written where those kernels
 * look, after this rank's own kernels have ended, and they fail the call
 * as a mismatch naming this rank.  *told: written (the caller then skips
 * its host compare, which would wait for them until SMDDP_TIMEOUT). */
int sd_cuda_refused(struct smddp_comm *c, const struct sd_cuda_call *k, unsigned call, int *told);
/* Host thread, smddp_comm_abort: sd_cuda_abort, then the proxy stopped and
 * joined (its call fails at once), so that the caller may use the
 * transport and the bootstrap itself. */
void sd_cuda_stop(struct smddp_comm *c);
/* comm_free(): stops the proxy (releasing every waiting stream), waits
 * briefly for the streams to pass their waits, frees everything. */
void sd_cuda_comm_free(struct smddp_comm *c);
#else
#include "base/comm-types.h"
#include "transport/transport.h"

static inline int sd_cuda_collect(struct smddp_comm *c, int drain)
{
	(void)c;
	(void)drain;
	return 0;
}
static inline int sd_cuda_async_error(struct smddp_comm *c, struct sd_err *err)
{
	(void)c;
	(void)err;
	return 0;
}
static inline int sd_cuda_mode(const struct smddp_comm *c)
{
	(void)c;
	return SMDDP_CUDA_BLOCKING;
}
static inline int sd_cuda_settle(struct smddp_comm *c, int rc)
{
	(void)c;
	return rc;
}
static inline int sd_cuda_refused(struct smddp_comm *c, const struct sd_cuda_call *k,
				  unsigned call, int *told)
{
	(void)c;
	(void)k;
	(void)call;
	*told = 0;
	return 0;
}
static inline void sd_cuda_comm_free(struct smddp_comm *c)
{
	(void)c;
}
static inline void sd_cuda_abort(struct smddp_comm *c)
{
	c->tp->abort(c);
}
static inline void sd_cuda_stop(struct smddp_comm *c)
{
	(void)c;
}
#endif

#endif
