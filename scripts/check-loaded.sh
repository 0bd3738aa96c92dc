#!/bin/bash
# scripts/check-loaded.sh - run tests on a loaded machine: busy loops on every core, several rounds.
#
# Usage (through make, which passes the test list): make -C build check-loaded
#        ROUNDS=5 BUSY=8 make -C build check-loaded
#   scripts/check-loaded.sh MAKE TEST...
# ROUNDS (default 3) runs of `MAKE check TESTS="TEST..."` with BUSY (default
# twice the number of cores) shell loops spinning beside them.  A test that
# passes alone and fails here races the scheduler: a bug in it or in the
# library.  Each round's test-suite.log is kept as test-suite-roundN.log.
set -u
[ $# -ge 2 ] || {
	echo "usage: $0 MAKE TEST... (or: make check-loaded in the build tree)" >&2
	exit 2
}
make=$1
shift
rounds=${ROUNDS:-3}
busy=${BUSY:-$((2 * $(nproc)))}
pids=()
stop_busy() {
	[ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null
	wait 2>/dev/null
}
trap stop_busy EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < busy; i++)); do
	sh -c 'while :; do :; done' &
	pids+=($!)
done
rc=0
for ((r = 1; r <= rounds; r++)); do
	echo "== check-loaded: round $r of $rounds, $busy busy loops"
	$make check TESTS="$*" || rc=1
	[ -f test-suite.log ] && cp test-suite.log "test-suite-round$r.log"
done
[ "$rc" = 0 ] && echo "== check-loaded: $rounds rounds passed" ||
	echo "== check-loaded: a round failed (see test-suite-round*.log)"
exit $rc
