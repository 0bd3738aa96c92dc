#!/bin/bash
# tests/run/sigterm.sh - SIGTERM, SIGINT, SIGHUP, SIGQUIT to smddp-run reach every
# rank; smddp-run then dies by the same signal (exits 131 for SIGQUIT)
. "$top_srcdir/tests/run/lib.sh"

# Signals ignored where this test was started (a CI job run in the
# background of a non-interactive shell ignores SIGINT and SIGQUIT, and
# nohup SIGHUP) would stay ignored in the launcher: reset them.
DFL="env --default-signal=HUP,INT,QUIT,TERM"
for sig in 15 2 1 3; do
	d="$T/$sig"
	mkdir "$d"
	start_bg $DFL "$RUN" -n 3 --grace 20 "$PROG" catch "$sig" "$d" pid "$d" sleep 50
	launcher=$BG
	wait_files 3 "$d/pid"
	kill -"$sig" "$launcher"
	wait_bg "$launcher" 30
	[ "$RC" -eq $((128 + sig)) ] || fail "signal $sig: exit status $RC, not $((128 + sig))"
	for r in 0 1 2; do
		[ -f "$d/got.$r" ] || fail "signal $sig did not reach rank $r"
	done
	expect_dead 0 $(pids_in "$d"/pid.*)
	rm -f "$d"/pid.*
done

# Ctrl-Z (SIGTSTP) stops the ranks with smddp-run; SIGCONT resumes them.
rm -f "$T"/pid.*
start_bg $DFL "$RUN" -n 2 "$PROG" pid "$T" sleep 50
launcher=$BG
wait_files 2 "$T/pid"
pids=$(pids_in "$T"/pid.*)
state() { sed -n 's/^[0-9]* (.*) \(.\).*/\1/p' "/proc/$1/stat"; }
# all_in_state S PID...: within 10 s
all_in_state() {
	local want=$1 i p ok
	shift
	for ((i = 0; i < 100; i++)); do
		ok=1
		for p in "$@"; do
			[ "$(state "$p")" = "$want" ] || ok=0
		done
		[ "$ok" = 1 ] && return 0
		sleep 0.1
	done
	return 1
}
kill -TSTP "$launcher"
all_in_state T "$launcher" $pids || fail "SIGTSTP: not all stopped: $(for p in $launcher $pids; do state $p; done)"
kill -CONT "$launcher"
all_in_state S "$launcher" $pids || fail "SIGCONT: not all resumed: $(for p in $launcher $pids; do state $p; done)"
kill -TERM "$launcher"
wait_bg "$launcher" 30
[ "$RC" -eq 143 ] || fail "after SIGCONT: exit status $RC"
expect_dead 0 $pids
rm -f "$T"/pid.*

# A signal ignored on entry (SIGHUP under nohup) stays ignored.
start_bg nohup "$RUN" -n 2 "$PROG" catch 1 "$T" pid "$T" sleep 50
launcher=$BG
wait_files 2 "$T/pid"
kill -HUP "$launcher"
sleep 1
is_alive "$launcher" || fail "SIGHUP ignored on entry: smddp-run died"
[ ! -e "$T/got.0" ] && [ ! -e "$T/got.1" ] || fail "SIGHUP ignored on entry was forwarded"
kill -TERM "$launcher"
wait_bg "$launcher" 30
[ "$RC" -eq 143 ] || fail "SIGHUP ignored on entry, then SIGTERM: exit status $RC"
expect_dead 0 $(pids_in "$T"/pid.*)
rm -f "$T"/pid.*

# A second signal does not wait for the grace period.
start_bg $DFL "$RUN" -n 2 --grace 50 "$PROG" ignore 15 pid "$T" sleep 50
launcher=$BG
wait_files 2 "$T/pid"
t0=$(now_ms)
kill -TERM "$launcher"
sleep 0.5
kill -TERM "$launcher"
wait_bg "$launcher" 30
[ "$RC" -eq 143 ] || fail "double SIGTERM: exit status $RC"
[ $(($(now_ms) - t0)) -lt 20000 ] || fail "double SIGTERM waited for the grace period"
expect_dead 0 $(pids_in "$T"/pid.*)
exit 0
