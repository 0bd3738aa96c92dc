# shim.sh - build the PyTorch backend (python/) against this build of libsmddp, as
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
# `pip install --no-build-isolation ./python` does, into a folder of the build tree.
. "$top_srcdir/tests/torch/lib.sh"
rm -rf "$SITE"
copy_python "$TDIR/src"
t0=$(now)
# one translation unit (SMDDP_UNITY_BUILD): a third of the CPU of one per file;
# pipinstall.sh builds the files one by one, as users get them
if SMDDP_BUILD_DIR=$top_builddir SMDDP_SOURCE_DIR=$top_srcdir SMDDP_UNITY_BUILD=1 \
	"$PY" -m pip install -q --no-build-isolation --no-deps --no-index --target "$SITE" \
	"$TDIR/src" >"$TDIR/pip.out" 2>&1; then
	pass "built and installed into $SITE in $(since "$t0") s"
else
	tail -40 "$TDIR/pip.out"
	fail "pip install of python/ failed"
	finish
fi
need_shim
# One C++ runtime in the process (tests/torch/runtime.sh).
if command -v nm >/dev/null; then
	copies=$(std_copies "$SITE"/smddp/_C*.so)
	[ "$copies" -eq 0 ] && pass "the shim carries no copy of libstdc++" ||
		fail "the shim defines $copies strong std:: functions: a copy of libstdc++"
fi
out=$("$PY" -c 'import torch.distributed as dist, smddp.torch; print(dist.Backend.SMDDP if hasattr(dist.Backend, "SMDDP") else dist.Backend("smddp"))' 2>&1)
[ "$out" = smddp ] && pass "import smddp.torch registers the backend" || fail "registration: $out"
# libinfinipath, which some libfabric builds link, must not take SIGTERM when _C
# loads libsmddp (smddp.torch sets IPATH_NO_BACKTRACE first)
sig=$(env -u IPATH_NO_BACKTRACE -u HFI_NO_BACKTRACE "$PY" -c 'import re, smddp.torch
m = re.search(r"SigCgt:\s*(\w+)", open("/proc/self/status").read())
print(int(m.group(1), 16) >> 14 & 1)' 2>&1)
[ "$sig" = 0 ] && pass "no library took SIGTERM when the backend loaded" ||
	fail "after import smddp.torch, SIGTERM is caught by a handler: $sig"
"$PY" -c 'import smdistributed.dataparallel.torch.torch_smddp' 2>&1 &&
	pass "the SageMaker module path imports" || fail "smdistributed.dataparallel.torch.torch_smddp"
finish
