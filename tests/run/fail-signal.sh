#!/bin/bash
# tests/run/fail-signal.sh - a rank killed by SIGKILL: exit 137, summary names
# the rank and the signal, the other ranks are stopped
. "$top_srcdir/tests/run/lib.sh"

rc=0
timeout 60 "$RUN" -n 3 "$PROG" pid "$T" waitn "$T" 3 kill-if 1 9 sleep 50 \
	>"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 137 ] || fail "exit status $rc, not 137: $(cat "$T/err")"
pid1=$(cat "$T/pid.1")
grep -Fxq "smddp-run: rank 1 (pid $pid1) was killed by signal 9 (Killed); stopping 2 other ranks" "$T/err" ||
	fail "no summary line: $(cat "$T/err")"
[ "$(grep -c '^smddp-run:' "$T/err")" -eq 1 ] || fail "more than one message: $(cat "$T/err")"
expect_dead 0 $(pids_in "$T"/pid.*)

# SIGSEGV (core dumps off): 139
rc=0
(ulimit -c 0; timeout 60 "$RUN" -n 2 "$PROG" kill-if 0 11 sleep 50 2>"$T/err2") || rc=$?
[ "$rc" -eq 139 ] || fail "SIGSEGV: exit status $rc, not 139"
grep -Eq '^smddp-run: rank 0 \(pid [0-9]+\) was killed by signal 11 \(' "$T/err2" ||
	fail "SIGSEGV: $(cat "$T/err2")"
exit 0
