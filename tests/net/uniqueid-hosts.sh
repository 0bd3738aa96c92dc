# uniqueid-hosts.sh - communicators made from a unique id between "hosts" (fakehost.sh), and ranks that disagree on the fabric.
#
# smddp_comm_init_rank is how the PyTorch backend makes every communicator:
# rank 0 listens on a dual-stack socket, which sees IPv4 peers as IPv4-mapped
# IPv6 addresses; its fabric endpoint must still be of the peers' address
# format (it once was not, and every multi-host torch job failed at init).
# Then ranks made to choose different providers (rank 1 SMDDP_FABRIC_PROVIDER=
# sockets): every rank fails at init with one sentence naming what rank 0 and
# rank 1 chose and the variables that fix it, within seconds.  Skips (77) in
# a build without libfabric.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/testlib.sh"
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

if fi_info -p sockets -t FI_EP_RDM >/dev/null 2>&1; then
	cat >"$TDIR/other-provider.sh" <<'SH'
[ "$RANK" = 1 ] && export SMDDP_FABRIC_PROVIDER=sockets
exec /bin/sh "$@"
SH
	mkdir -p "$TDIR/ids-mix"
	run_job mix 60 2 /bin/sh "$TDIR/other-provider.sh" "$top_srcdir/tests/net/fakehost.sh" \
		"$INITRANK" basic "$TDIR/ids-mix"
	want="the ranks opened different libfabric endpoints: rank 0 tcp;ofi_rxm .*, rank 1 sockets .*SMDDP_FABRIC_PROVIDER"
	[ "$status" -ne 0 ] || fail "ranks on different providers: the job succeeded"
	for r in 0 1; do
		grep -q "INITRANK-BAD rank=$r: .*$want" "$TDIR/mix.out" &&
			pass "rank $r names both ranks' providers" ||
			fail "rank $r does not say which rank chose which provider"
	done
	[ "${elapsed%.*}" -lt 30 ] && pass "they fail in ${elapsed} s" || fail "they took ${elapsed} s"
else
	echo "(libfabric's sockets provider is missing: the disagreement case is left out)"
fi
finish
