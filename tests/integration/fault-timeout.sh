# fault-timeout.sh - a rank never arrives (sleeps 30 s); with SMDDP_TIMEOUT=2 the others
# must get SMDDP_ETIMEDOUT after 2 to 6 s, naming the rank, the collective, its
# sequence number, op and count (see fault.c).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_TIMEOUT=2
# the stuck rank ignores SIGTERM: smddp-run kills it 5 s after a witness exits
WANT_STATUS=42 # a witness's exit is the first failure
LAUNCH_OPTS="--grace 5"

run_job hang-rank1 60 3 "$FAULT" hang 1 30
expect_witnesses hang-rank1 0 2
# stuck (SIGSTOP) in the middle of a large allreduce, not before it
run_job stopmid-rank1 60 3 "$FAULT" stopmid 1 700
expect_witnesses stopmid-rank1 0 2
# a communicator split with its own timeout_ms (2 s) under SMDDP_TIMEOUT=60:
# the split's deadline is the one that fires (smddp_comm_split_config)
mkdir -p "$TDIR/split"
SMDDP_TIMEOUT=60 LAUNCH_OPTS="--grace 30" run_job split-timeout 60 2 "$FAULT" splittimeout "$TDIR/split"
expect_witnesses split-timeout 0
finish
