# fault-exit.sh - a rank calls exit(0) without smddp_comm_destroy while the others are in an allreduce.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_TIMEOUT=60
WANT_STATUS=42 # a witness's exit is the first failure
LAUNCH_OPTS="--grace 30"

run_job exit-rank1 60 3 "$FAULT" exit 1 2
expect_witnesses exit-rank1 0 2
finish
