#!/bin/bash
# tests/cluster/pernode.sh - smddp-run's per-node mode between namespace hosts, no mpirun
#
# One smddp-run per host (--nnodes H --node-rank I --master-addr 10.77.0.1),
# started the way Kubernetes or Slurm would: all at once, node 0 last.
#  - 2 and 3 hosts x 1 and 2 ranks: each rank checks its variables and host
#    (tests/cluster/envcheck), then smddp_init, a barrier and an allreduce
#    across the hosts; and the conformance matrix (small counts) on 2 x 2
#    and 3 x 1;
#  - a rank killed on host 2: every node stops, says which node, host and
#    rank, and exits 137; nothing is left on any host;
#  - a host whose launcher never starts: node 0 names the missing node rank
#    within --join-timeout, the other node gives up too, no rank ever ran;
#  - SMDDP_JOB_TOKEN on every host: the launchers and then the ranks prove
#    it to each other across hosts; a host with another token is refused.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/cluster/lib.sh"

CONF="$top_builddir/tests/integration/conformance"
across=init-ok

cluster_up 3

# pernode H N HOSTS OPTIONS... -- PROGRAM...: smddp-run on each host of HOSTS
# (of h1..hH; host i is node i-1), N ranks each, all started at once; waits
# for them all and sets RCS[i], out.i and err.i, and DT (ms, the slowest).
# HOST_ENV[i], if set, is one VAR=VALUE for host i's smddp-run.
HOST_ENV=()
pernode() {
	local h=$1 n=$2 hosts=$3 i t0 pids=()
	shift 3
	t0=$(date +%s%N)
	for i in $hosts; do
		on_host "$i" env ${HOST_ENV[i]:+"${HOST_ENV[i]}"} timeout -k 5 120 "$RUN" \
			--nnodes "$h" --node-rank $((i - 1)) \
			--master-addr 10.77.0.1 -n "$n" --network-interface eth0 "$@" \
			>"$CL_DIR/out.$i" 2>"$CL_DIR/err.$i" &
		pids[i]=$!
	done
	for i in $hosts; do
		RCS[i]=0
		wait "${pids[i]}" || RCS[i]=$?
	done
	DT=$((($(date +%s%N) - t0) / 1000000))
}

everything() {
	local i
	for i in 1 2 3; do
		[ -f "$CL_DIR/err.$i" ] && echo "--- h$i: stderr" && cat "$CL_DIR/err.$i"
		[ -f "$CL_DIR/out.$i" ] && echo "--- h$i: stdout" && head -50 "$CL_DIR/out.$i"
	done
}

# nothing_left: every host's namespace is empty within 10 s
nothing_left() {
	cl_wait_empty 100 || fail "processes left in the hosts: $(cl_host_pids | tr '\n' ' ')"
}

hosts_of() {
	local h=$1 i out=""
	for ((i = h; i >= 1; i--)); do
		out="$out $i"
	done
	echo "$out"
}

# ---- 2 and 3 hosts x 1 and 2 ranks: variables, then the library across hosts
envcheck() {
	local h=$1 n=$2 r i want
	pernode "$h" "$n" "$(hosts_of "$h")" --join-timeout 60 -- \
		"$ENVCHECK" $((h * n)) "$n" 10.77.0.1 h "$across"
	for ((i = 1; i <= h; i++)); do
		[ "${RCS[i]}" -eq 0 ] || fail "$h hosts x $n: h$i exit status ${RCS[i]}: $(everything)"
	done
	case $across in
	init-ok) want="smddp_init, barrier, allreduce ok" ;;
	*) want="smddp_init: EUNSUPPORTED as expected.*" ;;
	esac
	for ((r = 0; r < h * n; r++)); do
		i=$((r / n + 1))
		grep -Eq "^(\[$r\] )?envcheck: rank $r on h$i: env ok$" "$CL_DIR/out.$i" ||
			fail "$h hosts x $n: rank $r not on h$i, or its variables are wrong: $(everything)"
		[ "$across" = init-ok ] || [ "$r" -eq 0 ] || continue
		grep -Eq "^(\[$r\] )?envcheck: rank $r on h$i: $want\$" "$CL_DIR/out.$i" ||
			fail "$h hosts x $n: rank $r did not run the job: $(everything)"
	done
	echo "ok: $h hosts x $n ranks, one smddp-run per host ($across) in $DT ms"
}
envcheck 2 1
envcheck 2 2
envcheck 3 1
envcheck 3 2

# ---- the conformance matrix, small counts, between hosts
conformance() {
	local h=$1 n=$2 r i
	if [ "$across" != init-ok ]; then
		echo "skip: conformance $h x $n: built without libfabric"
		return
	fi
	pernode "$h" "$n" "$(hosts_of "$h")" --join-timeout 60 --env CONFORMANCE_PER_HOST="$n" \
		--env SMDDP_TIMEOUT=60 -- "$CONF" --counts 0,7,1001
	for ((i = 1; i <= h; i++)); do
		[ "${RCS[i]}" -eq 0 ] ||
			fail "conformance $h x $n: h$i exit status ${RCS[i]}: $(grep -v 'cases in' "$CL_DIR/err.$i" "$CL_DIR/out.$i" | tail -40)"
	done
	for ((r = 0; r < h * n; r++)); do
		i=$((r / n + 1))
		grep -Eq "^(\[$r\] )?SUMMARY rank $r of $((h * n)): [0-9]+ passed, 0 failed, " "$CL_DIR/out.$i" ||
			fail "conformance $h x $n: rank $r printed no clean SUMMARY: $(tail -20 "$CL_DIR/out.$i")"
	done
	echo "ok: conformance $h hosts x $n ranks in $DT ms"
}
conformance 2 2
conformance 3 1
nothing_left

# ---- rank 3 (the second rank of h2) is killed: all three hosts stop, 137
pernode 3 2 "3 2 1" --join-timeout 60 -- \
	sh -c 'if [ "$RANK" = 3 ]; then kill -KILL $$; fi; exec sleep 120'
for i in 1 2 3; do
	[ "${RCS[i]}" -eq 137 ] || fail "kill on h2: h$i exit status ${RCS[i]}, not 137: $(everything)"
done
[ "$DT" -lt 60000 ] || fail "kill on h2: the job took $DT ms to stop"
grep -Eq '^smddp-run: rank 3 \(pid [0-9]+\) was killed by signal 9 \(Killed\); stopping 1 other rank$' "$CL_DIR/err.2" ||
	fail "kill on h2: h2 says: $(everything)"
for i in 1 3; do
	grep -Eq '^smddp-run: node 1 \(host h2\): rank 3 was killed by signal 9 \(Killed\); stopping 2 ranks here$' "$CL_DIR/err.$i" ||
		fail "kill on h2: h$i does not name node 1, host h2 and rank 3: $(everything)"
done
nothing_left
echo "ok: a rank killed on h2 stops all three hosts in $DT ms"

# ---- h3's launcher never starts: node 0 names node 2 within --join-timeout
pernode 3 2 "2 1" --join-timeout 4 -- "$ENVCHECK" 6 2 10.77.0.1 h "$across"
[ "${RCS[1]}" -eq 1 ] && [ "${RCS[2]}" -eq 1 ] ||
	fail "h3 missing: exit status ${RCS[1]} and ${RCS[2]}, not 1: $(everything)"
[ "$DT" -lt 30000 ] || fail "h3 missing: took $DT ms with --join-timeout 4"
grep -q '^smddp-run: node 2 of 3 did not join within 4 s (--join-timeout): no smddp-run --node-rank 2 reached port 29501 of host h1$' "$CL_DIR/err.1" ||
	fail "h3 missing: node 0 does not name node 2: $(everything)"
grep -q "^smddp-run: node 1: node 0's launcher at 10.77.0.1:29501 gave up: node 2 of 3 did not join within 4 s" "$CL_DIR/err.2" ||
	fail "h3 missing: node 1 does not say why it gave up: $(everything)"
[ ! -s "$CL_DIR/out.1" ] && [ ! -s "$CL_DIR/out.2" ] || fail "h3 missing: ranks ran: $(everything)"
nothing_left
echo "ok: h3's launcher never started: named in $DT ms"

# ---- SMDDP_JOB_TOKEN on both hosts: the launchers prove it (never send
# it), the ranks get it and prove it again in their own rendezvous
HOST_ENV[1]=SMDDP_JOB_TOKEN=cluster-secret-0123
HOST_ENV[2]=SMDDP_JOB_TOKEN=cluster-secret-0123
envcheck 2 2
nothing_left

# ---- h2 has another token: refused (2) and named on both, h1 then gives up (1)
HOST_ENV[2]=SMDDP_JOB_TOKEN=some-other-secret
pernode 2 2 "2 1" --join-timeout 4 -- "$ENVCHECK" 4 2 10.77.0.1 h "$across"
[ "${RCS[2]}" -eq 2 ] && [ "${RCS[1]}" -eq 1 ] ||
	fail "wrong token: exit status ${RCS[1]} and ${RCS[2]}, not 1 and 2: $(everything)"
grep -Eq "^smddp-run: node 1: node 0's launcher at 10\.77\.0\.1:29501 refused this one: node 1 \(host h2, [0-9.]+\) presented a wrong job token: SMDDP_JOB_TOKEN differs between the nodes$" "$CL_DIR/err.2" ||
	fail "wrong token: h2 says: $(everything)"
grep -Eq "^smddp-run: refused a launcher: node 1 \(host h2, [0-9.]+\) presented a wrong job token" "$CL_DIR/err.1" ||
	fail "wrong token: h1 says: $(everything)"
[ ! -s "$CL_DIR/out.1" ] && [ ! -s "$CL_DIR/out.2" ] || fail "wrong token: ranks ran: $(everything)"
HOST_ENV=()
nothing_left
echo "ok: a host with another SMDDP_JOB_TOKEN is refused"
exit 0
