#!/bin/bash
# tests/bench/baseline.sh - --baseline, --tolerance and --min-busbw: exit 3 below the floor
. "$top_srcdir/tests/bench/lib.sh"

args=(-b 1M -e 1M -n 2 -w 1 -c 0)
bench 2 "${args[@]}" --json
[ "$rc" -eq 0 ] || fail "--json: exit status $rc: $(cat "$T/err")"
[ "$(wc -l <"$T/out")" -eq 1 ] || fail "--json: $(cat "$T/out")"
cp "$T/out" "$T/run.json"

# An impossible baseline: every busbw at 1e9 GB/s.
sed -e 's/"oop_busbw_gbps":[^,]*/"oop_busbw_gbps":1e9/' \
    -e 's/"ip_busbw_gbps":[^,]*/"ip_busbw_gbps":1e9/' "$T/run.json" >"$T/high.json"
bench 2 "${args[@]}" --baseline "$T/high.json"
[ "$rc" -eq 3 ] || fail "impossible baseline: exit status $rc, not 3: $(cat "$T/err")"
grep -q 'below baseline' "$T/err" || fail "impossible baseline: $(cat "$T/err")"

# A baseline of 0 GB/s is always met.
sed -e 's/"oop_busbw_gbps":[^,]*/"oop_busbw_gbps":0/' \
    -e 's/"ip_busbw_gbps":[^,]*/"ip_busbw_gbps":0/' "$T/run.json" >"$T/low.json"
bench 2 "${args[@]}" --baseline "$T/low.json" --tolerance 0
[ "$rc" -eq 0 ] || fail "zero baseline: exit status $rc: $(cat "$T/err")"

# A baseline with no size of this run compares nothing: that is a failure too.
bench 2 -b 2M -e 2M -n 1 -w 0 -c 0 --baseline "$T/low.json"
[ "$rc" -eq 3 ] || fail "unmatched baseline: exit status $rc, not 3"

# Not a --json file: a usage error.
echo 'not json' >"$T/bad.json"
bench 2 "${args[@]}" --baseline "$T/bad.json"
[ "$rc" -eq 2 ] || fail "bad baseline: exit status $rc, not 2"
bench 2 "${args[@]}" --baseline "$T/missing.json"
[ "$rc" -eq 2 ] || fail "missing baseline: exit status $rc, not 2"

# --min-busbw applies to sizes of 1 MiB and more.
bench 2 "${args[@]}" --min-busbw 1e9
[ "$rc" -eq 3 ] || fail "--min-busbw 1e9: exit status $rc, not 3"
grep -q 'below --min-busbw' "$T/err" || fail "--min-busbw: $(cat "$T/err")"
bench 2 "${args[@]}" --min-busbw 0
[ "$rc" -eq 0 ] || fail "--min-busbw 0: exit status $rc: $(cat "$T/err")"
exit 0
