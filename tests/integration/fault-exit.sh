# fault-exit.sh - a rank calls exit(0) without smddp_comm_destroy while the others are in an allreduce;
# then exit(1) after an error of its own, which the others must name.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_TIMEOUT=60
WANT_STATUS=42 # a witness's exit is the first failure
LAUNCH_OPTS="--grace 30"

run_job exit-rank1 60 3 "$FAULT" exit 1 2
expect_witnesses exit-rank1 0 2
# after an error of its own (a refused argument): the witnesses name it, not a bare death
WANT_STATUS=1
run_job errexit-rank1 60 3 "$FAULT" errexit 1 2
expect_witnesses errexit-rank1 0 2
run_job errexit-rank0 60 3 "$FAULT" errexit 0 2
expect_witnesses errexit-rank0 1 2
finish
