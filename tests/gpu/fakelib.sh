# tests/gpu/fakelib.sh - helpers of the tests on tests/gpu/fakecuda.c (sourced): skip without a CUDA build,
# the fake's "device memory" file, one bounded run per case.  PROG: the program (default
# tests/gpu/p2p-fake).
set -u
: "${top_builddir:?top_builddir is not set: run me through make check}"
: "${top_srcdir:?top_srcdir is not set: run me through make check}"
PROG=${PROG:-$top_builddir/tests/gpu/p2p-fake}
RUN=$top_builddir/cmd/smddp-run
if [ ! -x "$PROG" ]; then
	echo "SKIP: built without CUDA (configure --with-cuda builds the fake too)"
	exit 77
fi
FAIL_GOES_ON=1
. "$top_srcdir/tests/lib.sh"
TDIR=$(mktemp -d "${TMPDIR:-/tmp}/smddp-fake.XXXXXX")
# Every rank maps this file at one address; made afresh for each case.
export FAKECUDA_FILE=/dev/shm/smddp-fakecuda-$$
trap 'rm -rf "$TDIR"; rm -f "$FAKECUDA_FILE"' EXIT
export SMDDP_TIMEOUT=60

# run_fake NAME SECONDS NRANKS [ENV=VALUE...] -- ARGS...: output in $TDIR/NAME.out, status
# in $status.  LAUNCH_OPTS: more smddp-run options; GPU_WRAP: a command that runs the
# program (tests/net/fakehost.sh).
run_fake() {
	local name=$1 secs=$2 n=$3 envs args t0
	shift 3
	split_envs "$@"
	rm -f "$FAKECUDA_FILE"
	t0=$(now)
	timeout -k 5 $((secs + 20)) env ${envs[@]+"${envs[@]}"} "$RUN" -n "$n" --timeout "$secs" \
		${LAUNCH_OPTS:-} ${GPU_WRAP:-} "$PROG" "${args[@]}" >"$TDIR/$name.out" 2>&1
	status=$?
	echo "--- $name: $n ranks: p2p-fake ${args[*]} -> exit $status ($(since "$t0") s)"
	sed 's/^/    /' "$TDIR/$name.out"
	rm -f "$FAKECUDA_FILE"
}

# fake NAME NRANKS [ENV=VALUE...] -- ARGS...: run_fake within FAKE_SECS (180), expect_summary
fake() {
	local name=$1 n=$2
	shift 2
	run_fake "$name" "${FAKE_SECS:-180}" "$n" "$@"
	expect_summary "$name" "$n"
}

# expect_rewound NAME RANK...: each RANK started its GPU tickets over (SMDDP_DEBUG=INFO,
# FAKECUDA_TICKET_LIMIT), so the case reached that path
expect_rewound() {
	local name=$1 r
	shift
	for r in "$@"; do
		grep -q "^\[$r\] .*GPU tickets start over" "$TDIR/$name.out" &&
			pass "$name: rank $r started its tickets over" ||
			fail "$name: rank $r never started its tickets over"
	done
}

