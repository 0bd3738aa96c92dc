# staged.sh - device collectives between "hosts": ranks on this one GPU told they are on
# different hosts (SMDDP_HOSTID, tests/net/fakehost.sh), so that every call is staged
# through pinned host memory and moved by libfabric's tcp provider on loopback.
# The matrix on 2 hosts x 1 rank (flat) and 2 hosts x 2 ranks (hierarchical) with a
# large count cut in several chunks, queued (auto) and blocking (SMDDP_CUDA_ASYNC=0);
# stream ordering in both modes; a bad buffer on one rank; a rank killed mid-job.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/lib.sh"
grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h" || {
	echo "SKIP: built without libfabric"
	exit 77
}
export SMDDP_TIMEOUT=60 SMDDP_FABRIC_PROVIDER=tcp
GPU_WRAP="/bin/sh $top_srcdir/tests/net/fakehost.sh"

# float32 1048579: five chunks of the staged pipeline (the last of 3 elements)
export CONFORMANCE_PER_HOST=1
run_gpu staged-2x1 300 2 matrix --quick --large 1048579
expect_summary staged-2x1 2
export CONFORMANCE_PER_HOST=2
run_gpu staged-2x2 300 4 matrix --quick --large 1048579
expect_summary staged-2x2 4
export CONFORMANCE_PER_HOST=1
# 64 MiB + 12 bytes of float32: 17 chunks, queued in parts of at most 128 stream
# operations each (lib/cuda/staged.c), queued and blocking
run_gpu staged-parts 300 2 matrix --quick --large 16777219
expect_summary staged-parts 2
SMDDP_CUDA_ASYNC=0 run_gpu staged-block-parts 300 2 matrix --quick --large 16777219
expect_summary staged-block-parts 2
run_gpu staged-3x1 200 3 matrix --small
expect_summary staged-3x1 3
run_gpu staged-order 120 2 order
expect_summary staged-order 2
run_gpu staged-twostreams 120 2 twostreams
expect_summary staged-twostreams 2
# rank 0 aborts while its proxy is inside a call: it returns at once, rank 1 is told
LAUNCH_OPTS="--grace 30" run_gpu staged-abort 60 2 abortq
for r in 0 1; do
	grep -q "FAULT-OK rank=$r " "$TDIR/staged-abort.out" &&
		pass "staged-abort: rank $r aborted in time, or was told" ||
		fail "staged-abort: rank $r: $(grep "FAULT-BAD rank=$r" "$TDIR/staged-abort.out" | head -1)"
done
unset LAUNCH_OPTS
# the blocking mode: the calling thread runs the host part
SMDDP_CUDA_ASYNC=0 run_gpu staged-block-2x1 200 2 matrix --small
expect_summary staged-block-2x1 2
SMDDP_CUDA_ASYNC=0 run_gpu staged-block-order 120 2 order
expect_summary staged-block-order 2

# a rank passes a short buffer: it gets SMDDP_EINVAL, the others (already in
# the call) an error naming it in seconds, not after SMDDP_TIMEOUT
export CONFORMANCE_PER_HOST=1
LAUNCH_OPTS="--grace 30"
run_gpu staged-badbuf 60 2 badbuf 1
for r in 0 1; do
	grep -q "FAULT-OK rank=$r " "$TDIR/staged-badbuf.out" &&
		pass "staged-badbuf: rank $r got the right error" ||
		fail "staged-badbuf: rank $r did not get the right error"
done

# rank 0 on device memory, rank 1 on host memory: SMDDP_CHECK_COLL says so
SMDDP_CHECK_COLL=1 run_gpu staged-mixed 60 2 mixed
for r in 0 1; do
	grep -q "FAULT-OK rank=$r " "$TDIR/staged-mixed.out" &&
		pass "staged-mixed: rank $r got SMDDP_EMISMATCH" ||
		fail "staged-mixed: rank $r did not get SMDDP_EMISMATCH"
done

# a rank dies: the others' next call fails naming it, streams released
export CONFORMANCE_PER_HOST=2 SMDDP_TIMEOUT=30 SMDDP_JOB_ID=gpustaged$$
LAUNCH_OPTS="--grace 30"
run_gpu staged-dead 60 4 dead 1
for r in 0 2 3; do
	if grep -q "FAULT-OK rank=$r " "$TDIR/staged-dead.out"; then
		pass "staged-dead: rank $r saw the dead peer"
	else
		fail "staged-dead: rank $r did not report the dead peer"
	fi
done
grep -q FAULT-BAD "$TDIR/staged-dead.out" && fail "$(grep FAULT-BAD "$TDIR/staged-dead.out" | head -3)"
if ls /dev/shm | grep -q "smddp-$SMDDP_JOB_ID"; then
	fail "left behind: $(ls /dev/shm | grep "smddp-$SMDDP_JOB_ID")"
fi
finish
