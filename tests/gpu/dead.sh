# dead.sh - a rank is SIGKILLed between device calls: the others' streams are released and
# their next call fails naming it, well within SMDDP_TIMEOUT; nothing is left in /dev/shm.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/lib.sh"
export SMDDP_TIMEOUT=30 SMDDP_JOB_ID=gpudead$$
LAUNCH_OPTS="--grace 30"
run_gpu dead 60 4 dead 1
expect_faults dead "saw the dead peer" 0 2 3
[ "$status" -ne 0 ] || fail "smddp-run exited 0 although a rank was killed"
expect_no_leftovers "$SMDDP_JOB_ID"
finish
