#!/bin/bash
# tests/run/tag.sh - "[R] " prefixes, stdout/stderr kept apart, lines kept whole
. "$top_srcdir/tests/run/lib.sh"

# ---- prefixes; stderr to stderr; a last line without '\n' still comes out
timeout 60 "$RUN" -n 2 "$PROG" out hello err oops part tail >"$T/out" 2>"$T/err" ||
	fail "smddp-run failed: $?"
[ "$(sort "$T/out")" = "$(printf '[0] hello\n[0] tail\n[1] hello\n[1] tail')" ] ||
	fail "stdout: $(cat "$T/out")"
[ "$(sort "$T/err")" = "$(printf '[0] oops\n[1] oops')" ] || fail "stderr: $(cat "$T/err")"
grep -q '^\[0\] hello' "$T/out" && grep -q '^\[0\] tail' "$T/out" || fail "rank 0 lost"
[ "$(grep -n '^\[0\]' "$T/out" | cut -d: -f1 | tr '\n' ' ')" != "" ] || fail "no rank 0"
# per-rank order is kept
[ "$(grep '^\[1\]' "$T/out" | tr '\n' ' ')" = "[1] hello [1] tail " ] || fail "order: $(cat "$T/out")"

# ---- tagging off, on, and the default for one rank
out=$(timeout 60 "$RUN" -n 2 --no-tag-output "$PROG" out plain) || fail "--no-tag-output failed"
[ "$out" = "$(printf 'plain\nplain')" ] || fail "--no-tag-output: $out"
out=$(timeout 60 "$RUN" -n 1 --tag-output "$PROG" out one) || fail "--tag-output failed"
[ "$out" = "[0] one" ] || fail "--tag-output -n 1: $out"
out=$(timeout 60 "$RUN" -n 1 "$PROG" out one) || fail "-n 1 failed"
[ "$out" = "one" ] || fail "-n 1 default: $out"

# check_lines FILE NRANKS N LEN: every line whole, N per rank, in order
check_lines() {
	awk -v nr="$2" -v n="$3" -v len="$4" '
	BEGIN { x = sprintf("%*s", len, ""); gsub(/ /, "x", x) }
	{
		if (!match($0, /^\[[0-9]+\] /)) { print "bad line " NR ": " substr($0, 1, 80); bad = 1; next }
		r = substr($0, 2, RLENGTH - 3) + 0
		want = r " " (next_k[r] + 0) " " x
		if (substr($0, RLENGTH + 1) != want) { print "broken line " NR " of rank " r ": " substr($0, 1, 80); bad = 1 }
		next_k[r]++
	}
	END {
		for (r = 0; r < nr; r++) if (next_k[r] + 0 != n) { print "rank " r ": " next_k[r] " lines, not " n; bad = 1 }
		exit bad
	}' "$1" || fail "lines of $1 are not whole"
}

# ---- many ranks writing at once: no line is cut or interleaved
timeout 60 "$RUN" -n 4 "$PROG" lines 3000 300 >"$T/many" || fail "many lines: $?"
check_lines "$T/many" 4 3000 300

# ---- lines longer than PIPE_BUF, stdout and stderr on one file
timeout 60 "$RUN" -n 3 "$PROG" lines 200 9000 elines 200 9000 >"$T/both" 2>&1 ||
	fail "long lines: $?"
# each rank printed "R K xxx..." for K < 200 once on stdout, once on stderr
x=$(printf '%9000s' '' | tr ' ' x)
bad=$(grep -cv "^\[\([0-2]\)\] \1 [0-9]* $x\$" "$T/both")
[ "$bad" -eq 0 ] || fail "$bad long lines were cut or mixed"
[ "$(wc -l <"$T/both")" -eq 1200 ] || fail "long lines: $(wc -l <"$T/both") lines, not 1200"
[ "$(cut -c1-12 "$T/both" | sort | uniq -c | awk '$1 != 2' | wc -l)" -eq 0 ] ||
	fail "long lines: some line is missing or doubled"

# ---- a slow reader: smddp-run must neither lose lines nor deadlock
n=$(timeout 60 "$RUN" -n 2 "$PROG" lines 20000 200 | { sleep 2; cat; } | wc -l) || fail "slow reader"
[ "$n" -eq 40000 ] || fail "slow reader got $n lines, not 40000"

# ---- a reader that goes away: the job still ends, ranks are not stuck
timeout 60 "$RUN" -n 2 "$PROG" lines 100000 100 | head -n 1 >/dev/null
rc=${PIPESTATUS[0]}
[ "$rc" -ne 124 ] || fail "smddp-run hung after its reader went away"

# standard input goes to rank 0 only (the others read /dev/null)
out=$(printf 'in 1\nin 2\n' | timeout 60 "$RUN" -n 3 cat) || fail "stdin: exit status $?"
[ "$out" = "$(printf '[0] in 1\n[0] in 2')" ] || fail "stdin: $out"
exit 0
