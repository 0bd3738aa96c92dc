# mismatch.sh - ranks pass different counts to a device call, or one rank refuses a call the
# others make: every rank gets an error naming a rank, from the call or (queued) from
# smddp_comm_get_async_error within 2 s; streams go on.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/lib.sh"
export SMDDP_TIMEOUT=30 SMDDP_JOB_ID=gpumis$$
LAUNCH_OPTS="--grace 30"
run_gpu mismatch 60 3 mismatch
expect_faults mismatch "was told of the mismatch" 0 1 2
# rank 1 alone refuses a call on its own arguments: every rank fails the call that meets
for how in short zero gather; do
	run_gpu refused-$how 60 3 refused $how
	expect_faults refused-$how "failed the call that met rank 1's next" 0 1 2
done
expect_no_leftovers "$SMDDP_JOB_ID"
finish
