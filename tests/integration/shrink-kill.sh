# shrink-kill.sh - ranks SIGKILLed mid-collective on one host; the survivors shrink and go on.
#
# Rank 0 (the hub of the old rendezvous) and a middle rank die in turn;
# 4 -> 3 -> 2 and 8 -> 7 -> 6 in a row; with SMDDP_SHRINK_ABORT too.  Each
# survivor checks the new communicator against a reference (shrink.c) and
# that no file descriptor is left of the freed ones; nothing is left in
# /dev/shm.  SMDDP_TIMEOUT is 60 s: every shrink must be far faster.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
SHRINK=$top_builddir/tests/integration/shrink
[ -x "$SHRINK" ] || { echo "ERROR: $SHRINK is not built"; exit 99; }
export SMDDP_TIMEOUT=60 SHRINK_FDS=1
LAUNCH_OPTS="--grace 30"

# expect_shrunk NAME SIZE RANK...: each RANK printed SHRINK-OK with the final
# SIZE, nobody SHRINK-BAD, and the first failure was the victim's SIGKILL.
expect_shrunk() {
	local name=$1 size=$2
	shift 2
	expect_shrink_ok "$name" "$size" "$*" "$TDIR/$name.out"
	[ "$status" = 137 ] && pass "$name: smddp-run exited 137 (the SIGKILL)" ||
		fail "$name: smddp-run exited $status, expected 137"
	expect_no_leftovers "$SMDDP_JOB_ID"
}

job=0
shrink_job() { # NAME NRANKS SIZE-AT-END SURVIVORS -- ARGS...
	local name=$1 n=$2 size=$3 survivors=$4
	shift 5
	job=$((job + 1))
	export SMDDP_JOB_ID="shrinkk$$x$job"
	run_job "$name" 90 "$n" "$SHRINK" "$@"
	expect_shrunk "$name" "$size" $survivors
}

shrink_job kill-rank0 4 3 "1 2 3" -- kill 0
shrink_job kill-rank2 4 3 "0 1 3" -- kill 2
shrink_job twice-4-3-2 4 2 "0 2" -- kill 3 1
shrink_job twice-rank0-then-1 4 2 "2 3" -- kill 0 1
shrink_job eight-7-6 8 6 "0 1 2 4 5 7" -- kill 3 6
shrink_job two-at-once 5 3 "1 3 4" -- kill 0+2
SHRINK_FLAGS=abort shrink_job abort-flag 4 2 "1 3" -- kill 2 0
finish
