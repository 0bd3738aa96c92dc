#!/bin/bash
# tests/run/unbuffered.sh - a rank's printf line reaches smddp-run's output
# before the rank exits: through a pseudo-terminal when smddp-run's stdout is
# a terminal, or always with --unbuffered (which also sets PYTHONUNBUFFERED=1);
# on a terminal, a rank's stderr is one too, and its progress line ("\r")
# shows as it is redrawn
. "$top_srcdir/tests/run/lib.sh"
unset PYTHONUNBUFFERED

# wait_line FILE LINE: FILE has LINE within 20 s
wait_line() {
	local i
	for ((i = 0; i < 200; i++)); do
		grep -qxF -- "$2" "$1" && return 0
		sleep 0.1
	done
	return 1
}

# ---- --unbuffered, stdout a file: rankprog's printf (no fflush) shows while it sleeps
start_bg timeout 60 "$RUN" -n 2 --unbuffered "$PROG" stdio out "hello from printf" pid "$T" sleep 50 \
	>"$T/out" 2>"$T/err"
b=$BG
wait_files 2 "$T/pid"
wait_line "$T/out" "[0] hello from printf" && wait_line "$T/out" "[1] hello from printf" ||
	fail "--unbuffered: the lines did not come while the ranks ran: $(cat "$T/out" "$T/err")"
for p in $(pids_in "$T"/pid.*); do
	is_alive "$p" || fail "--unbuffered: rank $p is gone: the line came at its exit"
done
kill -TERM "$(pgrep -P "$b" -x smddp-run)"
wait_bg "$b" 30
rm -f "$T"/pid.*
echo "ok: --unbuffered: the line before the rank's exit"

# ---- without it (stdout a file, not a terminal) stdio holds the line until
# the rank exits: why the option exists
start_bg timeout 60 "$RUN" -n 2 "$PROG" stdio out "held back" pid "$T" sleep 3 >"$T/out" 2>"$T/err"
b=$BG
wait_files 2 "$T/pid"
sleep 0.5
! grep -q 'held back' "$T/out" ||
	fail "without --unbuffered, stdio wrote a pipe's line at once: the test proves nothing"
wait_bg "$b" 30
[ "$RC" -eq 0 ] && grep -qxF "[0] held back" "$T/out" || fail "the held line was lost at exit: $(cat "$T/out")"
rm -f "$T"/pid.*

# ---- what a rank sees: stdout a terminal, stderr still a pipe; '\n' stays '\n'
out=$(timeout 60 "$RUN" -n 2 --unbuffered sh -c \
	'[ -t 1 ] && echo out-tty || echo out-pipe; [ -t 2 ] && echo err-tty >&2 || echo err-pipe >&2; printf "a\nb"' \
	2>"$T/err") || fail "--unbuffered: exit status $?"
[ "$(grep -c $'\r' <<<"$out")" -eq 0 ] || fail "--unbuffered: carriage returns in: $(od -c <<<"$out" | head)"
[ "$(sort <<<"$out" | tr '\n' '|')" = "[0] a|[0] b|[0] out-tty|[1] a|[1] b|[1] out-tty|" ] ||
	fail "--unbuffered: stdout: $out"
[ "$(sort "$T/err" | tr '\n' '|')" = "[0] err-pipe|[1] err-pipe|" ] || fail "--unbuffered: stderr: $(cat "$T/err")"

# ---- nothing is lost when a rank writes much and exits at once
timeout 60 "$RUN" -n 3 --unbuffered "$PROG" lines 2000 300 >"$T/lines" 2>"$T/err" ||
	fail "--unbuffered lines: exit status $?: $(cat "$T/err")"
[ "$(wc -l <"$T/lines")" -eq 6000 ] || fail "--unbuffered lines: $(wc -l <"$T/lines") lines, not 6000"
for r in 0 1 2; do
	[ "$(grep -c "^\[$r\] $r [0-9]* x\{300\}$" "$T/lines")" -eq 2000 ] || fail "--unbuffered: rank $r lost lines"
done

# ---- one rank: no tags, still line by line
start_bg timeout 60 "$RUN" -n 1 --unbuffered "$PROG" stdio out "just me" pid "$T" sleep 50 >"$T/out" 2>"$T/err"
b=$BG
wait_files 1 "$T/pid"
wait_line "$T/out" "just me" || fail "--unbuffered -n 1: $(cat "$T/out" "$T/err")"
kill -TERM "$(pgrep -P "$b" -x smddp-run)"
wait_bg "$b" 30
rm -f "$T"/pid.*
echo "ok: --unbuffered: what ranks see, nothing lost, one rank"

# ---- PYTHONUNBUFFERED: set by --unbuffered, the user's value kept, else unset
out=$(timeout 60 "$RUN" -n 1 --unbuffered "$PROG" env PYTHONUNBUFFERED) || fail "PYTHONUNBUFFERED: $?"
[ "$out" = "PYTHONUNBUFFERED=1" ] || fail "--unbuffered: $out"
out=$(PYTHONUNBUFFERED=0 timeout 60 "$RUN" -n 1 --unbuffered "$PROG" env PYTHONUNBUFFERED) || fail "PYTHONUNBUFFERED: $?"
[ "$out" = "PYTHONUNBUFFERED=0" ] || fail "--unbuffered with PYTHONUNBUFFERED=0: $out"
out=$(timeout 60 "$RUN" -n 1 --unbuffered --env PYTHONUNBUFFERED= "$PROG" env PYTHONUNBUFFERED) || fail "PYTHONUNBUFFERED: $?"
[ "$out" = "PYTHONUNBUFFERED=" ] || fail "--unbuffered --env PYTHONUNBUFFERED=: $out"
out=$(timeout 60 "$RUN" -n 1 "$PROG" env PYTHONUNBUFFERED) || fail "PYTHONUNBUFFERED: $?"
[ "$out" = "PYTHONUNBUFFERED unset" ] || fail "without --unbuffered: $out"
out=$("$RUN" -n 2 --unbuffered --dry-run prog) || fail "--dry-run: $?"
grep -qx 'export PYTHONUNBUFFERED=1' <<<"$out" || fail "--dry-run does not show PYTHONUNBUFFERED: $out"
echo "ok: PYTHONUNBUFFERED"

# ---- smddp-run on a terminal: the ranks get one too, without asking
if command -v script >/dev/null 2>&1; then
	timeout 60 script -qec "$RUN -n 2 sh -c '[ -t 1 ] && echo out-tty || echo out-pipe'" /dev/null \
		>"$T/tty" 2>&1 </dev/null || fail "on a terminal: exit status $?: $(cat "$T/tty")"
	[ "$(tr -d '\r' <"$T/tty" | sort | tr '\n' '|')" = "[0] out-tty|[1] out-tty|" ] ||
		fail "on a terminal: $(cat "$T/tty")"
	echo "ok: on a terminal, the ranks' stdout is one"

	# and their stderr: a progress line ("...\r") shows while the rank works
	printf '%s\n' "printf 'progress 1\\r' >&2" 'sleep 3' '[ -t 2 ] && echo err-tty || echo err-pipe' \
		>"$T/progress.sh"
	start_bg timeout 60 script -qec "$RUN -n 2 sh $T/progress.sh" /dev/null >"$T/tty2" 2>&1 </dev/null
	b=$BG
	for ((i = 0; i < 100; i++)); do
		grep -qF $'[1] progress 1\r' "$T/tty2" && grep -qF $'[0] progress 1\r' "$T/tty2" && break
		sleep 0.1
	done
	grep -qF $'[0] progress 1\r' "$T/tty2" && ! grep -q 'err-' "$T/tty2" ||
		fail "on a terminal: the progress line did not come while the ranks ran: $(od -c "$T/tty2" | head)"
	wait_bg "$b" 30
	[ "$(grep -o '\[[01]\] err-tty' "$T/tty2" | sort -u | wc -l)" -eq 2 ] ||
		fail "on a terminal: the ranks' stderr is not one: $(od -c "$T/tty2" | head -20)"
	echo "ok: on a terminal, the ranks' stderr is one, and a progress line shows"

	# a progress line's erase ("\r\033[K", at the start and at the end) shows
	# nothing, so it goes untagged: no "[R] " left behind, no empty line added
	printf '%s\n' "printf '\\r\\033[Kworking\\r\\033[K' >&2" >"$T/erase.sh"
	timeout 60 script -qec "$RUN -n 2 sh $T/erase.sh" /dev/null >"$T/tty3" 2>&1 </dev/null ||
		fail "erase: exit status $?: $(od -c "$T/tty3" | head)"
	for r in 0 1; do
		grep -qF "[$r] "$'\033[Kworking' "$T/tty3" && [ "$(grep -o "\[$r\] " "$T/tty3" | wc -l)" -eq 1 ] ||
			fail "erase: rank $r: $(od -c "$T/tty3" | head -20)"
	done
	! grep -q $'^\033\[K\r*$' "$T/tty3" || fail "erase: a line added: $(od -c "$T/tty3" | head -20)"
	echo "ok: on a terminal, a progress line's erase leaves no tag behind"
else
	echo "skip: on a terminal: script(1) is not installed"
fi
exit 0
