# cancel.sh - smddp_comm_cancel while a queued device call waits for its stream (held 3 s):
# the cancelling rank's async error says "cancelled" within 2 s, the peer's names it; both
# streams are released.  Queued mode only (SMDDP_CUDA_ASYNC=1, or auto under MPS); in the
# blocking mode there is no queued call to cancel and the ranks say so.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/lib.sh"
# queued by default: with auto, ranks sharing a GPU without MPS block
export SMDDP_TIMEOUT=30 SMDDP_JOB_ID=gpucancel$$ SMDDP_CUDA_ASYNC=${SMDDP_CUDA_ASYNC:-1}
LAUNCH_OPTS="--grace 30"
run_gpu cancel 60 2 cancelq
expect_faults cancel "cancelled within 2 s, or was told" 0 1
[ "$status" -eq 0 ] && [ "$(grep -c "STREAM-OK rank=" "$TDIR/cancel.out")" -eq 2 ] ||
	fail "exit $status: a rank's stream was not released"
expect_no_leftovers "$SMDDP_JOB_ID"
finish
