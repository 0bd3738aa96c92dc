# tests/lib.sh - helpers every shell test shares (sourced by each folder's helper file, not run)
#
# Two kinds of test use these. Most stop at the first failed check:
#
#   fail MESSAGE    prints "FAIL: MESSAGE" on stderr and exits 1.
#
# A test that runs many checks and reports them all (tests/integration/,
# tests/gpu/) sets FAIL_GOES_ON=1 before sourcing this file; then
#
#   fail MESSAGE    prints "FAIL: MESSAGE" on stdout, counts it and returns,
#   pass MESSAGE    prints "ok: MESSAGE",
#   finish          ends the test: exit 1 if any check failed, else exit 0.
#
# And for either kind:
#
#   skip REASON     prints "SKIP: REASON" on stderr and exits 77 (automake's skip),
#   now             the wall clock in seconds, with nanoseconds,
#   since T0        seconds elapsed since T0 (a value of now), one decimal,
#   split_envs VAR=VALUE... -- ARGS...
#                   the words before "--" into the array envs, those after
#                   it into the array args (both declared local by the
#                   caller), for "env VAR=VALUE... PROGRAM ARGS..." helpers.
#
# And for fault tests whose ranks print FAULT-OK / FAULT-BAD lines into
# $TDIR/NAME.out (FAIL_GOES_ON=1):
#
#   expect_faults NAME WHAT RANK...
#                   each RANK printed a FAULT-OK line, nobody FAULT-BAD,
#   expect_no_leftovers JOB
#                   nothing of SMDDP_JOB_ID JOB is left in /dev/shm.
#
# And for shrink tests whose survivors print "SHRINK-OK rank=R size=S"
# (tests/integration/shrink.c, tests/gpu/gpu-shrink.c):
#
#   expect_shrink_ok NAME SIZE "RANK..." FILE...
#                   each world RANK printed that it goes on in a communicator
#                   of SIZE, into one of FILEs, and nobody printed SHRINK-BAD.
#
# Paths, temporary folders and cleanup traps stay with each folder's helper
# file: they differ from folder to folder.

failures=0

fail() {
	if [ "${FAIL_GOES_ON:-0}" = 1 ]; then
		echo "FAIL: $*"
		failures=$((failures + 1))
	else
		echo "FAIL: $*" >&2
		exit 1
	fi
}

pass() { echo "ok: $*"; }

finish() {
	if [ "$failures" -ne 0 ]; then
		echo "$failures check(s) failed"
		exit 1
	fi
	echo "all checks passed"
	exit 0
}

skip() {
	echo "SKIP: $*" >&2
	exit 77
}

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

split_envs() {
	envs=()
	args=()
	while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
		envs+=("$1")
		shift
	done
	[ "$#" -eq 0 ] || shift
	args=("$@")
}

# expect_summary NAME NRANKS: every rank printed a clean SUMMARY in $TDIR/NAME.out and
# the job exited 0 ($status)
expect_summary() {
	local s
	s=$(grep -c "SUMMARY rank [0-9]* of $2: [0-9]* passed, 0 failed" "$TDIR/$1.out")
	if [ "$status" -eq 0 ] && [ "$s" -eq "$2" ]; then
		pass "$1: every one of $2 ranks passed"
	else
		fail "$1: exit $status, $s of $2 ranks printed a clean summary"
	fi
}

expect_faults() {
	local name=$1 what=$2 r
	shift 2
	for r in "$@"; do
		grep -q "FAULT-OK rank=$r " "$TDIR/$name.out" && pass "$name: rank $r $what" ||
			fail "$name: rank $r did not report: $what"
	done
	! grep -q FAULT-BAD "$TDIR/$name.out" || fail "$(grep FAULT-BAD "$TDIR/$name.out" | head -3)"
}

expect_shrink_ok() {
	local name=$1 size=$2 ranks=$3 r
	shift 3
	for r in $ranks; do
		grep -qs "SHRINK-OK rank=$r size=$size\$" "$@" &&
			pass "$name: rank $r goes on in a communicator of $size" ||
			fail "$name: rank $r did not finish in a communicator of $size"
	done
	! grep -qs SHRINK-BAD "$@" || fail "$name: $(grep -hs SHRINK-BAD "$@" | head -3)"
}

expect_no_leftovers() {
	if ls /dev/shm | grep -q "smddp-$1"; then
		fail "left behind: $(ls /dev/shm | grep "smddp-$1")"
	fi
}
