# socket-hosts.sh - between "hosts" over libsmddp's own TCP sockets (SMDDP_NET_TRANSPORT=socket).
#
# The endpoint of lib/transport/socket/ behind the same table as libfabric's:
# the conformance matrix hierarchical (2 hosts x 2 ranks) and flat (3 x 1),
# point to point and uneven all-to-all across hosts, then failures: a rank
# killed between calls and in the middle of a large allreduce (every
# survivor names it with SMDDP_EPEER), and a mismatch under
# SMDDP_CHECK_COLL.  Skips (77) in a build without libfabric (the layer
# between hosts is built with it).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h" || {
	echo "SKIP: built without libfabric"
	exit 77
}
export SMDDP_TIMEOUT=60 SMDDP_NET_TRANSPORT=socket
P2P=$top_builddir/tests/integration/p2p
FAKE=/bin/sh
HOSTLY="$top_srcdir/tests/net/fakehost.sh"

hosts() { # NAME NRANKS PER-HOST
	local name=$1 n=$2 per=$3 s
	run_job "$name" 600 "$n" --env CONFORMANCE_PER_HOST="$per" --env SMDDP_DEBUG=INFO \
		--env SMDDP_DEBUG_SUBSYS=NET $FAKE "$HOSTLY" "$CONFORMANCE" --counts 0,1,7,1001,262147
	[ "$status" -eq 0 ] || fail "$name: exited $status"
	s=$(grep -c "SUMMARY rank [0-9]* of $n: [0-9]* passed, 0 failed" "$TDIR/$name.out")
	[ "$s" -eq "$n" ] && pass "$name: every rank passed its cases" ||
		fail "$name: $s of $n ranks printed a clean summary"
	[ "$(grep -o '^\[[0-9]*\] .*socket transport: listening' "$TDIR/$name.out" | cut -d' ' -f1 | sort -u | wc -l)" -eq "$n" ] &&
		pass "$name: every rank used the socket endpoint" ||
		fail "$name: not every rank used the socket endpoint"
}
hosts hier-2x2 4 2
hosts flat-3x1 3 1

run_job p2p-3x1 300 3 --env CONFORMANCE_PER_HOST=1 $FAKE "$HOSTLY" "$P2P" matrix
[ "$status" -eq 0 ] && pass "point to point across 3 hosts" || fail "p2p across hosts: exit $status"

HOSTS=(--env CONFORMANCE_PER_HOST=2 $FAKE "$HOSTLY" "$FAULT")
LAUNCH_OPTS="--grace 30"
WANT_STATUS=137
run_job kill-rank3 60 4 "${HOSTS[@]}" kill 3 5
expect_witnesses kill-rank3 0 1 2
run_job killmid-rank1 60 4 "${HOSTS[@]}" killmid 1 700
expect_witnesses killmid-rank1 0 2 3
finish
