# fault-hosts.sh - failures between hosts (ranks that believe they are on 2 hosts, 2 each).
#
# A rank killed between calls, in the middle of a large allreduce, or instead
# of a split, barrier, broadcast it is the root of, or reduce_scatter: every
# survivor, on its host or the other, gets SMDDP_EPEER naming the dead rank
# (through its host's shared memory, the bootstrap, or a peer's notice that
# carries the code) within 10 s although SMDDP_TIMEOUT is 60.  Also: an
# explicit abort (SMDDP_EABORTED), a rank that exits after an error of its own
# (named with that error), an abort of a copy of the world that
# leaves the world usable, a death outside a sub-communicator that leaves it
# usable, and SMDDP_CHECK_COLL mismatches (count 0 and a refused argument
# too).  See tests/integration/fault.c for the checks.  Over libfabric
# (SMDDP_NET_TRANSPORT=fabric; socket-hosts.sh has the sockets' faults).
# Skips (77) in a build without libfabric.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h" || {
	echo "SKIP: built without libfabric"
	exit 77
}
export SMDDP_TIMEOUT=60 SMDDP_NET_TRANSPORT=fabric
HOSTS=(--env CONFORMANCE_PER_HOST=2 /bin/sh "$top_srcdir/tests/net/fakehost.sh" "$FAULT")
LAUNCH_OPTS="--grace 30"

WANT_STATUS=137
run_job kill-rank3 60 4 "${HOSTS[@]}" kill 3 5
expect_witnesses kill-rank3 0 1 2
run_job kill-rank0 60 4 "${HOSTS[@]}" kill 0 5
expect_witnesses kill-rank0 1 2 3
run_job killmid-rank1 60 4 "${HOSTS[@]}" killmid 1 700
expect_witnesses killmid-rank1 0 2 3
for where in split barrier broadcast reduce_scatter; do
	run_job "killat-$where" 60 4 "${HOSTS[@]}" killat 2 "$where"
	expect_witnesses "killat-$where" 0 1 3
done
# exit(1) after an error of its own: named with it on its host (shared memory) and the
# other (rank 0 passes its note on with its death), rank 0 (the hub) too
WANT_STATUS=1
run_job errexit-rank2 60 4 "${HOSTS[@]}" errexit 2 3
expect_witnesses errexit-rank2 0 1 3
run_job errexit-rank0 60 4 "${HOSTS[@]}" errexit 0 3
expect_witnesses errexit-rank0 1 2 3
WANT_STATUS=42
run_job abort-rank1 60 4 "${HOSTS[@]}" abort 1 3
expect_witnesses abort-rank1 0 1 2 3
run_job subabort-rank2 60 4 "${HOSTS[@]}" subabort 2
expect_witnesses subabort-rank2 0 1 2 3
WANT_STATUS=137
run_job subkill-rank3 60 4 "${HOSTS[@]}" subkill 3
expect_witnesses subkill-rank3 0 1 2
WANT_STATUS=42
for kind in count op coll zero null; do
	run_job "mismatch-$kind" 60 4 --env SMDDP_CHECK_COLL=1 "${HOSTS[@]}" mismatch "$kind"
	expect_witnesses "mismatch-$kind" 0 1 2 3
done
finish
