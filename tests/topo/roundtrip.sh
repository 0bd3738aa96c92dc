#!/bin/bash
# tests/topo/roundtrip.sh - JSON back through --topo, SMDDP_TOPO_FILE and the config file
. "$top_srcdir/tests/topo/lib.sh"

for f in vm two-socket; do
	topo --sysroot "$SYSROOT/$f" --json
	[ "$rc" -eq 0 ] || fail "$f: $(cat "$T/err")"
	cp "$T/out" "$T/$f.json"

	topo --topo "$T/$f.json" --json
	[ "$rc" -eq 0 ] || fail "$f --topo --json: exit $rc: $(cat "$T/err")"
	same "$f: --topo --json" "$T/$f.json" "$T/out"
	topo --topo "$T/$f.json"
	[ "$rc" -eq 0 ] || fail "$f --topo: exit $rc: $(cat "$T/err")"
	same "$f: --topo text" "$D/expected/$f.txt" "$T/out"

	# the library's own choice (smddp_topo_get) honours SMDDP_TOPO_FILE
	rc=0
	SMDDP_TOPO_FILE="$T/$f.json" timeout 60 "$TOPO" --json >"$T/out" 2>"$T/err" || rc=$?
	[ "$rc" -eq 0 ] || fail "$f SMDDP_TOPO_FILE: exit $rc: $(cat "$T/err")"
	same "$f: SMDDP_TOPO_FILE" "$T/$f.json" "$T/out"

	# ... and the config file's "topo_file"
	printf '{"topo_file": "%s"}\n' "$T/$f.json" >"$T/config.json"
	rc=0
	SMDDP_CONFIG="$T/config.json" timeout 60 "$TOPO" --json >"$T/out" 2>"$T/err" || rc=$?
	[ "$rc" -eq 0 ] || fail "$f topo_file: exit $rc: $(cat "$T/err")"
	same "$f: config topo_file" "$T/$f.json" "$T/out"
done

# The API reads the same: counts and each GPU's NIC (the RDMA one on its switch).
API="$top_builddir/tests/topo/api"
"$API" discover "$SYSROOT/two-socket" >"$T/a" || fail "api discover: $(cat "$T/a")"
SMDDP_TOPO_FILE="$T/two-socket.json" "$API" get >"$T/b" || fail "api get: $(cat "$T/b")"
same "api: get from SMDDP_TOPO_FILE vs discover" "$T/a" "$T/b"
cat >"$T/want" <<'X'
gpus 2 nics 3 numa 2
gpu0 0000:03:00.0 numa 0 nic eth0 numa 0 efa 0
gpu1 0000:83:00.0 numa 1 nic rdmap132s0 numa 1 efa 1
X
same "api: two-socket" "$T/want" "$T/a"
"$API" discover "$SYSROOT/vm" >"$T/a" || fail "api vm: $(cat "$T/a")"
[ "$(cat "$T/a")" = "gpus 0 nics 1 numa 1" ] || fail "api vm: $(cat "$T/a")"

# A hand-written file may leave out what it does not know: the rest is filled in.
cat >"$T/small.json" <<'X'
{"schema": 1, "gpus": [{"name": "X1"}, {"name": "X2", "numa_node": 1}],
 "nics": [{"name": "efa0", "efa": true, "ib_device": "efa0"}]}
X
topo --topo "$T/small.json" --json
[ "$rc" -eq 0 ] || fail "small file: exit $rc: $(cat "$T/err")"
grep -q '"gpu_links": \[$' "$T/out" || fail "small: no gpu_links: $(cat "$T/out")"
grep -q '^    \["X", "SYS"\],$' "$T/out" || fail "small: gpu_links not filled: $(cat "$T/out")"
grep -q '"providers": \[\]' "$T/out" || fail "small: providers not filled"
cp "$T/out" "$T/small2.json"
topo --topo "$T/small2.json" --json
same "small: second round" "$T/small2.json" "$T/out"
exit 0
