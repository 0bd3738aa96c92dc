# fault-abort.sh - rank 2 calls smddp_comm_abort while the others are in an allreduce:
# they get SMDDP_EABORTED naming rank 2; rank 2's own next call fails fast.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_TIMEOUT=60
WANT_STATUS=42 # a witness's exit is the first failure
LAUNCH_OPTS="--grace 30"

run_job abort-rank2 60 4 "$FAULT" abort 2 3
expect_witnesses abort-rank2 0 1 2 3
finish
