#!/bin/bash
# tests/cluster/net-shrink.sh - ranks die between real (namespace) hosts; the survivors shrink and go on
#
# tests/integration/shrink runs across 2 hosts through mpirun: 2x2 with rank
# 0 SIGKILLed mid-collective (the hub of the old rendezvous, on h1), then a
# rank of h2; 2x3 with a middle rank of h2, then rank 0; and a planned
# shrink of 2x2 whose excluded rank (on h2) is alive.  The survivors
# shrink (the coordinator being the lowest survivor, on either host), check
# the new communicator against a reference (lib: between hosts and inside
# one) and print SHRINK-OK; nothing may be left: no process in the hosts,
# no /dev/shm/smddp-JOB-* file.  SMDDP_TIMEOUT is 30 s; every case is
# bounded by smddp-run's --timeout.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/cluster/lib.sh"

SHRINK="$top_builddir/tests/integration/shrink"
[ -x "$SHRINK" ] || fail "$SHRINK is not built"
grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h" || skip "built without libfabric"

cluster_up 2
# mpirun must let the survivors go on: without orte_abort_on_non_zero_status
# 0 it aborts the job at the first death (and Open MPI 4.1's mpirun then
# hangs in its abort once the survivors have ended).  Should it abort all
# the same, the survivors ignore its SIGTERM for odls_base_sigkill_timeout.
MPIARGS="$(cl_mpirun_args) --mca orte_abort_on_non_zero_status 0 --mca odls_base_sigkill_timeout 20"
failures=0
bad() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

# shrink_case NAME NPER SIZE-AT-END "SURVIVORS" ARGS...
shrink_case() {
	local name=$1 nper=$2 size=$3 survivors=$4 jd r job rc=0
	shift 4
	jd="$CL_DIR/$name"
	job="shrinkn$$$name"
	job=${job//[^A-Za-z0-9]/}
	mkdir -p "$jd"
	on_host 1 env SMDDP_JOB_ID="$job" timeout -k 5 90 "$RUN" --timeout 60 \
		--hosts "$(cl_hosts 2 "$nper")" --network-interface eth0 --mpirun-args "$MPIARGS" \
		--env SMDDP_TIMEOUT=30 --env D="$jd" \
		sh -c 'exec "$@" >"$D/rank.$RANK" 2>&1' sh "$SHRINK" "$@" >"$jd/out" 2>&1 || rc=$?
	echo "--- $name: smddp-run exited $rc"
	sed 's/^/    out: /' "$jd/out"
	for f in "$jd"/rank.*; do
		grep -v "SMDDP WARN" "$f" | sed "s/^/    ${f##*/}: /"
	done
	# counted in failures, as bad() does, instead of stopping the test
	FAIL_GOES_ON=1 expect_shrink_ok "$name" "$size" "$survivors" "$jd"/rank.*
	[ "$rc" -ne 124 ] || bad "$name: smddp-run timed out"
	if ! cl_wait_empty 150; then
		bad "$name: processes left in the hosts: $(cl_host_pids | xargs -r ps -o pid=,args= -p)"
		for r in $(cl_host_pids); do
			kill -KILL "$r" 2>/dev/null
		done
	fi
	if compgen -G "/dev/shm/smddp-$job-*" >/dev/null; then
		bad "$name: left in /dev/shm: $(ls /dev/shm/smddp-"$job"-*)"
		rm -f /dev/shm/smddp-"$job"-*
	fi
}

# 2x2: ranks 0,1 on h1, 2,3 on h2
shrink_case rank0-then-h2 2 2 "1 2" kill 0 3
# 2x3: ranks 0-2 on h1, 3-5 on h2
shrink_case h2-then-rank0 3 4 "1 2 3 5" kill 4 0
shrink_case planned-2x2 2 3 "0 1 3" planned 2
grep -q "SHRINK-OK rank=2 excluded: " "$CL_DIR/planned-2x2/rank.2" ||
	bad "planned-2x2: the excluded rank's call on the old communicator did not fail at once"
[ "$failures" -eq 0 ] || exit 1
echo "net-shrink: all cases passed"
