# conformance-hosts.sh - the conformance matrix on ranks that believe they are on several hosts.
#
# Every collective x dtype x op x count x placement, through libfabric (tcp on
# loopback, SMDDP_NET_TRANSPORT=fabric: the default is libsmddp's sockets
# here, which socket-hosts.sh runs) between "hosts" and shared memory inside
# them: hierarchical (2 hosts x 2 ranks), flat (3 hosts x 1 rank; 5 ranks on
# hosts of 2, 2 and 1), and the flat ring forced with SMDDP_ALGO=ring.  Skips
# (77) in a build without libfabric.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h" || {
	echo "SKIP: built without libfabric"
	exit 77
}
export SMDDP_TIMEOUT=60 SMDDP_NET_TRANSPORT=fabric

hosts() { # NAME NRANKS PER-HOST [VAR=VALUE...]
	local name=$1 n=$2 per=$3 s e
	shift 3
	e=(--env CONFORMANCE_PER_HOST="$per")
	for s in "$@"; do e+=(--env "$s"); done
	# The bound catches hangs only: 5 ranks checking 262147-element results
	# on 2 busy cores took 112 s alone and over 240 s under a load of 10.
	run_job "$name" 600 "$n" "${e[@]}" /bin/sh "$top_srcdir/tests/net/fakehost.sh" \
		"$CONFORMANCE" --counts 0,1,7,1001,262147
	if [ "$status" -ne 0 ]; then
		fail "$name: exited $status"
		return
	fi
	s=$(grep -c "SUMMARY rank [0-9]* of $n: [0-9]* passed, 0 failed" "$TDIR/$name.out")
	if [ "$s" -ne "$n" ]; then
		fail "$name: $s of $n ranks printed a clean summary"
	else
		pass "$name: every rank passed its cases"
	fi
}

hosts hier-2x2 4 2 SMDDP_DEBUG=INFO SMDDP_DEBUG_SUBSYS=NET
grep -q 'allreduce: hierarchical algorithm' "$TDIR/hier-2x2.out" ||
	fail "hier-2x2: the hierarchical allreduce was not used"
# rxm's eager limit: raised to 64 KiB unless set (or RDMA devices are here)
if [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	grep -q 'FI_OFI_RXM_EAGER_LIMIT=65536' "$TDIR/hier-2x2.out" ||
		fail "hier-2x2: FI_OFI_RXM_EAGER_LIMIT was not raised"
fi
hosts flat-3x1 3 1
hosts uneven-5 5 2
hosts ring-2x2 4 2 SMDDP_ALGO=ring SMDDP_NET_CHUNK=4K FI_OFI_RXM_EAGER_LIMIT=16384 \
	SMDDP_DEBUG=INFO SMDDP_DEBUG_SUBSYS=NET
! grep -q 'FI_OFI_RXM_EAGER_LIMIT=65536' "$TDIR/ring-2x2.out" ||
	fail "ring-2x2: the user's FI_OFI_RXM_EAGER_LIMIT was overridden"
finish
