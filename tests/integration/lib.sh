# tests/integration/lib.sh - helpers shared by the integration test scripts (sourced by them, not run).
#
# make check sets top_builddir and top_srcdir (absolute).  Every job runs
# under both `timeout` and smddp-run's own --timeout, so that a hang fails
# the test instead of the build.
set -u
: "${top_builddir:?top_builddir is not set: run me through make check}"
: "${top_srcdir:?top_srcdir is not set: run me through make check}"

RUN=$top_builddir/cmd/smddp-run
CONFORMANCE=$top_builddir/tests/integration/conformance
FAULT=$top_builddir/tests/integration/fault
for prog in "$RUN" "$CONFORMANCE" "$FAULT"; do
	if [ ! -x "$prog" ]; then
		echo "ERROR: $prog is not built"
		exit 99
	fi
done

TDIR=$(mktemp -d "${TMPDIR:-/tmp}/smddp-test.XXXXXX")
trap 'rm -rf "$TDIR"' EXIT
status=0
elapsed=0
# fail counts and goes on; pass, finish, now, since
FAIL_GOES_ON=1
. "$top_srcdir/tests/lib.sh"

# run_job NAME SECONDS NRANKS PROGRAM ARGS...: smddp-run -n NRANKS (and
# $LAUNCH_OPTS) under a deadline; output in $TDIR/NAME.out (and shown), exit status in $status,
# seconds in $elapsed.
run_job() {
	local name=$1 secs=$2 n=$3 t0
	shift 3
	t0=$(now)
	timeout -k 5 $((secs + 60)) "$RUN" -n "$n" --timeout "$secs" ${LAUNCH_OPTS:-} "$@" >"$TDIR/$name.out" 2>&1
	status=$?
	elapsed=$(since "$t0")
	echo "--- $name: smddp-run -n $n --timeout $secs ${*##*/} -> exit $status in ${elapsed} s"
	sed 's/^/    /' "$TDIR/$name.out"
}

# run_alone NAME SECONDS VAR=VALUE... -- PROGRAM ARGS...: one process with a
# clean environment (no launcher); output in $TDIR/NAME.out and .err.
run_alone() {
	local name=$1 secs=$2 t0
	shift 2
	local -a vars=()
	while [ "$1" != "--" ]; do
		vars+=("$1")
		shift
	done
	shift
	t0=$(now)
	env -i PATH="$PATH" HOME="${HOME:-/}" SMDDP_CONFIG=/dev/null "${vars[@]}" \
		timeout -k 5 "$secs" "$@" >"$TDIR/$name.out" 2>"$TDIR/$name.err"
	status=$?
	elapsed=$(since "$t0")
	echo "--- $name: ${vars[*]} ${*##*/} -> exit $status in ${elapsed} s"
	sed 's/^/    out: /' "$TDIR/$name.out"
	sed 's/^/    err: /' "$TDIR/$name.err"
}

# Does text name rank R ("rank 1", "ranks 0, 1", "rank(s) 1 and 2")?
names_rank() { grep -Eiq "ranks?(\(s\))?:? *\[?([0-9]+ *(,|and|&|or|/) *)*$2([^0-9]|\$)" <<<"$1"; }

# expect_witnesses NAME RANKS...: each rank printed FAULT-OK, none FAULT-BAD,
# and the launcher's status is non-zero ($WANT_STATUS if set).
expect_witnesses() {
	local name=$1 r
	shift
	for r in "$@"; do
		if grep -q "FAULT-OK rank=$r " "$TDIR/$name.out"; then
			pass "$name: rank $r saw the expected error"
		else
			fail "$name: rank $r did not report the expected error (no FAULT-OK rank=$r line)"
		fi
	done
	if grep -q "FAULT-BAD" "$TDIR/$name.out"; then
		fail "$name: $(grep FAULT-BAD "$TDIR/$name.out" | head -3 | tr '\n' ' ')"
	fi
	if [ "$status" -eq 0 ]; then
		fail "$name: smddp-run exited 0 although ranks failed"
	elif [ -n "${WANT_STATUS:-}" ] && [ "$status" -ne "$WANT_STATUS" ]; then
		fail "$name: smddp-run exited $status, expected $WANT_STATUS (the first rank to fail)"
	else
		pass "$name: smddp-run exited $status"
	fi
}

# run_conformance NRANKS CONFORMANCE-ARGS...
run_conformance() {
	local n=$1 s
	shift
	export SMDDP_TIMEOUT=60
	# 8 ranks on 2 loaded cores took 100-165 s: room, not a race
	run_job "conformance-$n" $((n >= 8 ? 300 : 170)) "$n" "$CONFORMANCE" "$@"
	if [ "$status" -ne 0 ]; then
		fail "conformance on $n rank(s) exited $status"
	fi
	s=$(grep -c "SUMMARY rank [0-9]* of $n: [0-9]* passed, 0 failed" "$TDIR/conformance-$n.out")
	if [ "$s" -ne "$n" ]; then
		fail "$s of $n ranks printed a clean summary"
	else
		pass "every rank of $n passed its cases"
	fi
	finish
}
