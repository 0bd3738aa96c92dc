# deepspeed.sh - examples/torch/deepspeed_zero.py (ZeRO stage 2) on 2 ranks over smddp trains
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
# to the parameters of the same job on gloo, bit for bit, on CPU tensors.
#
# The interpreter is $DS_PYTHON, else the one of .venv-deepspeed in the source
# tree (scripts/deepspeed-venv.sh makes it over the torch venv), else
# $TORCH_PYTHON; it needs deepspeed and the torch the shim was built with.
. "$top_srcdir/tests/torch/lib.sh"
. "$top_srcdir/tests/examples/lib.sh"
DSPY=${DS_PYTHON:-}
if [ -z "$DSPY" ]; then
	DSPY=$PY
	[ -x "$top_srcdir/.venv-deepspeed/bin/python" ] && DSPY=$top_srcdir/.venv-deepspeed/bin/python
fi
if ! "$DSPY" -c 'import deepspeed' >"$TDIR/import.err" 2>&1; then
	echo "SKIP: no deepspeed for $DSPY (make it with scripts/deepspeed-venv.sh, or set DS_PYTHON):"
	tail -n 1 "$TDIR/import.err"
	exit 77
fi
torch_of() { "$1" -c 'import torch; print(torch.__version__, torch.__file__)'; }
if [ "$(torch_of "$DSPY")" != "$(torch_of "$PY")" ]; then
	echo "SKIP: $DSPY runs torch $(torch_of "$DSPY"), the backend was built for $(torch_of "$PY")"
	exit 77
fi
PY=$DSPY
need_shim
echo "deepspeed $("$PY" -c 'import deepspeed; print(deepspeed.__version__)' 2>/dev/null | tail -n 1)"
# DeepSpeed's CPU accelerator compiles an op when a job starts: the one that
# scripts/deepspeed-venv.sh compiled, else one compiled here once per build tree.
ext=$("$PY" -c 'import sys; print(sys.prefix)')/torch-extensions
[ -d "$ext" ] || ext=$top_builddir/tests/examples/torch-extensions
export DS_ACCELERATOR=cpu TORCH_EXTENSIONS_DIR=$ext
for b in smddp gloo; do
	run_job "ds-$b" 400 2 "$PY" "$E/deepspeed_zero.py" --backend "$b" --save "$TDIR/ds-$b.pt"
	[ "$status" -eq 0 ] && ranks_agree "ds-$b" 2 &&
		pass "examples/torch/deepspeed_zero.py on $b: 2 ranks, the same parameters" ||
		fail "examples/torch/deepspeed_zero.py on $b: exit $status, or the ranks' checksums differ"
done
same_params "examples/torch/deepspeed_zero.py: smddp against gloo" 0 "$TDIR/ds-smddp.pt" "$TDIR/ds-gloo.pt"
finish
