#!/bin/bash
# scripts/test.sh - build in ./build and run the whole test suite (make distcheck, which runs make check on the tarball).
set -eu
cd "$(dirname "$0")/.."
./scripts/build.sh
# The PyTorch backend's tests use the venv of scripts/torch-venv.sh when
# there is one (they skip without torch).
if [ -z "${TORCH_PYTHON:-}" ] && [ -x .venv-torch/bin/python ]; then
	export TORCH_PYTHON=$PWD/.venv-torch/bin/python
fi
# distcheck builds the release tarball, builds it again out of tree with a
# read-only source, and runs every test there: one run of the suite.
make -C build -j"$(nproc)" distcheck
# Then the backend's tests again with the oldest torch supported, where
# `scripts/torch-venv.sh 2.4.1` made its venv (CI does).
for v in .venv-torch-2.4.1; do
	[ -x "$v/bin/python" ] || continue
	TORCH_PYTHON=$PWD/$v/bin/python TORCH_SITE=$PWD/build/tests/torch/site-${v#.venv-torch-} \
		make -C build -j"$(nproc)" check TESTS="$(cd build && make -s print-torch-tests)"
done
