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
cd build
# distcheck builds the release tarball, builds it again out of tree with a
# read-only source, and runs every test there: one run of the suite.
make -j"$(nproc)" distcheck
