#!/bin/bash
# tests/cluster/launch.sh - smddp-run --hosts across 2 and 3 namespace hosts, 1 and 2 ranks each
#
# Each rank checks its variables (rank, local rank, group rank, sizes, master,
# its host's name). smddp_init, a barrier and an allreduce must work, on one
# host and across hosts (over libsmddp's sockets in a build without
# libfabric).
. "$top_srcdir/tests/cluster/lib.sh"

cluster_up 3
MPIARGS=$(cl_mpirun_args)

# run H N ACTION: smddp-run on host 1 over H hosts with N ranks each
run() {
	local h=$1 n=$2 action=$3 rc=0 out="$CL_DIR/out.$1.$2" err="$CL_DIR/err.$1.$2"
	on_host 1 timeout -k 5 90 "$RUN" --hosts "$(cl_hosts "$h" "$n")" --network-interface eth0 \
		--no-tag-output --mpirun-args "$MPIARGS" \
		"$ENVCHECK" $((h * n)) "$n" 10.77.0.1 h "$action" >"$out" 2>"$err" || rc=$?
	[ "$rc" -eq 0 ] || fail "$h hosts x $n: exit status $rc:
$(cat "$err")
$(cat "$out")"
	[ "$(grep -c ': env ok$' "$out")" -eq $((h * n)) ] || fail "$h hosts x $n: $(cat "$out" "$err")"
	local r
	for ((r = 0; r < h * n; r++)); do
		grep -qx "envcheck: rank $r on h$((r / n + 1)): env ok" "$out" ||
			fail "$h hosts x $n: rank $r not on h$((r / n + 1)): $(cat "$out")"
	done
	case $action in
	init-ok) want="smddp_init, barrier, allreduce ok" ;;
	*) want="smddp_init: EUNSUPPORTED as expected.*" ;;
	esac
	[ "$(grep -c ": $want\$" "$out")" -eq $((h * n)) ] || fail "$h hosts x $n: $(cat "$out" "$err")"
	[ "$action" = init-ok ] || grep -qx "envcheck: rank 0 on h1: $want" "$out" ||
		fail "$h hosts x $n: rank 0 did not refuse with EUNSUPPORTED: $(cat "$out" "$err")"
	echo "ok: $h hosts x $n ranks ($action)"
}

across=init-ok
run 1 2 init-ok
run 2 1 $across
run 2 2 $across
run 3 1 $across
run 3 2 $across
exit 0
