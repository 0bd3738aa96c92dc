#!/bin/bash
# tests/check-az/usage.sh - --help, --version, command-line errors (exit 2 + "Try"), unreadable input (exit 1)
. "$top_srcdir/tests/check-az/lib.sh"

az --help
expect_rc 0 --help
grep -q '^Usage: smddp-check-az ' "$T/out" || fail "--help: $(cat "$T/out")"
grep -q -- '--compare' "$T/out" || fail "--help lacks --compare"
[ ! -s "$T/err" ] || fail "--help wrote to stderr: $(cat "$T/err")"
az -h
expect_rc 0 -h
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"/\1/p' "$top_builddir/config.h")
for v in --version -V; do
	az $v
	expect_rc 0 "$v"
	[ "$(cat "$T/out")" = "smddp-check-az from libsmddp $version" ] || fail "$v: $(cat "$T/out")"
done

# bad ARGS...: exit 2, one error line and the "Try" line on stderr, nothing on stdout
bad() {
	az "$@" </dev/null
	[ "$RC" -eq 2 ] || fail "'$*': exit status $RC, not 2 (stderr: $(cat "$T/err"))"
	[ ! -s "$T/out" ] || fail "'$*': stdout: $(cat "$T/out")"
	[ "$(wc -l <"$T/err")" -eq 2 ] || fail "'$*': stderr: $(cat "$T/err")"
	grep -q '^smddp-check-az: ..*' "$T/err" || fail "'$*': stderr: $(cat "$T/err")"
	[ "$(tail -n 1 "$T/err")" = "Try 'smddp-check-az --help'." ] || fail "'$*': no Try line"
}
bad --bogus
bad -x
bad --emit --compare
bad -e -c
bad --emit extra-arg
bad extra-arg
bad --compare --mounts /proc/mounts
bad --compare --no-resolve
bad --emit --s3 my-bucket
bad --emit --peers 127.0.0.1
bad --s3
bad --s3 Bad_Bucket
bad --s3 ab
bad --s3-endpoint ftp://127.0.0.1/
bad --peers ,
bad --mounts ''
bad --json=yes
bad --s 127.0.0.1
grep -q ambiguous "$T/err" || fail "--s: $(cat "$T/err")"

# input that cannot be read or parsed: exit 1, not 2
az --compare "$T/does-not-exist"
expect_rc 1 "missing FILE"
grep -q 'does-not-exist' "$T/err" || fail "missing FILE: $(cat "$T/err")"
echo '{"schema": "smddp-check-az/1",' >"$T/broken"
az --compare "$T/broken"
expect_rc 1 "broken JSON"
grep -q "broken:1: not a JSON record" "$T/err" || fail "broken JSON: $(cat "$T/err")"
az --compare </dev/null
expect_rc 1 "no records"
grep -q '^UNDECIDED: no records to compare' "$T/out" || fail "no records: $(cat "$T/out")"
grep -q '^verdict: UNDECIDED' "$T/out" || fail "no records: $(cat "$T/out")"
exit 0
