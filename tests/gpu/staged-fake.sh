# staged-fake.sh - device collectives between "hosts" (lib/cuda/staged.c) without a GPU:
# gpu-conformance linked with tests/gpu/fakecuda.c, ranks told they are on different hosts
# (SMDDP_HOSTID, tests/net/fakehost.sh), so that every call is staged through host memory
# by the fake's asynchronous streams and moved by libfabric's tcp provider on loopback.
# As tests/gpu/staged.sh on a GPU: the matrix on 2 hosts x 1 rank (flat) and 2 hosts x 2
# ranks (hierarchical) with a count cut in five chunks of the staging pipeline, and on
# 6 hosts x 1 (bf16 sums rounded at every hop), queued (auto) and blocking
# (SMDDP_CUDA_ASYNC=0); stream order with the stream held 300 ms by a host function (a
# blocking call waits for it, a queued one returns at once); a bad buffer on one rank; a
# failed CUDA call; device and host memory mixed; a rank killed mid-job, beside a peer of
# its host and alone on its host; all of a process's streams in one hardware queue.  The
# 2 x 2 matrix runs with FAKECUDA_JITTER_US (every stream item starts late by a random few
# hundred us) to shake out copies that only happened to finish in time.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/fakelib.sh"
grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h" || {
	echo "SKIP: built without libfabric"
	exit 77
}
export SMDDP_FABRIC_PROVIDER=tcp
GPU_WRAP="/bin/sh $top_srcdir/tests/net/fakehost.sh"
FAKE_SECS=120

# float32 1048579: five chunks of the staged pipeline (the last of 3 elements)
fake staged-2x1 2 CONFORMANCE_PER_HOST=1 -- matrix --quick --large 1048579
fake staged-2x2 4 CONFORMANCE_PER_HOST=2 FAKECUDA_JITTER_US=200 -- matrix --quick --large 1048579
# six hosts: bf16 sums pass 64, past which a partial result that crosses the network in
# bf16 is rounded at each hop (gpu-conformance allows every hop its rounding there)
fake staged-6x1 6 CONFORMANCE_PER_HOST=1 -- matrix --quick
# over libsmddp's own sockets (a 1 MiB network step), in quarters
# (SMDDP_CUDA_STREAM_CHUNK=0): chunks are no smaller than the step, so a float32 call
# of 1 MiB + 12 bytes is two chunks, not five of 256 KiB; an allreduce's are streamed:
# the first's pieces copied up as the ring reads them and down as it finishes them,
# all but the last let go before the host collective ends
fake staged-sock-2x1 2 CONFORMANCE_PER_HOST=1 SMDDP_NET_TRANSPORT=socket SMDDP_DEBUG=TRACE \
	SMDDP_CUDA_STREAM_CHUNK=0 SMDDP_DEBUG_SUBSYS=COLL -- matrix --quick --large 262147
for r in 0 1; do
	grep -q "^\[$r\] .*staged between hosts: chunks 1-2 of 2, of 262144 elements" \
		"$TDIR/staged-sock-2x1.out" &&
		pass "staged-sock-2x1: rank $r cut 1 MiB + 12 bytes in two chunks" ||
		fail "staged-sock-2x1: rank $r did not cut 1 MiB + 12 bytes in two chunks of 1 MiB"
	grep -q "^\[$r\] .*staged between hosts: chunks 1-2 of 2, of 262144 elements streamed" \
		"$TDIR/staged-sock-2x1.out" &&
		grep -q "^\[$r\] .*staged chunk 1 of 2: .*(8 pieces up and down, 3 let go early)" \
			"$TDIR/staged-sock-2x1.out" &&
		pass "staged-sock-2x1: rank $r streamed the 1 MiB + 12 bytes allreduce in 4 pieces a way" ||
		fail "staged-sock-2x1: rank $r did not stream the allreduce in 4 pieces a way, 3 let go early"
done
# by default (SMDDP_CUDA_STREAM_CHUNK=16M) the same call streams in one chunk
fake staged-sock-default 2 CONFORMANCE_PER_HOST=1 SMDDP_NET_TRANSPORT=socket SMDDP_DEBUG=TRACE \
	SMDDP_DEBUG_SUBSYS=COLL -- matrix --quick --large 262147
for r in 0 1; do
	grep -q "^\[$r\] .*staged between hosts: chunks 1-1 of 1, of 262147 elements streamed" \
		"$TDIR/staged-sock-default.out" &&
		pass "staged-sock-default: rank $r streamed 1 MiB + 12 bytes in one chunk" ||
		fail "staged-sock-default: rank $r did not stream 1 MiB + 12 bytes in one chunk"
done
# SMDDP_CUDA_STREAM_CHUNK: a streamed call in chunks as large as it allows, not
# quarters: an allreduce of float32 of 4 MiB + 12 bytes in two chunks of 2 MiB and the
# 3 elements left, an allgather of as many on 2 ranks in five chunks of 2 MiB in all
# (in parts: chunks 1-3, then 4-5)
fake staged-sock-bigchunk 2 CONFORMANCE_PER_HOST=1 SMDDP_NET_TRANSPORT=socket \
	SMDDP_CUDA_STREAM_CHUNK=2M SMDDP_DEBUG=TRACE SMDDP_DEBUG_SUBSYS=COLL -- matrix --quick \
	--large 1048579
for r in 0 1; do
	grep -q "^\[$r\] .*staged between hosts: chunks 1-3 of 3, of 524288 elements streamed" \
		"$TDIR/staged-sock-bigchunk.out" &&
		grep -q "^\[$r\] .*staged between hosts: chunks 1-3 of 5, of 262144 elements streamed" \
			"$TDIR/staged-sock-bigchunk.out" &&
		pass "staged-sock-bigchunk: rank $r streamed in chunks of 2 MiB" ||
		fail "staged-sock-bigchunk: rank $r did not stream in chunks of 2 MiB"
done
# streamed chunks (4 MiB + 12 bytes in quarters: chunks of 8 pieces and one of 3
# elements, not streamed; by default one chunk) with every copy late by a random few
# hundred us
for sc in 0 16M; do
	fake staged-sock-jitter-$sc 2 CONFORMANCE_PER_HOST=1 SMDDP_NET_TRANSPORT=socket \
		SMDDP_CUDA_STREAM_CHUNK=$sc FAKECUDA_JITTER_US=200 -- matrix --quick --large 1048579
done
# SMDDP_CUDA_STREAM=0: the same allreduce in whole chunks (two of 1 MiB)
fake staged-sock-whole 2 CONFORMANCE_PER_HOST=1 SMDDP_NET_TRANSPORT=socket SMDDP_CUDA_STREAM=0 \
	SMDDP_DEBUG=TRACE SMDDP_DEBUG_SUBSYS=COLL -- matrix --quick --large 262147
grep -q "streamed" "$TDIR/staged-sock-whole.out" &&
	fail "staged-sock-whole: a call was streamed with SMDDP_CUDA_STREAM=0" ||
	pass "staged-sock-whole: no call streamed with SMDDP_CUDA_STREAM=0"
# a stream takes only so many operations (FAKECUDA_QUEUE_DEPTH, as a GPU's command
# queue), and those ahead wait for tickets that only the host side lets go once it
# knows of the call: a call is queued in parts (of at most 128 operations; here 32),
# each told to the host side before the next is queued.  4 MiB + 12 bytes of float32
# over the sockets, streamed: 4 chunks of 16 operations and one of 4, 68 at once,
# which would hang at a depth of 40 as 3000 did on an H100; here parts of 1, 2 and 2
# chunks (the first part also copies up the second chunk).
fake staged-depth 2 CONFORMANCE_PER_HOST=1 SMDDP_NET_TRANSPORT=socket FAKECUDA_QUEUE_DEPTH=40 \
	SMDDP_CUDA_STREAM_CHUNK=0 FAKECUDA_PART_ITEMS=32 SMDDP_DEBUG=TRACE SMDDP_DEBUG_SUBSYS=COLL \
	-- matrix --quick --large 1048579
expect_parts() { # NAME PARTS...: every rank queued its largest call in these parts
	local name=$1 r part
	shift
	for r in 0 1; do
		for part in "$@"; do
			grep -q "^\[$r\] .*staged between hosts: chunks $part," "$TDIR/$name.out" ||
				{ fail "$name: rank $r queued no part of chunks $part"; continue 2; }
		done
		pass "$name: rank $r queued the call in parts $*"
	done
}
expect_parts staged-depth "1-1 of 5" "2-3 of 5" "4-5 of 5"
# whole chunks (4 operations each) in parts of 8 operations, a queue of 12: the same
# call at once (20 operations) would hang; queued and blocking
for mode in auto 0; do
	fake staged-parts-$mode 2 CONFORMANCE_PER_HOST=1 SMDDP_NET_TRANSPORT=socket \
		SMDDP_CUDA_STREAM=0 SMDDP_CUDA_ASYNC=$mode FAKECUDA_QUEUE_DEPTH=12 \
		FAKECUDA_PART_ITEMS=8 SMDDP_DEBUG=TRACE SMDDP_DEBUG_SUBSYS=COLL \
		-- matrix --quick --large 1048579
	expect_parts staged-parts-$mode "1-1 of 5" "2-3 of 5" "4-5 of 5"
done
FAKE_SECS=60 fake staged-order 2 CONFORMANCE_PER_HOST=1 -- order
# calls on two streams share the staging slots: the second waits for the first
FAKE_SECS=60 fake staged-twostreams 2 CONFORMANCE_PER_HOST=1 -- twostreams
# one hardware queue for all of a process's streams (FAKECUDA_CONNECTIONS=1): a
# stream held by a wait holds back every other; the staged path queues all its work on
# the caller's stream, so it must not care
FAKE_SECS=60 fake staged-1queue-order 2 CONFORMANCE_PER_HOST=1 FAKECUDA_CONNECTIONS=1 -- order
fake staged-1queue-2x2 4 CONFORMANCE_PER_HOST=2 FAKECUDA_CONNECTIONS=1 -- matrix --small
# tickets start over every 5 (FAKECUDA_TICKET_LIMIT): staged calls take one per chunk
fake staged-rewind-2x1 2 CONFORMANCE_PER_HOST=1 FAKECUDA_TICKET_LIMIT=5 SMDDP_DEBUG=INFO \
	SMDDP_DEBUG_SUBSYS=COLL -- matrix --small
expect_rewound staged-rewind-2x1 0 1
# the blocking mode (the calling thread runs the host part, returns when done)
fake staged-block-2x1 2 CONFORMANCE_PER_HOST=1 SMDDP_CUDA_ASYNC=0 -- matrix --quick --large 1048579
FAKE_SECS=60 fake staged-block-order 2 CONFORMANCE_PER_HOST=1 SMDDP_CUDA_ASYNC=0 -- order

# a rank passes a short buffer: it gets SMDDP_EINVAL, the others an error naming it;
# rank 0 on device memory, rank 1 on host memory: SMDDP_CHECK_COLL says so
LAUNCH_OPTS="--grace 30" run_fake staged-badbuf 60 2 CONFORMANCE_PER_HOST=1 -- badbuf 1
expect_faults staged-badbuf "got the right error" 0 1
run_fake staged-mixed 60 2 CONFORMANCE_PER_HOST=1 SMDDP_CHECK_COLL=1 -- mixed
expect_faults staged-mixed "got SMDDP_EMISMATCH" 0 1
# under SMDDP_CHECK_COLL, rank 1 passes host memory with a stream right after a call of
# four staged chunks: it compares on its own thread, so only after that call has run
# (the proxy's use of the fabric, the chunks' wire numbers): its own error, a mismatch
# for rank 0, at once (it was a timeout for both, queued)
for m in auto 0; do
	LAUNCH_OPTS="--grace 30" run_fake staged-badmix-$m 60 2 CONFORMANCE_PER_HOST=1 \
		SMDDP_CHECK_COLL=1 SMDDP_CUDA_ASYNC=$m FAULT_COUNT=1048576 -- badmix 1
	expect_faults staged-badmix-$m "got its error or the mismatch in time" 0 1
done
# under SMDDP_CHECK_COLL, rank 1 makes the device call with count 0 or a NULL recvbuf while
# the others make it with 1024 elements: between hosts nothing else compares the calls, so
# the call that queues nothing compares on rank 1's own thread: a mismatch for the others
# naming rank 1, at once, queued and blocking, one rank a host or two (it was a timeout)
for how in zero null; do
	for m in 1 0; do
		LAUNCH_OPTS="--grace 30" run_fake staged-refusedcc-$how-$m 60 2 CONFORMANCE_PER_HOST=1 \
			SMDDP_CHECK_COLL=1 SMDDP_CUDA_ASYNC=$m -- refusedcc $how
		expect_faults staged-refusedcc-$how-$m "got the mismatch or its own error in time" 0 1
	done
	LAUNCH_OPTS="--grace 30" run_fake staged-refusedcc-$how-2x2 60 4 CONFORMANCE_PER_HOST=2 \
		SMDDP_CHECK_COLL=1 SMDDP_CUDA_ASYNC=1 -- refusedcc $how
	expect_faults staged-refusedcc-$how-2x2 "got the mismatch or its own error in time" 0 1 2 3
done

# a CUDA call of one rank fails (FAKECUDA_FAIL: the end event of its call 2), queued and
# blocking: both fail in call 2, told of it
for m in 1 0; do
	LAUNCH_OPTS="--grace 30" run_fake staged-cudafail-$m 60 2 CONFORMANCE_PER_HOST=1 \
		SMDDP_CUDA_ASYNC=$m FAKECUDA_FAIL=1:record:2 -- cudafail 1 2
	expect_faults staged-cudafail-$m "failed in call 2, told of rank 1's event" 0 1
done

# rank 0 aborts while its proxy is inside a call (the fabric's endpoint is the
# proxy's then): it returns at once, rank 1 is told
LAUNCH_OPTS="--grace 30" run_fake staged-abort 60 2 CONFORMANCE_PER_HOST=1 -- abortq
expect_faults staged-abort "aborted in time, or was told" 0 1
# rank 0 cancels while its proxy waits for the held stream's first chunk
LAUNCH_OPTS="--grace 30" run_fake staged-cancel 60 2 CONFORMANCE_PER_HOST=1 \
	SMDDP_JOB_ID=fakecancel$$ -- cancelq
expect_faults staged-cancel "cancelled within 2 s, or was told" 0 1
[ "$(grep -c "STREAM-OK rank=" "$TDIR/staged-cancel.out")" -eq 2 ] ||
	fail "staged-cancel: a rank's stream was not released"
expect_no_leftovers fakecancel$$

# a rank dies: the others' next call fails naming it, streams released
job=fakestaged$$
LAUNCH_OPTS="--grace 30" run_fake staged-dead 60 4 CONFORMANCE_PER_HOST=2 SMDDP_TIMEOUT=30 \
	SMDDP_JOB_ID=$job -- dead 1
expect_faults staged-dead "saw the dead peer" 0 2 3
[ "$status" -ne 0 ] || fail "staged-dead: smddp-run exited 0 although a rank was killed"
expect_no_leftovers "$job"
# ... and when the dead rank is alone on its host: only the fabric can tell
job=fakestaged1$$
LAUNCH_OPTS="--grace 30" run_fake staged-dead-2x1 60 2 CONFORMANCE_PER_HOST=1 SMDDP_TIMEOUT=30 \
	SMDDP_JOB_ID=$job -- dead 1
expect_faults staged-dead-2x1 "saw the dead peer" 0
expect_no_leftovers "$job"
# ... with calls of 4 MiB queued in parts of one chunk each: the parts after a failed
# one are not queued, and the failure names the dead rank; an abort likewise
job=fakestaged2$$
LAUNCH_OPTS="--grace 30" run_fake staged-dead-parts 60 2 CONFORMANCE_PER_HOST=1 SMDDP_TIMEOUT=30 \
	FAULT_COUNT=1048576 SMDDP_CUDA_STREAM_CHUNK=0 FAKECUDA_PART_ITEMS=4 SMDDP_JOB_ID=$job \
	-- dead 1
expect_faults staged-dead-parts "saw the dead peer" 0
expect_no_leftovers "$job"
LAUNCH_OPTS="--grace 30" run_fake staged-abort-parts 60 2 CONFORMANCE_PER_HOST=1 \
	FAULT_COUNT=1048576 SMDDP_CUDA_STREAM_CHUNK=0 FAKECUDA_PART_ITEMS=4 -- abortq
expect_faults staged-abort-parts "aborted in time, or was told" 0 1
finish
