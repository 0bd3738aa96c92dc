#!/bin/bash
# tests/slurm/slurm.sh - smddp-run inside Slurm allocations, without Slurm
#
# The environments of env/*.env (as sbatch, salloc and srun set them) are
# given to smddp-run --dry-run, alone in an emptied environment, and the plan
# compared with expected/NAME.out (smddp-run's path, the job id, the token and
# a picked port replaced by SMDDP_RUN, ID, TOKEN and PORT; SMDDP_REGEN=1
# rewrites the expected files). Then the host-list and usage errors, and a
# real run through fake-srun (srun's tasks as local processes) with 2 nodes
# on 127.0.0.[1-2]: each task a per-node smddp-run, its node rank from
# SLURM_NODEID; a rank failing on node 1 stops the job with its status.
. "$top_srcdir/tests/run/lib.sh"
S="$top_srcdir/tests/slurm"
failed=0

# plan NAME ENVFILE [VAR=VALUE...] -- OPTIONS...: "smddp-run OPTIONS --dry-run
# ./my_job --epochs 3" in ENVFILE's environment
plan() {
	local name=$1 envfile=$2 rc=0 envs=() args=() fenv
	shift 2
	split_envs "$@"
	mapfile -t fenv < <(grep -v '^#' "$S/env/$envfile.env")
	env -i PATH=/usr/local/bin:/usr/bin:/bin "${fenv[@]}" "${envs[@]}" \
		timeout 30 "$RUN" "${args[@]}" --dry-run ./my_job --epochs 3 >"$T/raw" 2>"$T/err" || rc=$?
	if [ "$rc" -ne 0 ]; then
		echo "FAIL: $name: exit status $rc: $(cat "$T/err")" >&2
		failed=1
		return
	fi
	sed -e 's/\(SMDDP_JOB_TOKEN=\)[0-9a-f]\{32\}$/\1TOKEN/' \
		-e 's/\(SMDDP_JOB_ID=\|TORCHELASTIC_RUN_ID=\)[0-9a-f]\{12\}$/\1ID/' \
		-e 's/\(MASTER_PORT=\|SERVER_PORT=\)[0-9]*$/\1PORT/' -e "s|$RUN|SMDDP_RUN|g" "$T/raw" >"$T/out"
	if [ "${SMDDP_REGEN:-}" = 1 ]; then
		cp "$T/out" "$S/expected/$name.out"
	elif ! diff -u "$S/expected/$name.out" "$T/out" >&2; then
		echo "FAIL: $name: the plan differs from expected/$name.out" >&2
		failed=1
	fi
	if [ -s "$T/err" ]; then
		echo "FAIL: $name: unexpected stderr: $(cat "$T/err")" >&2
		failed=1
	fi
}

# in a batch script: srun, 3 nodes x 8 (SLURM_GPUS_ON_NODE), all CPUs per task
plan sbatch-gpu sbatch-gpu --
# the options that reach each node's smddp-run, and srun's own
plan sbatch-flags sbatch-gpu -- --env NCCL_DEBUG=WARN --no-tag-output --bind core --grace 30 \
	--timeout 3600 --network-interface ens5 --rdzv-id run7 \
	--srun-args "--gpus-per-node=8 --mpi=none"
# salloc's shell: names with several prefixes, SLURM_NTASKS_PER_NODE ranks
plan salloc-names salloc-names --
# HyperPod's EC2 names; -n and the ports given
plan hyperpod hyperpod -- -n 8 --master-port 29600 --launcher-port 29700 --join-timeout 600
# one node: one task, which runs the ranks as on one machine
plan one-node one-node --
# --launcher slurm says the same as auto-detection
plan one-node-forced one-node -- --launcher slurm
# --launcher none: here, as without Slurm
plan none sbatch-gpu -- --launcher none -n 2
# inside the step: per-node mode, node rank from SLURM_NODEID, node 0 at
# the first host of SLURM_STEP_NODELIST; and no second srun
plan step step -- --nnodes 3 -n 2
plan step-local step -- -n 2

# ---- host lists: several bracket groups, widths kept, in Slurm's order
hosts() {
	env -i PATH=/usr/bin:/bin SLURM_JOB_ID=1 SLURM_JOB_NODELIST="$1" "$RUN" -n 1 --dry-run x |
		sed -n 's/^# hosts: //p'
}
for c in 'x[1-2]y[08-10]|x1y08 x1y09 x1y10 x2y08 x2y09 x2y10' 'n[098-101]|n098 n099 n100 n101' \
	'a,b[3,1],c|a b3 b1 c' 'rack1-[7]|rack1-7' 'ip-10-1-2-[3-4]|ip-10-1-2-3 ip-10-1-2-4'; do
	got=$(hosts "${c%%|*}")
	[ "$got" = "${c#*|}" ] || { echo "FAIL: host list '${c%%|*}': '$got', not '${c#*|}'" >&2; failed=1; }
done

# ---- errors: one line naming the problem, exit 2
error() {
	local want=$1 envfile=$2 rc=0 envs=() args=() fenv
	shift 2
	split_envs "$@"
	mapfile -t fenv < <(grep -v '^#' "$S/env/$envfile.env")
	env -i PATH=/usr/local/bin:/usr/bin:/bin "${fenv[@]}" "${envs[@]}" \
		timeout 30 "$RUN" "${args[@]}" ./my_job >"$T/out" 2>"$T/err" || rc=$?
	if [ "$rc" -ne 2 ] || ! grep -qF -- "$want" "$T/err"; then
		echo "FAIL: error '$want': exit status $rc: $(cat "$T/err")" >&2
		failed=1
	fi
}
error "SLURM_JOB_NODELIST='node[01-03': a '[' without its ']'" sbatch-gpu \
	SLURM_JOB_NODELIST='node[01-03' -- --dry-run
error "SLURM_JOB_NODELIST='n[3-1]': '[3-1]': expected numbers and ranges N-M (N <= M)" sbatch-gpu \
	SLURM_JOB_NODELIST='n[3-1]' -- --dry-run
error "SLURM_JOB_NODELIST='a,,b': an empty host name" sbatch-gpu SLURM_JOB_NODELIST='a,,b' -- --dry-run
error "SLURM_JOB_NODELIST='n[1-2],n2': host 'n2' is given twice" sbatch-gpu \
	SLURM_JOB_NODELIST='n[1-2],n2' -- --dry-run
error "SLURM_JOB_NODELIST names 3 hosts but SLURM_JOB_NUM_NODES (or SLURM_NNODES) is '4'" sbatch-gpu \
	SLURM_JOB_NUM_NODES=4 -- --dry-run
error "--launcher slurm: SLURM_JOB_NODELIST is not set: run inside a Slurm allocation" sbatch-gpu \
	SLURM_JOB_NODELIST= SLURM_NODELIST= -- --launcher slurm --dry-run
error "--launcher slurm: this is already a Slurm job step (SLURM_STEP_ID=0)" step -- --launcher slurm
error "--launcher slurm and --hosts exclude each other" sbatch-gpu -- --launcher slurm --hosts a,b
error "invalid --launcher 'pbs': expected auto, slurm or none" sbatch-gpu -- --launcher pbs
error "/nonexistent/srun not found: inside a Slurm allocation, smddp-run runs the job through srun" \
	sbatch-gpu SMDDP_SRUN=/nonexistent/srun --
error "--nnodes 3 in a Slurm step: SLURM_NODEID='7' is not a node rank 0 to 2" step SLURM_NODEID=7 -- \
	--nnodes 3
[ "$failed" -eq 0 ] || exit 1
echo "ok: plans and errors"

# ---- a run through fake-srun: 2 nodes x 2 ranks on this machine
PORT=$((20000 + (RANDOM % 20000) * 2))
slurm_env=(SLURM_JOB_ID=5 SLURM_JOB_NODELIST='127.0.0.[1-2]' SLURM_JOB_NUM_NODES=2
	SLURM_CPUS_ON_NODE=2 SMDDP_SRUN="$S/fake-srun" FAKE_SRUN_LOG="$T/srun.log")
rc=0
env "${slurm_env[@]}" timeout -k 5 60 "$RUN" -n 2 --master-port "$PORT" --join-timeout 20 \
	"$PROG" env RANK env GROUP_RANK env WORLD_SIZE env MASTER_ADDR env SLURM_PROCID \
	>"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 0 ] || fail "fake srun: exit status $rc: $(cat "$T/err" "$T/out")"
for r in 0 1 2 3; do
	grep -qx "\[$r\] RANK=$r" "$T/out" && grep -qx "\[$r\] GROUP_RANK=$((r / 2))" "$T/out" &&
		grep -qx "\[$r\] WORLD_SIZE=4" "$T/out" && grep -qx "\[$r\] MASTER_ADDR=127.0.0.1" "$T/out" &&
		grep -qx "\[$r\] SLURM_PROCID unset" "$T/out" || fail "fake srun: rank $r: $(cat "$T/out")"
done
grep -q "^srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --cpus-per-task=2 $RUN --launcher none --nnodes 2 -n 2 --master-addr 127.0.0.1 --master-port $PORT --join-timeout 20 --tag-output -- $PROG" "$T/srun.log" ||
	fail "fake srun: srun was run as $(cat "$T/srun.log")"
echo "ok: through srun, 2 nodes x 2 ranks"

# rank 3 (node 1) exits 6: the job stops, srun and smddp-run exit 6
PORT=$((20000 + (RANDOM % 20000) * 2))
rc=0
t0=$(now_ms)
env "${slurm_env[@]}" timeout -k 5 60 "$RUN" -n 2 --master-port "$PORT" --join-timeout 20 \
	"$PROG" pid "$T" exit-if 3 6 sleep 50 >"$T/out" 2>"$T/err" || rc=$?
dt=$(($(now_ms) - t0))
[ "$rc" -eq 6 ] || fail "fake srun, rank 3 fails: exit status $rc, not 6: $(cat "$T/err")"
[ "$dt" -lt 30000 ] || fail "fake srun, rank 3 fails: took $dt ms"
grep -Eq '^\[?.*smddp-run: node 1 \(host [^ ]+\): rank 3 exited with status 6; stopping 2 ranks here$' "$T/err" ||
	fail "fake srun, rank 3 fails: node 0 does not name it: $(cat "$T/err")"
grep -Eq '^smddp-run: srun \(pid [0-9]+\) exited with status 6: the job failed$' "$T/err" ||
	fail "fake srun, rank 3 fails: no final line: $(cat "$T/err")"
expect_dead 5 $(pids_in "$T"/pid.*)
echo "ok: through srun, a failing rank on node 1"
exit 0
