# proxy-fake.sh - device collectives on one node (lib/cuda/proxy.c, move.c, fast.c) without a GPU:
# gpu-conformance linked with tests/gpu/fakecuda.c, whose kernels are host copies and
# sd_reduce() queued on the fake's asynchronous streams.  Both modes of SMDDP_CUDA_ASYNC:
# blocking (auto, as ranks share the one fake GPU) and queue-and-return (1: the call's
# kernels wait on the user's stream for the release word, cuStreamWaitValue32, and read
# the arguments that the proxy thread wrote meanwhile), and the kernels that meet their
# peers themselves (fast.c: every collective; direct.c: every larger one).  The matrix,
# stream order with the stream held 300 ms, a mismatch, abort, cancel, a dead rank (on
# every path, and for every collective on the fast one), a failed CUDA call, all streams
# in one hardware queue, a GPU per rank; timing and the GPU itself are tests/gpu/*.sh's.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/fakelib.sh"
# a matrix of 3 ranks on the proxy's path takes ~30 s on an idle 2-core machine and
# past 120 s beside a full test run and another fake suite: a bound, not a timing
FAKE_SECS=300

fake node-n2 2 -- matrix --quick
fake node-n3-queued 3 SMDDP_CUDA_ASYNC=1 FAKECUDA_JITTER_US=200 -- matrix --quick
# queued allreduces up to SMDDP_CUDA_FAST run on kernels that meet their peers themselves
# (lib/cuda/fast.c); with it off every call takes the proxy's path, as before
fake node-n3-queued-proxy 3 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=0 SMDDP_CUDA_DIRECT=0 \
	FAKECUDA_JITTER_US=200 -- matrix --quick
# larger ones read the peers' buffers directly (lib/cuda/direct.c): with SMDDP_CUDA_FAST=4K
# most of the matrix's allreduces, with 0 all of them
fake direct-n3 3 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=4K FAKECUDA_JITTER_US=100 SMDDP_DEBUG=INFO \
	SMDDP_DEBUG_SUBSYS=COLL -- matrix --quick
expect_direct() {
	local name=$1 r
	shift
	for r in "$@"; do
		grep -q "^\[$r\] .* [1-9][0-9]* call(s) read the peers' buffers directly" \
			"$TDIR/$name.out" && pass "$name: rank $r read the peers' buffers directly" ||
			fail "$name: rank $r never took the direct path"
	done
}
expect_direct direct-n3 0 1 2
# ... every other collective too (reduce_scatter and alltoall in place through a stage)
for r in 0 1 2; do
	grep -q "^\[$r\] .* read the peers' buffers directly (allreduce [1-9][0-9]*, allgather [1-9][0-9]*, broadcast [1-9][0-9]*, reduce [1-9][0-9]*, reduce_scatter [1-9][0-9]*, alltoall [1-9][0-9]*)" \
		"$TDIR/direct-n3.out" && pass "direct-n3: rank $r made every direct collective" ||
		fail "direct-n3: rank $r lacks a direct collective"
done
fake direct-n4-1queue 4 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=0 FAKECUDA_CONNECTIONS=1 \
	FAKECUDA_JITTER_US=50 SMDDP_DEBUG=INFO SMDDP_DEBUG_SUBSYS=COLL -- matrix --small
expect_direct direct-n4-1queue 0 1 2 3
# the registrations: more allocations than slots, misses, a freed and remade allocation;
# rank 0 comes late to each new buffer, so the peers' kernels wait until their proxy
# threads have mapped it
fake regs-n3 3 SMDDP_CUDA_ASYNC=1 FAKECUDA_JITTER_US=50 SMDDP_DEBUG=INFO SMDDP_DEBUG_SUBSYS=COLL \
	-- regs
expect_direct regs-n3 0 1 2
for r in 1 2; do
	grep -q "^\[$r\] .*, [1-9][0-9]* by the proxy thread while a kernel waited" "$TDIR/regs-n3.out" &&
		pass "regs-n3: rank $r's proxy mapped a buffer its kernel waited for" ||
		fail "regs-n3: rank $r's kernels never waited for a mapping"
done
# the calls of a torch DDP construction and first steps, in its order, each on a new
# allocation: an allgather and a broadcast of a few words, two broadcasts of flat buckets
# queued together, the first step's one bucket of every parameter (rank 1 late to it),
# the rebuilt buckets as views at offsets of one allocation
fake ddp-n2 2 SMDDP_CUDA_ASYNC=1 FAKECUDA_JITTER_US=100 SMDDP_DEBUG=INFO SMDDP_DEBUG_SUBSYS=COLL \
	-- ddp
expect_direct ddp-n2 0 1
fake ddp-n3 3 SMDDP_CUDA_ASYNC=1 FAKECUDA_JITTER_US=100 -- ddp
# every collective (but sends and receives) of up to SMDDP_CUDA_FAST bytes per peer takes
# the fast path: its count per collective, said at INFO when the communicator goes
expect_fast() {
	local name=$1 n=$2 r c
	for r in $(seq 0 $((n - 1))); do
		for c in allreduce reduce_scatter allgather broadcast reduce alltoall; do
			grep -q "^\[$r\] .*fast path calls:.* $c [1-9]" "$TDIR/$name.out" ||
				fail "$name: rank $r made no fast $c"
		done
	done
	[ "$(grep -c "run on kernels that meet their peers themselves" "$TDIR/$name.out")" -eq "$n" ] &&
		pass "$name: every rank took the fast path, for every collective" ||
		fail "$name: a rank did not take the fast path"
}
fake fast-n2 2 SMDDP_CUDA_ASYNC=1 FAKECUDA_JITTER_US=100 SMDDP_DEBUG=INFO SMDDP_DEBUG_SUBSYS=COLL \
	-- matrix --small
expect_fast fast-n2 2
fake fast-n4 4 SMDDP_CUDA_ASYNC=1 FAKECUDA_JITTER_US=100 SMDDP_DEBUG=INFO SMDDP_DEBUG_SUBSYS=COLL \
	-- matrix --small
expect_fast fast-n4 4
# many blocks per call (SMDDP_CUDA_FAST=2K: regions of 64 bytes), calls alternating parity,
# all streams in one hardware queue
fake fast-n3-blocks 3 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=2K FAKECUDA_CONNECTIONS=1 \
	FAKECUDA_JITTER_US=50 SMDDP_DEBUG=INFO SMDDP_DEBUG_SUBSYS=COLL -- matrix --small
expect_fast fast-n3-blocks 3
FAKE_SECS=60
fake order-n2 2 -- order
# one rank: a copy on the stream, which SMDDP_CUDA_ASYNC=0 waits for like any call
fake order-n1-blocking 1 SMDDP_CUDA_ASYNC=0 -- order
fake order-n1 1 -- order
fake order-n2-queued 2 SMDDP_CUDA_ASYNC=1 -- order
fake errors-n2-queued 2 SMDDP_CUDA_ASYNC=1 -- errors
# two GPUs seen: a call with a stream of the other GPU is refused up front
fake errors-n2-twogpus 2 SMDDP_CUDA_ASYNC=1 FAKECUDA_DEVICES=2 -- errors
grep -q "ok: a stream of another GPU -> .*the stream is of GPU 1 and the buffers are on GPU 0" \
	"$TDIR/errors-n2-twogpus.out" && pass "errors-n2-twogpus: the stream of GPU 1 refused" ||
	fail "errors-n2-twogpus: the stream of GPU 1 was not refused"
fake twostreams-n2-queued 2 SMDDP_CUDA_ASYNC=1 -- twostreams
# every stream of a process in one hardware queue (FAKECUDA_CONNECTIONS=1): the queued
# call's kernels wait on the user's stream itself, so the held stream holds back nothing
# the call needs (the hang of docs/internals/gpu-measurements.md, which this reproduced)
fake order-n2-1queue 2 SMDDP_CUDA_ASYNC=1 FAKECUDA_CONNECTIONS=1 -- order
fake errors-n2-1queue 2 SMDDP_CUDA_ASYNC=1 FAKECUDA_CONNECTIONS=1 -- errors
# ranks in different modes (auto decides per rank: two sharing a GPU block, one alone
# queues): a queued call takes more tickets than a blocking one, and the calls still
# match by their number
GPU_WRAP="/bin/sh $top_srcdir/tests/integration/rank0-env.sh SMDDP_CUDA_ASYNC=1" \
	fake mixed-modes-n2 2 SMDDP_CUDA_ASYNC=0 -- matrix --small
FAKE_SECS=120
fake node-n3-1queue 3 SMDDP_CUDA_ASYNC=1 FAKECUDA_CONNECTIONS=1 -- matrix --quick
# a GPU per rank (FAKECUDA_NOPEER: no rank shares one): each rank moves its share
fake node-n3-pergpu 3 SMDDP_CUDA_ASYNC=1 FAKECUDA_NOPEER=1 FAKECUDA_CONNECTIONS=1 -- matrix --quick
# tickets start over every 5 (FAKECUDA_TICKET_LIMIT) rather than near 2^32: the queue
# drains and both words are reset, between calls on one stream and on two
# (SMDDP_CUDA_FAST=0 SMDDP_CUDA_DIRECT=0: the proxy's tickets, which the kernels' paths take none of)
fake rewind-n2-queued 2 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=0 SMDDP_CUDA_DIRECT=0 FAKECUDA_TICKET_LIMIT=5 SMDDP_DEBUG=INFO \
	SMDDP_DEBUG_SUBSYS=COLL -- matrix --small
expect_rewound rewind-n2-queued 0 1
fake rewind-twostreams-queued 2 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=0 SMDDP_CUDA_DIRECT=0 FAKECUDA_TICKET_LIMIT=5 SMDDP_DEBUG=INFO \
	SMDDP_DEBUG_SUBSYS=COLL -- twostreams
expect_rewound rewind-twostreams-queued 0 1

job=fakeproxy$$
export SMDDP_TIMEOUT=30
LAUNCH_OPTS="--grace 30" run_fake mismatch-queued 60 3 SMDDP_CUDA_ASYNC=1 SMDDP_JOB_ID=${job}m \
	-- mismatch
expect_faults mismatch-queued "was told of the mismatch" 0 1 2
# rank 1 alone refuses a call (its own arguments, or count 0): the call still takes its
# number there, and every rank fails the call that meets rank 1's next one, blocking or
# queued, rather than pair them and move the wrong data
for how in short zero gather; do
	LAUNCH_OPTS="--grace 30" run_fake refused-$how 60 3 SMDDP_JOB_ID=${job}r -- refused $how
	expect_faults refused-$how "failed the call that met rank 1's next" 0 1 2
	LAUNCH_OPTS="--grace 30" run_fake refused-$how-queued 60 3 SMDDP_CUDA_ASYNC=1 \
		SMDDP_JOB_ID=${job}r -- refused $how
	expect_faults refused-$how-queued "failed the call that met rank 1's next" 0 1 2
done
# under SMDDP_CHECK_COLL, rank 1 passes host memory with a stream while rank 0 makes the
# device call: its own error, and a mismatch naming it for rank 0, at once, whichever way
# rank 0's call goes: the kernels of the fast or the direct path (queued: they meet no host
# barrier, so the refusal is written where they look; it was a timeout for both), the
# proxy's meeting, or the blocking mode's
for way in fast direct proxy block; do
	case $way in
	fast) knobs="SMDDP_CUDA_ASYNC=1" ;;
	direct) knobs="SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=0" ;;
	proxy) knobs="SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=0 SMDDP_CUDA_DIRECT=0" ;;
	block) knobs="SMDDP_CUDA_ASYNC=0" ;;
	esac
	LAUNCH_OPTS="--grace 30" run_fake badmix-$way 60 2 SMDDP_CHECK_COLL=1 $knobs \
		SMDDP_JOB_ID=${job}b -- badmix 1
	expect_faults badmix-$way "got its error or the mismatch in time" 0 1
done
# ... with rank 0's kernel a second late and rank 1's next device call at once, whose
# number replaces the refusal before rank 0's kernel reads it: rank 0 still fails in
# seconds naming rank 1 (that call is ahead), and rank 1's next call fails
for way in fast direct; do
	case $way in
	fast) knobs="SMDDP_CUDA_ASYNC=1" ;;
	direct) knobs="SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=0" ;;
	esac
	LAUNCH_OPTS="--grace 30" run_fake badmixnext-$way 60 2 SMDDP_CHECK_COLL=1 $knobs \
		SMDDP_JOB_ID=${job}n -- badmixnext 1
	expect_faults badmixnext-$way "got its error or the mismatch in time" 0 1
done
LAUNCH_OPTS="--grace 30" run_fake abort-queued 60 2 SMDDP_CUDA_ASYNC=1 -- abortq
expect_faults abort-queued "aborted in time, or was told" 0 1
# the same faults met by direct kernels (SMDDP_CUDA_FAST=0: every allreduce direct)
LAUNCH_OPTS="--grace 30" run_fake mismatch-direct 60 3 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=0 \
	SMDDP_JOB_ID=${job}m -- mismatch
expect_faults mismatch-direct "was told of the mismatch" 0 1 2
LAUNCH_OPTS="--grace 30" run_fake abort-direct 60 2 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=0 -- abortq
expect_faults abort-direct "aborted in time, or was told" 0 1
LAUNCH_OPTS="--grace 30" run_fake cancel-direct 60 2 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=0 \
	SMDDP_JOB_ID=${job}c -- cancelq
expect_faults cancel-direct "cancelled within 2 s, or was told" 0 1
[ "$(grep -c "STREAM-OK rank=" "$TDIR/cancel-direct.out")" -eq 2 ] ||
	fail "cancel-direct: a rank's stream was not released"
LAUNCH_OPTS="--grace 30" run_fake dead-direct 60 4 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=0 \
	SMDDP_JOB_ID=${job}d -- dead 1
expect_faults dead-direct "saw the dead peer" 0 2 3
[ "$status" -ne 0 ] || fail "dead-direct: smddp-run exited 0 although a rank was killed"
# the same faults met by the fast kernels of the other collectives (broadcast's and reduce's
# root the last rank): mismatch at 3 ranks, abort and cancel at 2, a dead rank at 4
for coll in reduce_scatter allgather broadcast reduce alltoall; do
	LAUNCH_OPTS="--grace 30" run_fake mismatch-fast-$coll 60 3 SMDDP_CUDA_ASYNC=1 \
		FAKECUDA_JITTER_US=100 SMDDP_JOB_ID=${job}m -- mismatch --coll $coll
	expect_faults mismatch-fast-$coll "was told of the mismatch" 0 1 2
	LAUNCH_OPTS="--grace 30" run_fake abort-fast-$coll 60 2 SMDDP_CUDA_ASYNC=1 -- abortq --coll $coll
	expect_faults abort-fast-$coll "aborted in time, or was told" 0 1
	LAUNCH_OPTS="--grace 30" run_fake cancel-fast-$coll 60 2 SMDDP_CUDA_ASYNC=1 SMDDP_JOB_ID=${job}c \
		-- cancelq --coll $coll
	expect_faults cancel-fast-$coll "cancelled within 2 s, or was told" 0 1
	[ "$(grep -c "STREAM-OK rank=" "$TDIR/cancel-fast-$coll.out")" -eq 2 ] ||
		fail "cancel-fast-$coll: a rank's stream was not released"
	LAUNCH_OPTS="--grace 30" run_fake dead-fast-$coll 60 4 SMDDP_CUDA_ASYNC=1 FAKECUDA_JITTER_US=100 \
		SMDDP_JOB_ID=${job}d -- dead 1 --coll $coll
	expect_faults dead-fast-$coll "saw the dead peer" 0 2 3
	[ "$status" -ne 0 ] || fail "dead-fast-$coll: smddp-run exited 0 although a rank was killed"
done
# ... and by the direct kernels of the other collectives (SMDDP_CUDA_FAST=0)
for coll in allgather broadcast reduce reduce_scatter alltoall; do
	LAUNCH_OPTS="--grace 30" run_fake mismatch-direct-$coll 60 3 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=0 \
		FAKECUDA_JITTER_US=100 SMDDP_JOB_ID=${job}m -- mismatch --coll $coll
	expect_faults mismatch-direct-$coll "was told of the mismatch" 0 1 2
	LAUNCH_OPTS="--grace 30" run_fake abort-direct-$coll 60 2 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=0 \
		-- abortq --coll $coll
	expect_faults abort-direct-$coll "aborted in time, or was told" 0 1
	LAUNCH_OPTS="--grace 30" run_fake cancel-direct-$coll 60 2 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=0 \
		SMDDP_JOB_ID=${job}c -- cancelq --coll $coll
	expect_faults cancel-direct-$coll "cancelled within 2 s, or was told" 0 1
	[ "$(grep -c "STREAM-OK rank=" "$TDIR/cancel-direct-$coll.out")" -eq 2 ] ||
		fail "cancel-direct-$coll: a rank's stream was not released"
	LAUNCH_OPTS="--grace 30" run_fake dead-direct-$coll 60 4 SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=0 \
		FAKECUDA_JITTER_US=100 SMDDP_JOB_ID=${job}d -- dead 1 --coll $coll
	expect_faults dead-direct-$coll "saw the dead peer" 0 2 3
	[ "$status" -ne 0 ] || fail "dead-direct-$coll: smddp-run exited 0 although a rank was killed"
done
# smddp_comm_cancel while the proxy waits for a held stream to reach the call
LAUNCH_OPTS="--grace 30" run_fake cancel-queued 60 2 SMDDP_CUDA_ASYNC=1 SMDDP_JOB_ID=${job}c \
	-- cancelq
expect_faults cancel-queued "cancelled within 2 s, or was told" 0 1
[ "$(grep -c "STREAM-OK rank=" "$TDIR/cancel-queued.out")" -eq 2 ] ||
	fail "cancel-queued: a rank's stream was not released"
expect_no_leftovers "${job}c"
LAUNCH_OPTS="--grace 30" run_fake dead-queued 60 4 SMDDP_CUDA_ASYNC=1 SMDDP_JOB_ID=${job}d -- dead 1
expect_faults dead-queued "saw the dead peer" 0 2 3
[ "$status" -ne 0 ] || fail "dead-queued: smddp-run exited 0 although a rank was killed"
# a CUDA call of one rank fails (FAKECUDA_FAIL) in its call 2, queued halfway (its
# kernel's launch, its end event) or run blocking (the worker's kernel): every rank
# fails in call 2 naming that rank and step, later calls fail at once; a slot whose end
# could not be recorded is never freed under its stream
# (SMDDP_CUDA_FAST=0 SMDDP_CUDA_DIRECT=0: the proxy's ring; the fast path's launch fails below)
LAUNCH_OPTS="--grace 30" run_fake cudafail-launch-queued 60 3 SMDDP_CUDA_ASYNC=1 \
	SMDDP_CUDA_FAST=0 SMDDP_CUDA_DIRECT=0 FAKECUDA_FAIL=1:launch:2 -- cudafail 1 2
expect_faults cudafail-launch-queued "failed in call 2, told of rank 1's kernel" 0 1 2
LAUNCH_OPTS="--grace 30" run_fake cudafail-record-queued 60 3 SMDDP_CUDA_ASYNC=1 \
	SMDDP_CUDA_FAST=0 SMDDP_CUDA_DIRECT=0 FAKECUDA_FAIL=1:record:4 -- cudafail 1 2
expect_faults cudafail-record-queued "failed in call 2, told of rank 1's event" 0 1 2
grep -q "^\[1\].*could not be recorded: its release word, kernel arguments" \
	"$TDIR/cudafail-record-queued.out" && pass "cudafail-record-queued: the blind slot is kept" ||
	fail "cudafail-record-queued: rank 1 did not keep the memory of its blind slot"
LAUNCH_OPTS="--grace 30" run_fake cudafail-blocking 60 3 FAKECUDA_FAIL=0:launch:2 -- cudafail 0 2
expect_faults cudafail-blocking "failed in call 2, told of rank 0's kernel" 0 1 2
expect_no_leftovers "$job"
finish
