# cancel.sh - smddp_comm_cancel while a queued device call waits for its stream (held 3 s):
# the cancelling rank's async error says "cancelled" within 2 s, the peer's names it; both
# streams are released.  Queued mode only (SMDDP_CUDA_ASYNC=1, or auto under MPS); in the
# blocking mode there is no queued call to cancel and the ranks say so.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/lib.sh"
export SMDDP_TIMEOUT=30 SMDDP_JOB_ID=gpucancel$$
LAUNCH_OPTS="--grace 30"
run_gpu cancel 60 2 cancelq
for r in 0 1; do
	if grep -q "FAULT-OK rank=$r " "$TDIR/cancel.out"; then
		pass "rank $r: $(grep -o "FAULT-OK rank=$r [^:]*" "$TDIR/cancel.out" | head -1)"
	else
		fail "rank $r did not report the cancel"
	fi
done
grep -q FAULT-BAD "$TDIR/cancel.out" && fail "$(grep FAULT-BAD "$TDIR/cancel.out" | head -3)"
if ls /dev/shm | grep -q "smddp-$SMDDP_JOB_ID"; then
	fail "left behind: $(ls /dev/shm | grep "smddp-$SMDDP_JOB_ID")"
fi
finish
