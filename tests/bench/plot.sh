#!/bin/bash
# tests/bench/plot.sh - scripts/bench-plot.py draws real --json runs as PNGs and refuses bad input
# The interpreter is $PLOT_PYTHON, else the srcdir's .venv-plot (python3 -m venv
# .venv-plot && .venv-plot/bin/pip install matplotlib), else python3.
. "$top_srcdir/tests/bench/lib.sh"

PY=${PLOT_PYTHON:-}
[ -n "$PY" ] || { [ -x "$top_srcdir/.venv-plot/bin/python" ] && PY=$top_srcdir/.venv-plot/bin/python; }
PY=${PY:-python3}
command -v "$PY" >/dev/null || skip "$PY is not installed"
PLOT="$top_srcdir/scripts/bench-plot.py"

# plot ARGS...: run the script; stdout in $T/pout, stderr in $T/perr, status in $rc.
plot() {
	rc=0
	"$PY" "$PLOT" "$@" >"$T/pout" 2>"$T/perr" </dev/null || rc=$?
}

# expect_usage WHAT PATTERN: exit 2 and PATTERN in the message
expect_usage() {
	[ "$rc" -eq 2 ] || fail "$1: exit status $rc, not 2: $(cat "$T/perr")"
	grep -q -- "$2" "$T/perr" || fail "$1: no '$2' in: $(cat "$T/perr")"
}

# ---- bad input: exit 2 with a message naming the file (before matplotlib is needed)
printf '{"collective":"allreduce"\n' >"$T/broken.json"
plot -o "$T/bad" "$T/broken.json"
expect_usage "broken JSON" "broken.json:1: not a JSON line"
printf '{"collective":"allreduce","size_bytes":8}\n' >"$T/short.json"
plot -o "$T/bad" "$T/short.json"
expect_usage "missing keys" "short.json:1: not a line of smddp-allreduce-bench --json (needs"
: >"$T/empty.json"
plot -o "$T/bad" "$T/empty.json"
expect_usage "empty file" "empty.json: no rows"
plot -o "$T/bad" "$T/no-such.json"
expect_usage "missing file" "cannot read .*no-such.json"
plot --no-such-option "$T/empty.json"
expect_usage "unknown option" "Try 'bench-plot.py --help'"
[ ! -e "$T/bad" ] || fail "bad input, yet $T/bad was made: $(ls "$T/bad")"
plot --help
[ "$rc" -eq 0 ] && grep -q -- '--output-dir' "$T/pout" || fail "--help: exit status $rc: $(cat "$T/pout" "$T/perr")"
echo "ok: bad input and usage errors exit 2 with a message"

# ---- the fixture: real runs, as smddp-run tags them and as -J writes them
args=(--coll allreduce -b 8 -e 1M -f 4 -n 2 -w 1 -c 0)
rc=0
timeout 120 "$RUN" -n 2 "$BENCH" "${args[@]}" --json -J "$T/plain.jsonl" \
	>"$T/tagged.jsonl" 2>"$T/err" </dev/null || rc=$?
[ "$rc" -eq 0 ] || fail "bench --json: exit status $rc: $(cat "$T/err")"
grep -q '^\[0\] {"collective":"allreduce","impl":"smddp"' "$T/tagged.jsonl" ||
	fail "bench --json: not tagged rows of rank 0: $(head -n 3 "$T/tagged.jsonl")"
# the shape of a --compare mpi run without needing mpirun: our rows, then "mpi" rows
{ cat "$T/tagged.jsonl"; sed 's/"impl":"smddp"/"impl":"mpi"/' "$T/tagged.jsonl"; } >"$T/compare.jsonl"

# without matplotlib (a stand-in that fails to import): exit 2, saying so
mkdir -p "$T/nompl/matplotlib"
echo 'raise ImportError("no matplotlib in this test")' >"$T/nompl/matplotlib/__init__.py"
rc=0
PYTHONPATH=$T/nompl "$PY" "$PLOT" -o "$T/nompl-out" "$T/tagged.jsonl" >"$T/pout" 2>"$T/perr" || rc=$?
expect_usage "no matplotlib" "matplotlib cannot be imported by .*pip install matplotlib"
echo "ok: without matplotlib: exit 2 and how to get it"

"$PY" -c 'import matplotlib' 2>/dev/null ||
	skip "matplotlib cannot be imported by $PY (set PLOT_PYTHON, or make $top_srcdir/.venv-plot)"

# png FILE: the PNG signature and more than a blank canvas's bytes
png() {
	[ -f "$1" ] || fail "no $1: $(cat "$T/pout" "$T/perr")"
	[ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
		fail "$1: no PNG signature: $(head -c 8 "$1" | od -An -c)"
	local size
	size=$(wc -c <"$1")
	[ "$size" -gt 8000 ] && [ "$size" -lt 200000 ] || fail "$1: $size bytes"
}

# --compare rows: one chart per place, ours against "Open MPI"
plot -o "$T/charts" -t '{collective} on {nranks}: {ours} vs {anchor}' "$T/compare.jsonl"
[ "$rc" -eq 0 ] || fail "--compare rows: exit status $rc: $(cat "$T/perr")"
for place in oop ip; do
	png "$T/charts/allreduce-2r-float32-sum-$place.png"
	grep -qx "$T/charts/allreduce-2r-float32-sum-$place.png" "$T/pout" ||
		fail "not named on stdout: $(cat "$T/pout")"
done
[ "$(ls "$T/charts" | wc -l)" -eq 2 ] || fail "not 2 charts: $(ls "$T/charts")"
echo "ok: --compare rows: $(wc -c <"$T/charts/allreduce-2r-float32-sum-oop.png") bytes out of place"

# a second file as the anchor, places merged, a prefix
plot -o "$T/charts2" -p before-after- --merge-places --anchor "$T/plain.jsonl" \
	--anchor-label before "$T/tagged.jsonl"
[ "$rc" -eq 0 ] || fail "--anchor: exit status $rc: $(cat "$T/perr")"
png "$T/charts2/before-after-allreduce-2r-float32-sum-oop-ip.png"
[ "$(ls "$T/charts2" | wc -l)" -eq 1 ] || fail "--merge-places: not 1 chart: $(ls "$T/charts2")"
plot -o "$T/charts4" --place ip "$T/compare.jsonl"
[ "$rc" -eq 0 ] && [ "$(ls "$T/charts4")" = allreduce-2r-float32-sum-ip.png ] ||
	fail "--place ip: exit status $rc: $(ls "$T/charts4") $(cat "$T/perr")"
# ... but not beside --compare rows: which one would be the anchor?
plot -o "$T/charts3" --anchor "$T/plain.jsonl" "$T/compare.jsonl"
expect_usage "--anchor beside --compare rows" "draw one anchor at a time"
echo "ok: --anchor FILE, --merge-places, --prefix, --place"
exit 0
