#!/bin/bash
# scripts/torch-compat.sh [VERSION] - the PyTorch backend's tests against another torch
# (default 2.4.1, the last SageMaker's own library supports), in .venv-torch-VERSION.
# Needs a build in ./build (scripts/build.sh); about 2.5 GB to download the first time.
set -eu
cd "$(dirname "$0")/.."
ver=${1:-2.4.1}
py=$(./scripts/torch-venv.sh "$ver" | tail -1)
[ -f build/Makefile ] || ./scripts/build.sh
# A site folder of its own, so that the backend built for the other torch stays.
TORCH_PYTHON=$py TORCH_SITE=$PWD/build/tests/torch/site-$ver make -C build -j"$(nproc)" check \
	TESTS="$(cd build && make -s print-torch-tests)"
