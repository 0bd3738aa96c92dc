# v1api.sh - SMDDP's 1.x PyTorch API (smdistributed.dataparallel.torch.distributed
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
# and its DistributedDataParallel) against gloo, and outside a job.
. "$top_srcdir/tests/torch/lib.sh"
need_shim
export SMDDP_TIMEOUT=120
for n in 2 3; do
	torch_job "v1-$n" 300 "$n" test_v1_api.py
done

# A script run on its own (no launcher): is_available() is False, and
# init_process_group() says how to launch it; Python's default warning
# filters show the deprecation to the script (its __main__), once per import.
cat >"$TDIR/alone.py" <<'PY'
import smdistributed.dataparallel.torch.distributed as dist
from smdistributed.dataparallel.torch.parallel import DistributedDataParallel
print("available", dist.is_available())
try:
    dist.init_process_group()
except RuntimeError as e:
    print("error", e)
PY
out=$(env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT -u PYTHONWARNINGS \
	"$PY" "$TDIR/alone.py" 2>"$TDIR/alone.err")
echo "$out"
grep -qx "available False" <<<"$out" && pass "is_available() is False outside a job" ||
	fail "is_available() outside a job: $out $(cat "$TDIR/alone.err")"
grep -q "^error .*not started as a distributed job (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set): launch it with smddp-run" <<<"$out" &&
	pass "init_process_group() outside a job says how to launch it" ||
	fail "init_process_group() outside a job: $out"
n=$(grep -c "alone.py:[12]: DeprecationWarning: .*SMDDP 1.4" "$TDIR/alone.err")
[ "$n" -eq 2 ] && pass "the script sees one DeprecationWarning per 1.x import, on its import lines" ||
	fail "deprecation warnings shown to the script: $n: $(cat "$TDIR/alone.err")"
finish
