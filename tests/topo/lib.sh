# tests/topo/lib.sh - sourced by the smddp-topo tests: paths, temp dir, helpers
set -u
: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"

TOPO="$top_builddir/cmd/smddp-topo"
D="$top_srcdir/tests/topo"
SYSROOT="$D/sysroot"
T=$(mktemp -d "${TMPDIR:-/tmp}/smddp-topo-test.XXXXXX") || exit 99
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP
# The tests must not see the user's settings.
unset SMDDP_TOPO_FILE SMDDP_TIMEOUT
export SMDDP_CONFIG=/dev/null

. "$top_srcdir/tests/lib.sh" # fail (stops the test), skip, now, since

# topo ARGS...: runs smddp-topo; stdout in $T/out, stderr in $T/err, status in $rc
topo() {
	rc=0
	timeout 60 "$TOPO" "$@" >"$T/out" 2>"$T/err" </dev/null || rc=$?
}

# same WHAT EXPECTED ACTUAL: the files are equal, else fail showing the diff
same() {
	diff -u "$2" "$3" >"$T/diff" || fail "$1: differs from $2:
$(head -n 40 "$T/diff")"
}

# runtime_error WHAT PATTERN: exit 1, nothing on stdout, one line on stderr matching PATTERN
runtime_error() {
	[ "$rc" -eq 1 ] || fail "$1: exit status $rc, not 1: $(cat "$T/err")"
	[ ! -s "$T/out" ] || fail "$1: stdout: $(head -n 5 "$T/out")"
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "$1: not one line on stderr: $(cat "$T/err")"
	grep -q "^smddp-topo: .*$2" "$T/err" || fail "$1: stderr does not match '$2': $(cat "$T/err")"
}
