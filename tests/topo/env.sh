#!/bin/bash
# tests/topo/env.sh - --env: every variable with its value, source and default
. "$top_srcdir/tests/topo/lib.sh"

topo --env
[ "$rc" -eq 0 ] || fail "--env: exit status $rc: $(cat "$T/err")"
grep -q '^VARIABLE  *VALUE  *SOURCE  *DEFAULT$' "$T/out" || fail "--env: no header: $(head -n 3 "$T/out")"
grep -q '^SMDDP_TIMEOUT  *600  *default  *600$' "$T/out" || fail "--env: $(grep TIMEOUT "$T/out")"
grep -q '^SMDDP_TOPO_FILE  *-  *default  *-$' "$T/out" || fail "--env: $(grep TOPO_FILE "$T/out")"
grep -q '^    seconds any wait' "$T/out" || fail "--env: no help line"
for v in SMDDP_DEBUG SMDDP_CONFIG SMDDP_RANK SMDDP_MASTER_PORT SMDATAPARALLEL_OPTIMIZE_SDP; do
	grep -q "^$v " "$T/out" || fail "--env: $v not listed"
done

rc=0
SMDDP_TIMEOUT=42 SMDDP_RANK=3 timeout 60 "$TOPO" --env >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 0 ] || fail "SMDDP_TIMEOUT=42: exit status $rc: $(cat "$T/err")"
grep -q '^SMDDP_TIMEOUT  *42  *env  *600$' "$T/out" || fail "env value: $(grep TIMEOUT "$T/out")"
grep -q '^SMDDP_RANK  *3  *env ' "$T/out" || fail "env-only value: $(grep SMDDP_RANK "$T/out")"

echo '{"timeout": 77}' >"$T/c.json"
rc=0
SMDDP_CONFIG="$T/c.json" timeout 60 "$TOPO" --env >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 0 ] || fail "config: exit status $rc: $(cat "$T/err")"
grep -q '^SMDDP_TIMEOUT  *77  *config  *600$' "$T/out" || fail "config: $(grep TIMEOUT "$T/out")"

rc=0
SMDDP_TIMEOUT=42 timeout 60 "$TOPO" --env --json >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 0 ] || fail "--env --json: exit status $rc"
# JSON lines: one variable a line
[ "$(grep -c '^{"name":"[A-Z0-9_]*","value":' "$T/out")" -eq "$(grep -c '' "$T/out")" ] || fail "--env --json: $(cat "$T/out")"
if command -v python3 >/dev/null; then
	python3 - "$T/out" <<'X' || fail "--env --json: $(head -n 20 "$T/out")"
import json, sys
v = {}
for line in open(sys.argv[1]):
    p = json.loads(line)
    v[p["name"]] = p
t = v["SMDDP_TIMEOUT"]
assert (t["value"], t["source"], t["default"]) == ("42", "env", "600"), t
assert t["help"]
assert "SMDDP_TOPO_FILE" in v
X
else
	grep -q '^{"name":"SMDDP_TIMEOUT","value":"42","source":"env","default":"600",' "$T/out" ||
		fail "--env --json: $(cat "$T/out")"
fi

# a bad value is the library's error, exit 1
rc=0
SMDDP_TIMEOUT=abc timeout 60 "$TOPO" --env >"$T/out" 2>"$T/err" || rc=$?
runtime_error "SMDDP_TIMEOUT=abc" 'SMDDP_TIMEOUT="abc": expected a positive integer'
exit 0
