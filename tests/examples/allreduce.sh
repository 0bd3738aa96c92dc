#!/bin/bash
# tests/examples/allreduce.sh - examples/ builds with its own Makefile (pkg-config,
# here the build tree's smddp-uninstalled.pc) and allreduce runs right on 2 ranks
set -u
: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"
. "$top_srcdir/tests/lib.sh"

command -v pkg-config >/dev/null || skip "pkg-config is not installed"
command -v make >/dev/null || skip "make is not installed"
[ -f "$top_builddir/smddp-uninstalled.pc" ] || fail "$top_builddir/smddp-uninstalled.pc is not built"
T=$(mktemp -d "${TMPDIR:-/tmp}/smddp-examples-test.XXXXXX") || exit 99
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP
export PKG_CONFIG_PATH=$top_builddir

# pkg-config takes smddp-uninstalled.pc over an installed smddp.pc
libdir=$(pkg-config --variable=libdir smddp)
[ "$libdir" = "$top_builddir/lib/.libs" ] || fail "pkg-config's smddp is not the build tree's: libdir=$libdir"

# The example's own Makefile, run out of its folder (the source may be read-only,
# as in make distcheck); not the MAKEFLAGS of the make check around us.
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$T" -f "$top_srcdir/examples/Makefile" \
	VPATH="$top_srcdir/examples" allreduce >"$T/make.out" 2>&1 ||
	fail "make -f examples/Makefile: $(cat "$T/make.out")"
[ -x "$T/allreduce" ] || fail "no allreduce after make: $(cat "$T/make.out")"

rc=0
LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 120 \
	"$top_builddir/cmd/smddp-run" -n 2 --timeout 60 --no-tag-output "$T/allreduce" >"$T/out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || fail "smddp-run -n 2 allreduce: exit status $rc: $(cat "$T/out")"
for r in 0 1; do
	grep -qx "rank $r of 2: sum 3, 0 wrong" "$T/out" || fail "rank $r did not print its sum: $(cat "$T/out")"
done
echo "ok: examples/allreduce built through pkg-config and ran on 2 ranks"
exit 0
