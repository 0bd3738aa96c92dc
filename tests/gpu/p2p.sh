# p2p.sh - sends, receives, groups, alltoallv, gather and scatter on device memory:
# ranks sharing the GPU(s), and between "hosts" (tests/net/fakehost.sh) where the
# build has libfabric.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$top_srcdir/tests/gpu/lib.sh"
export SMDDP_TIMEOUT=60
for n in 1 2 4; do
	run_gpu p2p-n$n 200 $n p2p --large 300007
	expect_summary p2p-n$n $n
done
if grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h"; then
	export CONFORMANCE_PER_HOST=1 SMDDP_FABRIC_PROVIDER=tcp
	GPU_WRAP="/bin/sh $top_srcdir/tests/net/fakehost.sh"
	run_gpu p2p-hosts-3x1 200 3 p2p --large 300007
	expect_summary p2p-hosts-3x1 3
fi
finish
