/* gpu-p2p.c - gpu-conformance: sends, receives, alltoallv, gather and scatter on device memory
 * (p2p, p2p --perf).
 */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include <smddp/smddp.h>

#include "gpu-conformance.h"

static unsigned char pval(int s, int r, int t, size_t j)
{
	return (unsigned char)(s * 131 + r * 31 + t * 7 + j * 13 + (j >> 8) * 5 + 1);
}

/* Byte j of the message from s to r with tag t at host offset off. */
static void pfill(unsigned char *h, size_t n, int s, int r, int t)
{
	for (size_t j = 0; j < n; j++)
		h[j] = pval(s, r, t, j);
}

static void pcheck(const char *what, const unsigned char *h, size_t n, int s, int r, int t)
{
	for (size_t j = 0; j < n; j++)
		if (h[j] != pval(s, r, t, j)) {
			printf("FAIL rank %d: %s: byte %zu of %zu from rank %d is %u, expected %u\n",
			       rank, what, j, n, s, h[j], pval(s, r, t, j));
			failures++;
			return;
		}
	passed++;
}

static void pcall(const char *what, int rc)
{
	if (rc) {
		printf("FAIL rank %d: %s: %s: %s\n", rank, what, smddp_strerror(rc),
		       smddp_last_error(comm));
		failures++;
	}
}

/* Bytes from rank s to rank r, message j of the all-to-all group: odd,
 * different for every pair, 0 for some. */
static size_t a2a_bytes(int s, int r, int j)
{
	size_t b = (size_t)(s * 7 + r * 13 + j * 101) % 5003;

	return (s + r + j) % 5 == 4 ? 0 : b | 1;
}

static int both_ranks_named(int other)
{
	char me[32], him[32];
	const char *m = smddp_last_error(comm);

	snprintf(me, sizeof(me), "rank %d", rank);
	snprintf(him, sizeof(him), "rank %d", other);
	return strstr(m, me) && strstr(m, him);
}

/* More of p2p: every dtype, a group that deadlocks if run one call at a
 * time, an exchange in place, a receive from anyone, a size mismatch in a
 * group whose other message must still arrive. */
static void p2p_more(void)
{
	unsigned char *hs = (unsigned char *)hbuf, *hr = (unsigned char *)hout;
	int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;

	/* Stream order: the stream is held back 300 ms by a host function,
	 * then the send buffer is written and the receive buffer poisoned; a
	 * send that read early, or a copy into the receive buffer queued
	 * before the poison, gives wrong bytes. */
	{
		size_t n = 65537;

		pfill(hs, n, rank, to, 9);
		CK(cudaMemsetAsync(dsend, 0, n, stream));
		CK(cudaLaunchHostFunc(stream, hold, NULL));
		CK(cudaMemcpyAsync(dsend, hs, n, cudaMemcpyHostToDevice, stream));
		CK(cudaMemsetAsync(drecv, 0xA5, n, stream));
		pcall("held: group_start", smddp_group_start());
		pcall("held: send", smddp_send(dsend, n, SMDDP_UINT8, to, 9, comm, stream));
		pcall("held: recv", smddp_recv(drecv, n, SMDDP_UINT8, from, 9, NULL, comm, stream));
		pcall("held: group_end", smddp_group_end());
		CK(cudaMemcpyAsync(hr, drecv, n, cudaMemcpyDeviceToHost, stream));
		CK(cudaStreamSynchronize(stream));
		pcheck("held back", hr, n, from, rank, 9);
	}

	/* every dtype, an odd count of elements, a ring in a group */
	for (int dt = 0; dt < SMDDP_NUM_DTYPES; dt++) {
		size_t count = 1003 + (size_t)dt * 2, n = count * es_of[dt];
		char what[48];

		snprintf(what, sizeof(what), "ring of %s", smddp_dtype_name((enum smddp_dtype)dt));
		pfill(hs, n, rank, to, 10 + dt);
		CK(cudaMemcpyAsync(dsend, hs, n, cudaMemcpyHostToDevice, stream));
		CK(cudaMemsetAsync(drecv, 0xA5, n, stream));
		pcall("group_start", smddp_group_start());
		pcall(what, smddp_send(dsend, count, (enum smddp_dtype)dt, to, 10 + dt, comm, stream));
		pcall(what, smddp_recv(drecv, count, (enum smddp_dtype)dt, from, 10 + dt, NULL, comm,
				       stream));
		pcall("group_end", smddp_group_end());
		CK(cudaMemcpyAsync(hr, drecv, n, cudaMemcpyDeviceToHost, stream));
		CK(cudaStreamSynchronize(stream));
		pcheck(what, hr, n, from, rank, 10 + dt);
	}

	/* All to all in one group, this rank included: every rank sends three
	 * messages to each (two with tag 20, in order, one with tag 21) before
	 * it receives any, and receives tag 21 first: one call at a time,
	 * every rank would wait in its first send. */
	{
		size_t soff[64][3], roff[64][3], so = 0, ro = 0;
		int srcs[64][3];

		for (int q = 0; q < nranks && nranks <= 64; q++)
			for (int j = 0; j < 3; j++) {
				soff[q][j] = so;
				roff[q][j] = ro;
				pfill(hs + so, a2a_bytes(rank, q, j), rank, q, 30 + j);
				so += a2a_bytes(rank, q, j);
				ro += a2a_bytes(q, rank, j);
			}
		if (nranks <= 64 && so <= cap_bytes && ro <= cap_bytes) {
			CK(cudaMemcpyAsync(dsend, hs, so, cudaMemcpyHostToDevice, stream));
			CK(cudaMemsetAsync(drecv, 0xA5, ro, stream));
			pcall("a2a group_start", smddp_group_start());
			for (int q = 0; q < nranks; q++)
				for (int j = 0; j < 3; j++)
					pcall("a2a send", smddp_send(dsend + soff[q][j], a2a_bytes(rank, q, j),
								     SMDDP_UINT8, q, j == 2 ? 21 : 20, comm,
								     stream));
			for (int j = 2; j >= 0; j--)
				for (int i = 0; i < nranks; i++) {
					int q = (rank + nranks - i) % nranks, jj = j == 2 ? 2 : 1 - j;

					srcs[q][jj] = -1;
					pcall("a2a recv", smddp_recv(drecv + roff[q][jj], a2a_bytes(q, rank, jj),
								     SMDDP_UINT8, q, jj == 2 ? 21 : 20,
								     &srcs[q][jj], comm, stream));
				}
			pcall("a2a group_end", smddp_group_end());
			CK(cudaMemcpyAsync(hr, drecv, ro, cudaMemcpyDeviceToHost, stream));
			CK(cudaStreamSynchronize(stream));
			for (int q = 0; q < nranks; q++)
				for (int j = 0; j < 3; j++) {
					pcheck("a2a group", hr + roff[q][j], a2a_bytes(q, rank, j), q, rank,
					       30 + j);
					if (srcs[q][j] != q) {
						printf("FAIL rank %d: a2a group: source %d, expected %d\n",
						       rank, srcs[q][j], q);
						failures++;
					}
				}
		}
	}

	/* An exchange in place (nccl-tests' in-place sendrecv): the buffer a
	 * rank sends is the one its receive overwrites. */
	{
		size_t n = 100003;

		pfill(hs, n, rank, to, 50);
		CK(cudaMemcpyAsync(drecv, hs, n, cudaMemcpyHostToDevice, stream));
		pcall("in place: group_start", smddp_group_start());
		pcall("in place: send", smddp_send(drecv, n, SMDDP_UINT8, to, 50, comm, stream));
		pcall("in place: recv", smddp_recv(drecv, n, SMDDP_UINT8, from, 50, NULL, comm, stream));
		pcall("in place: group_end", smddp_group_end());
		CK(cudaMemcpyAsync(hr, drecv, n, cudaMemcpyDeviceToHost, stream));
		CK(cudaStreamSynchronize(stream));
		pcheck("in place", hr, n, from, rank, 50);
	}

	/* Rank 0 receives from anyone, one call at a time; each other rank
	 * sends it one message (a plain blocking send). */
	if (nranks >= 2) {
		size_t n = 777;

		if (rank == 0) {
			int seen[64] = {0};

			for (int i = 1; i < nranks; i++) {
				int src = -1;

				CK(cudaMemsetAsync(drecv, 0xA5, n, stream));
				pcall("any: recv", smddp_recv(drecv, n, SMDDP_UINT8, SMDDP_ANY_SOURCE, 40,
							      &src, comm, stream));
				CK(cudaMemcpyAsync(hr, drecv, n, cudaMemcpyDeviceToHost, stream));
				CK(cudaStreamSynchronize(stream));
				if (src <= 0 || src >= nranks || src >= 64 || seen[src]++) {
					printf("FAIL rank 0: any: source %d\n", src);
					failures++;
					continue;
				}
				pcheck("any", hr, n, src, 0, 40);
			}
		} else {
			pfill(hs, n, rank, 0, 40);
			CK(cudaMemcpyAsync(dsend, hs, n, cudaMemcpyHostToDevice, stream));
			pcall("any: send", smddp_send(dsend, n, SMDDP_UINT8, 0, 40, comm, stream));
		}
	}

	/* A size mismatch in a group: tag 6 has another size on the receiver
	 * (an error naming both ranks), tag 7 still arrives. */
	if (nranks >= 2 && rank <= 1) {
		int got;

		pfill(hs, 500, rank, 1 - rank, 7);
		CK(cudaMemcpyAsync(dsend + 4096, hs, 500, cudaMemcpyHostToDevice, stream));
		CK(cudaMemsetAsync(drecv + 4096, 0xA5, 500, stream));
		smddp_group_start();
		if (rank == 0) {
			smddp_send(dsend, 1000, SMDDP_UINT8, 1, 6, comm, stream);
			smddp_send(dsend + 4096, 500, SMDDP_UINT8, 1, 7, comm, stream);
		} else {
			smddp_recv(drecv, 1200, SMDDP_UINT8, 0, 6, NULL, comm, stream);
			smddp_recv(drecv + 4096, 500, SMDDP_UINT8, 0, 7, NULL, comm, stream);
		}
		got = smddp_group_end();
		if ((got == SMDDP_EMISMATCH && both_ranks_named(1 - rank)) ||
		    (got == SMDDP_OK && rank == 0))
			passed++;
		else
			pcall("mismatch in a group (expected SMDDP_EMISMATCH naming both ranks)",
			      got ? got : SMDDP_EINTERNAL);
		if (rank == 1) {
			CK(cudaMemcpyAsync(hr, drecv + 4096, 500, cudaMemcpyDeviceToHost, stream));
			CK(cudaStreamSynchronize(stream));
			pcheck("the good message beside the mismatch", hr, 500, 0, 1, 7);
		}
	}
	pcall("barrier after the group's mismatch", smddp_barrier(comm));
}

/* p2p --perf: a ring of sendrecv (one group per call) on rank 0's clock,
 * printed as P2P-PERF lines (no floor: the numbers are for the log). */
void p2p_perf(void)
{
	size_t sizes[] = {8, 4096, 1 << 20, 64 << 20};
	int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;
	char *s = NULL, *r = NULL;

	CK(cudaMalloc((void **)&s, 64 << 20));
	CK(cudaMalloc((void **)&r, 64 << 20));
	CK(cudaMemsetAsync(s, 1, 64 << 20, stream));
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int iters = sizes[i] >= (1 << 20) ? 20 : 200;
		double t0 = 0;

		for (int it = -3; it < iters; it++) {
			if (it == 0) {
				pcall("perf barrier", smddp_barrier(comm));
				t0 = sd_now_s();
			}
			smddp_group_start();
			smddp_send(s, sizes[i], SMDDP_UINT8, to, 60, comm, stream);
			smddp_recv(r, sizes[i], SMDDP_UINT8, from, 60, NULL, comm, stream);
			if (smddp_group_end()) {
				pcall("perf sendrecv", SMDDP_EINTERNAL);
				goto out;
			}
		}
		double us = (sd_now_s() - t0) / iters * 1e6;

		if (rank == 0)
			printf("P2P-PERF ranks=%d bytes=%zu time_us=%.1f algbw_gbps=%.2f\n", nranks,
			       sizes[i], us, (double)sizes[i] / us / 1e3);
	}
out:
	CK(cudaStreamSynchronize(stream));
	cudaFree(s);
	cudaFree(r);
}

/* The input is written on the stream just before each call and read back
 * on it just after: the calls must keep stream order both ways. */
void p2p(size_t large)
{
	size_t counts[] = {0, 1, 7, 1001, large};
	unsigned char *hs = (unsigned char *)hbuf, *hr = (unsigned char *)hout;
	int to = (rank + 1) % nranks, from = (rank - 1 + nranks) % nranks;

	for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
		size_t n = counts[ci];
		int src = -1;

		if (n * (size_t)nranks > cap_bytes)
			continue;
		/* ring, in a group */
		pfill(hs, n, rank, to, 1);
		CK(cudaMemcpyAsync(dsend, hs, n, cudaMemcpyHostToDevice, stream));
		CK(cudaMemsetAsync(drecv, 0xA5, n, stream));
		pcall("group_start", smddp_group_start());
		pcall("send", smddp_send(dsend, n, SMDDP_UINT8, to, 1, comm, stream));
		pcall("recv", smddp_recv(drecv, n, SMDDP_UINT8, from, 1, &src, comm, stream));
		pcall("group_end", smddp_group_end());
		CK(cudaMemcpyAsync(hr, drecv, n, cudaMemcpyDeviceToHost, stream));
		CK(cudaStreamSynchronize(stream));
		pcheck("ring", hr, n, from, rank, 1);
		if (src != from) {
			printf("FAIL rank %d: ring: source %d, expected %d\n", rank, src, from);
			failures++;
		}
		/* alltoallv: rank s sends (s + q) % 3 * n / 2 bytes to q */
		size_t sc[64], sd[64], rc[64], rd[64], so = 0, ro = 0;

		for (int q = 0; q < nranks && nranks <= 64; q++) {
			sc[q] = (size_t)((rank + q) % 3) * n / 2;
			rc[q] = (size_t)((q + rank) % 3) * n / 2;
			sd[q] = so;
			rd[q] = ro;
			so += sc[q];
			ro += rc[q];
			pfill(hs + sd[q], sc[q], rank, q, 2);
		}
		CK(cudaMemcpyAsync(dsend, hs, so, cudaMemcpyHostToDevice, stream));
		pcall("alltoallv",
		      smddp_alltoallv(dsend, sc, sd, drecv, rc, rd, SMDDP_UINT8, comm, stream));
		CK(cudaMemcpyAsync(hr, drecv, ro, cudaMemcpyDeviceToHost, stream));
		CK(cudaStreamSynchronize(stream));
		for (int q = 0; q < nranks; q++)
			pcheck("alltoallv", hr + rd[q], rc[q], q, rank, 2);
		/* gather and scatter from every root */
		for (int root = 0; root < nranks; root++) {
			pfill(hs, n, rank, root, 3);
			CK(cudaMemcpyAsync(dsend, hs, n, cudaMemcpyHostToDevice, stream));
			pcall("gather", smddp_gather(dsend, drecv, n, SMDDP_UINT8, root, comm, stream));
			CK(cudaMemcpyAsync(hr, drecv, n * (size_t)nranks, cudaMemcpyDeviceToHost,
					   stream));
			CK(cudaStreamSynchronize(stream));
			if (rank == root)
				for (int q = 0; q < nranks; q++)
					pcheck("gather", hr + (size_t)q * n, n, q, root, 3);
			if (rank == root)
				for (int q = 0; q < nranks; q++)
					pfill(hs + (size_t)q * n, n, root, q, 4);
			CK(cudaMemcpyAsync(dsend, hs, n * (size_t)nranks, cudaMemcpyHostToDevice,
					   stream));
			pcall("scatter", smddp_scatter(dsend, drecv, n, SMDDP_UINT8, root, comm, stream));
			CK(cudaMemcpyAsync(hr, drecv, n, cudaMemcpyDeviceToHost, stream));
			CK(cudaStreamSynchronize(stream));
			pcheck("scatter", hr, n, root, rank, 4);
		}
	}
	/* Memory that CUDA IPC cannot share (a cudaMallocAsync pool) goes
	 * staged through the host: the same ring. */
	{
		size_t n = 100003;
		char *ps = NULL, *pr = NULL;

		CK(cudaMallocAsync((void **)&ps, n, stream));
		CK(cudaMallocAsync((void **)&pr, n, stream));
		pfill(hs, n, rank, to, 5);
		CK(cudaMemcpyAsync(ps, hs, n, cudaMemcpyHostToDevice, stream));
		pcall("pool: group_start", smddp_group_start());
		pcall("pool: send", smddp_send(ps, n, SMDDP_UINT8, to, 5, comm, stream));
		pcall("pool: recv", smddp_recv(pr, n, SMDDP_UINT8, from, 5, NULL, comm, stream));
		pcall("pool: group_end", smddp_group_end());
		CK(cudaMemcpyAsync(hr, pr, n, cudaMemcpyDeviceToHost, stream));
		CK(cudaStreamSynchronize(stream));
		pcheck("pool ring", hr, n, from, rank, 5);
		CK(cudaFreeAsync(ps, stream));
		CK(cudaFreeAsync(pr, stream));
		CK(cudaStreamSynchronize(stream));
	}
	/* Sizes that differ: rank 0 sends 1000 bytes, rank 1 takes 1200:
	 * SMDDP_EMISMATCH naming the other rank (on the sender too inside a
	 * node; between hosts its send may just complete), and the
	 * communicator goes on. */
	if (nranks >= 2 && rank <= 1) {
		int got = rank == 0 ? smddp_send(dsend, 1000, SMDDP_UINT8, 1, 6, comm, stream)
				    : smddp_recv(drecv, 1200, SMDDP_UINT8, 0, 6, NULL, comm, stream);

		if ((got == SMDDP_EMISMATCH &&
		     strstr(smddp_last_error(comm), rank ? "rank 0" : "rank 1")) ||
		    (got == SMDDP_OK && rank == 0))
			passed++;
		else
			pcall("mismatch (expected SMDDP_EMISMATCH naming the other rank)",
			      got ? got : SMDDP_EINTERNAL);
	}
	pcall("barrier after the mismatch", smddp_barrier(comm));
	p2p_more();
}
