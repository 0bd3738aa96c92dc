# dead.sh - a rank is SIGKILLed between device calls: the others' streams are released and
# their next call fails naming it, well within SMDDP_TIMEOUT; nothing is left in /dev/shm.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/lib.sh"
export SMDDP_TIMEOUT=30 SMDDP_JOB_ID=gpudead$$
LAUNCH_OPTS="--grace 30"
run_gpu dead 60 4 dead 1
for r in 0 2 3; do
	if grep -q "FAULT-OK rank=$r " "$TDIR/dead.out"; then
		pass "rank $r saw the dead peer"
	else
		fail "rank $r did not report the dead peer"
	fi
done
grep -q FAULT-BAD "$TDIR/dead.out" && fail "$(grep FAULT-BAD "$TDIR/dead.out" | head -3)"
[ "$status" -ne 0 ] || fail "smddp-run exited 0 although a rank was killed"
if ls /dev/shm | grep -q "smddp-$SMDDP_JOB_ID"; then
	fail "left behind: $(ls /dev/shm | grep "smddp-$SMDDP_JOB_ID")"
fi
finish
