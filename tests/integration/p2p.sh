# p2p.sh - sends, receives, groups, alltoallv, gather and scatter on 1 to 8 ranks, every path.
#
# Inside a node: the default (eager up to 4 KiB, single copy above),
# single copy off with small halves (every message past eager staged, in
# many pieces), and single copy with SMDDP_SINGLE_COPY_MIN=0 (which must not
# matter).  Between "hosts" (tests/net/fakehost.sh: libfabric
# over loopback) on 2 x 2 and 3 x 1 ranks where the build has libfabric.
# "p2p collsend": staged exchanges right after an allgather, checked on
# the ranks still gathering.  "p2p pieces" (messages around 64 KiB and of 3 MiB, sizes that differ
# across it and below it, any source) both inside a node and between "hosts".
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
P2P=$top_builddir/tests/integration/p2p
export SMDDP_TIMEOUT=60

check() { # NAME NRANKS
	local s
	if [ "$status" -ne 0 ]; then
		fail "$1: exited $status"
		return
	fi
	s=$(grep -c "SUMMARY rank [0-9]* of $2: [0-9]* passed, 0 failed" "$TDIR/$1.out")
	[ "$s" -eq "$2" ] && pass "$1: every rank passed its cases" ||
		fail "$1: $s of $2 ranks printed a clean summary"
}

for n in 1 2 3 4 8; do
	run_job "n$n" 240 "$n" "$P2P"
	check "n$n" "$n"
done
run_job staged-4 240 4 --env SMDDP_SINGLE_COPY=0 --env SMDDP_SHM_CHUNK=4K "$P2P" \
	--counts 0,1,300,4096,70001
check staged-4 4
run_job single-copy-3 240 3 --env SMDDP_SINGLE_COPY_MIN=0 "$P2P" --counts 0,300,70001
check single-copy-3 3
run_job pieces-3 240 3 "$P2P" pieces
check pieces-3 3
run_job collsend-3 240 3 --env SMDDP_SINGLE_COPY=0 "$P2P" collsend
check collsend-3 3
if grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h"; then
	run_job hosts-2x2 240 4 --env CONFORMANCE_PER_HOST=2 /bin/sh \
		"$top_srcdir/tests/net/fakehost.sh" "$P2P" --counts 0,1,300,70001
	check hosts-2x2 4
	run_job hosts-3x1 240 3 --env CONFORMANCE_PER_HOST=1 /bin/sh \
		"$top_srcdir/tests/net/fakehost.sh" "$P2P" --counts 0,7,1001
	check hosts-3x1 3
	run_job hosts-pieces-2x2 240 4 --env CONFORMANCE_PER_HOST=2 /bin/sh \
		"$top_srcdir/tests/net/fakehost.sh" "$P2P" pieces
	check hosts-pieces-2x2 4
else
	echo "(no libfabric in this build: the cases between hosts are skipped)"
fi
finish
