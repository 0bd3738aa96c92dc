# fault-noshow.sh - a rank dies before it ever calls smddp_init: the others' smddp_init
# must time out (SMDDP_TIMEOUT=3) naming it.
# Regression: rank 1's rendezvous deadline can pass just before rank 0's; it
# used to hang up, and rank 0 then blamed rank 1 instead of the rank that never
# connected.  Ranks now wait a grace period past their deadline for rank 0's word.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_TIMEOUT=3
LAUNCH_OPTS="--grace 30"
WANT_STATUS=137
for i in 1 2 3 4 5; do
	run_job "noshow-rank2-$i" 60 3 "$FAULT" noshow 2
	expect_witnesses "noshow-rank2-$i" 0 1
done
finish
