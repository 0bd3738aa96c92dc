# init.sh - env:// under smddp-run and torchrun, tcp://, file://, mpirun, the
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
# SageMaker import path, and the group timeout.
. "$top_srcdir/tests/torch/lib.sh"
need_shim
export SMDDP_TIMEOUT=120
torch_job env-2 120 2 test_init.py env
torch_job sagemaker-2 120 2 test_init.py sagemaker
# A script that ends without destroy_process_group, work in flight: the
# process must still exit 0 (not die of SIGABRT in interpreter shutdown).
for i in 1 2 3; do
	torch_job exit-3-$i 120 3 test_init.py exit
done
# Right after a synchronous call the queue is idle though its threads
# have not looped back yet: the exit hook must release it, not abort it.
torch_job exitidle-2 120 2 test_init.py exitidle
for kind in tcp file; do
	run_alone "$kind" 120 PYTHONPATH="$PYTHONPATH" SMDDP_CONFIG=/dev/null -- "$PY" "$TESTS_PY/test_init.py" spawn "$kind" 3
	[ "$status" -eq 0 ] && [ "$(grep -o TORCH-OK "$TDIR/$kind.out" | wc -l)" -eq 3 ] &&
		pass "$kind:// with 3 ranks" || fail "$kind:// with 3 ranks: exit $status"
done
run_alone torchrun 180 PYTHONPATH="$PYTHONPATH" SMDDP_CONFIG=/dev/null OMP_NUM_THREADS=1 -- \
	"$PY" -m torch.distributed.run --standalone --nproc-per-node 2 "$TESTS_PY/test_init.py" env
[ "$status" -eq 0 ] && [ "$(grep -o TORCH-OK "$TDIR/torchrun.out" | wc -l)" -eq 2 ] &&
	pass "torchrun --standalone --nproc-per-node 2" || fail "torchrun: exit $status"
if command -v mpirun >/dev/null; then
	port=$("$top_builddir/tests/integration/fault" freeport)
	asroot=
	[ "$(id -u)" = 0 ] && asroot=--allow-run-as-root
	run_alone mpirun 180 PATH="$PATH" PYTHONPATH="$PYTHONPATH" SMDDP_CONFIG=/dev/null OMP_NUM_THREADS=1 \
		OMPI_MCA_plm_rsh_agent=false -- \
		mpirun $asroot --oversubscribe -np 2 -x PYTHONPATH -x SMDDP_CONFIG \
		"$PY" "$TESTS_PY/test_init.py" mpi "tcp://127.0.0.1:$port"
	[ "$status" -eq 0 ] && [ "$(grep -o TORCH-OK "$TDIR/mpirun.out" | wc -l)" -eq 2 ] &&
		pass "mpirun -np 2 with tcp://" || fail "mpirun: exit $status"
else
	echo "no mpirun: that case is not run"
fi
run_alone timeout 120 PYTHONPATH="$PYTHONPATH" SMDDP_CONFIG=/dev/null -- "$PY" "$TESTS_PY/test_init.py" timeout
grep -q "TORCH-OK rank=0" "$TDIR/timeout.out" &&
	pass "a call rank 1 never joins raises DistBackendError at the group's timeout" ||
	fail "timeout: exit $status"
# abort() of a group whose worker is inside a library call (a collective,
# a receive) that a peer stays away from: smddp_comm_cancel ends the call,
# so abort returns in seconds, not at the group timeout of 120 s
for kind in coll recv shutdown; do
	run_alone "abort-$kind" 120 PYTHONPATH="$PYTHONPATH" SMDDP_CONFIG=/dev/null -- \
		"$PY" "$TESTS_PY/test_init.py" abort "$kind"
	if grep -q "TORCH-SKIP rank=0" "$TDIR/abort-$kind.out"; then
		echo "abort-$kind: not run: $(grep -o 'torch .* has no _abort_process_group' "$TDIR/abort-$kind.out" | head -1)"
	elif [ "$status" -eq 0 ] && grep -q "TORCH-OK rank=0" "$TDIR/abort-$kind.out"; then
		pass "abort of a group inside $kind returns before the timeout"
	else
		fail "abort-$kind: exit $status"
	fi
done
# an error of a collective inside _coalescing_manager(device=...) reaches
# the work torch waits on (it was lost when a completer had not run yet)
run_alone coalesced 120 PYTHONPATH="$PYTHONPATH" SMDDP_CONFIG=/dev/null -- \
	"$PY" "$TESTS_PY/test_init.py" coalesced
[ "$status" -eq 0 ] && [ "$(grep -o TORCH-OK "$TDIR/coalesced.out" | wc -l)" -eq 2 ] &&
	pass "an error inside the coalescing manager is raised on every rank" ||
	fail "coalesced: exit $status"
# a group made again on the same store (same prefix after
# destroy_process_group) must not read the earlier group's id
run_alone reinit 120 PYTHONPATH="$PYTHONPATH" SMDDP_CONFIG=/dev/null -- \
	"$PY" "$TESTS_PY/test_init.py" reinit
[ "$status" -eq 0 ] && [ "$(grep -o TORCH-OK "$TDIR/reinit.out" | wc -l)" -eq 3 ] &&
	pass "groups of 3, 2, 3 ranks one after the other on one store" || fail "reinit: exit $status"
# timeout_case MODE WHAT: test_init.py MODE on 2 ranks; rank 0's
# TORCH-OK passes, a TORCH-SKIP (this torch lacks the API) is said
timeout_case() {
	run_alone "$1" 120 PYTHONPATH="$PYTHONPATH" SMDDP_CONFIG=/dev/null -- \
		"$PY" "$TESTS_PY/test_init.py" "$1"
	if grep -q "TORCH-SKIP rank=0" "$TDIR/$1.out"; then
		echo "$1: not run: $(grep -o 'torch .* has no [a-z_]*' "$TDIR/$1.out" | head -1)"
	elif [ "$status" -eq 0 ] && grep -q "TORCH-OK rank=0" "$TDIR/$1.out"; then
		pass "$2"
	else
		fail "$1: exit $status"
	fi
}
# dist.set_timeout: the calls issued after it wait for the new timeout
timeout_case settimeout "dist.set_timeout bounds the calls issued after it"
# a split_group's own timeout bounds its calls (smddp_comm_split_config)
timeout_case splittimeout "a split_group's timeout, not the parent's, bounds its calls"
finish
