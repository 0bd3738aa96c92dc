# shrink-cases.sh - a planned shrink, a shrink of a split communicator, and bad input.
#
# planned: the excluded rank is alive and calls on the old communicator:
# it fails at once.  split: the ranks of a communicator split in reverse
# order shrink it around a dead rank.  bad: arguments refused on each rank,
# then survivors that pass different lists all fail quickly (rank 2, whose
# list differs, with SMDDP_EMISMATCH) and a shrink with one list then works.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
SHRINK=$top_builddir/tests/integration/shrink
[ -x "$SHRINK" ] || { echo "ERROR: $SHRINK is not built"; exit 99; }
export SMDDP_TIMEOUT=60 SHRINK_FDS=1
LAUNCH_OPTS="--grace 30"

check() { # NAME WANT-STATUS LINE...: each LINE (a regex) is in the output
	local name=$1 want=$2 l
	shift 2
	for l in "$@"; do
		grep -Eq "$l" "$TDIR/$name.out" && pass "$name: $l" || fail "$name: no line $l"
	done
	! grep -q SHRINK-BAD "$TDIR/$name.out" || fail "$(grep SHRINK-BAD "$TDIR/$name.out" | head -3)"
	[ "$status" = "$want" ] && pass "$name: exit $status" || fail "$name: exit $status, expected $want"
	expect_no_leftovers "$SMDDP_JOB_ID"
}

export SMDDP_JOB_ID="shrinkc$$a"
run_job planned-1 90 4 "$SHRINK" planned 1
check planned-1 0 "SHRINK-OK rank=0 size=3" "SHRINK-OK rank=2 size=3" "SHRINK-OK rank=3 size=3" \
	"SHRINK-OK rank=1 excluded: communicator aborted"
export SMDDP_JOB_ID="shrinkc$$b"
run_job planned-0 90 3 "$SHRINK" planned 0
check planned-0 0 "SHRINK-OK rank=1 size=2" "SHRINK-OK rank=2 size=2" \
	"SHRINK-OK rank=0 excluded: communicator aborted"
export SMDDP_JOB_ID="shrinkc$$c"
run_job split-1 90 4 "$SHRINK" split 1
check split-1 137 "SHRINK-OK rank=0 size=3" "SHRINK-OK rank=2 size=3" "SHRINK-OK rank=3 size=3"
export SMDDP_JOB_ID="shrinkc$$d"
run_job bad 90 4 "$SHRINK" bad
check bad 137 "SHRINK-OK rank=0 size=3" "SHRINK-OK rank=1 size=3" "SHRINK-OK rank=2 size=3" \
	"rank 2: different lists: ranks called mismatched" "rank 0: different lists: " \
	"rank 1: different lists: "
finish
