# fault-cascade.sh - a rank stops (SIGSTOP) in the middle of a large allreduce and each
# witness exits as soon as it has timed out (FAULT_LINGER=0): a witness that
# times out a moment after another must still name the stopped rank, not
# report the early leaver as dead.
# Regression: with the single-copy path (process_vm_readv), a witness that was
# reading the early leaver's buffer reported SMDDP_EPEER "rank 0 died while this
# rank read its buffer" and lost the root cause.  A failing rank now publishes
# its reason at once, and a failed read quotes it.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_TIMEOUT=2 FAULT_LINGER=0
LAUNCH_OPTS="--grace 5"
WANT_STATUS=42
for i in 1 2 3 4 5; do
	run_job "cascade-$i" 60 3 "$FAULT" stopmid 1 700
	expect_witnesses "cascade-$i" 0 2
done
finish
