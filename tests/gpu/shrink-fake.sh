# shrink-fake.sh - a rank dies in the middle of device collectives; the survivors shrink and
# pass the matrix on device buffers on the new communicator (tests/gpu/gpu-shrink.c), under
# the fake CUDA (tests/gpu/fakecuda.c): queued (the fast, direct and proxy paths: with
# SMDDP_CUDA_FAST=2K the matrix's calls of 1003 elements read the peers' buffers directly)
# and blocking, rank 0 among the victims, 4 -> 3 -> 2, the victim dying at a random moment
# or just before a call of each path (the survivors' kernels waiting for it, the failure
# naming that call), the kernels' own deadline as the only witness, a planned shrink,
# SMDDP_SHRINK_ABORT, and between two fake hosts (staged).  Each survivor checks that its
# stream is released, that a call on the old communicator fails at once and that no mapping
# of the dead rank is left once the old communicator is freed; each new communicator makes
# its own device state (its own window for the fast path: the INFO line, once per
# communicator).  About 35 s.  The same on a GPU: tests/gpu/shrink-device.sh.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/fakelib.sh"
export SMDDP_TIMEOUT=60
LAUNCH_OPTS="--on-failure continue"
job=fakeshrink$$

# shrunk NAME SIZE RANK...: each world RANK ended in a communicator of SIZE, nobody printed
# SHRINK-BAD, each survivor's matrix passed, smddp-run exited 0 (--on-failure continue:
# survivors exited 0); nothing of the job is left in /dev/shm
shrunk() {
	local name=$1 size=$2 r
	shift 2
	for r in "$@"; do
		grep -q "SHRINK-OK rank=$r size=$size\$" "$TDIR/$name.out" &&
			pass "$name: world rank $r goes on in a communicator of $size" ||
			fail "$name: world rank $r did not finish in a communicator of $size"
	done
	! grep -q SHRINK-BAD "$TDIR/$name.out" || fail "$(grep SHRINK-BAD "$TDIR/$name.out" | head -3)"
	expect_summary "$name" "$size"
	expect_no_leftovers "$job"
}

# fast_each NAME NCOMMS RANK...: each world RANK turned the fast path on NCOMMS times (the
# world and each shrunk communicator: fresh device state)
fast_each() {
	local name=$1 k=$2 r
	shift 2
	for r in "$@"; do
		[ "$(grep -c "^\[$r\] .*run on kernels that meet their peers themselves" "$TDIR/$name.out")" -eq "$k" ] &&
			pass "$name: world rank $r set the fast path up in each of $k communicators" ||
			fail "$name: world rank $r did not set the fast path up $k times"
	done
}

INFO="SMDDP_DEBUG=INFO SMDDP_DEBUG_SUBSYS=COLL"
# queued, rank 0 at a random moment, then world rank 2: 4 -> 3 -> 2
run_fake queued-0-then-2 120 4 SMDDP_JOB_ID=${job}a SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=2K \
	FAKECUDA_JITTER_US=100 $INFO -- shrink --small 0 2
shrunk queued-0-then-2 2 1 3
fast_each queued-0-then-2 3 1 3
for r in 1 3; do
	grep -q "^\[$r\] .* [1-9][0-9]* call(s) read the peers' buffers directly" \
		"$TDIR/queued-0-then-2.out" && pass "queued-0-then-2: world rank $r took the direct path" ||
		fail "queued-0-then-2: world rank $r never took the direct path"
done
# the victim dies before a call of each path: the survivors' fast kernels, direct kernels,
# proxy wait for it; the failure names that call
run_fake in-fast 120 3 SMDDP_JOB_ID=${job}f SHRINK_IN=fast SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=2K \
	FAKECUDA_JITTER_US=100 -- shrink --small 1
shrunk in-fast 2 0 2
run_fake in-direct 120 3 SMDDP_JOB_ID=${job}d SHRINK_IN=direct SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=2K \
	FAKECUDA_JITTER_US=100 -- shrink --small 0
shrunk in-direct 2 1 2
run_fake in-proxy 120 3 SMDDP_JOB_ID=${job}p SHRINK_IN=proxy SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=2K \
	FAKECUDA_JITTER_US=100 -- shrink --small 2
shrunk in-proxy 2 0 1
# the kernels' own deadline (SMDDP_TIMEOUT 8 s; the peers' health checked every 100 s, so
# only the deadline can see the death): the failure names the dead rank with its pid
run_fake deadline-fast 120 3 SMDDP_JOB_ID=${job}t SMDDP_TIMEOUT=8 SMDDP_LIVENESS_MS=100000 \
	SHRINK_IN=fast SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=2K -- shrink --small 1
shrunk deadline-fast 2 0 2
grep -q "did not arrive within SMDDP_TIMEOUT" "$TDIR/deadline-fast.out" &&
	pass "deadline-fast: the kernels' deadline caught the death" ||
	fail "deadline-fast: the failure was not the kernels' deadline"
# a planned shrink (world rank 1 is left out alive, and its device call on the old
# communicator fails at once), then world rank 2 dies: queued, and blocking
for m in 1 0; do
	run_fake planned-$m 120 4 SMDDP_JOB_ID=${job}l$m SMDDP_CUDA_ASYNC=$m SMDDP_CUDA_FAST=2K \
		FAKECUDA_JITTER_US=100 -- shrink --small p1 2
	shrunk planned-$m 2 0 3
	grep -q "SHRINK-OK rank=1 excluded: " "$TDIR/planned-$m.out" &&
		pass "planned-$m: the rank left out failed its call on the old communicator at once" ||
		fail "planned-$m: the rank left out did not report"
done
# blocking (auto: the ranks share the fake GPU), SMDDP_SHRINK_ABORT
run_fake blocking-abort 120 3 SMDDP_JOB_ID=${job}b SHRINK_FLAGS=abort -- shrink --small 0
shrunk blocking-abort 2 1 2
# between two "hosts" of 2 ranks (SMDDP_HOSTID, tests/net/fakehost.sh): every call staged
# through host memory (lib/cuda/staged.c), libfabric's tcp provider between them; the
# first rank of host 0 dies, then the last of host 1
if grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h"; then
	GPU_WRAP="/bin/sh $top_srcdir/tests/net/fakehost.sh" run_fake staged-2x2 180 4 \
		SMDDP_JOB_ID=${job}s SMDDP_FABRIC_PROVIDER=tcp CONFORMANCE_PER_HOST=2 \
		FAKECUDA_JITTER_US=100 -- shrink --small 0 3
	shrunk staged-2x2 2 1 2
else
	echo "staged-2x2 is left out: built without libfabric"
fi
finish
