#!/bin/bash
# tests/examples/shrink.sh - examples/shrink builds with its own Makefile and
# goes on without a rank that died: rank 0, then a middle rank, of 4 ranks
# under smddp-run --on-failure continue; every survivor ends with 3 ranks and
# right sums, and nothing is left in /dev/shm.
set -u
: "${top_srcdir:?top_srcdir is not set: run me through make check}"
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/examples/lib.sh"
T_CLEANUP='rm -f /dev/shm/smddp-exshrink$$-*'
build_example shrink

for victim in 0 2; do
	rc=0
	SMDDP_JOB_ID="exshrink$$v$victim" SMDDP_TIMEOUT=60 timeout -k 5 150 \
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
