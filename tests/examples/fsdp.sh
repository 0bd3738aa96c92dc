# fsdp.sh - examples/torch/fsdp.py (fully_shard) on 2 ranks over smddp trains to the
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
# parameters of the same job on gloo, bit for bit, on CPU tensors.
. "$top_srcdir/tests/torch/lib.sh"
. "$top_srcdir/tests/examples/lib.sh"
need_shim
if ! "$PY" -c 'from torch.distributed.fsdp import fully_shard' 2>/dev/null; then
	echo "SKIP: torch $("$PY" -c 'import torch; print(torch.__version__)') has no fully_shard (2.6 or later)"
	exit 77
fi
for b in smddp gloo; do
	run_job "fsdp-$b" 300 2 "$PY" "$E/fsdp.py" --cpu --backend "$b" --save "$TDIR/fsdp-$b.pt"
	[ "$status" -eq 0 ] && ranks_agree "fsdp-$b" 2 &&
		pass "examples/torch/fsdp.py on $b: 2 ranks, the same full parameters" ||
		fail "examples/torch/fsdp.py on $b: exit $status, or the ranks' checksums differ"
done
same_params "examples/torch/fsdp.py: smddp against gloo" 0 "$TDIR/fsdp-smddp.pt" "$TDIR/fsdp-gloo.pt"
finish
