/* ipc-fake.c - lib/cuda/ipc.c's registry of the peers' mappings under threads, without a GPU.
 *
 * Linked with tests/gpu/fakecuda.c, whose cudaIpcCloseMemHandle waits for
 * the device and FAKECUDA_IPC_CLOSE_US more, and counts the references of
 * each mapping as the driver does.  One process, its own allocations as
 * the "peer's" (a handle is an address in the fake):
 * - a close of a mapping's last reference, slow, must not hold back an
 *   open of another handle, nor of the same one, and must not unmap what
 *   that open handed out;
 * - threads open and close a few handles at random, each checking that
 *   what it holds stays mapped, and nothing is left mapped at the end;
 * - mappings retired by a communicator and flushed go to the closer
 *   thread: the flush returns at once however slow the close, and
 *   sd_cuda_ipc_settle waits until they are closed;
 * - so does a mapping dropped with sd_cuda_ipc_close_later (the direct
 *   path's, opened but never published).
 * Prints "SUMMARY rank 0 of 1: P passed, F failed".
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "clock/clock.h"
#include "cuda/internal.h"
#include "cuda/ipc.h"
#include "fakecuda.h"

#define NH 4       /* handles */
#define NT 4       /* threads of the second part */
#define ROUNDS 3000
#define PEER 4242  /* the "peer's" pid, as the registry keys it */

static struct buf_pub pubs[NH];
static void *bases[NH];
static int passed, failed;

static void check(int ok, const char *what)
{
	printf("%s: %s\n", ok ? "ok" : "FAIL", what);
	*(ok ? &passed : &failed) += 1;
}

static void *slow_close(void *p)
{
	sd_cuda_ipc_close(p);
	return NULL;
}

/* Opens and closes handles at random, up to 3 held at once; the number of
 * mappings that were not what they should be. */
static void *churn(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
	void *held[3];
	int hk[3], n = 0;
	long bad = 0;

	for (int i = 0; i < ROUNDS; i++) {
		if (n < 3 && (n == 0 || rand_r(&seed) % 2)) {
			int k = (int)(rand_r(&seed) % NH);
			void *p = NULL;

			if (sd_cuda_ipc_open(PEER, 0, &pubs[k], &p) != cudaSuccess || p != bases[k]) {
				bad++;
				continue;
			}
			held[n] = p;
			hk[n++] = k;
		} else {
			int j = (int)(rand_r(&seed) % (unsigned)n);

			sd_cuda_ipc_close(held[j]);
			held[j] = held[--n];
			hk[j] = hk[n];
		}
		for (int j = 0; j < n; j++)
			bad += fake_ipc_refs(bases[hk[j]]) < 1;
	}
	while (n > 0)
		sd_cuda_ipc_close(held[--n]);
	return (void *)bad;
}

int main(void)
{
	pthread_t t, ts[NT];
	void *a = NULL, *b = NULL, *a2 = NULL;
	double t0, took_b, took_a;
	long bad = 0;

	for (int k = 0; k < NH; k++) {
		if (cudaMalloc(&bases[k], 1 << 20) != cudaSuccess ||
		    cudaIpcGetMemHandle(&pubs[k].h, bases[k]) != cudaSuccess) {
			printf("FAIL: cannot allocate and share buffer %d\n", k);
			return 1;
		}
		pubs[k].id = (uint64_t)k + 1;
		pubs[k].base = (uint64_t)(uintptr_t)bases[k];
		pubs[k].size = 1 << 20;
		pubs[k].present = 1;
	}

	/* 1: A's last reference closed slowly (500 ms) by a thread; B opened,
	 * and A again, 100 ms into it. */
	check(sd_cuda_ipc_open(PEER, 0, &pubs[0], &a) == cudaSuccess && a == bases[0],
	      "buffer A mapped");
	setenv("FAKECUDA_IPC_CLOSE_US", "500000", 1);
	pthread_create(&t, NULL, slow_close, a);
	usleep(100000);
	t0 = sd_now_s();
	check(sd_cuda_ipc_open(PEER, 0, &pubs[1], &b) == cudaSuccess && b == bases[1],
	      "buffer B mapped while A's mapping closes");
	took_b = sd_now_s() - t0;
	t0 = sd_now_s();
	check(sd_cuda_ipc_open(PEER, 0, &pubs[0], &a2) == cudaSuccess && a2 == bases[0],
	      "buffer A mapped again while its old mapping closes");
	took_a = sd_now_s() - t0;
	printf("# the opens took %.3f s and %.3f s (the close 0.5 s)\n", took_b, took_a);
	check(took_b < 0.2 && took_a < 0.2, "neither open waited for the close");
	pthread_join(t, NULL);
	unsetenv("FAKECUDA_IPC_CLOSE_US");
	check(fake_ipc_refs(bases[0]) == 1, "A's new mapping still mapped after the old one closed");
	sd_cuda_ipc_close(a2);
	sd_cuda_ipc_close(b);
	check(fake_ipc_mapped_of(0) == 0, "nothing mapped after the last closes");

	/* 2: threads at random. */
	for (int i = 0; i < NT; i++)
		pthread_create(&ts[i], NULL, churn, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < NT; i++) {
		void *r;

		pthread_join(ts[i], &r);
		bad += (long)r;
	}
	printf("# %d threads, %d rounds each: %ld mapping(s) not as they should be\n", NT, ROUNDS,
	       bad);
	check(bad == 0, "every mapping held stayed mapped, and was the buffer's");
	check(fake_ipc_mapped_of(0) == 0, "nothing mapped after the threads");

	/* 3: retired and flushed as a communicator's host thread does, with
	 * no call queued: closed by the closer, 300 ms each. */
	struct sd_cuda *cu = calloc(1, sizeof(*cu));
	void *r[2];
	double flush_s, settle_s;

	pthread_mutex_init(&cu->mu, NULL);
	for (int k = 0; k < 2; k++)
		check(sd_cuda_ipc_open(PEER, 0, &pubs[k], &r[k]) == cudaSuccess &&
			      sd_cuda_ipc_retire(cu, r[k]) == SMDDP_OK,
		      "a mapping opened and retired");
	setenv("FAKECUDA_IPC_CLOSE_US", "300000", 1);
	t0 = sd_now_s();
	sd_cuda_flush_stale(cu);
	flush_s = sd_now_s() - t0;
	t0 = sd_now_s();
	sd_cuda_ipc_settle();
	settle_s = sd_now_s() - t0;
	unsetenv("FAKECUDA_IPC_CLOSE_US");
	printf("# the flush took %.3f s, the settle %.3f s (two closes of 0.3 s)\n", flush_s,
	       settle_s);
	check(flush_s < 0.2, "the flush did not wait for the closes");
	check(fake_ipc_mapped_of(0) == 0 && !cu->nstale, "both closed once settled");
	pthread_mutex_destroy(&cu->mu);
	free(cu);

	/* 4: the last reference dropped to the closer, as direct.c's
	 * sync_peers does: back at once, the close 300 ms. */
	double drop_s;

	check(sd_cuda_ipc_open(PEER, 0, &pubs[2], &a) == cudaSuccess, "a mapping opened");
	setenv("FAKECUDA_IPC_CLOSE_US", "300000", 1);
	t0 = sd_now_s();
	sd_cuda_ipc_close_later(a);
	drop_s = sd_now_s() - t0;
	sd_cuda_ipc_settle();
	unsetenv("FAKECUDA_IPC_CLOSE_US");
	printf("# the drop took %.3f s (a close of 0.3 s)\n", drop_s);
	check(drop_s < 0.2, "dropping the last reference did not wait for its close");
	check(fake_ipc_mapped_of(0) == 0, "closed once settled");
	printf("SUMMARY rank 0 of 1: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
