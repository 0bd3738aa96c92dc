# cuda-late.sh - a CUDA driver loaded after a communicator's first calls: its device buffers are seen as such.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
LATE=$top_builddir/tests/integration/cuda-late
LIBS=$top_builddir/tests/integration/.libs
if grep -q '^#define HAVE_CUDA 1' "$top_builddir/config.h"; then
	skip "a build with CUDA would take the stand-in driver's buffers to lib/cuda/"
fi
# Right after the first calls; and after another object was loaded in between
# (the probe's load counter rather than the object it watches).
run_job direct 60 1 "$LATE" "$top_builddir/tests/integration/fakecuda/.libs/libcuda.so.1"
[ "$status" -eq 0 ] && grep -q '^CUDA-LATE-OK' "$TDIR/direct.out" &&
	pass "driver loaded after the first calls: device buffer refused, host buffers work" ||
	fail "driver loaded after the first calls: exit $status"
run_job other 60 1 "$LATE" "$top_builddir/tests/integration/fakecuda/.libs/libcuda.so.1" "$LIBS/libfakeplain.so"
[ "$status" -eq 0 ] && grep -q '^CUDA-LATE-OK' "$TDIR/other.out" &&
	pass "driver loaded after another object: device buffer refused" ||
	fail "driver loaded after another object: exit $status"
finish
