# fault.sh - a rank killed mid-training: the others raise DistBackendError naming it.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/torch/lib.sh"
need_shim
export SMDDP_TIMEOUT=120
LAUNCH_OPTS="--grace 30"
for n in 2 3; do
	run_job "fault-$n" 180 "$n" "$PY" "$TESTS_PY/test_fault.py" 1
	for r in $(seq 0 $((n - 1))); do
		[ "$r" = 1 ] && continue
		grep -q "TORCH-OK rank=$r " "$TDIR/fault-$n.out" &&
			pass "fault-$n: rank $r raised DistBackendError naming rank 1" ||
			fail "fault-$n: rank $r did not"
	done
	! grep -q TORCH-BAD "$TDIR/fault-$n.out" || fail "fault-$n: $(grep TORCH-BAD "$TDIR/fault-$n.out" | head -2)"
	[ "$status" -ne 0 ] || fail "fault-$n: smddp-run exited 0"
done
finish
