#!/bin/bash
# tests/run/fail-exit.sh - a rank exits 3: smddp-run says so once, stops the
# others (and their children), and exits 3
. "$top_srcdir/tests/run/lib.sh"

t0=$(now_ms)
rc=0
timeout 60 "$RUN" -n 4 --grace 10 "$PROG" child "$T" pid "$T" waitn "$T" 4 err "last words" exit-if 2 3 sleep 50 \
	>"$T/out" 2>"$T/err" || rc=$?
dt=$(($(now_ms) - t0))
[ "$rc" -eq 3 ] || fail "exit status $rc, not 3: $(cat "$T/err")"
# the others die of SIGTERM at once, long before their sleep or the grace period ends
[ "$dt" -lt 20000 ] || fail "the other ranks were not stopped at once: ${dt} ms"
pid2=$(cat "$T/pid.2")
grep -Fxq "smddp-run: rank 2 (pid $pid2) exited with status 3; stopping 3 other ranks" "$T/err" ||
	fail "no summary line: $(cat "$T/err")"
[ "$(grep -c '^smddp-run:' "$T/err")" -eq 1 ] || fail "more than one message: $(cat "$T/err")"
# the summary comes after what the rank said last
[ "$(grep -n -e '^\[2\] last words$' -e '^smddp-run:' "$T/err" | cut -d: -f2- | tr '\n' '|')" = \
  "[2] last words|smddp-run: rank 2 (pid $pid2) exited with status 3; stopping 3 other ranks|" ] ||
	fail "summary out of order: $(cat "$T/err")"
# smddp-run waits for all of them before it exits: no delay allowed here
expect_dead 0 $(pids_in "$T"/pid.* "$T"/child.*)
[ "$(ls "$T"/pid.* | wc -l)" -eq 4 ] && [ "$(ls "$T"/child.* | wc -l)" -eq 4 ] || fail "pid files missing"

# one rank: no "stopping" clause
rc=0
timeout 60 "$RUN" -n 1 "$PROG" exit-if 0 7 2>"$T/err1" || rc=$?
[ "$rc" -eq 7 ] || fail "-n 1: exit status $rc, not 7"
grep -Eq '^smddp-run: rank 0 \(pid [0-9]+\) exited with status 7$' "$T/err1" || fail "-n 1: $(cat "$T/err1")"

# a rank that ends early with 0 does not stop the others
rc=0
out=$(timeout 60 "$RUN" -n 3 "$PROG" exit-if 0 0 sleep 1 out "still here" 2>"$T/err0") || rc=$?
[ "$rc" -eq 0 ] || fail "early exit 0: exit status $rc: $(cat "$T/err0")"
[ "$(sort <<<"$out" | tr '\n' '|')" = "[1] still here|[2] still here|" ] || fail "early exit 0: $out"

# all ranks succeed: 0 and not a word
rc=0
timeout 60 "$RUN" -n 3 "$PROG" out ok >/dev/null 2>"$T/err0" || rc=$?
[ "$rc" -eq 0 ] || fail "success: exit status $rc"
[ ! -s "$T/err0" ] || fail "success: unexpected stderr: $(cat "$T/err0")"
exit 0
