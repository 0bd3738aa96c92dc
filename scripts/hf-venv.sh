#!/bin/bash
# scripts/hf-venv.sh [PYTHON] - make .venv-hf: Hugging Face transformers and accelerate
# over the torch of PYTHON (default .venv-torch/bin/python), for tests/torch/hf.sh;
# prints the interpreter's path last.
#
# The venv sees PYTHON's packages, so pip adds only what torch's venv lacks
# (scripts/venv-over.sh). Versions are pinned so that CI runs what was tested.
set -eu
cd "$(dirname "$0")/.."
. scripts/venv-over.sh
venv_over hf-venv "${1:-.venv-torch/bin/python}" .venv-hf "transformers==5.23.0 accelerate==1.15.0"
echo "$PWD/.venv-hf/bin/python"
