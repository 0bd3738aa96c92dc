#!/bin/bash
# scripts/deepspeed-venv.sh [PYTHON] - make .venv-deepspeed: DeepSpeed over the torch of PYTHON
# (default .venv-torch/bin/python), for tests/examples/deepspeed.sh; prints the interpreter's path last.
#
# As scripts/hf-venv.sh does, the venv sees PYTHON's packages through a .pth
# file: pip adds DeepSpeed and its few pure-Python needs (about 36 MB, some
# 10 s) and never touches torch's venv. DeepSpeed ships as source only; it is
# installed without compiled ops (DS_BUILD_OPS=0) and built against that
# torch (--no-build-isolation: an isolated build would download another
# torch). On a machine without CUDA its CPU accelerator compiles one op, a
# shared-memory all-reduce, the first time a job starts (about 80 s of CPU
# time); this script compiles it once into .venv-deepspeed/torch-extensions,
# which the test names in TORCH_EXTENSIONS_DIR. The version is pinned so
# that CI runs what was tested.
set -eu
cd "$(dirname "$0")/.."
base=${1:-.venv-torch/bin/python}
dir=.venv-deepspeed
want="deepspeed==0.19.8"
site=$("$base" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || {
	echo "deepspeed-venv: $base does not run (make it with scripts/torch-venv.sh)" >&2
	exit 1
}
"$base" -c 'import torch' || { echo "deepspeed-venv: no torch for $base" >&2; exit 1; }
if ! [ -x "$dir/bin/python" ] || ! "$dir/bin/python" - "$want" "$site" <<'PY' 2>/dev/null; then
import sys, importlib.metadata as md, torch  # noqa: F401  (torch: seen through the .pth)
for req in sys.argv[1].split():
    name, ver = req.split("==")
    assert md.version(name) == ver, req
assert sys.argv[2] in sys.path
PY
	rm -rf "$dir"
	"$base" -m venv --without-pip "$dir" 2>/dev/null || python3 -m venv --without-pip "$dir"
	own=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
	echo "$site" >"$own/zz-torch-venv.pth"
	# pip from the torch venv, running in this one: installs here
	DS_BUILD_OPS=0 "$dir/bin/python" -m pip install -q --disable-pip-version-check \
		--no-build-isolation $want >&2
fi
# DeepSpeed's CUDA accelerator compiles nothing at start; its CPU one does
cuda=$("$dir/bin/python" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)
if [ "$cuda" = 0 ] && ! [ -d "$dir/torch-extensions/deepspeed_shm_comm" ]; then
	TORCH_EXTENSIONS_DIR=$PWD/$dir/torch-extensions DS_ACCELERATOR=cpu "$dir/bin/python" -c \
		'from deepspeed.comm.torch import build_shm_op; build_shm_op()' >&2 ||
		echo "deepspeed-venv: the CPU accelerator's op did not build: each job will try again" >&2
fi
echo "$PWD/$dir/bin/python"
