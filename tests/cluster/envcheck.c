/* tests/cluster/envcheck.c - a rank that checks what smddp-run gave it, then libsmddp
 *
 * envcheck WORLD LOCAL MASTER HOSTPREFIX ACTION [ARGS]
 *   checks WORLD_SIZE=WORLD, LOCAL_WORLD_SIZE=LOCAL, MASTER_ADDR=MASTER,
 *   0 <= RANK < WORLD, LOCAL_RANK = RANK % LOCAL, GROUP_RANK = RANK / LOCAL,
 *   the SMDDP_* twins, and (HOSTPREFIX not "-") that this host's name is
 *   HOSTPREFIX followed by GROUP_RANK + 1; prints "envcheck: rank R on H: env ok".
 * ACTION:
 *   init-ok           smddp_init succeeds with our rank and sizes; a barrier and
 *                     an allreduce of the ranks give WORLD*(WORLD-1)/2
 *   init-unsupported  smddp_init returns SMDDP_EUNSUPPORTED and says that there is
 *                     no transport between hosts yet (the state until the
 *                     libfabric transport lands); ranks other than 0 may get
 *                     SMDDP_EPEER instead, when rank 0 refused and left first
 *   fail R CODE       rank R exits CODE at once; the others sleep 120 s
 * Exit: 0 when every check passed, 3 when one failed (a line on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <smddp/smddp.h>

static int rank = -1;
static char host[256] = "?";

static void bad(const char *what, const char *detail)
{
	fprintf(stderr, "envcheck: rank %d on %s: %s%s%s\n", rank, host, what,
		detail ? ": " : "", detail ? detail : "");
	exit(3);
}

static long env_long(const char *name)
{
	const char *v = getenv(name);
	char *end;
	long x;

	if (!v || !*v)
		bad(name, "not set");
	x = strtol(v, &end, 10);
	if (*end)
		bad(name, v);
	return x;
}

static void expect(const char *name, long want)
{
	long got = env_long(name);
	char msg[128];

	if (got != want) {
		snprintf(msg, sizeof(msg), "%ld, expected %ld", got, want);
		bad(name, msg);
	}
}

int main(int argc, char **argv)
{
	struct smddp_comm *comm = NULL;
	long world, local;
	int rc;

	if (argc < 6) {
		fprintf(stderr, "usage: envcheck WORLD LOCAL MASTER HOSTPREFIX ACTION [ARGS]\n");
		return 2;
	}
	gethostname(host, sizeof(host) - 1);
	world = atol(argv[1]);
	local = atol(argv[2]);
	rank = (int)env_long("RANK");
	if (rank < 0 || rank >= world)
		bad("RANK", "out of range");
	expect("WORLD_SIZE", world);
	expect("SMDDP_WORLD_SIZE", world);
	expect("SMDDP_RANK", rank);
	expect("LOCAL_WORLD_SIZE", local);
	expect("SMDDP_LOCAL_WORLD_SIZE", local);
	expect("LOCAL_RANK", rank % local);
	expect("SMDDP_LOCAL_RANK", rank % local);
	expect("GROUP_RANK", rank / local);
	if (!getenv("MASTER_ADDR") || strcmp(getenv("MASTER_ADDR"), argv[3]) != 0)
		bad("MASTER_ADDR", getenv("MASTER_ADDR") ? getenv("MASTER_ADDR") : "not set");
	if (!getenv("MASTER_PORT") || !getenv("SMDDP_JOB_TOKEN") || !getenv("SMDDP_JOB_ID"))
		bad("MASTER_PORT, SMDDP_JOB_TOKEN or SMDDP_JOB_ID", "not set");
	if (strcmp(argv[4], "-") != 0) {
		char want[300];
		snprintf(want, sizeof(want), "%s%ld", argv[4], rank / local + 1);
		if (strcmp(host, want) != 0)
			bad("host name", want);
	}
	printf("envcheck: rank %d on %s: env ok\n", rank, host);
	fflush(stdout);

	if (strcmp(argv[5], "fail") == 0 && argc >= 8) {
		if (rank == atoi(argv[6]))
			return atoi(argv[7]);
		sleep(120);
		return 0;
	}
	rc = smddp_init(&comm);
	if (strcmp(argv[5], "init-unsupported") == 0) {
		/* Rank 0 sees the host identities and refuses; the others may
		 * see that first, or rank 0 leaving the rendezvous (EPEER). */
		if (rc == SMDDP_EPEER && rank != 0) {
			printf("envcheck: rank %d on %s: smddp_init: EUNSUPPORTED as expected "
			       "(rank 0 refused first)\n", rank, host);
			return 0;
		}
		if (rc != SMDDP_EUNSUPPORTED)
			bad("smddp_init did not return SMDDP_EUNSUPPORTED", smddp_strerror(rc));
		if (!strstr(smddp_last_error(NULL), "no transport between hosts"))
			bad("smddp_init's message", smddp_last_error(NULL));
		printf("envcheck: rank %d on %s: smddp_init: EUNSUPPORTED as expected\n", rank, host);
		return 0;
	}
	if (rc != SMDDP_OK)
		bad("smddp_init", smddp_last_error(NULL));
	if (smddp_comm_rank(comm) != rank || smddp_comm_size(comm) != world)
		bad("smddp_init", "rank or size differ from the environment");
	if ((rc = smddp_barrier(comm)) != SMDDP_OK)
		bad("smddp_barrier", smddp_last_error(comm));
	long long v = rank, sum = -1;
	if ((rc = smddp_allreduce(&v, &sum, 1, SMDDP_INT64, SMDDP_SUM, comm, NULL)) != SMDDP_OK)
		bad("smddp_allreduce", smddp_last_error(comm));
	if (sum != world * (world - 1) / 2)
		bad("smddp_allreduce", "wrong sum");
	if ((rc = smddp_comm_destroy(comm)) != SMDDP_OK)
		bad("smddp_comm_destroy", smddp_strerror(rc));
	printf("envcheck: rank %d on %s: smddp_init, barrier, allreduce ok\n", rank, host);
	return 0;
}
