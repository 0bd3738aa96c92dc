#!/bin/bash
# tests/topo/api.sh - the C API on a fixture and errors through it
. "$top_srcdir/tests/topo/lib.sh"
API="$top_builddir/tests/topo/api"

"$API" discover "$SYSROOT/two-socket" >"$T/out" || fail "discover: $(cat "$T/out")"
grep -q '^gpus 2 nics 3 numa 2$' "$T/out" || fail "discover: $(cat "$T/out")"
rc=0
"$API" load "$T/nosuch.json" >"$T/out" || rc=$?
[ "$rc" -eq 1 ] && grep -q "^error 11: $T/nosuch.json: No such file" "$T/out" ||
	fail "load missing: $rc $(cat "$T/out")"
echo '{"schema": 1, "gpus": 3}' >"$T/bad.json"
rc=0
"$API" load "$T/bad.json" >"$T/out" || rc=$?
[ "$rc" -eq 1 ] && grep -q '^error 11: .*gpus: expected an array' "$T/out" ||
	fail "load bad: $rc $(cat "$T/out")"
rc=0
SMDDP_TOPO_FILE="$T/bad.json" "$API" get >"$T/out" || rc=$?
[ "$rc" -eq 1 ] && grep -q '^error 11: SMDDP_TOPO_FILE: ' "$T/out" || fail "get bad: $rc $(cat "$T/out")"

# the library's own copy (sd_topo_shared): made once, from any thread
SHARED="$top_builddir/tests/topo/shared"
"$TOPO" --sysroot "$SYSROOT/two-socket" --json >"$T/ts.json"
out=$(SMDDP_TOPO_FILE="$T/ts.json" "$SHARED") || fail "shared: $out"
[ "$out" = "gpus 2" ] || fail "shared: $out"
out=$(SMDDP_TOPO_FILE="$T/bad.json" "$SHARED") || fail "shared bad: $out"
[[ "$out" == "error 11: SMDDP_TOPO_FILE: $T/bad.json: gpus: expected an array"* ]] || fail "shared bad: $out"
exit 0
