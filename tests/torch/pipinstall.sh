# pipinstall.sh - `pip install --no-build-isolation ./python` alone, where no libsmddp
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
# is installed: setup.py builds libsmddp from the source tree and bundles it, and the
# package then runs 2 ranks against gloo with LD_LIBRARY_PATH unset, its build gone.
#
# A copy of the source tree (git's files in a checkout, so that autoreconf runs as
# in a fresh clone; the tree itself under make distcheck) is built into a private
# --target folder. The shim is built without its CUDA path unless SMDDP_TORCH_CUDA
# says otherwise (nvcc's minute buys nothing that a CPU run could check);
# SMDDP_TORCH_CUDA=1 builds both with CUDA (nvcc needed, no GPU) and checks that.
. "$top_srcdir/tests/torch/lib.sh"
# Not shim.sh's copy: this test builds its own, and under make -j shim.sh
# may be writing $SITE meanwhile, where torch's backend autoload (at
# setup.py's `import torch`) would find a half-installed smddp.
export PYTHONPATH=$TESTS_PY
PY=$(command -v "$PY")
TIMEOUT=$(command -v timeout)
SRC=$TDIR/src
PIPSITE=$TDIR/site
top=$(git -C "$top_srcdir" rev-parse --show-toplevel 2>/dev/null)
if [ -n "$top" ] && [ "$top" -ef "$top_srcdir" ]; then
	mkdir -p "$SRC"
	(cd "$top_srcdir" && git ls-files -z --cached --others --exclude-standard |
		xargs -0 cp --parents -t "$SRC" 2>/dev/null)
	[ -f "$SRC/configure" ] && fail "the git checkout's copy has a configure script"
	what="a copy of the git checkout"
else
	cp -r "$top_srcdir/." "$SRC"
	chmod -R u+w "$SRC"
	[ -f "$SRC/config.status" ] && skip "$top_srcdir is configured in place (config.status)"
	what="a copy of the release tree"
fi
rm -rf "$SRC/python/build" "$SRC"/python/*.egg-info

# pip, as a user runs it: no installed libsmddp on pkg-config's path, no
# SMDDP_BUILD_DIR.
pip_install() {
	local log=$1
	shift
	env -u LD_LIBRARY_PATH -u SMDDP_BUILD_DIR -u SMDDP_PREFIX -u SMDDP_SOURCE_DIR -u SMDDP_UNITY_BUILD \
		PKG_CONFIG_PATH= MAX_JOBS=2 SMDDP_TORCH_CUDA=${SMDDP_TORCH_CUDA:-0} "$@" \
		"$TIMEOUT" -k 5 1800 "$PY" -m pip install -v --no-build-isolation --no-deps --no-index \
		--target "$PIPSITE" "$SRC/python" >"$TDIR/$log" 2>&1
}
bundle=
if env PKG_CONFIG_PATH= pkg-config --exists smddp 2>/dev/null; then
	bundle=SMDDP_BUNDLE=1
	echo "note: pkg-config finds an installed libsmddp: SMDDP_BUNDLE=1 asks for the bundle"
fi

# Errors before any build say what to do.
pip_install bundle0.out SMDDP_BUNDLE=0 PKG_CONFIG_LIBDIR=/nonexistent && fail "SMDDP_BUNDLE=0 without libsmddp built"
grep -q "SMDDP_BUNDLE=0 builds none" "$TDIR/bundle0.out" &&
	pass "SMDDP_BUNDLE=0 without an installed libsmddp: an error that says so" ||
	{ tail -5 "$TDIR/bundle0.out"; fail "SMDDP_BUNDLE=0: no clear error"; }
mkdir -p "$TDIR/nobin"
pip_install nomake.out PATH="$TDIR/nobin" && fail "built without make on PATH"
grep -q "make is not installed.*build-essential pkg-config libcjson-dev" "$TDIR/nomake.out" &&
	pass "no make: the error names the Debian packages" ||
	{ tail -5 "$TDIR/nomake.out"; fail "no make: no error naming the Debian packages"; }
# configure fails (here: a CUDA toolkit that is not there): its own error and the packages.
pip_install badconf.out $bundle SMDDP_CONFIGURE_ARGS=--with-cuda=/nonexistent &&
	fail "built with --with-cuda=/nonexistent"
grep -q "configuring libsmddp in .* failed: configure: error: --with-cuda given.*libcjson-dev" \
	"$TDIR/badconf.out" && pass "a failed configure: its error and the Debian packages" ||
	{ tail -5 "$TDIR/badconf.out"; fail "a failed configure: no clear error"; }

t0=$(now)
if pip_install pip.out $bundle; then
	pass "pip install of $what built libsmddp and the shim in $(since "$t0") s"
else
	tail -40 "$TDIR/pip.out"
	fail "pip install of $what failed"
	finish
fi
grep "^smddp: " "$TDIR/pip.out" | sed 's/^/    /'
grep -q "building against libsmddp from the source tree .*bundled into the package" "$TDIR/pip.out" &&
	pass "the build log says that libsmddp was built and bundled" ||
	fail "the build log does not say which libsmddp it used"
[ -n "$bundle" ] || grep -q "autoreconf -fi" "$TDIR/badconf.out" "$TDIR/pip.out" ||
	[ "$what" != "a copy of the git checkout" ] ||
	fail "no autoreconf ran in a checkout without configure"
so=$(ls "$PIPSITE"/smddp/libsmddp.so.* 2>/dev/null)
[ -n "$so" ] && [ -x "$PIPSITE/smddp/bin/smddp-run" ] && [ -x "$PIPSITE/bin/smddp-run" ] &&
	pass "the package holds ${so##*/}, bin/smddp-run, and the smddp-run console script" ||
	fail "missing from $PIPSITE: libsmddp.so.N, smddp/bin/smddp-run or bin/smddp-run"
if command -v readelf >/dev/null; then
	rp=$(readelf -d "$PIPSITE"/smddp/_C*.so | grep -E 'R(UN)?PATH')
	case $rp in
	*'[$ORIGIN]'*) pass "the shim's rpath is \$ORIGIN alone" ;;
	*) fail "the shim's rpath: $rp" ;;
	esac
fi
# SMDDP_TORCH_CUDA=1 (tests/gpu/torch-examples-device.sh's pip-cuda stage
# runs it on a GPU): libsmddp configured --with-cuda (its kernels in an
# .nv_fatbin section) and the shim with its CUDA path.
if [ "${SMDDP_TORCH_CUDA:-0}" = 1 ]; then
	cb=$(PYTHONPATH=$PIPSITE "$PY" -c 'import smddp.torch as s; print(s.cuda_built())' 2>&1 | tail -n 1)
	if [ "$cb" = True ] && readelf -S "$so" | grep -q "\.nv_fatbin"; then
		pass "SMDDP_TORCH_CUDA=1: the shim has its CUDA path, the bundled ${so##*/} its kernels"
	else
		fail "SMDDP_TORCH_CUDA=1: cuda_built() says '$cb'; .nv_fatbin in ${so##*/}: $(readelf -S "$so" | grep -c nv_fatbin)"
	fi
fi
# Nothing may point into the build: it goes away.
rm -rf "$SRC"

# A clean environment: the target folder and the tests' helpers on PYTHONPATH, no
# LD_LIBRARY_PATH, the console script as the launcher.
clean() {
	env -i PATH="/usr/bin:/bin" HOME="${HOME:-/}" SMDDP_CONFIG=/dev/null OMP_NUM_THREADS=1 \
		PYTHONPATH="$PIPSITE:$TESTS_PY" "$@"
}
out=$(clean "$PIPSITE/bin/smddp-run" --version 2>&1)
case $out in
"smddp-run from libsmddp "*) pass "the console script runs the bundled launcher: $out" ;;
*) fail "smddp-run --version: $out" ;;
esac
clean timeout -k 5 300 "$PIPSITE/bin/smddp-run" -n 2 --timeout 240 "$PY" "$TESTS_PY/test_pipinstall.py" \
	>"$TDIR/run.out" 2>&1
status=$?
sed 's/^/    /' "$TDIR/run.out"
ok=$(grep -c "TORCH-OK rank=" "$TDIR/run.out")
[ "$status" -eq 0 ] && [ "$ok" -eq 2 ] &&
	pass "2 ranks: all_reduce on the bundled libsmddp agrees with gloo" ||
	fail "2 ranks: exit $status, $ok of 2 said TORCH-OK"
finish
