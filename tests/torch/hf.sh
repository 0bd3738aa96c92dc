# hf.sh - Hugging Face's Trainer and Accelerate on their SageMaker data-parallel
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
# paths train on smddp to the parameters of the same job on gloo (python/tests/test_hf.py).
#
# The interpreter is $HF_PYTHON, else the one of .venv-hf in the source tree
# (scripts/hf-venv.sh makes it over the torch venv), else $TORCH_PYTHON; it
# needs transformers and accelerate, and the torch the shim was built with.
. "$top_srcdir/tests/torch/lib.sh"
python_with "transformers, accelerate" HF_PYTHON .venv-hf
need_shim
echo "transformers $("$PY" -c 'import transformers; print(transformers.__version__)')," \
	"accelerate $("$PY" -c 'import accelerate; print(accelerate.__version__)')"
# nothing from the model hub, nothing written to the home folder
export SMDDP_TIMEOUT=120 HF_HUB_OFFLINE=1 HF_HOME=$TDIR/hf TRANSFORMERS_NO_ADVISORY_WARNINGS=1
for client in trainer accelerate; do
	for backend in smddp gloo; do
		torch_job "$client-$backend" 300 2 test_hf.py "$client" "$backend" "$TDIR/$client-$backend"
	done
	if out=$("$PY" "$TESTS_PY/hf_compare.py" "$TDIR/$client-smddp" "$TDIR/$client-gloo" 2 2>&1); then
		pass "$client: $out"
	else
		fail "$client: $out"
	fi
done

# Without SMDATAPARALLEL_LOCAL_RANK (what smddp-run did not set before), the
# Trainer dies wrapping the model: the run above depends on the variable.
run_job nolocal 300 2 env -u SMDATAPARALLEL_LOCAL_RANK "$PY" "$TESTS_PY/test_hf.py" trainer smddp \
	"$TDIR/nolocal"
[ "$status" -ne 0 ] && grep -q "TypeError: int() argument must be" "$TDIR/nolocal.out" &&
	pass "the Trainer's SageMaker path needs SMDATAPARALLEL_LOCAL_RANK" ||
	fail "the Trainer without SMDATAPARALLEL_LOCAL_RANK: exit $status"
finish
