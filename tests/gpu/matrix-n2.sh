# matrix-n2.sh - every device collective x dtype x op x placement x count on 2 rank(s) of the GPU(s).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/lib.sh"
export SMDDP_TIMEOUT=60
run_gpu matrix-n2 600 2 matrix
expect_summary matrix-n2 2
finish
