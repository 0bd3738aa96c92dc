#!/bin/bash
# tests/run/tty.sh - ranks and smddp-run's terminal: setting its modes and
# writing under "stty tostop" work (SIGTTOU ignored); a rank that reads it is
# stopped by SIGTTIN, named, and the job fails with 149 instead of hanging;
# a rank paused by SIGSTOP is named and waited for
. "$top_srcdir/tests/run/lib.sh"

command -v script >/dev/null 2>&1 || skip "no script(1) (util-linux; Debian: bsdutils)"

# on_tty OUT SCRIPT: runs SCRIPT (a file) with a pseudo-terminal as its
# controlling terminal and stdio; its output, less the '\r's, in OUT; sets RC
on_tty() {
	RC=0
	timeout 60 script -qec "bash $2" /dev/null </dev/null >"$1.raw" 2>&1 || RC=$?
	tr -d '\r' <"$1.raw" >"$1"
}

# tcsetattr() from a rank (its group is not the terminal's foreground one)
cat >"$T/modes.sh" <<END
"$RUN" -n 1 sh -c 'echo \$\$ >"$T/pid.0"; stty -echo </dev/tty && echo done'
END
on_tty "$T/modes" "$T/modes.sh"
[ "$RC" -eq 0 ] || fail "stty from a rank: exit status $RC: $(cat "$T/modes")"
grep -qx done "$T/modes" || fail "stty from a rank: $(cat "$T/modes")"

# a write to the terminal under tostop, untagged (straight to the terminal)
cat >"$T/tostop.sh" <<END
stty tostop
"$RUN" -n 1 sh -c 'echo \$\$ >"$T/pid.0"; echo hi'
END
on_tty "$T/tostop" "$T/tostop.sh"
[ "$RC" -eq 0 ] || fail "tostop: exit status $RC: $(cat "$T/tostop")"
grep -qx hi "$T/tostop" || fail "tostop: $(cat "$T/tostop")"
rm -f "$T"/pid.*

# rank 0 reads the terminal: SIGTTIN stops it; the job fails, nothing is left
cat >"$T/ttin.sh" <<END
"$RUN" -n 2 sh -c 'echo \$\$ >"$T/pid.\$RANK"
	if [ "\$RANK" = 0 ]; then read x </dev/tty; echo "read \$x"; fi
	exec sleep 50'
END
t0=$(now_ms)
on_tty "$T/ttin" "$T/ttin.sh"
[ "$RC" -eq 149 ] || fail "SIGTTIN: exit status $RC, not 149: $(cat "$T/ttin")"
[ $(($(now_ms) - t0)) -lt 40000 ] || fail "SIGTTIN: the job was not stopped before the grace period ended"
pid0=$(cat "$T/pid.0")
# ("; stopping 1 other rank" follows when rank 1 had started by then: on a
# loaded machine rank 0 may stop first)
grep -Fq "smddp-run: rank 0 (pid $pid0) was stopped by SIGTTIN (it read from the terminal, which smddp-run's ranks do not own; give it stdin from a file)" \
	"$T/ttin" || fail "SIGTTIN: no message naming rank 0: $(cat "$T/ttin")"
expect_dead 5 $(pids_in "$T"/pid.*)
rm -f "$T"/pid.*

# SIGSTOP from outside is a pause: said, waited for, resumed by SIGCONT
start_bg "$RUN" -n 2 "$PROG" pid "$T" waitn "$T" 2 sleep 3 2>"$T/stop.err"
launcher=$BG
wait_files 2 "$T/pid"
pid1=$(cat "$T/pid.1")
kill -STOP "$pid1"
for ((i = 0; i < 300; i++)); do
	grep -q 'was stopped' "$T/stop.err" && break
	sleep 0.1
done
grep -Fxq "smddp-run: rank 1 (pid $pid1) was stopped by signal 19 (Stopped (signal)); the job waits for it ('kill -CONT $pid1' resumes it)" \
	"$T/stop.err" || fail "SIGSTOP: $(cat "$T/stop.err")"
is_alive "$launcher" || fail "SIGSTOP: smddp-run did not wait for the stopped rank"
kill -CONT "$pid1"
wait_bg "$launcher" 60
[ "$RC" -eq 0 ] || fail "SIGSTOP, then SIGCONT: exit status $RC: $(cat "$T/stop.err")"
exit 0
