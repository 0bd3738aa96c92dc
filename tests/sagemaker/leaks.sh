#!/bin/bash
# tests/sagemaker/leaks.sh - smddp-run's plans free what they allocate: --dry-run of each
# plan kind (mpirun, instance groups, SM_HOSTS over the files, one rank
# group per host) under valgrind: no memory definitely lost.
# Skips (77) without valgrind.
set -u
: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"
command -v valgrind >/dev/null || { echo "SKIP: no valgrind"; exit 77; }
RUN="$top_builddir/cmd/smddp-run"
S="$top_srcdir/tests/sagemaker"
D="$S/dist"
T=$(mktemp -d "${TMPDIR:-/tmp}/smddp-sm-leaks.XXXXXX") || exit 99
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP
mkdir "$T/empty"

. "$top_srcdir/tests/lib.sh" # split_envs
failed=0

# leaks NAME DIR [VAR=VALUE...] -- OPTIONS...
leaks() {
	local name=$1 dir=$2 rc=0 envs=() args=()
	shift 2
	split_envs "$@"
	env -i PATH=/usr/local/bin:/usr/bin:/bin SMDDP_JOB_ID=test SM_NUM_GPUS=8 SMDDP_SM_CONFIG_DIR="$dir" \
		"${envs[@]}" timeout 120 valgrind -q --leak-check=full --errors-for-leak-kinds=definite \
		--error-exitcode=9 "$RUN" "${args[@]}" --dry-run true >"$T/out" 2>"$T/err" || rc=$?
	if [ "$rc" -ne 0 ]; then
		echo "FAIL: $name: exit status $rc: $(cat "$T/err")" >&2
		failed=1
	else
		echo "ok: $name"
	fi
}

leaks mpirun "$S/g5" -- --distribution "$D/mpi.json"
leaks instance-groups "$S/hetero" -- --distribution "$D/torch_groups.json"
leaks sm-hosts "$S/p4d" 'SM_HOSTS=["algo-2","algo-1"]' SM_CURRENT_HOST=algo-2 -- --sagemaker
leaks per-host "$S/p4d" SMDDP_JOB_TOKEN=0123456789abcdef -- --distribution "$D/torch_distributed.json"
# the modelparallel parameters, the hyperparameters' instance type, and
# the hyperparameters' distribution under --distribution's (found by
# LeakSanitizer, make check-sanitize)
leaks modelparallel "$S/p4d" -- --distribution "$D/modelparallel.json"
leaks hp-dataparallel "$S/hp-ddp" -- --sagemaker
leaks hp-modelparallel "$S/hp-smp" -- --sagemaker
leaks hp-overridden "$S/hp-mpi" -- --distribution "$D/mpi.json"
exit $failed
