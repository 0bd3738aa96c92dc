# fault-kill.sh - a rank SIGKILLs itself while the others are inside an allreduce.
# The survivors must get SMDDP_EPEER within 10 s (SMDDP_TIMEOUT=60 is far
# away), naming the dead rank and the collective; see fault.c for the checks.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_TIMEOUT=60
LAUNCH_OPTS="--grace 30"
WANT_STATUS=137 # the victim's SIGKILL is the first failure

run_job kill-rank1 60 4 "$FAULT" kill 1 5
expect_witnesses kill-rank1 0 2 3

# rank 0 is the hub of the rendezvous channel: its death must be seen too
run_job kill-rank0 60 3 "$FAULT" kill 0 5
expect_witnesses kill-rank0 1 2
# death in the middle of a large allreduce (4 MiB per rank), not between calls
run_job killmid-rank1 60 4 "$FAULT" killmid 1 700
expect_witnesses killmid-rank1 0 2 3
# a rank dies instead of calling a split, a barrier, a broadcast it is the
# root of, a reduce_scatter, or destroy
for where in split barrier broadcast reduce_scatter destroy; do
	run_job "killat-$where" 60 3 "$FAULT" killat 2 "$where"
	expect_witnesses "killat-$where" 0 1
done
finish
