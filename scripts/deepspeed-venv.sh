#!/bin/bash
# scripts/deepspeed-venv.sh [PYTHON] - make .venv-deepspeed: DeepSpeed over the torch of PYTHON
# (default .venv-torch/bin/python), for tests/examples/deepspeed.sh; prints the interpreter's path last.
#
# As scripts/hf-venv.sh does, the venv sees PYTHON's packages
# (scripts/venv-over.sh): pip adds DeepSpeed and its few pure-Python needs
# (about 36 MB, some 10 s) and never touches torch's venv. DeepSpeed ships as source only; it is
# installed without compiled ops (DS_BUILD_OPS=0) and built against that
# torch (--no-build-isolation: an isolated build would download another
# torch). On a machine without CUDA its CPU accelerator compiles one op, a
# shared-memory all-reduce, the first time a job starts (about 80 s of CPU
# time); this script compiles it once into .venv-deepspeed/torch-extensions,
# which the test names in TORCH_EXTENSIONS_DIR. The version is pinned so
# that CI runs what was tested.
set -eu
cd "$(dirname "$0")/.."
. scripts/venv-over.sh
dir=.venv-deepspeed
DS_BUILD_OPS=0 venv_over deepspeed-venv "${1:-.venv-torch/bin/python}" "$dir" "deepspeed==0.19.8" \
	--no-build-isolation
# DeepSpeed's CUDA accelerator compiles nothing at start; its CPU one does
cuda=$("$dir/bin/python" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)
if [ "$cuda" = 0 ] && ! [ -d "$dir/torch-extensions/deepspeed_shm_comm" ]; then
	TORCH_EXTENSIONS_DIR=$PWD/$dir/torch-extensions DS_ACCELERATOR=cpu "$dir/bin/python" -c \
		'from deepspeed.comm.torch import build_shm_op; build_shm_op()' >&2 ||
		echo "deepspeed-venv: the CPU accelerator's op did not build: each job will try again" >&2
fi
echo "$PWD/$dir/bin/python"
