# uniqueid-hosts.sh - communicators made from a unique id between "hosts" (fakehost.sh), and ranks that disagree on the fabric.
#
# smddp_comm_init_rank is how the PyTorch backend makes every communicator:
# rank 0 listens on a dual-stack socket, which sees IPv4 peers as IPv4-mapped
# IPv6 addresses; its fabric endpoint must still be of the peers' address
# format (it once was not, and every multi-host torch job failed at init).
# Then ranks made to choose different providers (rank 1 SMDDP_FABRIC_PROVIDER=
# sockets), or different endpoints (rank 0 libsmddp's sockets, rank 1
# libfabric): every rank fails at init with one sentence naming what rank 0
# and rank 1 chose and the variables that fix it, within seconds.  Skips (77) in
# a build without libfabric.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h" || {
	echo "SKIP: built without libfabric"
	exit 77
}
INITRANK=$top_builddir/tests/integration/initrank
export SMDDP_TIMEOUT=60
for n in 2 3; do
	mkdir -p "$TDIR/ids-$n"
	run_job "initrank-$n" 60 "$n" /bin/sh "$top_srcdir/tests/net/fakehost.sh" "$INITRANK" basic "$TDIR/ids-$n"
	[ "$status" -eq 0 ] && [ "$(grep -c 'INITRANK-OK rank=' "$TDIR/initrank-$n.out")" -eq "$n" ] &&
		pass "$n ranks on $n hosts: communicators from unique ids" ||
		fail "$n ranks on $n hosts from unique ids: exit $status"
done

# both_fail NAME WANT WHAT: ranks 0 and 1 (pid0, pid1, started at t0, output
# in $TDIR/NAME.R) must each exit 1 with an INITRANK-BAD line matching WANT,
# within 30 s.
both_fail() {
	local name=$1 want=$2 what=$3 st r
	wait "$pid0"
	st0=$?
	wait "$pid1"
	st1=$?
	elapsed=$(since "$t0")
	cat "$TDIR/$name.0" "$TDIR/$name.1" | sed 's/^/    /'
	for r in 0 1; do
		eval "st=\$st$r"
		[ "$st" -eq 1 ] && grep -q "INITRANK-BAD rank=$r: .*$want" "$TDIR/$name.$r" &&
			pass "$what: rank $r fails naming both" ||
			fail "$what: rank $r (exit $st) does not name both"
	done
	[ "${elapsed%.*}" -lt 30 ] && pass "they fail in ${elapsed} s" || fail "they took ${elapsed} s"
}

if fi_info -p sockets -t FI_EP_RDM >/dev/null 2>&1; then
	# Without a launcher: smddp-run stops the job at the first rank that
	# fails, and the other must be heard too.
	mkdir -p "$TDIR/ids-mix"
	t0=$(now)
	for r in 0 1; do
		prov=
		[ "$r" = 1 ] && prov=sockets
		env SMDDP_CONFIG=/dev/null SMDDP_NET_TRANSPORT=fabric SMDDP_FABRIC_PROVIDER=$prov \
			SMDDP_RANK=$r SMDDP_WORLD_SIZE=2 \
			SMDDP_HOSTID=fake-h$r timeout -k 5 60 "$INITRANK" basic "$TDIR/ids-mix" \
			>"$TDIR/mix.$r" 2>&1 &
		eval "pid$r=$!"
	done
	both_fail mix "the ranks opened different libfabric endpoints: rank 0 tcp;ofi_rxm .*, rank 1 sockets .*SMDDP_NET_TRANSPORT and SMDDP_FABRIC_PROVIDER" \
		"libfabric providers tcp against sockets"
else
	echo "(libfabric's sockets provider is missing: the disagreement case is left out)"
fi

# Rank 0 on libsmddp's sockets, rank 1 on libfabric: the same sentence.
mkdir -p "$TDIR/ids-ep"
t0=$(now)
for r in 0 1; do
	tr=socket
	[ "$r" = 1 ] && tr=fabric
	env SMDDP_CONFIG=/dev/null SMDDP_NET_TRANSPORT=$tr SMDDP_RANK=$r SMDDP_WORLD_SIZE=2 \
		SMDDP_HOSTID=fake-h$r timeout -k 5 60 "$INITRANK" basic "$TDIR/ids-ep" \
		>"$TDIR/ep.$r" 2>&1 &
	eval "pid$r=$!"
done
both_fail ep "the ranks opened different libfabric endpoints: rank 0 sockets .smddp. .*, rank 1 tcp;ofi_rxm .*SMDDP_NET_TRANSPORT" \
	"sockets against libfabric"
finish
