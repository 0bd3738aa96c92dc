#!/bin/bash
# scripts/hf-venv.sh [PYTHON] - make .venv-hf: Hugging Face transformers and accelerate
# over the torch of PYTHON (default .venv-torch/bin/python), for tests/torch/hf.sh;
# prints the interpreter's path last.
#
# The venv sees PYTHON's packages through a .pth file, so pip adds only what
# torch's venv lacks and never touches that venv or its torch (no second
# copy of torch: some 40 MB to download). Versions are pinned so that CI
# runs what was tested.
set -eu
cd "$(dirname "$0")/.."
base=${1:-.venv-torch/bin/python}
dir=.venv-hf
want="transformers==5.23.0 accelerate==1.15.0"
site=$("$base" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || {
	echo "hf-venv: $base does not run (make it with scripts/torch-venv.sh)" >&2
	exit 1
}
"$base" -c 'import torch' || { echo "hf-venv: no torch for $base" >&2; exit 1; }
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
	"$dir/bin/python" -m pip install -q --disable-pip-version-check $want >&2
fi
echo "$PWD/$dir/bin/python"
