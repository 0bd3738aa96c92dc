# asyncerr-fake.sh - smddp_comm_get_async_error() beside another thread's calls, without a GPU.
# tests/gpu/asyncerr-fake (with tests/gpu/fakecuda.c standing in for the proxy's async error)
# on 1 rank: the poll must not write the communicator's last error, and
# smddp_last_error() gives each thread its own sentence.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
PROG=$top_builddir/tests/gpu/asyncerr-fake
. "$top_srcdir/tests/gpu/fakelib.sh"
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
