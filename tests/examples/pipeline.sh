# pipeline.sh - examples/torch/pipeline.py (torch.distributed.pipelining) over smddp:
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
# 2 stages with the 1F1B schedule and 3 with GPipe train every stage to the
# parameters of the same job on gloo, bit for bit, on CPU tensors.
. "$top_srcdir/tests/torch/lib.sh"
. "$top_srcdir/tests/examples/lib.sh"
need_shim
need_torch "torch.distributed.pipelining with shape inference (2.5 or later)" \
	'import inspect; from torch.distributed.pipelining import PipelineStage as S; assert inspect.signature(S).parameters["input_args"].default is None'
for case in "2 1f1b" "3 gpipe"; do
	set -- $case
	for b in smddp gloo; do
		run_job "pipe-$1-$b" 300 "$1" "$PY" "$E/torch/pipeline.py" --cpu --schedule "$2" --backend "$b" \
			--save "$TDIR/pipe-$1-$b"
		n=$(grep -c "stage [0-9]* parameter checksum" "$TDIR/pipe-$1-$b.out")
		[ "$status" -eq 0 ] && [ "$n" -eq "$1" ] &&
			pass "examples/torch/pipeline.py on $b: $1 stages, $2" ||
			fail "examples/torch/pipeline.py on $b, $1 stages: exit $status, $n stages reported"
	done
	for ((r = 0; r < $1; r++)); do
		same_params "examples/torch/pipeline.py, $2: stage $r of $1, smddp against gloo" 0 \
			"$TDIR/pipe-$1-smddp.$r.pt" "$TDIR/pipe-$1-gloo.$r.pt"
	done
done
finish
