# p2p.sh - point to point, batches, uneven and rooted exchanges, sparse all-reduce,
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
# split_group and pipeline training of the smddp backend against gloo, 1 to 4 ranks.
. "$top_srcdir/tests/torch/lib.sh"
need_shim
export SMDDP_TIMEOUT=120
for n in 1 2 3 4; do
	torch_job "p2p-$n" 600 "$n" test_p2p.py
done
for n in 2 4; do
	torch_job "pipeline-$n" 600 "$n" test_pipeline.py
done
finish
