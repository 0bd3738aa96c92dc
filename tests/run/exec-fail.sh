#!/bin/bash
# tests/run/exec-fail.sh - a PROGRAM that cannot be executed: 127 or 126, one message
. "$top_srcdir/tests/run/lib.sh"

rc=0
timeout 60 "$RUN" -n 3 smddp-no-such-program-xyz arg >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 127 ] || fail "not found: exit status $rc, not 127"
[ "$(cat "$T/err")" = "smddp-run: cannot execute 'smddp-no-such-program-xyz': No such file or directory" ] ||
	fail "not found: stderr: $(cat "$T/err")"
[ ! -s "$T/out" ] || fail "not found: stdout: $(cat "$T/out")"

rc=0
timeout 60 "$RUN" -n 2 "$T/missing/prog" 2>"$T/err" || rc=$?
[ "$rc" -eq 127 ] || fail "missing path: exit status $rc, not 127"

printf '#!/bin/sh\necho hi\n' >"$T/noexec"
chmod 644 "$T/noexec"
rc=0
timeout 60 "$RUN" -n 2 "$T/noexec" 2>"$T/err" || rc=$?
if [ "$(id -u)" -ne 0 ] || [ "$rc" -ne 0 ]; then   # root may execute it anyway? (it may not: no x bit)
	[ "$rc" -eq 126 ] || fail "not executable: exit status $rc, not 126"
	[ "$(cat "$T/err")" = "smddp-run: cannot execute '$T/noexec': Permission denied" ] ||
		fail "not executable: stderr: $(cat "$T/err")"
fi

rc=0
timeout 60 "$RUN" -n 2 "$T" 2>"$T/err" || rc=$?
[ "$rc" -eq 126 ] || fail "a directory: exit status $rc, not 126"
[ "$(grep -c 'cannot execute' "$T/err")" -eq 1 ] || fail "a directory: $(cat "$T/err")"

# found through PATH, argv passed untouched (no shell)
rc=0
out=$(PATH="$(dirname "$PROG"):$PATH" timeout 60 "$RUN" -n 1 rankprog out 'a b; $HOME `x`' out '*') || rc=$?
[ "$rc" -eq 0 ] || fail "PATH search: exit status $rc"
[ "$out" = "$(printf '%s\n%s' 'a b; $HOME `x`' '*')" ] || fail "argv was changed: $out"
exit 0
