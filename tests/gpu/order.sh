# order.sh - stream ordering: the call queues and returns while its stream is held back,
# waits for the input written before it, and the work after it waits for the output.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/lib.sh"
export SMDDP_TIMEOUT=60
for n in 2 4; do
	run_gpu order-n$n 120 $n order
	expect_summary order-n$n $n
done
finish
