#!/bin/bash
# scripts/test.sh [--no-torch] - build in ./build and run the whole test suite (make distcheck,
# which runs make check on the tarball), the PyTorch backend's tests included.
#
# The backend's tests need torch: TORCH_PYTHON, else .venv-torch, which this
# script makes as CI does (scripts/torch-venv.sh: about 2.8 GB from PyPI),
# Hugging Face's transformers and accelerate beside it (scripts/hf-venv.sh)
# and DeepSpeed (scripts/deepspeed-venv.sh: 36 MB, and one op compiled).
# --no-torch (or SMDDP_TEST_TORCH=0) leaves them out, and the summary says so.
set -eu
cd "$(dirname "$0")/.."
torch=${SMDDP_TEST_TORCH:-1}
case ${1:-} in
"") ;;
--no-torch) torch=0 ;;
-h | --help)
	sed -n '2,8s/^# \{0,1\}//p' "$0"
	exit 0
	;;
*)
	echo "test.sh: unknown option '$1'" >&2
	echo "Try 'scripts/test.sh --help'." >&2
	exit 2
	;;
esac
./scripts/build.sh
notes=()
if [ "$torch" = 0 ]; then
	# tests/torch/lib.sh skips every torch test, saying why
	export SMDDP_TEST_TORCH=0
	notes+=("the PyTorch backend's tests were left out (--no-torch or SMDDP_TEST_TORCH=0)")
else
	if [ -z "${TORCH_PYTHON:-}" ]; then
		TORCH_PYTHON=$(./scripts/torch-venv.sh | tail -n 1) || {
			echo "test.sh: scripts/torch-venv.sh could not make the torch venv (see above);" \
				"scripts/test.sh --no-torch runs the suite without the PyTorch backend's tests" >&2
			exit 1
		}
	fi
	export TORCH_PYTHON
	if [ -z "${HF_PYTHON:-}" ]; then
		if HF_PYTHON=$(./scripts/hf-venv.sh "$TORCH_PYTHON" | tail -n 1); then
			export HF_PYTHON
		else
			notes+=("scripts/hf-venv.sh failed: tests/torch/hf.sh skipped (no transformers, accelerate)")
		fi
	fi
	if [ -z "${DS_PYTHON:-}" ]; then
		if DS_PYTHON=$(./scripts/deepspeed-venv.sh "$TORCH_PYTHON" | tail -n 1); then
			export DS_PYTHON
		else
			notes+=("scripts/deepspeed-venv.sh failed: tests/examples/deepspeed.sh skipped (no deepspeed)")
		fi
	fi
fi
rc=0
# distcheck builds the release tarball, builds it again out of tree with a
# read-only source, and runs every test there: one run of the suite.
make -C build -j"$(nproc)" distcheck || rc=$?
# A test that failed there: the end of its log, so that a CI log shows why
# (distcheck keeps its tree when it fails).
failed_logs() {
	local trs
	for trs in $(grep -rl --include='*.trs' '^:test-result: \(FAIL\|ERROR\)' "$1" 2>/dev/null); do
		echo "=== the end of ${trs%.trs}.log:"
		tail -n 80 "${trs%.trs}.log"
	done
}
[ "$rc" = 0 ] || failed_logs build/libsmddp-*/_build
# Then the backend's tests again with the oldest torch supported, where
# `scripts/torch-venv.sh 2.4.1` made its venv (CI does).
if [ "$torch" = 1 ]; then
	for v in .venv-torch-2.4.1; do
		if ! [ -x "$v/bin/python" ]; then
			notes+=("no $v (scripts/torch-venv.sh 2.4.1): the tests against torch 2.4.1 were not run")
			continue
		fi
		TORCH_PYTHON=$PWD/$v/bin/python TORCH_SITE=$PWD/build/tests/torch/site-${v#.venv-torch-} \
			make -C build -j"$(nproc)" check TESTS="$(cd build && make -s print-torch-tests)" ||
			{ rc=$?; failed_logs build/tests; }
	done
fi
for n in "${notes[@]}"; do
	echo "NOTE: $n"
done
exit $rc
