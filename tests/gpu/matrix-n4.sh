# matrix-n4.sh - every device collective x dtype x op x placement x count on 4 rank(s) of the GPU(s).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/lib.sh"
export SMDDP_TIMEOUT=60
run_gpu matrix-n4 600 4 matrix
expect_summary matrix-n4 4
finish
