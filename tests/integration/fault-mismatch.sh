# fault-mismatch.sh - with SMDDP_CHECK_COLL=1, rank 1 differs from ranks 0 and 2 in count, op,
# dtype, broadcast root or collective, passes count 0, or refuses its own argument (NULL):
# every rank must get SMDDP_EMISMATCH naming rank 1 (rank 1 its SMDDP_EINVAL), and the
# next allreduce must be right.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_TIMEOUT=60 SMDDP_CHECK_COLL=1
WANT_STATUS=42 # a witness's exit is the first failure
LAUNCH_OPTS="--grace 30"

for kind in count op dtype root coll null zero; do
	run_job "mismatch-$kind" 60 3 "$FAULT" mismatch "$kind"
	expect_witnesses "mismatch-$kind" 0 1 2
done
finish
