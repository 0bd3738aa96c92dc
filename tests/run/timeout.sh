#!/bin/bash
# tests/run/timeout.sh - --timeout stops the job and exits 124, like timeout(1)
. "$top_srcdir/tests/run/lib.sh"

t0=$(now_ms)
rc=0
timeout 60 "$RUN" -n 3 --timeout 1 "$PROG" pid "$T" sleep 50 2>"$T/err" || rc=$?
dt=$(($(now_ms) - t0))
[ "$rc" -eq 124 ] || fail "exit status $rc, not 124: $(cat "$T/err")"
grep -q '^smddp-run: timeout' "$T/err" || fail "no timeout message: $(cat "$T/err")"
[ "$(grep -c '^smddp-run:' "$T/err")" -eq 1 ] || fail "more than one message: $(cat "$T/err")"
[ "$dt" -ge 900 ] && [ "$dt" -lt 15000 ] || fail "took ${dt} ms"
expect_dead 0 $(pids_in "$T"/pid.*)

# ranks that ignore SIGTERM: still 124, after --grace
rm -f "$T"/pid.*
t0=$(now_ms)
rc=0
timeout 60 "$RUN" -n 2 --timeout 0.5 --grace 1 "$PROG" ignore 15 pid "$T" sleep 50 2>"$T/err" || rc=$?
dt=$(($(now_ms) - t0))
[ "$rc" -eq 124 ] || fail "ignoring SIGTERM: exit status $rc, not 124"
[ "$dt" -ge 1400 ] && [ "$dt" -lt 15000 ] || fail "ignoring SIGTERM: took ${dt} ms"
expect_dead 0 $(pids_in "$T"/pid.*)

# a reader that never reads: --timeout still ends the job (ranks and all)
rm -f "$T"/pid.*
mkfifo "$T/fifo" || fail "mkfifo"
exec 3<>"$T/fifo"   # hold it open, never read it
start_bg "$RUN" -n 2 --timeout 1 --grace 1 "$PROG" pid "$T" lines 1000000 100 >"$T/fifo" 2>"$T/err"
launcher=$BG
t0=$(now_ms)
wait_bg "$launcher" 30
dt=$(($(now_ms) - t0))
exec 3>&-
[ "$RC" -eq 124 ] || fail "stuck reader: exit status $RC, not 124: $(cat "$T/err")"
[ "$dt" -lt 15000 ] || fail "stuck reader: took ${dt} ms"
expect_dead 0 $(pids_in "$T"/pid.*)

# a job that ends in time is not affected
rc=0
timeout 60 "$RUN" -n 2 --timeout 30 "$PROG" out ok >/dev/null 2>"$T/err" || rc=$?
[ "$rc" -eq 0 ] && [ ! -s "$T/err" ] || fail "in time: exit status $rc: $(cat "$T/err")"
exit 0
