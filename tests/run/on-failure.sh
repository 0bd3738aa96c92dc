#!/bin/bash
# tests/run/on-failure.sh - --on-failure continue: a rank killed or failing
# leaves the others running to their end; the job fails only if none exits 0
. "$top_srcdir/tests/run/lib.sh"

# rank 1 is SIGKILLed at once; the others sleep 2 s and finish: 0, and both spoke
rc=0
t0=$(now_ms)
out=$(timeout 60 "$RUN" -n 3 --grace 0 --on-failure continue "$PROG" pid "$T" kill-if 1 9 \
	sleep 2 out "finished" 2>"$T/err") || rc=$?
dt=$(($(now_ms) - t0))
[ "$rc" -eq 0 ] || fail "continue: exit status $rc, not 0: $(cat "$T/err")"
[ "$(sort <<<"$out" | tr '\n' '|')" = "[0] finished|[2] finished|" ] ||
	fail "continue: the survivors did not finish: $out"
[ "$dt" -ge 2000 ] || fail "continue: ended after ${dt} ms, before the survivors' sleep"
pid1=$(cat "$T/pid.1")
# (the others may not all be started yet when rank 1 dies: 1 or 2 go on then)
grep -Exq "smddp-run: rank 1 \(pid $pid1\) was killed by signal 9 \(Killed\); the other (1 rank goes|2 ranks go) on \(--on-failure continue\)" "$T/err" ||
	fail "continue: no line for the lost rank: $(cat "$T/err")"
grep -Fxq "smddp-run: 1 rank failed and the job went on without it (--on-failure continue); 2 exited 0; the first failure: rank 1 was killed by signal 9 (Killed)" "$T/err" ||
	fail "continue: no summary: $(cat "$T/err")"
expect_dead 0 $(pids_in "$T"/pid.*)

# the default still stops the job at the first failure
rc=0
t0=$(now_ms)
timeout 60 "$RUN" -n 3 --grace 0 "$PROG" kill-if 1 9 sleep 30 >/dev/null 2>"$T/err2" || rc=$?
dt=$(($(now_ms) - t0))
[ "$rc" -eq 137 ] || fail "stop: exit status $rc, not 137"
[ "$dt" -lt 20000 ] || fail "stop: the others were not stopped: ${dt} ms"
rc=0
timeout 60 "$RUN" -n 3 --grace 0 --on-failure stop "$PROG" kill-if 1 9 sleep 30 \
	>/dev/null 2>"$T/err2" || rc=$?
[ "$rc" -eq 137 ] || fail "--on-failure stop: exit status $rc, not 137"

# every rank fails: the first failure's status
rc=0
timeout 60 "$RUN" -n 2 --on-failure continue "$PROG" exit-if 1 3 sleep 1 exit-if 0 5 \
	>/dev/null 2>"$T/err3" || rc=$?
[ "$rc" -eq 3 ] || fail "all failed: exit status $rc, not 3: $(cat "$T/err3")"
grep -Fq "no rank exited 0: the job failed (--on-failure continue); the first failure: rank 1 exited with status 3" "$T/err3" ||
	fail "all failed: no summary: $(cat "$T/err3")"

# --timeout still ends a job that goes on
rc=0
timeout 60 "$RUN" -n 2 --grace 0 --timeout 2 --on-failure continue "$PROG" exit-if 1 3 \
	sleep 30 >/dev/null 2>"$T/err4" || rc=$?
[ "$rc" -eq 124 ] || fail "timeout: exit status $rc, not 124: $(cat "$T/err4")"

# bad values, and mpirun (which stops the job itself) refused
rc=0
"$RUN" -n 2 --on-failure maybe true 2>"$T/err5" || rc=$?
[ "$rc" -eq 2 ] && grep -Fq "invalid --on-failure 'maybe': expected stop or continue" "$T/err5" ||
	fail "bad value: exit $rc: $(cat "$T/err5")"
rc=0
"$RUN" --hosts a:1,b:1 --on-failure continue true 2>"$T/err6" || rc=$?
[ "$rc" -eq 2 ] && grep -Fq -- "--on-failure continue: only for the ranks smddp-run starts itself" "$T/err6" ||
	fail "mpirun: exit $rc: $(cat "$T/err6")"
exit 0
