# fault-late.sh - a rank that arrives at a collective after the others timed out on it and
# left (SMDDP_TIMEOUT=2, it comes 6 s late) must get an error, not SMDDP_OK.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_TIMEOUT=2
LAUNCH_OPTS="--grace 30"

run_job late-rank1 60 3 "$FAULT" late 1 6
expect_witnesses late-rank1 0 1 2
finish
