# scripts/venv-over.sh - sourced by scripts/hf-venv.sh and scripts/deepspeed-venv.sh, not run.
#
# venv_over NAME BASE DIR "PINS" [PIP-ARGS...]: make DIR a venv over the torch
# of the interpreter BASE, with the packages PINS ("name==version ...", pinned
# so that CI runs what was tested), unless it is one already. The venv sees
# BASE's packages through a .pth file, so pip adds only what BASE's venv
# lacks and never touches that venv or its torch (no second copy of torch:
# some 40 MB to download). PIP-ARGS go to pip install; NAME prefixes the
# errors. Exits 1 when BASE does not run or has no torch.
venv_over() {
	local name=$1 base=$2 dir=$3 want=$4 site own
	shift 4
	site=$("$base" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || {
		echo "$name: $base does not run (make it with scripts/torch-venv.sh)" >&2
		exit 1
	}
	"$base" -c 'import torch' || {
		echo "$name: no torch for $base" >&2
		exit 1
	}
	# there already: every pin installed, BASE's packages in view
	if [ -x "$dir/bin/python" ] && "$dir/bin/python" - "$want" "$site" <<'PY' 2>/dev/null; then
import sys, importlib.metadata as md, torch  # noqa: F401  (torch: seen through the .pth)
for req in sys.argv[1].split():
    name, ver = req.split("==")
    assert md.version(name) == ver, req
assert sys.argv[2] in sys.path
PY
		return 0
	fi
	rm -rf "$dir"
	"$base" -m venv --without-pip "$dir" 2>/dev/null || python3 -m venv --without-pip "$dir"
	own=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
	echo "$site" >"$own/zz-torch-venv.pth"
	# pip from BASE's venv, running in this one: installs here
	# shellcheck disable=SC2086 # PINS: one word a package
	"$dir/bin/python" -m pip install -q --disable-pip-version-check "$@" $want >&2
}
