# p2p-fake.sh - the device p2p protocol (lib/cuda/p2p.c) without a GPU: gpu-conformance's
# p2p mode linked with tests/gpu/fakecuda.c, "device memory" in one file of /dev/shm that
# every rank maps at one address.  Checks the rounds, matching, sizes and staging; the
# GPU itself (stream order, copies, real IPC) is tests/gpu/p2p.sh's.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
: "${top_builddir:?top_builddir is not set: run me through make check}"
: "${top_srcdir:?top_srcdir is not set: run me through make check}"
PROG=$top_builddir/tests/gpu/p2p-fake
RUN=$top_builddir/cmd/smddp-run
if [ ! -x "$PROG" ]; then
	echo "SKIP: built without CUDA (configure --with-cuda builds the fake too)"
	exit 77
fi
FAIL_GOES_ON=1
. "$top_srcdir/tests/lib.sh"
TDIR=$(mktemp -d "${TMPDIR:-/tmp}/smddp-p2pfake.XXXXXX")
export FAKECUDA_FILE=/dev/shm/smddp-fakecuda-$$
trap 'rm -rf "$TDIR"; rm -f "$FAKECUDA_FILE"' EXIT
export SMDDP_TIMEOUT=60

# fake NAME NRANKS [ENV=VALUE...] -- ARGS...: every rank's clean SUMMARY, exit 0
fake() {
	local name=$1 n=$2 envs args s st
	shift 2
	split_envs "$@"
	rm -f "$FAKECUDA_FILE"
	timeout -k 5 200 env "${envs[@]}" "$RUN" -n "$n" --timeout 180 ${GPU_WRAP:-} "$PROG" \
		"${args[@]}" >"$TDIR/$name.out" 2>&1
	st=$?
	echo "--- $name: $n ranks: p2p-fake ${args[*]} -> exit $st"
	sed 's/^/    /' "$TDIR/$name.out"
	s=$(grep -c "SUMMARY rank [0-9]* of $n: [0-9]* passed, 0 failed" "$TDIR/$name.out")
	if [ "$st" -eq 0 ] && [ "$s" -eq "$n" ]; then
		pass "$name: every one of $n ranks passed"
	else
		fail "$name: exit $st, $s of $n ranks printed a clean summary"
	fi
}

for n in 1 2 3 4; do
	fake ipc-n$n $n -- p2p --large 30011
done
# receivers that cannot map their peers' buffers ask for the data staged
fake nopeer-n3 3 FAKECUDA_NOPEER=1 SMDDP_DEBUG=INFO -- p2p --large 30011
grep -q "staged through host memory where a peer's GPU is not visible" "$TDIR/nopeer-n3.out" &&
	pass "nopeer-n3: said at INFO why it stages" ||
	fail "nopeer-n3: no INFO line saying why it stages"
# a rank killed before a ring: the others name it, in seconds
rm -f "$FAKECUDA_FILE"
timeout -k 5 120 env SMDDP_TIMEOUT=60 "$RUN" -n 4 --grace 30 --timeout 90 "$PROG" p2pdead 1 \
	>"$TDIR/dead.out" 2>&1
sed 's/^/    /' "$TDIR/dead.out"
for r in 0 2 3; do
	grep -q "FAULT-OK rank=$r " "$TDIR/dead.out" && pass "p2pdead: rank $r named the dead rank" ||
		fail "p2pdead: rank $r did not report the dead rank"
done
if grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h"; then
	# between "hosts" (staged), and 2 hosts x 2 ranks: IPC inside, staged across
	export SMDDP_FABRIC_PROVIDER=tcp
	GPU_WRAP="/bin/sh $top_srcdir/tests/net/fakehost.sh"
	fake hosts-3x1 3 CONFORMANCE_PER_HOST=1 -- p2p --large 30011
	fake hosts-2x2 4 CONFORMANCE_PER_HOST=2 -- p2p --large 30011
fi
finish
