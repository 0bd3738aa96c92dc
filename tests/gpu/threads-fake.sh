# threads-fake.sh - three communicators (the world and two splits) driven by three threads
# of each rank at once, each on its own stream, queued device calls (tests/gpu/torch_threads.py's
# pattern, which hung past SMDDP_TIMEOUT on an H200), without a GPU: gpu-conformance threads
# on tests/gpu/fakecuda.c.  All healthy, first calls at once or staggered per rank, with
# jitter; then one rank's thread stops calling (as torch_threads.py's rank 1 thread 2 did
# after an error): its peers fail within SMDDP_TIMEOUT naming it, the other two finish; and
# one communicator destroyed while its mappings close slowly, the other two going on; and
# mappings retired and closed on every round.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/fakelib.sh"
FAKE_SECS=120

expect_threads() {
	local name=$1 n=$2 r
	for r in $(seq 0 $((n - 1))); do
		grep -q "^\[$r\] THREADS-OK rank=$r " "$TDIR/$name.out" &&
			pass "$name: rank $r: every thread as expected" ||
			fail "$name: rank $r: a thread failed or hung"
	done
}
# the first device call of three threads at once: each must find the driver and its buffer
# on the device (lib/core/api.c's probe, which raced before b188c70), a few times over
for i in 1 2 3; do
	fake threads-first$i 2 SMDDP_CUDA_ASYNC=1 -- threads --rounds 1
	expect_threads threads-first$i 2
done
# SMDDP_CUDA_FAST=16K: the small calls take the fast path, every 8th round's allreduce of
# 256 KiB the direct one
fake threads-n2 2 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=16K FAKECUDA_JITTER_US=50 SMDDP_DEBUG=INFO \
	SMDDP_DEBUG_SUBSYS=COLL -- threads --rounds 120
expect_threads threads-n2 2
[ "$(grep -c "read the peers' buffers directly (allreduce [1-9]" "$TDIR/threads-n2.out")" -eq 6 ] &&
	pass "threads-n2: every communicator of every rank took the direct path" ||
	fail "threads-n2: a communicator never took the direct path"
fake threads-n3-stagger 3 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=16K FAKECUDA_JITTER_US=100 -- threads --rounds 80 \
	--stagger --jitter 300
expect_threads threads-n3-stagger 3
# auto: the first device call of each communicator runs blocking and meets the peers
fake threads-n2-auto 2 SMDDP_CUDA_ASYNC=auto -- threads --rounds 60 --jitter 200
expect_threads threads-n2-auto 2
# All streams of a process in one hardware queue (FAKECUDA_CONNECTIONS=1; MPS shares a
# pool among its clients): two communicators' kernels queued in one order on rank 0 and in
# the other on rank 1 wait for each other, each behind the other's in its queue, until
# SMDDP_TIMEOUT (the H200's torch_threads.py run under MPS; NCCL has the same rule).  Not
# fixed: the calls must fail within the deadline naming a rank, never hang.
run_fake threads-n2-1queue 60 2 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=16K FAKECUDA_CONNECTIONS=1 \
	SMDDP_TIMEOUT=10 -- threads --rounds 60 --bounded
expect_threads threads-n2-1queue 2

# Every rank's thread 1 destroys its communicator after 8 rounds, whose first two closes of
# a mapping (its window's and the direct path's, which wait for the whole device) take 4 s
# each, while threads 0 and 2 go on mapping each new buffer of their peers (--fresh): no
# round of theirs may take 2 s.  lib/cuda/ipc.c held its process-wide lock across the
# close, and their rounds took 3-3.5 s.
fake threads-leave 2 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=16K FAKECUDA_IPC_CLOSE_US=4000000:2 -- \
	threads --rounds 100 --jitter 200000 --fresh --leave 1:8 --slow 4000
expect_threads threads-leave 2

# Each round's large allreduce on new buffers (--fresh --every 1): past SD_REG_SLOTS each
# retires a peer's mapping of every communicator, closed (waiting for the whole device)
# while the other communicators' kernels wait for their peers.  Closed on the caller's
# thread, a close on rank 0 waited for kernels waiting for rank 1's thread, itself in a
# close waiting for kernels waiting for rank 0's: SMDDP_TIMEOUT at round 33-37.  The
# closer thread of lib/cuda/ipc.c takes them.
fake threads-churn 2 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=16K SMDDP_TIMEOUT=5 -- threads --rounds 100 \
	--jitter 3000 --fresh --every 1
expect_threads threads-churn 2

# rank 1's thread 2 stops after 5 rounds; SMDDP_TIMEOUT=5
for first in 0 5; do
	run_fake threads-stop$first 90 2 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=16K SMDDP_TIMEOUT=5 -- threads --rounds 80 \
		--stop 1:2:$first
	expect_threads threads-stop$first 2
done
run_fake threads-stop-auto 90 2 SMDDP_CUDA_ASYNC=auto SMDDP_TIMEOUT=5 -- threads --rounds 40 \
	--stop 1:2:0
expect_threads threads-stop-auto 2

# The job stopped (smddp-run's --timeout) while a communicator's first call waits for a
# thread that never calls: that rank's registrations' segment (lib/cuda/direct.c) is still
# linked, and is named by the job, so smddp-run removes it with the job's others.
job=fakethr$$
LAUNCH_OPTS="--grace 1" run_fake threads-killed 4 2 SMDDP_CUDA_ASYNC=1 SMDDP_TIMEOUT=60 \
	SMDDP_JOB_ID=$job -- threads --rounds 40 --stop 1:2:0
[ "$status" -ne 0 ] || fail "threads-killed: smddp-run exited 0 although it stopped the job"
left=$(ls /dev/shm | grep -- "$job")
[ -z "$left" ] && pass "threads-killed: nothing of the job left in /dev/shm" ||
	fail "threads-killed: left behind: $left"
rm -f ${left:+$(printf '/dev/shm/%s ' $left)}
finish
