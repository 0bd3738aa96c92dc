# fault-timeout.sh - a rank never arrives (sleeps 30 s); with SMDDP_TIMEOUT=2 the others
# must get SMDDP_ETIMEDOUT after 2 to 6 s, naming the rank, the collective, its
# sequence number, op and count (see fault.c).
. "$top_srcdir/tests/integration/testlib.sh"
export SMDDP_TIMEOUT=2
# the stuck rank ignores SIGTERM: smddp-run kills it 5 s after a witness exits
LAUNCH_OPTS="--grace 5"

run_job hang-rank1 60 3 "$FAULT" hang 1 30
expect_witnesses hang-rank1 0 2
finish
