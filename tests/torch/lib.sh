# lib.sh - helpers of the PyTorch backend's tests (sourced by tests/torch/*.sh).
#
# The interpreter is $TORCH_PYTHON (scripts/torch-venv.sh makes one and
# scripts/test.sh passes it on), else python3; without torch the tests skip.
# shim.sh builds the backend once against this build of libsmddp into
# $top_builddir/tests/torch/site (or $TORCH_SITE); the other tests run after it (Makefile
# dependency) and use that copy, so nothing is installed anywhere.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/integration/lib.sh"
PY=${TORCH_PYTHON:-python3}
SITE=${TORCH_SITE:-$top_builddir/tests/torch/site}
TESTS_PY=$top_srcdir/python/tests

if [ "${SMDDP_TEST_TORCH:-1}" = 0 ]; then
	echo "SKIP: the PyTorch backend's tests are left out (SMDDP_TEST_TORCH=0, scripts/test.sh --no-torch)"
	exit 77
fi
if ! "$PY" -c 'import torch' 2>/dev/null; then
	echo "SKIP: no torch for $PY (make a venv with scripts/torch-venv.sh and set TORCH_PYTHON)"
	exit 77
fi
export PYTHONPATH=$SITE:$TESTS_PY${PYTHONPATH:+:$PYTHONPATH}
# The ranks run in the test's own folder, so that nothing they leave behind
# (a crash report in the working directory, say) lands in the build tree.
cd "$TDIR"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 SMDDP_CONFIG=/dev/null

need_shim() {
	if ! "$PY" -c 'import smddp.torch' 2>"$TDIR/import.err"; then
		echo "ERROR: the backend built by tests/torch/shim.sh does not import:"
		sed 's/^/    /' "$TDIR/import.err"
		exit 99
	fi
}

# copy_python DEST: python/ copied to DEST, writable, without the build a
# `pip install ./python` may have left there (pip would take it as up to date).
copy_python() {
	rm -rf "$1"
	cp -r "$top_srcdir/python" "$1"
	chmod -R u+w "$1"
	rm -rf "$1/build" "$1"/*.egg-info
}

# std_copies SO: how many strong std:: functions SO defines.  Those come
# from libstdc++ itself (the shim's own template instantiations are weak):
# a copy of libstdc++ in the shim, beside the one torch loaded.
std_copies() {
	nm -D --defined-only "$1" | grep -c " T _ZNK\?S[a-z]"
}

# torch_job NAME SECONDS NRANKS SCRIPT ARGS...: smddp-run -n NRANKS python SCRIPT;
# every rank must print TORCH-OK and the job exit 0.
torch_job() {
	local name=$1 secs=$2 n=$3 ok
	shift 3
	run_job "$name" "$secs" "$n" "$PY" "$TESTS_PY/$@"
	ok=$(grep -o "TORCH-OK rank=" "$TDIR/$name.out" | wc -l)
	if [ "$status" -eq 0 ] && [ "$ok" -eq "$n" ]; then
		pass "$name: $n rank(s) agree with the reference"
	else
		fail "$name: exit $status, $ok of $n ranks said TORCH-OK"
	fi
}

# python_with IMPORTS VAR VENV: the tests that need more than torch
# (transformers, deepspeed) run $VAR's interpreter, else VENV/bin/python in
# the source tree (scripts/VENV-venv.sh makes it over the torch venv, VENV
# without its ".venv-"), else $PY; it must import IMPORTS (a Python import
# list) and run the torch the shim was built with, or the test skips. PY
# becomes that interpreter.
python_with() {
	local imports=$1 var=$2 venv=$3 py torch_py torch_other
	py=${!var:-}
	if [ -z "$py" ]; then
		py=$PY
		[ -x "$top_srcdir/$venv/bin/python" ] && py=$top_srcdir/$venv/bin/python
	fi
	if ! "$py" -c "import $imports" >"$TDIR/import.err" 2>&1; then
		echo "SKIP: no $imports for $py (make it with scripts/${venv#.venv-}-venv.sh, or set $var):"
		tail -n 1 "$TDIR/import.err"
		exit 77
	fi
	torch_py=$("$PY" -c 'import torch; print(torch.__version__, torch.__file__)')
	torch_other=$("$py" -c 'import torch; print(torch.__version__, torch.__file__)')
	if [ "$torch_other" != "$torch_py" ]; then
		echo "SKIP: $py runs torch $torch_other, the backend was built for $torch_py"
		exit 77
	fi
	PY=$py
}
