# matrix-n8.sh - every device collective x dtype x op x placement x count on 8 rank(s) of the GPU(s).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/lib.sh"
export SMDDP_TIMEOUT=60
run_gpu matrix-n8 600 8 matrix --quick
expect_summary matrix-n8 8
finish
