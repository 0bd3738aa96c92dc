# runtime.sh - the backend built by a compiler that has only a static libstdc++
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
# (a GCC built with --disable-shared, as in /opt/gcc on the GPU machine)
# must link torch's libstdc++.so.6, not a copy of libstdc++.a: with python's
# -Bsymbolic-functions the copy's code ran on torch's copy's data and died of
# SIGSEGV formatting a number into an error message.
. "$top_srcdir/tests/torch/lib.sh"
# Not shim.sh's copy: this test builds its own, and under make -j shim.sh
# may be writing $SITE meanwhile, where torch's backend autoload (at
# setup.py's `import torch`) would find a half-installed smddp.
export PYTHONPATH=$TESTS_PY
for tool in g++ gcc nm readelf; do
	command -v "$tool" >/dev/null || { echo "SKIP: no $tool"; exit 77; }
done
# The compilers: g++ and gcc, but without libstdc++.so, as such a GCC is.
for cc in gcc g++; do
	cat >"$TDIR/static-$cc" <<WRAP
#!/bin/sh
for a; do [ "\$a" = -print-file-name=libstdc++.so ] && { echo libstdc++.so; exit 0; }; done
for a; do [ "\$a" = -shared ] && exec $(command -v $cc) "\$@" -static-libstdc++ -Wl,-Bsymbolic-functions; done
exec $(command -v $cc) "\$@"
WRAP
	chmod +x "$TDIR/static-$cc"
done
copy_python "$TDIR/src"
# A CUDA toolkit of another major version than torch's (its header only):
# the build leaves the CUDA path out, and says why; forced, it refuses.
tcuda=$("$PY" -c 'import torch; print((torch.version.cuda or "").split(".")[0])')
mkdir -p "$TDIR/cuda/include"
fake=$(( ${tcuda:-13} - 1 ))
echo "#define CUDART_VERSION ${fake}080" >"$TDIR/cuda/include/cuda_runtime_api.h"
if [ -n "$tcuda" ]; then
	CUDA_HOME=$TDIR/cuda SMDDP_TORCH_CUDA=1 SMDDP_BUILD_DIR=$top_builddir \
		SMDDP_SOURCE_DIR=$top_srcdir "$PY" -m pip install -v --no-build-isolation --no-deps \
		--no-index --target "$TDIR/site-forced" "$TDIR/src" >"$TDIR/forced.out" 2>&1
	st=$?
	want="SMDDP_TORCH_CUDA=1 but the CUDA toolkit in $TDIR/cuda is CUDA $fake, torch [^ ]* was built with CUDA $tcuda[.0-9]* (set CUDA_HOME to a CUDA $tcuda toolkit)"
	[ "$st" -ne 0 ] && grep -q "smddp: $want" "$TDIR/forced.out" &&
		pass "a CUDA $fake toolkit with SMDDP_TORCH_CUDA=1 is refused, saying why" ||
		fail "SMDDP_TORCH_CUDA=1 with a CUDA $fake toolkit: exit $st; $(grep -m1 "smddp: " "$TDIR/forced.out")"
	copy_python "$TDIR/src"
fi
t0=$(now)
if ! CUDA_HOME=$TDIR/cuda CC=$TDIR/static-gcc CXX=$TDIR/static-g++ SMDDP_BUILD_DIR=$top_builddir \
	SMDDP_SOURCE_DIR=$top_srcdir SMDDP_UNITY_BUILD=1 "$PY" -m pip install -v --no-build-isolation \
	--no-deps --no-index --target "$TDIR/site" "$TDIR/src" >"$TDIR/pip.out" 2>&1; then
	tail -40 "$TDIR/pip.out"
	fail "pip install of python/ with a static-only libstdc++ failed"
	finish
fi
pass "built with a static-only libstdc++ in $(since "$t0") s"
if [ -n "$tcuda" ]; then
	grep -q "smddp: building without the CUDA path: the CUDA toolkit in $TDIR/cuda is CUDA $fake, " "$TDIR/pip.out" &&
		pass "a CUDA $fake toolkit leaves the CUDA path out, saying why" ||
		fail "a CUDA $fake toolkit: no line saying the CUDA path is left out"
fi
grep -h "smddp: .* has no shared libstdc++" "$TDIR/pip.out" | sed 's/^ *//' | head -1 | grep . &&
	pass "setup.py says it links torch's libstdc++" ||
	fail "setup.py did not say that the compiler has no shared libstdc++"
so=$(ls "$TDIR"/site/smddp/_C*.so)
copies=$(std_copies "$so")
[ "$copies" -eq 0 ] && pass "_C.so defines no libstdc++ function" ||
	fail "_C.so carries libstdc++: $copies strong std:: functions, e.g. $(nm -D --defined-only "$so" | grep -m1 " T _ZNK\?S[a-z]" | cut -d' ' -f3)"
readelf -d "$so" | grep -q "NEEDED.*\[libstdc++\.so\.6\]" &&
	pass "_C.so needs libstdc++.so.6" || fail "_C.so does not need libstdc++.so.6"
# An error message with numbers in it, raised on both ranks.
PYTHONPATH=$TDIR/site run_job splits 120 2 "$PY" "$top_srcdir/tests/gpu/torch_errors.py" splits cpu
[ "$status" -eq 0 ] && [ "$(grep -c "ERRORS-OK rank=" "$TDIR/splits.out")" -eq 2 ] &&
	pass "a message with numbers is raised on both ranks" ||
	fail "splits: exit $status; the error was not raised on both ranks"
finish
