/* cmd/bench/smddp-allreduce-bench.c - measure libsmddp's collectives the way nccl-tests does.
 *
 * Every rank runs the same sweep of sizes; rank 0 alone prints.  For each
 * size: -w untimed warm-up calls, a barrier, -n calls each timed on every
 * rank; after the loop (never inside it) the per-call times are combined
 * with an allreduce MAX, so that the time of a call is that of its slowest
 * rank, and the reported time is the median of those.  With -c 1 a separate
 * call follows on poisoned output and freshly filled input, and every element
 * is compared with a reference computed here (bench_data.c).  Sizes, counts
 * and bus bandwidth factors are those of nccl-tests, so that the numbers of
 * the two tools can be compared column for column.  sendrecv is nccl-tests'
 * ring of grouped sends and receives; alltoallv, which nccl-tests lack,
 * cuts alltoall's totals into the uneven blocks of bench_v_block().
 *
 * --device cuda (builds with CUDA) puts both buffers in device memory and
 * passes a stream: a timed call is the call and the synchronisation of its
 * stream, so the time is still that of a finished collective; filling,
 * poisoning and checking go through a host copy, outside the timed loop.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <smddp/smddp.h>

#include "bench.h"
#include "sweep.h"
#include "../common/tool.h"

/* ---- main ------------------------------------------------------------------- */

/* Every rank leaves with rank 0's verdict, so that a launcher that reports
 * the first failing rank reports the right code. */
static int share_verdict(int v)
{
	int32_t x = v;
	int rc = smddp_broadcast(&x, 1, SMDDP_INT32, 0, comm, NULL);

	if (rc)
		fail("broadcast of the verdict", rc);
	return x;
}

int main(int argc, char **argv)
{
	struct sweep ours = { 0 };
	struct base_row *base = NULL;
	long nbase = 0;
	int rc, verdict;

	tool_init(PROG);
	coll_from_argv0(argv[0]);
	parse_args(argc, argv);

#ifdef HAVE_MPI
	if (opt.compare_mpi) {
		char err[256];
		/* MPI first, so that its progress engine and signal handlers
		 * are in place before libsmddp starts. */
		if (bench_mpi_init(&argc, &argv, err, sizeof(err)) != 0) {
			tool_warn("--compare mpi: %s", err);
			return TOOL_EXIT_FAILURE;
		}
	}
#endif
	rc = smddp_init(&comm);
	if (rc) {
		tool_warn("smddp_init failed: %s%s%s", smddp_strerror(rc),
			  *smddp_last_error(NULL) ? ": " : "", smddp_last_error(NULL));
		return TOOL_EXIT_FAILURE;
	}
	rank = smddp_comm_rank(comm);
	nranks = smddp_comm_size(comm);
#ifdef HAVE_MPI
	if (opt.compare_mpi && (bench_mpi_rank() != rank || bench_mpi_size() != nranks)) {
		tool_warn("rank %d: MPI says rank %d of %d, libsmddp rank %d of %d: the two must agree",
			  rank, bench_mpi_rank(), bench_mpi_size(), rank, nranks);
		smddp_comm_abort(comm);
		bench_mpi_abort(TOOL_EXIT_FAILURE);
	}
#endif
	if (opt.root >= nranks) {
		if (rank == 0)
			tool_warn("-r %d: there are only %d ranks", opt.root, nranks);
		smddp_comm_destroy(comm);
		return TOOL_EXIT_USAGE;
	}
	/* Only rank 0 reads the baseline (it may be on rank 0's host only);
	 * the others learn whether it was readable. */
	verdict = TOOL_EXIT_OK;
	if (opt.baseline && rank == 0) {
		nbase = load_baseline(opt.baseline, &base);
		if (nbase < 0)
			verdict = TOOL_EXIT_USAGE;
	}
	if (opt.baseline && share_verdict(verdict) != TOOL_EXIT_OK) {
		smddp_comm_destroy(comm);
		return TOOL_EXIT_USAGE;
	}
	/* -J: rank 0 alone writes the file, as it alone prints; after the
	 * baseline was read, which may be the same file. */
	if (opt.json_file) {
		verdict = TOOL_EXIT_OK;
		if (rank == 0 && !(json_file = fopen(opt.json_file, "w"))) {
			tool_warn_errno("-J: cannot create %s", opt.json_file);
			verdict = TOOL_EXIT_FAILURE;
		}
		if (share_verdict(verdict) != TOOL_EXIT_OK) {
			smddp_comm_destroy(comm);
			return TOOL_EXIT_FAILURE;
		}
	}
	show_progress = rank == 0 && isatty(STDERR_FILENO);

	buffers_alloc();

	print_header();
	run_sweep(&smddp_backend, &ours, NULL);
	print_footer(&ours);

#ifdef HAVE_MPI
	struct sweep theirs = { 0 };
	if (opt.compare_mpi) {
		const struct bench_backend *mpi = bench_mpi_backend();
		be_barrier(mpi);
		if (rank == 0 && !opt.json)
			printf("#\n# The same sweep through %s; ratio = busbw of libsmddp / "
			       "busbw of MPI\n", bench_mpi_version());
		run_sweep(mpi, &theirs, &ours);
		print_footer(&theirs);
		be_barrier(mpi);
	}
#endif

#ifdef HAVE_NCCL
	struct sweep ncs = { 0 };
	if (opt.compare_nccl) {
		char err[256];

		if (bench_nccl_init(comm, stream, err, sizeof(err)))
			gpu_fail(err);
		if (rank == 0 && !opt.json)
			printf("#\n# The same sweep through %s; ratio = busbw of libsmddp / "
			       "busbw of NCCL\n", bench_nccl_version());
		run_sweep(bench_nccl_backend(), &ncs, &ours);
		print_footer(&ncs);
		bench_nccl_finalize();
		free(ncs.res);
	}
#endif

	verdict = ours.wrong ? TOOL_EXIT_CHECK : TOOL_EXIT_OK;
	if (rank == 0 && (opt.baseline || opt.min_busbw >= 0)) {
		int v = judge(&ours, base, nbase);
		if (v)
			verdict = v;
	}
	if (json_file && (ferror(json_file) | fclose(json_file))) {
		tool_warn_errno("-J: cannot write %s", opt.json_file);
		if (!verdict)
			verdict = TOOL_EXIT_FAILURE;
	}
	verdict = share_verdict(verdict);

	rc = smddp_comm_destroy(comm);
	if (rc) {
		tool_warn("rank %d: smddp_comm_destroy failed: %s", rank, smddp_strerror(rc));
		if (!verdict)
			verdict = TOOL_EXIT_FAILURE;
	}
#ifdef HAVE_MPI
	if (opt.compare_mpi)
		bench_mpi_finalize();
	free(theirs.res);
#endif
	free(ours.res);
	free(base);
	buffers_free();
	return verdict;
}
