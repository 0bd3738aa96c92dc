#!/bin/bash
# tests/topo/usage.sh - --help, --version and command-line errors (exit 2 + "Try")
. "$top_srcdir/tests/topo/lib.sh"

topo --help
[ "$rc" -eq 0 ] || fail "--help: exit status $rc"
grep -q '^Usage: smddp-topo ' "$T/out" || fail "--help: $(cat "$T/out")"
for opt in --json --sysroot --topo --expect --env --version; do
	grep -q -- "$opt" "$T/out" || fail "--help does not mention $opt"
done
topo -h
[ "$rc" -eq 0 ] && grep -q '^Usage: smddp-topo ' "$T/out" || fail "-h: $rc"
topo -V
[ "$rc" -eq 0 ] || fail "-V: exit status $rc"
grep -q '^smddp-topo from libsmddp [0-9][0-9.]*$' "$T/out" || fail "-V: $(cat "$T/out")"
cp "$T/out" "$T/v"
topo --version
same "--version" "$T/v" "$T/out"

# bad ARGS...: exit 2, one error line and the "Try" line on stderr, nothing on stdout
bad() {
	topo "$@"
	[ "$rc" -eq 2 ] || fail "'$*': exit status $rc, not 2"
	[ ! -s "$T/out" ] || fail "'$*': stdout: $(cat "$T/out")"
	[ "$(wc -l <"$T/err")" -eq 2 ] || fail "'$*': stderr: $(cat "$T/err")"
	grep -q '^smddp-topo: ..*' "$T/err" || fail "'$*': stderr: $(cat "$T/err")"
	[ "$(tail -n 1 "$T/err")" = "Try 'smddp-topo --help'." ] ||
		fail "'$*': no Try line: $(cat "$T/err")"
}
bad --bogus
bad -x
bad extra-argument
bad --sysroot
bad -s
bad --topo
bad --expect
bad --json=1
bad --env=1
bad --sysroot ''
bad --topo ''
bad --sysroot "$SYSROOT/vm" --topo "$T/x.json"
bad --env --topo "$T/x.json"
bad --env --sysroot "$SYSROOT/vm"
bad --env --expect "$T/x.json"
grep -q "choose one" <(topo --sysroot a --topo b; cat "$T/err") || fail "--sysroot + --topo: $(cat "$T/err")"
exit 0
