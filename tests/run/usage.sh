#!/bin/bash
# tests/run/usage.sh - --help, --version and command-line errors (exit 2 + "Try")
. "$top_srcdir/tests/run/lib.sh"

out=$(timeout 60 "$RUN" --help) || fail "--help: exit status $?"
grep -q '^Usage: smddp-run ' <<<"$out" || fail "--help: $out"
out=$(timeout 60 "$RUN" -h) || fail "-h: exit status $?"
grep -q -- '--nproc' <<<"$out" || fail "-h: $out"
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"/\1/p' "$top_builddir/config.h")
out=$(timeout 60 "$RUN" --version) || fail "--version: exit status $?"
[ "$out" = "smddp-run from libsmddp $version" ] || fail "--version: $out"
out=$(timeout 60 "$RUN" -V) || fail "-V: exit status $?"
[ "$out" = "smddp-run from libsmddp $version" ] || fail "-V: $out"

# bad ARGS...: exit 2, one line of error and the "Try" line on stderr, nothing on stdout
bad() {
	local rc=0
	timeout 60 "$RUN" "$@" >"$T/out" 2>"$T/err" </dev/null || rc=$?
	[ "$rc" -eq 2 ] || fail "'$*': exit status $rc, not 2"
	[ ! -s "$T/out" ] || fail "'$*': stdout: $(cat "$T/out")"
	[ "$(wc -l <"$T/err")" -eq 2 ] || fail "'$*': stderr: $(cat "$T/err")"
	grep -q '^smddp-run: ..*' "$T/err" || fail "'$*': stderr: $(cat "$T/err")"
	[ "$(tail -n 1 "$T/err")" = "Try 'smddp-run --help'." ] || fail "'$*': no Try line: $(cat "$T/err")"
}
bad
bad --bogus "$PROG"
bad -x "$PROG"
bad -n 0 "$PROG"
bad -n 1025 "$PROG"
bad -n abc "$PROG"
bad -n 2x "$PROG"
bad --nproc
bad -n
bad --nproc=-1 "$PROG"
bad --grace -1 "$PROG"
bad --grace abc "$PROG"
bad --timeout 0 "$PROG"
bad --timeout -5 "$PROG"
bad --timeout nan "$PROG"
bad --master-port 0 "$PROG"
bad --master-port 65536 "$PROG"
bad --master-addr "" "$PROG"
bad --help=yes
bad --ma 127.0.0.1 "$PROG"
grep -q "ambiguous" "$T/err" || fail "--ma: $(cat "$T/err")"
bad -n 2
bad --

# the options of PROGRAM are its own
out=$(timeout 60 "$RUN" -n 1 "$PROG" out -n out --bogus) || fail "PROGRAM options: exit status $?"
[ "$out" = "$(printf -- '-n\n--bogus')" ] || fail "PROGRAM options: $out"
out=$(timeout 60 "$RUN" -n 1 -- "$PROG" out --help) || fail "--: exit status $?"
[ "$out" = "--help" ] || fail "--: $out"
# limits are inclusive; --nproc=N works
out=$(timeout 60 "$RUN" --nproc=1 --grace=0.5 --timeout=30 "$PROG" env WORLD_SIZE) || fail "--opt=value"
[ "$out" = "WORLD_SIZE=1" ] || fail "--nproc=1: $out"
exit 0
