# asyncerr-fake.sh - smddp_comm_get_async_error() beside another thread's calls, without a GPU.
# tests/gpu/asyncerr-fake (with tests/gpu/fakecuda.c standing in for the proxy's async error)
# on 1 rank: the poll must not write the communicator's last error, and
# smddp_last_error() gives each thread its own sentence.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
: "${top_builddir:?top_builddir is not set: run me through make check}"
: "${top_srcdir:?top_srcdir is not set: run me through make check}"
PROG=$top_builddir/tests/gpu/asyncerr-fake
RUN=$top_builddir/cmd/smddp-run
if [ ! -x "$PROG" ]; then
	echo "SKIP: built without CUDA (configure --with-cuda builds the fake too)"
	exit 77
fi
FAIL_GOES_ON=1
. "$top_srcdir/tests/lib.sh"
TDIR=$(mktemp -d "${TMPDIR:-/tmp}/smddp-asyncerr.XXXXXX")
export FAKECUDA_FILE=/dev/shm/smddp-fakecuda-$$
trap 'rm -rf "$TDIR"; rm -f "$FAKECUDA_FILE"' EXIT
export SMDDP_TIMEOUT=60
export SMDDP_DEBUG=NONE # a WARN line for each of the 20000 failed calls otherwise

timeout -k 5 120 "$RUN" -n 1 --timeout 100 "$PROG" >"$TDIR/out" 2>&1
st=$?
sed 's/^/    /' "$TDIR/out"
if [ "$st" -eq 0 ] && grep -q "SUMMARY rank 0 of 1: [0-9]* passed, 0 failed" "$TDIR/out"; then
	pass "the poller's sentence and the caller's stay apart"
else
	fail "exit $st, no clean summary"
fi
finish
