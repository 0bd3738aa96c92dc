#!/bin/bash
# tests/examples/allreduce.sh - examples/ builds with its own Makefile (pkg-config,
# here the build tree's smddp-uninstalled.pc) and allreduce runs right on 2 ranks
set -u
: "${top_srcdir:?top_srcdir is not set: run me through make check}"
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/examples/lib.sh"
build_example allreduce

rc=0
timeout 120 "$top_builddir/cmd/smddp-run" -n 2 --timeout 60 --no-tag-output "$T/allreduce" >"$T/out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || fail "smddp-run -n 2 allreduce: exit status $rc: $(cat "$T/out")"
for r in 0 1; do
	grep -qx "rank $r of 2: sum 3, 0 wrong" "$T/out" || fail "rank $r did not print its sum: $(cat "$T/out")"
done
echo "ok: examples/allreduce built through pkg-config and ran on 2 ranks"
exit 0
