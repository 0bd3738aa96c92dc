#!/bin/bash
# tests/topo/init.sh - smddp_init checks SMDDP_TOPO_FILE: a bad file is SMDDP_ECONFIG at once, a good one runs
. "$top_srcdir/tests/topo/lib.sh"

BENCH="$top_builddir/cmd/bench/smddp-allreduce-bench"
RUN="$top_builddir/cmd/smddp-run"

printf '{"schema": 1, "host": 5' >"$T/bad.json"
rc=0
SMDDP_TOPO_FILE="$T/bad.json" timeout 60 "$RUN" -n 2 --no-tag-output "$BENCH" -b 8 -e 8 \
	>"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 1 ] || fail "bad SMDDP_TOPO_FILE: exit $rc, expected 1: $(cat "$T/err")"
grep -q "bad.json" "$T/err" || fail "bad SMDDP_TOPO_FILE: the error does not name the file: $(cat "$T/err")"
echo "ok: a bad SMDDP_TOPO_FILE fails smddp_init naming the file"

topo --sysroot "$SYSROOT/two-socket" --json
[ "$rc" -eq 0 ] || fail "two-socket: $(cat "$T/err")"
cp "$T/out" "$T/good.json"
rc=0
SMDDP_TOPO_FILE="$T/good.json" timeout 60 "$RUN" -n 2 --no-tag-output "$BENCH" -b 8 -e 1K -f 4 \
	>"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 0 ] || fail "good SMDDP_TOPO_FILE: exit $rc: $(cat "$T/err")"
echo "ok: a good SMDDP_TOPO_FILE runs a 2-rank benchmark"
