# matrix-n1.sh - every device collective x dtype x op x placement x count on 1 rank(s) of the GPU(s).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/lib.sh"
export SMDDP_TIMEOUT=60
run_gpu matrix-n1 600 1 matrix
expect_summary matrix-n1 1
finish
