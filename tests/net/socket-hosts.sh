# socket-hosts.sh - between "hosts" over libsmddp's own TCP sockets (SMDDP_NET_TRANSPORT=socket).
#
# The endpoint of lib/transport/socket/ behind the same table as libfabric's:
# the conformance matrix hierarchical (2 hosts x 2 ranks) and flat (3 x 1)
# (the fake hosts counted as one machine: whether a wait keeps its core),
# the ring's chunk (the endpoint's, or SMDDP_NET_CHUNK as the user set it),
# point to point and uneven all-to-all across hosts (ranks that talk both
# ways sharing one control connection), then failures: a rank
# killed between calls and in the middle of a large allreduce (every
# survivor names it with SMDDP_EPEER), one that exits after an error of
# its own (named with its error), and a mismatch under
# SMDDP_CHECK_COLL.  Then the long messages' paths forced (socket-long.c):
# every message from 4K up by rendezvous (no credit), over 3 data
# connections with a thread each: point to point (and pieces cut at
# different sizes by sender and receiver), collectives checked
# byte for byte, a send that times out and is forgotten while its receiver
# has not posted (the receive then fails naming rank 0, never taking the
# reused buffer's bytes), a rank killed mid-message.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_TIMEOUT=60 SMDDP_NET_TRANSPORT=socket
P2P=$top_builddir/tests/integration/p2p
FAKE=/bin/sh
HOSTLY="$top_srcdir/tests/net/fakehost.sh"

hosts() { # NAME NRANKS PER-HOST
	local name=$1 n=$2 per=$3 s
	run_job "$name" 600 "$n" --env CONFORMANCE_PER_HOST="$per" --env SMDDP_DEBUG=INFO \
		--env SMDDP_DEBUG_SUBSYS=NET $FAKE "$HOSTLY" "$CONFORMANCE" --counts 0,1,7,1001,262147
	[ "$status" -eq 0 ] || fail "$name: exited $status"
	s=$(grep -c "SUMMARY rank [0-9]* of $n: [0-9]* passed, 0 failed" "$TDIR/$name.out")
	[ "$s" -eq "$n" ] && pass "$name: every rank passed its cases" ||
		fail "$name: $s of $n ranks printed a clean summary"
	[ "$(grep -o '^\[[0-9]*\] .*socket transport: listening' "$TDIR/$name.out" | cut -d' ' -f1 | sort -u | wc -l)" -eq "$n" ] &&
		pass "$name: every rank used the socket endpoint" ||
		fail "$name: not every rank used the socket endpoint"
	# fake hosts of one machine: every rank counts them all against its CPUs
	# (nproc: the ones it may run on), and keeps its core only where each has one
	local how="gives its core away"
	[ "$n" -le "$(nproc)" ] && how="keeps its core"
	[ "$(grep -c "socket transport: $n rank(s) of $n on this machine, $(nproc) core(s) for them: a wait $how" \
		"$TDIR/$name.out")" -ge "$n" ] && pass "$name: $n ranks of one machine on $(nproc) cores: a wait $how" ||
		fail "$name: not every rank saw $n ranks on $(nproc) cores (a wait $how)"
	# ranks that talk both ways share one control connection (the peer's,
	# or the lower rank's where both opened one)
	grep -q 'socket transport: sending to rank [0-9]* over its connection to this rank' \
		"$TDIR/$name.out" && pass "$name: control connections used both ways" ||
		fail "$name: no rank sent over a peer's control connection"
}
hosts hier-2x2 4 2
hosts flat-3x1 3 1
# the ring's chunk: the sockets' 1 MiB (halved down to 128 KiB for mid sizes), or the
# user's SMDDP_NET_CHUNK as it is
grep -q "chunks of 1048576 bytes (at least 131072)$" "$TDIR/hier-2x2.out" &&
	pass "hier-2x2: the sockets' chunk of 1 MiB" || fail "hier-2x2: not the sockets' chunk"
run_job chunk-user 60 2 --env CONFORMANCE_PER_HOST=1 --env SMDDP_NET_CHUNK=64K \
	--env SMDDP_DEBUG=INFO --env SMDDP_DEBUG_SUBSYS=NET $FAKE "$HOSTLY" \
	"$top_builddir/cmd/bench/smddp-allreduce-bench" -b 1M -e 1M -n 2 -w 1 -c 1
[ "$status" -eq 0 ] && [ "$(grep -c "chunks of 65536 bytes (at least 65536)$" "$TDIR/chunk-user.out")" -eq 2 ] &&
	pass "SMDDP_NET_CHUNK=64K: every rank's chunk, as it is" ||
	fail "SMDDP_NET_CHUNK=64K: exit $status, or not every rank took the user's chunk"

run_job p2p-3x1 300 3 --env CONFORMANCE_PER_HOST=1 $FAKE "$HOSTLY" "$P2P" matrix
[ "$status" -eq 0 ] && pass "point to point across 3 hosts" || fail "p2p across hosts: exit $status"

HOSTS=(--env CONFORMANCE_PER_HOST=2 $FAKE "$HOSTLY" "$FAULT")
LAUNCH_OPTS="--grace 30"
WANT_STATUS=137
run_job kill-rank3 60 4 "${HOSTS[@]}" kill 3 5
expect_witnesses kill-rank3 0 1 2
run_job killmid-rank1 60 4 "${HOSTS[@]}" killmid 1 700
expect_witnesses killmid-rank1 0 2 3
WANT_STATUS=1
run_job errexit-rank2 60 4 "${HOSTS[@]}" errexit 2 3
expect_witnesses errexit-rank2 0 1 3
WANT_STATUS=137

RDV=(--env SMDDP_SOCKET_CREDIT=0 --env SMDDP_SOCKET_LONG=4K --env SMDDP_SOCKET_NSOCKS=3
	--env SMDDP_SOCKET_THREADS=1)
WANT_STATUS=
LAUNCH_OPTS=
run_job p2p-rdv-3x1 300 3 "${RDV[@]}" --env CONFORMANCE_PER_HOST=1 $FAKE "$HOSTLY" "$P2P" matrix \
	--counts 0,1,1001,65537,300007
[ "$status" -eq 0 ] && pass "point to point by rendezvous over 3 data connections" ||
	fail "p2p by rendezvous: exit $status"
run_job p2p-rdv-pieces 300 3 "${RDV[@]}" --env CONFORMANCE_PER_HOST=1 $FAKE "$HOSTLY" "$P2P" pieces
[ "$status" -eq 0 ] && pass "pieces and size mismatches by rendezvous" ||
	fail "p2p pieces by rendezvous: exit $status"
# Ranks that cut messages into pieces of different sizes (rank 1: 8 MiB, from
# its long threshold; the others 4 MiB): the receiver cuts as the head says.
run_job p2p-mixed-pieces 300 3 --env CONFORMANCE_PER_HOST=1 /bin/sh -c \
	'[ "$RANK" != 1 ] || export SMDDP_SOCKET_LONG=8M; exec /bin/sh "$@"' sh "$HOSTLY" "$P2P" pieces
[ "$status" -eq 0 ] && pass "pieces of different sizes on sender and receiver" ||
	fail "p2p pieces of different sizes: exit $status"
for coll in allreduce allgather reducescatter broadcast alltoall; do
	run_job "rdv-$coll" 300 4 "${RDV[@]}" --env CONFORMANCE_PER_HOST=2 $FAKE "$HOSTLY" \
		"$top_builddir/cmd/bench/smddp-allreduce-bench" --coll "$coll" -b 8 -e 8M -f 8 -n 2 -w 1 -c 1
	[ "$status" -eq 0 ] && grep -q "Out of bounds values : 0 OK" "$TDIR/rdv-$coll.out" &&
		pass "$coll, 2 hosts x 2 ranks, by rendezvous: every byte right" ||
		fail "$coll by rendezvous: exit $status or wrong bytes"
done
run_job rdv-spread 120 2 "${RDV[@]}" --env CONFORMANCE_PER_HOST=1 --env SMDDP_DEBUG=INFO \
	--env SMDDP_DEBUG_SUBSYS=NET $FAKE "$HOSTLY" "$top_builddir/cmd/bench/smddp-allreduce-bench" \
	-b 16M -e 16M -n 2 -w 1 -c 1
grep -q "socket transport: to rank [01], pieces of long messages per data connection: [1-9][0-9]* [1-9][0-9]* [1-9][0-9]*$" \
	"$TDIR/rdv-spread.out" && pass "a long message's pieces went over all 3 data connections" ||
	fail "the pieces did not spread over the 3 data connections"

# Forgotten mid-rendezvous: rank 0's send of 1 MiB times out (its receiver
# has not posted) and rank 0 reuses the buffer; then rank 1 receives.
rm -f "$TDIR"/late-*
LAUNCH_OPTS="--grace 30"
run_job late-rdv 90 2 --env SMDDP_TIMEOUT=2 --env SMDDP_SOCKET_CREDIT=0 --env SMDDP_SOCKET_LONG=4K \
	--env P2P_SYNC_DIR="$TDIR" \
	--env CONFORMANCE_PER_HOST=1 $FAKE "$HOSTLY" "$P2P" late
WANT_STATUS= expect_witnesses late-rdv 0 1
WANT_STATUS=137
run_job killmid-rdv 60 4 "${RDV[@]}" "${HOSTS[@]}" killmid 1 700
expect_witnesses killmid-rdv 0 2 3
finish
