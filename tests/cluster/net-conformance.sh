#!/bin/bash
# tests/cluster/net-conformance.sh - the conformance matrix between real (namespace) hosts
#
# Every collective x dtype x op of tests/integration/conformance, against its
# independent reference, on 2, 3 and 4 hosts x 1 and 2 ranks per host, over
# libfabric's tcp provider (SMDDP_NET_TRANSPORT=fabric: the default takes
# libsmddp's sockets here, which the other cluster tests run on) on the
# veths of tests/cluster/lib.sh (no SMDDP_HOSTID: the hosts are told apart
# by their own hostnames).  Every rank
# must print a clean SUMMARY and say, at INFO, that it spans the hosts over
# tcp on eth0; 2 x 2 must take the hierarchical allreduce.  Counts: 0, 7 and
# 1001 (recursive doubling) and a large one that goes round the ring in
# several chunks: 262147 on 2 hosts, 70001 on 3 and 4 (the reference costs
# more than the collectives, and CI has 2 cores: about 3.5 minutes in all).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/cluster/lib.sh"

CONF="$top_builddir/tests/integration/conformance"
[ -x "$CONF" ] || fail "$CONF is not built"
grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h" || skip "built without libfabric"

cluster_up 4
MPIARGS=$(cl_mpirun_args)
failures=0

bad() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

# conf H N COUNTS: conformance on hosts h1..hH with N ranks each
conf() {
	local h=$1 n=$2 counts=$3 w=$(($1 * $2)) name="${1}x$2" rc=0 t0 r s f0=$failures
	local out="$CL_DIR/$name.out"
	t0=$(date +%s)
	on_host 1 timeout -k 5 180 "$RUN" --hosts "$(cl_hosts "$h" "$n")" --network-interface eth0 \
		--mpirun-args "$MPIARGS" --env CONFORMANCE_PER_HOST="$n" --env SMDDP_TIMEOUT=60 \
		--env SMDDP_NET_TRANSPORT=fabric \
		--env SMDDP_DEBUG=INFO --env SMDDP_DEBUG_SUBSYS=NET \
		"$CONF" --counts "$counts" >"$out" 2>&1 || rc=$?
	echo "--- $name: $w ranks, counts $counts: exit $rc in $(($(date +%s) - t0)) s"
	grep -E 'SUMMARY|FAIL|provider|spans|hierarchical algorithm' "$out" | sed 's/^/    /'
	if [ "$rc" -ne 0 ]; then
		bad "$name: smddp-run exited $rc"
		grep -v 'cases in' "$out" | tail -40 | sed 's/^/    /'
		return
	fi
	for ((r = 0; r < w; r++)); do
		grep -Eq "^(\[[0-9]+,$r\]<stdout>:)?SUMMARY rank $r of $w: [0-9]+ passed, 0 failed, " "$out" ||
			bad "$name: rank $r printed no clean SUMMARY"
		# the library itself says that the job spans the hosts, over tcp on eth0
		s="rank $r of $w spans $h hosts \\(tcp;ofi_rxm on eth0\\), $n per host"
		grep -Eq "^(\[[0-9]+,$r\]<stderr>:)?h$((r / n + 1)):[0-9]+:$r \[SMDDP INFO NET\] $s" "$out" ||
			bad "$name: rank $r did not log, on h$((r / n + 1)), that it spans $h hosts over tcp on eth0"
		grep -Eq "^(\[[0-9]+,$r\]<stderr>:)?h$((r / n + 1)):[0-9]+:$r \[SMDDP INFO NET\] libfabric [0-9.]+, provider tcp[;,]" "$out" ||
			bad "$name: rank $r did not log a tcp provider"
	done
	[ "$failures" -eq "$f0" ] && echo "ok: $name: every rank passed, between hosts over tcp"
	return 0
}

conf 2 1 0,7,1001,262147
conf 2 2 0,7,1001,262147
# every rank of 2 x 2 runs the hierarchical allreduce (node reduce-scatter,
# the rail's allreduce between hosts, node allgather)
[ "$(grep -Ec '\[SMDDP INFO NET\] allreduce: hierarchical algorithm \(4 ranks on 2 hosts' "$CL_DIR/2x2.out")" -eq 4 ] ||
	bad "2x2: not every rank logged 'allreduce: hierarchical algorithm (4 ranks on 2 hosts'"
conf 3 1 0,7,1001,70001
conf 3 2 0,7,1001,70001
conf 4 1 0,7,1001,70001
conf 4 2 0,7,1001,70001

if [ "$failures" -ne 0 ]; then
	echo "$failures check(s) failed"
	exit 1
fi
echo "all checks passed"
exit 0
