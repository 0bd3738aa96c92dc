#!/bin/bash
# tests/examples/shrink.sh - examples/shrink builds with its own Makefile and
# goes on without a rank that died: rank 0, then a middle rank, of 4 ranks
# under smddp-run --on-failure continue; every survivor ends with 3 ranks and
# right sums, and nothing is left in /dev/shm.
set -u
: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"
. "$top_srcdir/tests/lib.sh"

command -v pkg-config >/dev/null || skip "pkg-config is not installed"
command -v make >/dev/null || skip "make is not installed"
[ -f "$top_builddir/smddp-uninstalled.pc" ] || fail "$top_builddir/smddp-uninstalled.pc is not built"
T=$(mktemp -d "${TMPDIR:-/tmp}/smddp-examples-test.XXXXXX") || exit 99
trap 'rm -rf "$T"; rm -f /dev/shm/smddp-exshrink$$-*' EXIT
trap 'exit 1' INT TERM HUP
export PKG_CONFIG_PATH=$top_builddir
libdir=$(pkg-config --variable=libdir smddp)

env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$T" -f "$top_srcdir/examples/Makefile" \
	VPATH="$top_srcdir/examples" shrink >"$T/make.out" 2>&1 ||
	fail "make -f examples/Makefile shrink: $(cat "$T/make.out")"

for victim in 0 2; do
	rc=0
	SMDDP_JOB_ID="exshrink$$v$victim" SMDDP_TIMEOUT=60 \
		LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout -k 5 150 \
		"$top_builddir/cmd/smddp-run" -n 4 --timeout 120 --on-failure continue \
		"$T/shrink" "$victim" >"$T/out" 2>&1 || rc=$?
	sed 's/^/    /' "$T/out"
	[ "$rc" -eq 0 ] || fail "victim $victim: smddp-run exited $rc"
	for r in 0 1 2 3; do
		[ "$r" = "$victim" ] && continue
		grep -q "^\[$r\] rank $r: rank $victim excluded, now rank [0-9] of 3;" "$T/out" ||
			fail "victim $victim: rank $r did not shrink around it"
		grep -qx "\[$r\] rank $r: 10 steps on 3 ranks at the end, 0 wrong" "$T/out" ||
			fail "victim $victim: rank $r did not end right"
	done
	! compgen -G "/dev/shm/smddp-exshrink$$v$victim-*" >/dev/null ||
		fail "victim $victim: left in /dev/shm: $(ls /dev/shm/smddp-exshrink$$v$victim-*)"
	echo "ok: examples/shrink went on without rank $victim of 4"
done
exit 0
