/* lab/shm/way-probe.c - one node: libsmddp's collectives against Open MPI's, in blocks, round robin, with the placement.
 *
 * usage (under mpirun, 2 ranks or more):
 *   way-probe BYTES CALLS COLL[,COLL...]
 * COLL is [mpi-]{ar,ag,rs,bc,aa}-{oop,ip}: allreduce, allgather,
 * reduce_scatter, broadcast (root 0), alltoall, out of place or in place; mpi- is
 * Open MPI's.  Each is run in blocks of 10 calls (3 untimed first), round
 * robin until each has CALLS timed calls, so that all see the same
 * machine; the time of a call is that of its slowest rank.  Before each
 * block ranks 0 and 1 bounce a cache line through MPI shared memory: the
 * least round trip tells where the two cores sit (on the CI VM 50-200 ns
 * where they share an L3, 330-520 where they do not; docs/PERFORMANCE.md).
 * Prints per COLL: min and median us over all calls, and the median of
 * the calls whose block saw a round trip below and above RTT_NS (env,
 * default 260).
 *
 * Build: mpicc -O2 -I lib/include lab/shm/way-probe.c -L build/lib/.libs -lsmddp
 * (scripts/way-probe.sh, below, does it and runs it).
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <smddp/smddp.h>

static struct smddp_comm *comm;
static int rank, nranks;
static char *sbuf, *rbuf;
static size_t bytes;
static volatile long *line;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The least round trip of a cache line between ranks 0 and 1, ns. */
static double round_trip(void)
{
	double best = 1e9;

	MPI_Barrier(MPI_COMM_WORLD);
	if (rank < 2) {
		for (long i = 1; i <= 400; i++) {
			if (rank == 0) {
				double t0 = now();

				__atomic_store_n(line, 2 * i - 1, __ATOMIC_SEQ_CST);
				while (__atomic_load_n(line, __ATOMIC_SEQ_CST) != 2 * i)
					;
				if (i > 20 && now() - t0 < best)
					best = now() - t0;
			} else {
				while (__atomic_load_n(line, __ATOMIC_SEQ_CST) != 2 * i - 1)
					;
				__atomic_store_n(line, 2 * i, __ATOMIC_SEQ_CST);
			}
		}
	}
	if (rank == 0)
		__atomic_store_n(line, 0, __ATOMIC_SEQ_CST);
	MPI_Bcast(&best, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	return best * 1e9;
}

static int run(const char *v)
{
	int mpi = !strncmp(v, "mpi-", 4), ip = strstr(v, "-ip") != NULL;
	const char *k = mpi ? v + 4 : v;
	size_t n = bytes / 4, m = n / (size_t)nranks;

	if (!strncmp(k, "ar", 2)) {
		if (mpi)
			return ip ? MPI_Allreduce(MPI_IN_PLACE, rbuf, (int)n, MPI_FLOAT, MPI_SUM,
						  MPI_COMM_WORLD)
				  : MPI_Allreduce(sbuf, rbuf, (int)n, MPI_FLOAT, MPI_SUM,
						  MPI_COMM_WORLD);
		return smddp_allreduce(ip ? rbuf : sbuf, rbuf, n, SMDDP_FLOAT32, SMDDP_SUM, comm,
				       NULL);
	}
	if (!strncmp(k, "ag", 2)) {
		if (mpi)
			return MPI_Allgather(ip ? MPI_IN_PLACE : sbuf, (int)m, MPI_FLOAT, rbuf,
					     (int)m, MPI_FLOAT, MPI_COMM_WORLD);
		return smddp_allgather(ip ? rbuf + (size_t)rank * m * 4 : sbuf, rbuf, m,
				       SMDDP_FLOAT32, comm, NULL);
	}
	if (!strncmp(k, "rs", 2)) {
		if (mpi)
			return MPI_Reduce_scatter_block(ip ? MPI_IN_PLACE : sbuf, rbuf, (int)m,
							MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		return smddp_reduce_scatter(ip ? rbuf : sbuf, rbuf, m, SMDDP_FLOAT32, SMDDP_SUM,
					    comm, NULL);
	}
	if (!strncmp(k, "bc", 2)) {
		if (mpi)
			return MPI_Bcast(rbuf, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
		return smddp_broadcast(rbuf, n, SMDDP_FLOAT32, 0, comm, NULL);
	}
	if (!strncmp(k, "aa", 2)) {
		if (mpi)
			return MPI_Alltoall(ip ? MPI_IN_PLACE : sbuf, (int)m, MPI_FLOAT, rbuf, (int)m,
					    MPI_FLOAT, MPI_COMM_WORLD);
		return smddp_alltoall(ip ? rbuf : sbuf, rbuf, m, SMDDP_FLOAT32, comm, NULL);
	}
	return -1;
}

int main(int argc, char **argv)
{
	enum { BLOCK = 10, WARM = 3, MAXV = 16 };
	char *names[MAXV], *list;
	int nv = 0, calls, cnt[MAXV] = {0};
	double *t, *where, thr = getenv("RTT_NS") ? atof(getenv("RTT_NS")) : 260;
	MPI_Win win;
	long *base;

	if (argc != 4) {
		fprintf(stderr, "usage: way-probe BYTES CALLS COLL[,COLL...]\n");
		return 2;
	}
	bytes = strtoull(argv[1], NULL, 0);
	calls = atoi(argv[2]);
	list = strdup(argv[3]);
	for (char *s = strtok(list, ","); s && nv < MAXV; s = strtok(NULL, ","))
		names[nv++] = s;
	MPI_Init(&argc, &argv);
	if (smddp_init(&comm)) {
		fprintf(stderr, "smddp_init: %s\n", smddp_last_error(NULL));
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	rank = smddp_comm_rank(comm);
	nranks = smddp_comm_size(comm);
	{
		MPI_Aint sz;
		int du;

		MPI_Win_allocate_shared(rank == 0 ? 256 : 0, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base,
					&win);
		MPI_Win_shared_query(win, 0, &sz, &du, &base);
		line = (volatile long *)(((unsigned long)base + 127) & ~127ul);
		if (rank == 0)
			*line = 0;
		MPI_Barrier(MPI_COMM_WORLD);
	}
	if (posix_memalign((void **)&sbuf, 4096, bytes + 4096) ||
	    posix_memalign((void **)&rbuf, 4096, bytes + 4096))
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (size_t i = 0; i < (bytes + 4096) / 4; i++)
		((float *)sbuf)[i] = ((float *)rbuf)[i] = 1.0f;
	t = calloc((size_t)calls * nv, sizeof(*t));
	where = calloc((size_t)calls * nv, sizeof(*where));
	while (cnt[nv - 1] < calls) {
		for (int v = 0; v < nv; v++) {
			double rtt = round_trip();

			for (int k = -WARM; k < BLOCK && cnt[v] < calls; k++) {
				double t0 = now();

				if (run(names[v]) != 0) {
					fprintf(stderr, "%s failed\n", names[v]);
					MPI_Abort(MPI_COMM_WORLD, 1);
				}
				if (k >= 0) {
					where[v * calls + cnt[v]] = rtt;
					t[v * calls + cnt[v]++] = (now() - t0) * 1e6;
				}
				/* in place sums double: keep the values finite */
				if (strstr(names[v], "-ip") && strstr(names[v], "ar-"))
					for (size_t i = 0; i < bytes / 4; i += 1024)
						((float *)rbuf)[i] = 1.0f;
			}
		}
	}
	MPI_Allreduce(MPI_IN_PLACE, t, calls * nv, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("# %zu bytes, %d ranks, %d calls each; us: min, median, median (calls) with the "
		       "round trip below / above %.0f ns\n",
		       bytes, nranks, calls, thr);
		for (int v = 0; v < nv; v++) {
			double *a = t + v * calls, lo[calls], hi[calls];
			int nl = 0, nh = 0;

			for (int i = 0; i < calls; i++) {
				if (where[v * calls + i] < thr)
					lo[nl++] = a[i];
				else
					hi[nh++] = a[i];
			}
			qsort(a, (size_t)calls, sizeof(double), cmp);
			qsort(lo, (size_t)nl, sizeof(double), cmp);
			qsort(hi, (size_t)nh, sizeof(double), cmp);
			printf("%-10s %9.1f %9.1f   near %9.1f (%d)   far %9.1f (%d)\n", names[v], a[0],
			       a[calls / 2], nl ? lo[nl / 2] : 0.0, nl, nh ? hi[nh / 2] : 0.0, nh);
		}
	}
	MPI_Win_free(&win);
	smddp_comm_destroy(comm);
	MPI_Finalize();
	return 0;
}
