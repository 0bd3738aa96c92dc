#!/bin/bash
# tests/bench/jsonfile.sh - machine-readable output through smddp-run: rank 0 alone writes
# JSON, --baseline and scripts/bench-median.py take smddp-run's tagged lines back, and
# -J FILE writes untagged lines beside the table
. "$top_srcdir/tests/bench/lib.sh"

command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
args=(-b 64K -e 1M -f 4 -n 2 -w 1 -c 0)

# ---- smddp-run's default for 2 ranks tags the lines; only rank 0 prints
rc=0
timeout 120 "$RUN" -n 2 "$BENCH" "${args[@]}" --json >"$T/tagged.jsonl" 2>"$T/err" </dev/null || rc=$?
[ "$rc" -eq 0 ] || fail "--json under smddp-run: exit status $rc: $(cat "$T/err")"
[ "$(grep -c '^\[0\] {' "$T/tagged.jsonl")" -eq 3 ] && [ "$(wc -l <"$T/tagged.jsonl")" -eq 3 ] ||
	fail "--json under smddp-run: not 3 lines of rank 0: $(cat "$T/tagged.jsonl")"

# ... and --baseline reads them as they are: a zero baseline passes, a high one fails
sed 's/"\(oop\|ip\)_busbw_gbps":[^,]*/"\1_busbw_gbps":0/g' "$T/tagged.jsonl" >"$T/low.jsonl"
sed 's/"\(oop\|ip\)_busbw_gbps":[^,]*/"\1_busbw_gbps":1e9/g' "$T/tagged.jsonl" >"$T/high.jsonl"
grep -q '^\[0\] {.*"oop_busbw_gbps":0,' "$T/low.jsonl" || fail "sed: $(cat "$T/low.jsonl")"
bench 2 "${args[@]}" --baseline "$T/low.jsonl"
[ "$rc" -eq 0 ] || fail "tagged zero baseline: exit status $rc: $(cat "$T/err")"
bench 2 "${args[@]}" --baseline "$T/high.jsonl"
[ "$rc" -eq 3 ] && grep -q 'below baseline' "$T/err" ||
	fail "tagged high baseline: exit status $rc, not 3: $(cat "$T/err")"
# a tag must be a whole "[R] ": anything else is still not a --json file
sed 's/^\[0\] /[0]/' "$T/low.jsonl" >"$T/bad.jsonl"
bench 2 "${args[@]}" --baseline "$T/bad.jsonl"
[ "$rc" -eq 2 ] || fail "malformed tag: exit status $rc, not 2: $(cat "$T/err")"
echo "ok: --baseline takes smddp-run's tagged --json output"

# ---- the median script too (an MPI row made from ours, since mpirun may be absent)
mkdir "$T/runs"
{ cat "$T/tagged.jsonl"; sed 's/"impl":"smddp"/"impl":"mpi"/' "$T/tagged.jsonl"; } >"$T/runs/run1.json"
out=$(python3 "$top_srcdir/scripts/bench-median.py" "$T/runs" test) ||
	fail "bench-median.py on tagged lines: $out"
[ "$(grep -c '^ *\(65536\|262144\|1048576\) .* 1\.00 ' <<<"$out")" -eq 3 ] ||
	fail "bench-median.py: $out"
echo "mpirun: a log beside the runs" >"$T/runs/mpirun.log"
out=$(python3 "$top_srcdir/scripts/bench-median.py" --lowest "$T/runs" test) ||
	fail "bench-median.py --lowest: $out"
grep -q '^# test: .* of 1 runs$' <<<"$out" || fail "bench-median.py counts a log as a run: $out"
[ "$(grep -c '^ *\(65536\|262144\|1048576\)  oop med 1\.00 min 1\.00   ip med 1\.00 min 1\.00$' <<<"$out")" -eq 3 ] ||
	fail "bench-median.py --lowest: $out"
echo "ok: bench-median.py takes them too"

# ---- -J: the table on stdout, untagged JSON lines in the file, from rank 0 alone
rc=0
timeout 120 "$RUN" -n 2 "$BENCH" "${args[@]}" -J "$T/j.jsonl" >"$T/out" 2>"$T/err" </dev/null || rc=$?
[ "$rc" -eq 0 ] || fail "-J: exit status $rc: $(cat "$T/err")"
grep -q '^\[0\] # Collective test starting' "$T/out" || fail "-J: no table: $(cat "$T/out")"
! grep -q '{' "$T/out" || fail "-J: JSON on stdout: $(cat "$T/out")"
python3 - "$T/j.jsonl" <<'PY' || fail "-J: $(cat "$T/j.jsonl")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["size_bytes"] for r in rows] == [65536, 262144, 1048576], rows
assert all(r["impl"] == "smddp" and r["nranks"] == 2 for r in rows), rows
PY
bench 2 "${args[@]}" --baseline "$T/j.jsonl" --tolerance 100
[ "$rc" -eq 0 ] || fail "-J file as --baseline: exit status $rc: $(cat "$T/err")"

# with --json as well: the same lines in both places; the long spelling
rc=0
timeout 120 "$RUN" -n 2 --no-tag-output "$BENCH" "${args[@]}" --json --json-file="$T/j2.jsonl" \
	>"$T/out" 2>"$T/err" </dev/null || rc=$?
[ "$rc" -eq 0 ] && cmp -s "$T/out" "$T/j2.jsonl" ||
	fail "--json --json-file: exit status $rc: $(diff "$T/out" "$T/j2.jsonl")"

# a file that cannot be created: exit 1 on every rank, one message, no table
rc=0
timeout 120 "$RUN" -n 2 --no-tag-output "$BENCH" "${args[@]}" -J "$T/no/such/dir/x.jsonl" \
	>"$T/out" 2>"$T/err" </dev/null || rc=$?
[ "$rc" -eq 1 ] || fail "-J into a missing directory: exit status $rc, not 1: $(cat "$T/err")"
[ "$(grep -c 'cannot create' "$T/err")" -eq 1 ] || fail "-J: $(cat "$T/err")"
[ ! -s "$T/out" ] || fail "-J failed, yet: $(cat "$T/out")"
echo "ok: -J FILE"
exit 0
