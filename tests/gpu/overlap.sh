# overlap.sh - a device call returns while the GPU work queued before it still runs (in the
# queue-and-return mode; in the blocking mode after it), with right results.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/lib.sh"
export SMDDP_TIMEOUT=60
for n in 2 4; do
	run_gpu overlap-n$n 120 $n overlap
	expect_summary overlap-n$n $n
done
finish
