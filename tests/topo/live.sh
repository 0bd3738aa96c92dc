#!/bin/bash
# tests/topo/live.sh - this machine: discovery works, and its JSON reads back the same
. "$top_srcdir/tests/topo/lib.sh"

topo
[ "$rc" -eq 0 ] || fail "text: exit status $rc: $(cat "$T/err")"
grep -q '^Host: ' "$T/out" && grep -q '^CPU: [0-9]' "$T/out" || fail "text: $(cat "$T/out")"
grep -q '^NUMA nodes: [1-9]' "$T/out" || fail "no NUMA node: $(cat "$T/out")"
topo --json
[ "$rc" -eq 0 ] || fail "--json: exit status $rc: $(cat "$T/err")"
cp "$T/out" "$T/live.json"
topo --topo "$T/live.json" --json
same "this machine, read back" "$T/live.json" "$T/out"
topo --expect "$T/live.json"
[ "$rc" -eq 0 ] || fail "this machine vs its own dump: $(cat "$T/out")"
# the same node under --sysroot / (hwloc, NVML and libfabric only on the live root)
topo --sysroot / --json
same "--sysroot /" "$T/live.json" "$T/out"
exit 0
