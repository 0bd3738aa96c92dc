#!/bin/bash
# scripts/torch-venv.sh [VERSION] - make .venv-torch (or .venv-torch-VERSION) with torch from PyPI,
# for the PyTorch backend's tests; prints the interpreter's path last.
#
#   ./scripts/torch-venv.sh           torch 2.15.0 into .venv-torch (what scripts/test.sh uses)
#   ./scripts/torch-venv.sh 2.4.1     torch 2.4.1 (the last SageMaker's own library supports)
# About 2.8 GB to download and 5.4 GB on disk per version (PyPI's wheels carry CUDA).
set -eu
cd "$(dirname "$0")/.."
ver=${1:-2.15.0}
dir=.venv-torch
[ $# -gt 0 ] && dir=.venv-torch-$ver
if [ "$(id -u)" = 0 ] && ! python3 -c 'import ensurepip, sysconfig, os; assert os.path.exists(sysconfig.get_paths()["include"] + "/Python.h")' 2>/dev/null; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv python3-dev >/dev/null
fi
if ! "$dir/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$ver')" 2>/dev/null; then
	rm -rf "$dir"
	python3 -m venv "$dir"
	extra="numpy"
	case $ver in 2.[0-4].*) extra='numpy<2' ;; esac
	"$dir/bin/pip" install -q --upgrade pip >&2
	"$dir/bin/pip" install -q "torch==$ver" "$extra" "setuptools>=64" wheel ninja >&2
fi
echo "$PWD/$dir/bin/python"
