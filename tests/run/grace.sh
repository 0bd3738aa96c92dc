#!/bin/bash
# tests/run/grace.sh - a rank that ignores SIGTERM gets SIGKILL after --grace
. "$top_srcdir/tests/run/lib.sh"

t0=$(now_ms)
rc=0
timeout 60 "$RUN" -n 3 --grace 2 "$PROG" ignore 15 pid "$T" waitn "$T" 3 exit-if 1 5 sleep 50 \
	2>"$T/err" || rc=$?
dt=$(($(now_ms) - t0))
[ "$rc" -eq 5 ] || fail "exit status $rc, not 5: $(cat "$T/err")"
expect_dead 0 $(pids_in "$T"/pid.*)
[ "$dt" -ge 1900 ] || fail "SIGKILL came before the grace period: ${dt} ms"
[ "$dt" -lt 9000 ] || fail "SIGKILL came late: ${dt} ms"

# --grace 0: SIGKILL at once
rm -f "$T"/pid.*
t0=$(now_ms)
rc=0
timeout 60 "$RUN" -n 2 --grace 0 "$PROG" ignore 15 pid "$T" waitn "$T" 2 exit-if 0 4 sleep 50 \
	2>"$T/err" || rc=$?
dt=$(($(now_ms) - t0))
[ "$rc" -eq 4 ] || fail "--grace 0: exit status $rc, not 4"
expect_dead 0 $(pids_in "$T"/pid.*)
[ "$dt" -lt 5000 ] || fail "--grace 0 took ${dt} ms"
exit 0
