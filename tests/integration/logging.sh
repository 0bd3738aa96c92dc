# logging.sh - the library never writes to stdout, even at SMDDP_DEBUG=TRACE; its lines
# go to stderr, or to SMDDP_DEBUG_FILE with %h (host) and %p (pid) expanded.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_TIMEOUT=60 SMDDP_DEBUG=TRACE

t0=$(now)
timeout -k 5 120 "$RUN" -n 2 --no-tag-output --timeout 100 "$CONFORMANCE" --counts 0,7,1001 \
	>"$TDIR/stdout" 2>"$TDIR/stderr"
st=$?
echo "--- smddp-run -n 2 conformance at SMDDP_DEBUG=TRACE -> exit $st in $(since "$t0") s"
echo "    stdout: $(wc -l <"$TDIR/stdout") lines, stderr: $(wc -l <"$TDIR/stderr") lines"
[ "$st" -eq 0 ] && pass "conformance passed at TRACE" || fail "conformance exited $st at TRACE"
# the program's own lines are these; anything else came from the library
others=$(grep -Ev '^(world|split-[a-z-]+|copy-in-thread): count |^SUMMARY rank |^note: |^FAIL |^ok rank ' "$TDIR/stdout")
if [ -n "$others" ]; then
	fail "lines on stdout that the program did not print:"
	head -5 <<<"$others" | sed 's/^/    /'
else
	pass "stdout holds only the program's lines"
fi
if grep -q 'SMDDP TRACE' "$TDIR/stderr"; then
	pass "TRACE lines on stderr"
else
	fail "no 'SMDDP TRACE' line on stderr"
	head -5 "$TDIR/stderr" | sed 's/^/    /'
fi

# SMDDP_DEBUG_FILE: one file per process, named by host and pid
mkdir "$TDIR/logs"
SMDDP_DEBUG_FILE="$TDIR/logs/smddp-%h-%p.log" timeout -k 5 120 "$RUN" -n 2 --timeout 100 \
	"$CONFORMANCE" --counts 7 --skip-split >"$TDIR/stdout2" 2>"$TDIR/stderr2"
st=$?
echo "--- with SMDDP_DEBUG_FILE -> exit $st; files: $(ls "$TDIR/logs" | tr '\n' ' ')"
[ "$st" -eq 0 ] && pass "conformance passed with SMDDP_DEBUG_FILE" || fail "exited $st with SMDDP_DEBUG_FILE"
n=$(ls "$TDIR/logs" | grep -c '^smddp-[^%]\{1,\}-[0-9]\{1,\}\.log$')
if [ "$n" -eq 2 ]; then pass "two log files named by host and pid"; else fail "$n log files named smddp-HOST-PID.log, expected 2"; fi
if cat "$TDIR"/logs/* 2>/dev/null | grep -q 'SMDDP TRACE'; then pass "the files hold TRACE lines"; else fail "no TRACE line in the files"; fi
if grep -q 'SMDDP TRACE' "$TDIR/stderr2"; then fail "TRACE lines on stderr despite SMDDP_DEBUG_FILE"; else pass "stderr is free of the log"; fi
m=$(stat -c %a "$(ls -d "$TDIR"/logs/* | head -1)")
if [ "$m" = 600 ]; then pass "a new log file is private (mode $m)"; else fail "a new log file has mode $m, expected 600"; fi

# SMDDP_DEBUG_FILE naming a symbolic link is refused (O_NOFOLLOW): the log
# goes to stderr with a sentence, and the link's target stays untouched.
: >"$TDIR/target"
ln -s "$TDIR/target" "$TDIR/link.log"
SMDDP_RANK=0 SMDDP_WORLD_SIZE=1 SMDDP_DEBUG=INFO SMDDP_DEBUG_FILE="$TDIR/link.log" timeout -k 5 30 "$FAULT" init \
	>"$TDIR/stdout3" 2>"$TDIR/stderr3"
echo "--- SMDDP_DEBUG_FILE=a symbolic link -> exit $?; stderr: $(head -1 "$TDIR/stderr3")"
if grep -q 'link.log" is a symbolic link' "$TDIR/stderr3"; then pass "the link is refused with a sentence"; else fail "no sentence about the symbolic link on stderr"; fi
if [ ! -s "$TDIR/target" ]; then pass "the link's target stays empty"; else fail "the log went through the link"; fi
if grep -q 'SMDDP INFO' "$TDIR/stderr3"; then pass "the log goes to stderr instead"; else fail "no log lines on stderr"; fi
finish
