# p2p-fault.sh - a send nobody receives, a receiver that dies, a late receive: errors naming the other rank.
#
# Inside a node, and between "hosts" (tests/net/fakehost.sh) where the
# build has libfabric.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
P2P=$top_builddir/tests/integration/p2p
LAUNCH_OPTS="--grace 30" # the survivors report before smddp-run stops them

cases() { # PREFIX [launcher args before the program]
	local p=$1
	shift
	# Rank 0 sends tag 8, rank 1 waits for tag 9: both time out, each
	# naming the other.
	# Each waits for the other's timeout before it exits (files in $TDIR).
	rm -f "$TDIR"/timeout-*
	run_job "$p-timeout" 60 2 --env SMDDP_TIMEOUT=2 --env P2P_SYNC_DIR="$TDIR" "$@" "$P2P" timeout
	WANT_STATUS= expect_witnesses "$p-timeout" 0 1
	[ "${elapsed%.*}" -lt 30 ] && pass "$p-timeout: over in ${elapsed} s" ||
		fail "$p-timeout: took ${elapsed} s for a 2 s deadline"
	# Rank 1 dies while rank 0 sends it 1 MiB: rank 0 names it.
	run_job "$p-kill" 60 2 --env SMDDP_TIMEOUT=60 "$@" "$P2P" kill
	# (the launcher's status is whichever rank it reaps first: rank 1's
	# SIGKILL or rank 0's exit after its report; either is a failure)
	WANT_STATUS= expect_witnesses "$p-kill" 0
	[ "${elapsed%.*}" -lt 30 ] && pass "$p-kill: over in ${elapsed} s" ||
		fail "$p-kill: took ${elapsed} s (the death should be seen within seconds)"
}

cases node
# Rank 0's send times out and it reuses its buffer, alive; then rank 1
# receives: an error naming rank 0, not the new bytes (inside a node,
# where the receiver reads the sender's memory).
rm -f "$TDIR"/late-*
run_job node-late 90 2 --env SMDDP_TIMEOUT=2 --env P2P_SYNC_DIR="$TDIR" "$P2P" late
WANT_STATUS= expect_witnesses node-late 0 1
if grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h"; then
	cases hosts --env CONFORMANCE_PER_HOST=1 /bin/sh "$top_srcdir/tests/net/fakehost.sh"
fi
finish
