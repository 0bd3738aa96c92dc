#!/bin/bash
# tests/cluster/slurm.sh - smddp-run through srun across namespace hosts, without Slurm
#
# The batch script's view of an allocation of h1..h3 (SLURM_JOB_NODELIST
# 10.77.0.[1-3]): smddp-run on h1 runs "srun", here tests/slurm/fake-srun,
# which starts one task per host through the cluster's launch agent, as
# srun's daemons would: each task a per-node smddp-run, node rank from
# SLURM_NODEID. 3 hosts x 2 ranks check their variables and host, and run
# smddp_init, a barrier and an allreduce across the hosts; then a rank killed
# on h2 stops the job on all three, named, with srun's and smddp-run's exit
# status 137, and nothing left behind.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/cluster/lib.sh"
across=init-ok

cluster_up 3

# job ARGS...: smddp-run on h1 in the allocation; sets RC, DT (ms)
job() {
	local t0
	t0=$(date +%s%N)
	RC=0
	SLURM_JOB_ID=31 SLURM_JOB_NODELIST='10.77.0.[1-3]' SLURM_JOB_NUM_NODES=3 \
		SMDDP_SRUN="$top_srcdir/tests/slurm/fake-srun" FAKE_SRUN_AGENT="$CL_AGENT" \
		FAKE_SRUN_HOSTS="10.77.0.1 10.77.0.2 10.77.0.3" FAKE_SRUN_LOG="$CL_DIR/srun.log" \
		on_host 1 timeout -k 5 120 "$RUN" --network-interface eth0 --join-timeout 60 "$@" \
		>"$CL_DIR/out" 2>"$CL_DIR/err" || RC=$?
	DT=$((($(date +%s%N) - t0) / 1000000))
}

nothing_left() {
	cl_wait_empty 100 || fail "processes left in the hosts: $(cl_host_pids | tr '\n' ' ')"
}

job -n 2 "$ENVCHECK" 6 2 10.77.0.1 h "$across"
[ "$RC" -eq 0 ] || fail "3 x 2 through srun: exit status $RC: $(cat "$CL_DIR/err" "$CL_DIR/out")"
grep -q -- "--nodes=3 --ntasks=3 --ntasks-per-node=1 .*smddp-run --launcher none --nnodes 3 -n 2 --master-addr 10.77.0.1 " "$CL_DIR/srun.log" ||
	fail "srun was run as: $(cat "$CL_DIR/srun.log")"
for ((r = 0; r < 6; r++)); do
	grep -qx "\[$r\] envcheck: rank $r on h$((r / 2 + 1)): env ok" "$CL_DIR/out" ||
		fail "3 x 2 through srun: rank $r not on h$((r / 2 + 1)): $(cat "$CL_DIR/out" "$CL_DIR/err")"
	if [ "$across" = init-ok ]; then
		grep -qx "\[$r\] envcheck: rank $r on h$((r / 2 + 1)): smddp_init, barrier, allreduce ok" "$CL_DIR/out" ||
			fail "3 x 2 through srun: rank $r did not run the job: $(cat "$CL_DIR/out" "$CL_DIR/err")"
	fi
done
nothing_left
echo "ok: 3 hosts x 2 ranks through srun ($across) in $DT ms"

# (a script: srun's stand-in passes words through sh, as ssh would)
printf '%s\n' 'if [ "$RANK" = 3 ]; then kill -KILL $$; fi' 'exec sleep 120' >"$CL_DIR/kill3.sh"
job -n 2 sh "$CL_DIR/kill3.sh"
[ "$RC" -eq 137 ] || fail "kill on h2 through srun: exit status $RC, not 137: $(cat "$CL_DIR/err")"
[ "$DT" -lt 60000 ] || fail "kill on h2 through srun: took $DT ms"
grep -Eq '^smddp-run: rank 3 \(pid [0-9]+\) was killed by signal 9 \(Killed\); stopping 1 other rank$' "$CL_DIR/err" ||
	fail "kill on h2 through srun: h2's line: $(cat "$CL_DIR/err")"
[ "$(grep -Ec '^smddp-run: node 1 \(host h2\): rank 3 was killed by signal 9 \(Killed\); stopping 2 ranks here$' "$CL_DIR/err")" -eq 2 ] ||
	fail "kill on h2 through srun: h1 and h3 do not both name it: $(cat "$CL_DIR/err")"
grep -Eq '^smddp-run: srun \(pid [0-9]+\) exited with status 137: the job failed$' "$CL_DIR/err" ||
	fail "kill on h2 through srun: no final line: $(cat "$CL_DIR/err")"
nothing_left
echo "ok: a rank killed on h2 through srun stops all three hosts in $DT ms"
exit 0
