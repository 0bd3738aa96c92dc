#!/bin/bash
# tests/sagemaker/dryrun.sh - smddp-run --dry-run for each SageMaker distribution
# form, the hyperparameter form and the SM_* variables, against expected files
#
# The fixtures are configuration folders (resourceconfig.json and perhaps
# hyperparameters.json, found through SMDDP_SM_CONFIG_DIR) and distribution
# files in dist/. The environment is emptied so that the output depends on
# nothing else but a job token (which plans whose hosts each start their own
# ranks take as given, and others replace with a random one); the token and
# smddp-run's path are replaced by TOKEN and SMDDP_RUN. SMDDP_REGEN=1 rewrites the expected files instead of comparing.
set -u
: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"
RUN="$top_builddir/cmd/smddp-run"
S="$top_srcdir/tests/sagemaker"
T=$(mktemp -d "${TMPDIR:-/tmp}/smddp-sm-test.XXXXXX") || exit 99
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP
mkdir "$T/empty"

. "$top_srcdir/tests/lib.sh" # split_envs
failed=0

# check NAME CONFIGDIR [VAR=VALUE...] -- [OPTIONS...]: the plan of
# "smddp-run OPTIONS --dry-run python3 train.py --epochs 10"
check() {
	local name=$1 dir=$2 rc=0 envs=() args=()
	shift 2
	split_envs "$@"
	env -i PATH=/usr/local/bin:/usr/bin:/bin SMDDP_JOB_ID=test SM_NUM_GPUS=8 \
		SMDDP_JOB_TOKEN=0123456789abcdef0123456789abcdef \
		SMDDP_SM_CONFIG_DIR="$dir" "${envs[@]}" \
		timeout 30 "$RUN" "${args[@]}" --dry-run python3 train.py --epochs 10 >"$T/raw" 2>"$T/err" || rc=$?
	if [ "$rc" -ne 0 ]; then
		echo "FAIL: $name: exit status $rc: $(cat "$T/err")" >&2
		failed=1
		return
	fi
	sed -e 's/\(SMDDP_JOB_TOKEN=\)[0-9a-f]\{32\}$/\1TOKEN/' -e "s|$RUN|SMDDP_RUN|g" "$T/raw" >"$T/out"
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

D="$S/dist"
# every form of the estimator's distribution argument, on two p4d hosts
check torch_distributed "$S/p4d" -- --distribution "$D/torch_distributed.json"
check torch_distributed-host2 "$S/p4d-worker" -- --distribution "$D/torch_distributed.json"
# no token given: none is derived from the (public) host names; the ranks go without
check torch_distributed-notoken "$S/p4d" SMDDP_JOB_TOKEN= -- --distribution "$D/torch_distributed.json"
check pytorchddp "$S/p4d" -- --distribution "$D/pytorchddp.json"
check smdataparallel "$S/p4d" -- --distribution "$D/smdataparallel.json"
check smdataparallel-host2 "$S/p4d-worker" -- --distribution "$D/smdataparallel.json"
check modelparallel "$S/p4d" -- --distribution "$D/modelparallel.json"
check mpi "$S/g5" -- --distribution "$D/mpi.json"
check parameter_server "$S/g5" -- --distribution "$D/parameter_server.json"
check none "$S/c5" SM_NUM_GPUS=0 -- --distribution "$D/none.json"
# inline JSON; an explicit -n and --bind; the user's FI_PROVIDER is kept
check inline-n2 "$S/p4d" FI_PROVIDER=tcp -- -n 2 --bind core --distribution '{"pytorchddp": {"enabled": true}}'
# the hyperparameter form (values JSON-encoded in strings)
check hp-dataparallel "$S/hp-ddp" --
check hp-mpi "$S/hp-mpi" --
check hp-torch "$S/hp-torch" --
check hp-modelparallel "$S/hp-smp" --
# heterogeneous cluster: only the "train" group runs; EFA from its type
check instance-groups "$S/hetero" -- --distribution "$D/torch_groups.json"
# auto-detected (no --sagemaker), no distribution: one plain rank group per host
check autodetect "$S/p4d" --
# no files, the SM_* variables only (they win over the folder's files)
check sm-variables "$T/empty" 'SM_HOSTS=["algo-2","algo-1"]' SM_CURRENT_HOST=algo-2 \
	SM_NETWORK_INTERFACE_NAME=ens5 'SM_HPS={"sagemaker_torch_distributed_enabled": true}' -- --sagemaker
check sm-resource-config "$T/empty" "SM_RESOURCE_CONFIG=$(cat "$S/g5/resourceconfig.json")" -- --sagemaker \
	--distribution "$D/pytorchddp.json"
# --resource-config and --hyperparameters name the files
check flags "$T/empty" -- --resource-config "$S/g5/resourceconfig.json" \
	--hyperparameters "$S/hp-mpi/hyperparameters.json"
exit $failed
