#!/bin/bash
# tests/cluster/net-p2p.sh - sends, receives, groups, alltoallv, gather and scatter between real (namespace) hosts
#
# The cases of tests/integration/p2p (every dtype and count, groups that
# would deadlock one call at a time, any source, sends to self, uneven
# alltoallv, gather and scatter from every root, a size mismatch) on 2 and 3
# hosts x 1 and 2 ranks per host, and its messages in pieces and sizes that
# differ (p2p pieces: up to 64 KiB too), over the default endpoint (libsmddp's sockets: no RDMA here) on the veths
# of tests/cluster/lib.sh; then a receiver killed while a rank on another
# host sends to it, which must be named.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/cluster/lib.sh"

P2P="$top_builddir/tests/integration/p2p"
[ -x "$P2P" ] || fail "$P2P is not built"
grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h" || skip "built without libfabric"

cluster_up 3
MPIARGS=$(cl_mpirun_args)
failures=0

bad() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

# p2p H N ARGS...: tests/integration/p2p on hosts h1..hH with N ranks each
p2p() {
	local h=$1 n=$2 w=$(($1 * $2)) name="${1}x$2" rc=0 t0 r f0=$failures
	local out="$CL_DIR/$name.out"
	shift 2
	t0=$(date +%s)
	on_host 1 timeout -k 5 180 "$RUN" --hosts "$(cl_hosts "$h" "$n")" --network-interface eth0 \
		--mpirun-args "$MPIARGS" --env SMDDP_TIMEOUT=60 "$P2P" "$@" >"$out" 2>&1 || rc=$?
	echo "--- $name: $w ranks, p2p $*: exit $rc in $(($(date +%s) - t0)) s"
	grep -E 'SUMMARY|FAIL' "$out" | sed 's/^/    /'
	if [ "$rc" -ne 0 ]; then
		bad "$name: smddp-run exited $rc"
		tail -30 "$out" | sed 's/^/    /'
		return
	fi
	for ((r = 0; r < w; r++)); do
		grep -Eq "^(\[[0-9]+,$r\]<stdout>:)?SUMMARY rank $r of $w: [0-9]+ passed, 0 failed" "$out" ||
			bad "$name: rank $r printed no clean SUMMARY"
	done
	[ "$failures" -eq "$f0" ] && echo "ok: $name: every rank passed, between hosts over tcp"
	return 0
}

p2p 2 1 --counts 0,7,1001,70001
p2p 2 2 --counts 0,7,1001,70001
p2p 3 1 --counts 0,7,1001
p2p 3 2 --counts 0,7,1001
# around the 64 KiB pieces of point to point (and the sockets' long messages)
p2p 2 1 pieces
p2p 3 2 pieces

# rank 1 (on h2) dies while rank 0 (on h1) sends it 1 MiB: rank 0 names it
out="$CL_DIR/kill.out"
on_host 1 timeout -k 5 120 "$RUN" --hosts "$(cl_hosts 2 1)" --network-interface eth0 \
	--mpirun-args "$MPIARGS" --env SMDDP_TIMEOUT=60 "$P2P" kill >"$out" 2>&1
echo "--- kill: exit $?"
sed 's/^/    /' "$out" | grep -E 'FAULT|smddp-run' | head
grep -Eq "^(\[[0-9]+,0\]<stdout>:)?FAULT-OK rank=0 .*rank 1" "$out" &&
	echo "ok: kill: rank 0 named rank 1" || bad "kill: rank 0 did not name rank 1"

if [ "$failures" -ne 0 ]; then
	echo "$failures check(s) failed"
	exit 1
fi
echo "all checks passed"
exit 0
