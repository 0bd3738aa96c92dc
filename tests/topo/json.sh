#!/bin/bash
# tests/topo/json.sh - --json of each sysroot fixture, against the expected output
. "$top_srcdir/tests/topo/lib.sh"

for f in vm two-socket; do
	topo --sysroot "$SYSROOT/$f" --json
	[ "$rc" -eq 0 ] || fail "$f: exit status $rc: $(cat "$T/err")"
	[ ! -s "$T/err" ] || fail "$f: stderr: $(cat "$T/err")"
	same "json of $f" "$D/expected/$f.json" "$T/out"
	if command -v python3 >/dev/null; then
		python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/out" ||
			fail "$f: not JSON"
	fi
done
# schema versioned, numbers as numbers, unknown as null, under a sysroot no libfabric
grep -q '^  "schema": 1,$' "$T/out" || fail "no schema 1"
grep -q "\"memory_mb\": 65536$" "$T/out" || fail "memory not a number"
grep -q '"speed_mbps": 100000,' "$T/out" || fail "speed not a number"
grep -q '"memory_mb": null,' "$T/out" || fail "GPU memory (unknown in sysfs) not null"
grep -q '"fabric": "none"' "$T/out" || fail "libfabric used under --sysroot"
grep -q '"efa": true,' "$T/out" || fail "EFA device not marked"
grep -q '"ib_device": "mlx5_0",' "$T/out" || fail "mlx5_0 not attached to eth0"
exit 0
