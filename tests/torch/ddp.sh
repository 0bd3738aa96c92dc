# ddp.sh - DDP (8 variants), FSDP and fully_shard on smddp train to gloo's parameters.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/torch/lib.sh"
need_shim
export SMDDP_TIMEOUT=120
for n in 2 3; do
	torch_job "ddp-$n" 600 "$n" test_ddp.py
done
finish
