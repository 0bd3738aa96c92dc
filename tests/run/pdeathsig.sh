#!/bin/bash
# tests/run/pdeathsig.sh - smddp-run killed by SIGKILL: its ranks die too
. "$top_srcdir/tests/run/lib.sh"

start_bg "$RUN" -n 3 "$PROG" pid "$T" sleep 50
launcher=$BG
wait_files 3 "$T/pid"
pids=$(pids_in "$T"/pid.*)
for p in $pids; do
	is_alive "$p" || fail "rank $p died early"
done
kill -KILL "$launcher"
wait_bg "$launcher" 10
[ "$RC" -eq 137 ] || fail "smddp-run: exit status $RC, not 137"
expect_dead 10 $pids
exit 0
