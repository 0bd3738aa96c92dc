# errors.sh - bad device calls get clear errors (mixed memory, host memory with a stream,
# short or overlapping buffers) and the communicator keeps working; reallocated buffers.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/lib.sh"
export SMDDP_TIMEOUT=60
run_gpu errors 120 2 errors
expect_summary errors 2
finish
