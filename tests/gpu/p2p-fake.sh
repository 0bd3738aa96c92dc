# p2p-fake.sh - the device p2p protocol (lib/cuda/p2p.c) without a GPU: gpu-conformance's
# p2p mode linked with tests/gpu/fakecuda.c, "device memory" in one file of /dev/shm that
# every rank maps at one address, streams that run their work in order on threads of their
# own (asynchronous, as a GPU's: a call that reads a buffer before its stream got there
# gets wrong data here).  Checks the rounds, matching, sizes, staging and stream order;
# the GPU itself (real IPC, copy engines, speed) is tests/gpu/p2p.sh's.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/fakelib.sh"

for n in 1 2 3 4; do
	fake ipc-n$n $n -- p2p --large 30011
done
# receivers that cannot map their peers' buffers ask for the data staged
fake nopeer-n3 3 FAKECUDA_NOPEER=1 SMDDP_DEBUG=INFO -- p2p --large 30011
grep -q "staged through host memory where a peer's GPU is not visible" "$TDIR/nopeer-n3.out" &&
	pass "nopeer-n3: said at INFO why it stages" ||
	fail "nopeer-n3: no INFO line saying why it stages"
# a rank killed before a ring: the others name it, in seconds
LAUNCH_OPTS="--grace 30" run_fake p2pdead 90 4 -- p2pdead 1
expect_faults p2pdead "named the dead rank" 0 2 3
if grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h"; then
	# between "hosts" (staged), and 2 hosts x 2 ranks: IPC inside, staged across
	export SMDDP_FABRIC_PROVIDER=tcp
	GPU_WRAP="/bin/sh $top_srcdir/tests/net/fakehost.sh"
	fake hosts-3x1 3 CONFORMANCE_PER_HOST=1 -- p2p --large 30011
	fake hosts-2x2 4 CONFORMANCE_PER_HOST=2 -- p2p --large 30011
fi
finish
