# deepspeed.sh - examples/torch/deepspeed_zero.py (ZeRO stage 2) on 2 ranks over smddp trains
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
# to the parameters of the same job on gloo, bit for bit, on CPU tensors.
#
# The interpreter is $DS_PYTHON, else the one of .venv-deepspeed in the source
# tree (scripts/deepspeed-venv.sh makes it over the torch venv), else
# $TORCH_PYTHON; it needs deepspeed and the torch the shim was built with.
. "$top_srcdir/tests/torch/lib.sh"
. "$top_srcdir/tests/examples/lib.sh"
python_with deepspeed DS_PYTHON .venv-deepspeed
need_shim
echo "deepspeed $("$PY" -c 'import deepspeed; print(deepspeed.__version__)' 2>/dev/null | tail -n 1)"
# DeepSpeed's CPU accelerator compiles an op when a job starts: the one that
# scripts/deepspeed-venv.sh compiled, else one compiled here once per build tree.
ext=$("$PY" -c 'import sys; print(sys.prefix)')/torch-extensions
[ -d "$ext" ] || ext=$top_builddir/tests/examples/torch-extensions
export DS_ACCELERATOR=cpu TORCH_EXTENSIONS_DIR=$ext
against_gloo ds 400 deepspeed_zero.py
finish
