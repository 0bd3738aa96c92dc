#!/bin/bash
# tests/topo/expect.sh - --expect: a match exits 0, each difference listed and exit 3
. "$top_srcdir/tests/topo/lib.sh"
TS="$SYSROOT/two-socket"

# its own dump matches, and so does a partial description
topo --sysroot "$TS" --json
cp "$T/out" "$T/self.json"
for e in "$T/self.json" "$D/data/two-socket-matches.json"; do
	topo --sysroot "$TS" --expect "$e"
	[ "$rc" -eq 0 ] || fail "$e: exit status $rc: $(cat "$T/out" "$T/err")"
	grep -q "^This node matches $e\$" "$T/out" || fail "$e: $(cat "$T/out")"
done

# four differences, one line each, then the count
topo --sysroot "$TS" --expect "$D/data/two-socket-differs.json"
[ "$rc" -eq 3 ] || fail "differs: exit status $rc, not 3: $(cat "$T/out" "$T/err")"
for want in \
	'^cpu.cores: expected at least 24, found 8$' \
	'^gpus: expected 4, found 2$' \
	'^gpu_links: expected "NV12" for every pair, found "SYS" for 2 ' \
	'^nics\[1\]: no NIC of this node matches {"name":"eth1","efa":true}$' \
	'^4 differences from .*two-socket-differs.json$'; do
	grep -q "$want" "$T/out" || fail "differs: no line '$want' in: $(cat "$T/out")"
done
[ "$(wc -l <"$T/out")" -eq 5 ] || fail "differs: not 4 lines and the count: $(cat "$T/out")"
# nics[0] (the EFA on node 1) did match: not listed
! grep -q '^nics\[0\]' "$T/out" || fail "differs: nics[0] listed: $(cat "$T/out")"

# a full dump of another machine: every field that differs is named
topo --sysroot "$SYSROOT/vm" --expect "$T/self.json"
[ "$rc" -eq 3 ] || fail "vm vs two-socket: exit status $rc"
! grep -q '^host' "$T/out" || fail "vm: host compared: $(cat "$T/out")"
grep -q '^cpu.model: expected "Example CPU @ 2.00GHz", found "Intel(R) Xeon(R) Processor"$' "$T/out" ||
	fail "vm: $(cat "$T/out")"
grep -q '^gpus: expected 2, found 0$' "$T/out" || fail "vm: $(cat "$T/out")"
grep -q '^nics: expected 3, found 1$' "$T/out" || fail "vm: $(cat "$T/out")"

# the topology may come from a pipe (--topo -)
rc=0
timeout 60 "$TOPO" --topo - --expect "$T/self.json" <"$T/self.json" >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 0 ] || fail "--topo -: exit status $rc: $(cat "$T/out" "$T/err")"

# --json: a verdict
topo --sysroot "$TS" --expect "$D/data/two-socket-differs.json" --json
[ "$rc" -eq 3 ] || fail "--json differs: exit status $rc"
grep -q '"match":false' "$T/out" || fail "--json: $(cat "$T/out")"
[ "$(wc -l <"$T/out")" -eq 1 ] || fail "--json: not one line: $(cat "$T/out")"
grep -q '"gpus: expected 4, found 2"' "$T/out" || fail "--json: $(cat "$T/out")"
topo --sysroot "$TS" --expect "$T/self.json" --json
[ "$rc" -eq 0 ] && grep -q '"match":true,"differences":\[\]}$' "$T/out" || fail "--json match: $rc $(cat "$T/out")"

# the shipped AWS layouts: accept a machine shaped like them, refuse the other
E="$top_srcdir/share/expect"
for k in p4d:p4d.24xlarge p5:p5.48xlarge; do
	topo --topo "$D/data/${k%%:*}-like.json" --expect "$E/${k#*:}.json"
	[ "$rc" -eq 0 ] || fail "${k#*:}: exit status $rc: $(cat "$T/out" "$T/err")"
done
topo --topo "$D/data/p5-like.json" --expect "$E/p4d.24xlarge.json"
[ "$rc" -eq 3 ] || fail "p5 as p4d: exit status $rc"
grep -q '^gpus\[0\].nvlinks: expected 12, found 18$' "$T/out" || fail "p5 as p4d: $(cat "$T/out")"
topo --sysroot "$TS" --expect "$E/p4d.24xlarge.json"
[ "$rc" -eq 3 ] || fail "two-socket as p4d: exit status $rc"
grep -q '^gpus: expected 8, found 2$' "$T/out" || fail "two-socket as p4d: $(cat "$T/out")"
grep -q -i 'public specifications' "$E/p4d.24xlarge.json" "$E/p5.48xlarge.json" ||
	fail "shipped files not labelled"

# a bad expect file is a failure (1), not a difference (3)
echo '{"gpus": 8}' >"$T/noschema.json"
topo --sysroot "$TS" --expect "$T/noschema.json"
runtime_error "no schema" 'noschema.json: no "schema": 1'
echo '{"schema": 1, "nics_match": "some"}' >"$T/badmode.json"
topo --sysroot "$TS" --expect "$T/badmode.json"
runtime_error "bad nics_match" 'nics_match'
topo --sysroot "$TS" --expect "$T/missing.json"
runtime_error "missing expect" 'missing.json'
exit 0
