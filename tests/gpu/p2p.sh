# p2p.sh - sends, receives, groups, alltoallv, gather and scatter on device memory:
# ranks sharing the GPU(s) by CUDA IPC, and between "hosts" (tests/net/fakehost.sh,
# staged through host memory) where the build has libfabric, 2 hosts x 2 ranks
# mixing both.  --perf prints P2P-PERF lines (a ring, 8 B to 64 MiB) for the log.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/lib.sh"
export SMDDP_TIMEOUT=60
for n in 1 2 4; do
	perf=
	[ "$n" -gt 1 ] && perf=--perf
	SMDDP_DEBUG=INFO run_gpu p2p-n$n 200 $n p2p --large 300007 $perf
	expect_summary p2p-n$n $n
	# Only the cudaMallocAsync ring may be staged inside the node.
	if grep -q "staged through host memory where \(a peer's GPU\|the GPUs\|cudaIpcOpen\|a buffer is on another\)" \
		"$TDIR/p2p-n$n.out"; then
		fail "p2p-n$n: messages inside the node went staged (see the INFO lines)"
	else
		pass "p2p-n$n: messages inside the node went by CUDA IPC"
	fi
done
# a rank killed before a ring: the others name it, in seconds
LAUNCH_OPTS="--grace 30" run_gpu p2p-dead 60 4 p2pdead 1
for r in 0 2 3; do
	grep -q "FAULT-OK rank=$r " "$TDIR/p2p-dead.out" && pass "p2p-dead: rank $r named the dead rank" ||
		fail "p2p-dead: rank $r did not report the dead rank"
done
if grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h"; then
	export SMDDP_FABRIC_PROVIDER=tcp
	GPU_WRAP="/bin/sh $top_srcdir/tests/net/fakehost.sh"
	CONFORMANCE_PER_HOST=1 run_gpu p2p-hosts-3x1 200 3 p2p --large 300007
	expect_summary p2p-hosts-3x1 3
	CONFORMANCE_PER_HOST=2 run_gpu p2p-hosts-2x2 200 4 p2p --large 300007 --perf
	expect_summary p2p-hosts-2x2 4
fi
finish
