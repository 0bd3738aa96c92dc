#!/bin/bash
# tests/sagemaker/errors.sh - bad SageMaker configurations: one clear line on
# stderr naming the problem, nothing on stdout, exit 2
set -u
: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"
RUN="$top_builddir/cmd/smddp-run"
S="$top_srcdir/tests/sagemaker"
T=$(mktemp -d "${TMPDIR:-/tmp}/smddp-sm-test.XXXXXX") || exit 99
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP
mkdir "$T/empty"

. "$top_srcdir/tests/lib.sh" # fail (stops the test), skip, now, since, split_envs

# bad DIR PATTERN [VAR=VALUE...] -- OPTIONS...: exit 2, stderr matches PATTERN
bad() {
	local dir=$1 pat=$2 rc=0 envs=() args=()
	shift 2
	split_envs "$@"
	env -i PATH=/usr/bin:/bin SM_NUM_GPUS=8 SMDDP_SM_CONFIG_DIR="$dir" "${envs[@]}" \
		timeout 30 "$RUN" "${args[@]}" --dry-run true >"$T/out" 2>"$T/err" || rc=$?
	[ "$rc" -eq 2 ] || fail "'${args[*]}': exit status $rc, not 2: $(cat "$T/err" "$T/out")"
	[ ! -s "$T/out" ] || fail "'${args[*]}': stdout: $(cat "$T/out")"
	grep -Eq "^smddp-run: .*$pat" "$T/err" || fail "'${args[*]}': expected /$pat/ in: $(cat "$T/err")"
}

P="$S/p4d"
# hosts that each start their own ranks: a token given must be one
bad "$P" 'SMDDP_JOB_TOKEN: expected 8 to 256 printable characters' SMDDP_JOB_TOKEN=short -- \
	--distribution '{"torch_distributed": {"enabled": true}}'
bad "$P" 'unknown key "torch" \(known: torch_distributed pytorchddp' -- --distribution '{"torch": {"enabled": true}}'
bad "$P" 'unknown key "enable" in "pytorchddp" \(known: enabled\)' -- --distribution '{"pytorchddp": {"enable": true}}'
bad "$P" 'unknown key "tensorparallel" in "smdistributed"' -- --distribution '{"smdistributed": {"tensorparallel": {"enabled": true}}}'
bad "$P" 'conflicting distribution: torch_distributed and pytorchddp are both enabled' -- \
	--distribution '{"torch_distributed": {"enabled": true}, "pytorchddp": {"enabled": true}}'
bad "$P" 'conflicting distribution: smdistributed.dataparallel and mpi are both enabled' -- \
	--distribution '{"smdistributed": {"dataparallel": {"enabled": true}}, "mpi": {"enabled": true}}'
bad "$P" 'modelparallel runs through MPI: add "mpi"' -- \
	--distribution '{"smdistributed": {"modelparallel": {"enabled": true}}}'
bad "$P" '"pytorchddp.enabled" must be true or false' -- --distribution '{"pytorchddp": {"enabled": 1}}'
bad "$P" '"mpi.processes_per_host" must be a whole number' -- \
	--distribution '{"mpi": {"enabled": true, "processes_per_host": 0}}'
bad "$P" '"mpi.custom_mpi_options" must be a string' -- \
	--distribution '{"mpi": {"enabled": true, "custom_mpi_options": ["-v"]}}'
bad "$P" 'is not valid JSON \(line 1' -- --distribution '{"pytorchddp": {"enabled": true}'
bad "$P" "cannot open distribution '/nonexistent.json'" -- --distribution /nonexistent.json
bad "$P" 'must be a JSON object' -- --distribution '[]'
# the hyperparameter form
echo '{"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_processes": "8"}' >"$T/hp.json"
bad "$P" 'unknown hyperparameter "sagemaker_mpi_num_processes"' -- --hyperparameters "$T/hp.json"
echo '{"sagemaker_mpi_enabled": "true", "sagemaker_torch_distributed_enabled": "true"}' >"$T/hp.json"
bad "$P" 'conflicting distribution: torch_distributed and mpi' -- --hyperparameters "$T/hp.json"
echo '{"sagemaker_pytorch_ddp_enabled": "true"}' >"$T/hp.json"
bad "$P" 'conflicting distribution: --distribution says torch_distributed, .* says pytorchddp' -- \
	--hyperparameters "$T/hp.json" --distribution '{"torch_distributed": {"enabled": true}}'
# resourceconfig
cat >"$T/rc.json" <<'RC'
{"current_host": "algo-1", "hosts": ["algo-1"], "current_group_name": "a", "current_instance_group": "b"}
RC
bad "$P" 'conflicting "current_group_name" \(a\) and "current_instance_group" \(b\)' -- --resource-config "$T/rc.json"
echo '{"current_host": "algo-9", "hosts": ["algo-1", "algo-2"]}' >"$T/rc.json"
bad "$P" "the current host 'algo-9' is not among the hosts" -- --resource-config "$T/rc.json"
echo '{"current_host": "algo-1", "hosts": "algo-1"}' >"$T/rc.json"
bad "$P" '"hosts" must be an array of host names' -- --resource-config "$T/rc.json"
echo '{"hosts": ["algo-1"]}' >"$T/rc.json"
bad "$P" 'no "current_host"' -- --resource-config "$T/rc.json"
bad "$P" "instance group 'nope' is not in" -- --distribution '{"torch_distributed": {"enabled": true}, "instance_groups": ["nope"]}'
bad "$T/empty" 'no resource config: give --resource-config FILE' -- --sagemaker
bad "$T/empty" 'SM_HOSTS is not valid JSON' SM_HOSTS=algo-1 SM_CURRENT_HOST=algo-1 -- --sagemaker
bad "$P" "SM_NUM_GPUS='x'" SM_NUM_GPUS=x -- --sagemaker
bad "$S/g5" 'parameter_server runs one server and one worker per host: -n does not apply' -- \
	-n 2 --distribution '{"parameter_server": {"enabled": true}}'
# options that exclude each other
bad "$P" '--hosts and SageMaker' -- --hosts a,b --sagemaker
bad "$P" '--no-sagemaker with' -- --no-sagemaker --distribution '{}'

# a host outside the training instance groups has nothing to do: exit 0
rc=0
env -i PATH=/usr/bin:/bin SMDDP_SM_CONFIG_DIR="$S/hetero" SM_CURRENT_HOST=algo-1 timeout 30 "$RUN" \
	--distribution "$S/dist/torch_groups.json" true >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 0 ] || fail "idle host: exit status $rc: $(cat "$T/err")"
grep -q "host algo-1 is not in the instance groups that train; nothing to run here" "$T/err" ||
	fail "idle host: $(cat "$T/err")"
# --no-sagemaker ignores a configuration that is there
out=$(env -i PATH=/usr/bin:/bin SMDDP_SM_CONFIG_DIR="$P" timeout 30 "$RUN" --no-sagemaker -n 1 \
	--dry-run true) || fail "--no-sagemaker: exit status $?"
head -n 1 <<<"$out" | grep -q '^# smddp-run --dry-run: local on this host, node rank 0 of 1 host, 1 rank here$' ||
	fail "--no-sagemaker: $out"
exit 0
