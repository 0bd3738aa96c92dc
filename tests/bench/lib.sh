# tests/bench/lib.sh - sourced by the smddp-allreduce-bench tests: paths, temp dir, helpers
set -u
: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"

RUN="$top_builddir/cmd/smddp-run"
BENCH="$top_builddir/cmd/bench/smddp-allreduce-bench"
T=$(mktemp -d "${TMPDIR:-/tmp}/smddp-bench-test.XXXXXX") || exit 99
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP

. "$top_srcdir/tests/lib.sh" # fail (stops the test), skip, now, since

# bench N ARGS...: run the benchmark on N ranks; stdout in $T/out, stderr in
# $T/err, exit status in $rc.
bench() {
	local n=$1
	shift
	rc=0
	timeout 120 "$RUN" -n "$n" --no-tag-output "$BENCH" "$@" >"$T/out" 2>"$T/err" </dev/null || rc=$?
}

# rows FILE: the table's data lines (nccl-tests format: not starting with '#')
rows() {
	grep -v '^#' "$1" | grep -v '^[[:space:]]*$'
}

# expect_clean_table WHAT: exit 0, one header, rows with #wrong 0 in both
# halves (alltoallv and sendrecv have no in-place half: N/A there), and the nccl-tests
# summary lines.
expect_clean_table() {
	[ "$rc" -eq 0 ] || fail "$1: exit status $rc: $(cat "$T/err")"
	[ "$(grep -c '^# Collective test starting: smddp-allreduce-bench$' "$T/out")" -eq 1 ] ||
		fail "$1: not exactly one header (only rank 0 prints): $(head -n 20 "$T/out")"
	grep -q '^# Out of bounds values : 0 OK$' "$T/out" || fail "$1: $(tail -n 3 "$T/out")"
	grep -q '^# Avg bus bandwidth    : ' "$T/out" || fail "$1: no Avg bus bandwidth line"
	awk -v what="$1" '
		/^# Collective: / { c = $3; next }
		/^#/ || NF == 0 { next }
		NF != 13 { print what ": bad row: " $0; bad = 1 }
		c ~ /^(alltoallv|sendrecv)$/ && ($10 != "N/A" || $13 != "N/A") {
			print what ": " c " in place is not N/A: " $0; bad = 1 }
		$9 != "0" || ($13 != "0" && c !~ /^(alltoallv|sendrecv)$/) {
			print what ": wrong elements: " $0; bad = 1 }
		END { exit bad }' "$T/out" >&2 || exit 1
}
