# fault-sub.sh - failures stay with the communicators they concern.
# An abort of a copy of the world fails the copy (SMDDP_EABORTED naming the
# aborting rank) but not the world; a rank's death does not disturb a
# sub-communicator it is not in, and fails the world (SMDDP_EPEER).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_TIMEOUT=60
LAUNCH_OPTS="--grace 30"

WANT_STATUS=42
run_job subabort-rank2 60 4 "$FAULT" subabort 2
expect_witnesses subabort-rank2 0 1 2 3

WANT_STATUS=137
run_job subkill-rank2 60 4 "$FAULT" subkill 2
expect_witnesses subkill-rank2 0 1 3
finish
