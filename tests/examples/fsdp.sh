# fsdp.sh - examples/torch/fsdp.py (fully_shard) on 2 ranks over smddp trains to the
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
# parameters of the same job on gloo, bit for bit, on CPU tensors.
. "$top_srcdir/tests/torch/lib.sh"
. "$top_srcdir/tests/examples/lib.sh"
need_shim
need_torch "fully_shard (2.6 or later)" 'from torch.distributed.fsdp import fully_shard'
against_gloo fsdp 300 fsdp.py --cpu
finish
