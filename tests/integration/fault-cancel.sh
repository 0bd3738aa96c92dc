# fault-cancel.sh - smddp_comm_cancel from another thread ends a call that waits for a
# rank that stays away, long before SMDDP_TIMEOUT; that rank then hears of it.
#
# Inside a node, and between "hosts" (tests/net/fakehost.sh) where the
# build has libfabric.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_TIMEOUT=60
WANT_STATUS=42 # a witness's exit is the first failure
LAUNCH_OPTS="--grace 30"

cases() { # PREFIX [launcher args before the program]
	local p=$1
	shift
	mkdir -p "$TDIR/$p"
	run_job "$p-cancel" 90 2 "$@" "$FAULT" cancel "$TDIR/$p"
	expect_witnesses "$p-cancel" 0 1
	# both calls end within seconds: a wait that ignored the cancel
	# would take the whole SMDDP_TIMEOUT
	[ "${elapsed%.*}" -lt 40 ] && pass "$p-cancel: over in ${elapsed} s" ||
		fail "$p-cancel: took ${elapsed} s (SMDDP_TIMEOUT is 60 s)"
}

cases node
if grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h"; then
	cases hosts --env CONFORMANCE_PER_HOST=1 /bin/sh "$top_srcdir/tests/net/fakehost.sh"
fi
finish
