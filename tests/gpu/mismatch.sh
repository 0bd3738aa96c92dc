# mismatch.sh - ranks pass different counts to a device call: every rank gets an error naming
# a rank, from the call or (queued) from smddp_comm_get_async_error within 2 s; streams go on.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/lib.sh"
export SMDDP_TIMEOUT=30 SMDDP_JOB_ID=gpumis$$
LAUNCH_OPTS="--grace 30"
run_gpu mismatch 60 3 mismatch
for r in 0 1 2; do
	if grep -q "FAULT-OK rank=$r " "$TDIR/mismatch.out"; then
		pass "rank $r was told of the mismatch"
	else
		fail "rank $r was not told of the mismatch"
	fi
done
grep -q FAULT-BAD "$TDIR/mismatch.out" && fail "$(grep FAULT-BAD "$TDIR/mismatch.out" | head -3)"
if ls /dev/shm | grep -q "smddp-$SMDDP_JOB_ID"; then
	fail "left behind: $(ls /dev/shm | grep "smddp-$SMDDP_JOB_ID")"
fi
finish
