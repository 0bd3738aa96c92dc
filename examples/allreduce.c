/* allreduce.c - a complete libsmddp program: every rank adds its vector into
 * everyone's, then checks the sum.  make && smddp-run -n 4 ./allreduce */
#include <stdio.h>

#include <smddp/smddp.h>

#define COUNT 1024

int main(void)
{
	static float grad[COUNT];
	struct smddp_comm *comm;
	int rc, rank, size, wrong = 0;

	/* rank and peers from the environment: smddp-run, torchrun, mpirun, Slurm */
	rc = smddp_init(&comm);
	if (rc != SMDDP_OK) {
		fprintf(stderr, "smddp_init: %s: %s\n", smddp_strerror(rc), smddp_last_error(NULL));
		return 1;
	}
	rank = smddp_comm_rank(comm);
	size = smddp_comm_size(comm);
	for (int i = 0; i < COUNT; i++)
		grad[i] = rank + 1;

	/* in place (sendbuf == recvbuf), on host memory (stream NULL) */
	rc = smddp_allreduce(grad, grad, COUNT, SMDDP_FLOAT32, SMDDP_SUM, comm, NULL);
	if (rc != SMDDP_OK) {
		/* what failed, on which rank, in which call, and which peer */
		fprintf(stderr, "allreduce: %s: %s\n", smddp_strerror(rc), smddp_last_error(comm));
		smddp_comm_abort(comm); /* local: the peers fail instead of waiting */
		return 1;
	}
	for (int i = 0; i < COUNT; i++)
		wrong += grad[i] != size * (size + 1) / 2;
	printf("rank %d of %d: sum %g, %d wrong\n", rank, size, grad[0], wrong);

	rc = smddp_comm_destroy(comm); /* collective: every rank calls it */
	return rc != SMDDP_OK || wrong != 0;
}
