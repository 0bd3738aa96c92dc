#!/bin/bash
# tests/run/orphans.sh - what a rank leaves behind (children in its process
# group, daemons in their own session) is killed when the job ends
. "$top_srcdir/tests/run/lib.sh"

# children that keep the ranks' output pipes open must not make smddp-run wait
mkdir "$T/a" "$T/b"
t0=$(now_ms)
rc=0
timeout 60 "$RUN" -n 2 "$PROG" pid "$T/a" child "$T/a" out started >"$T/out" || rc=$?
[ "$rc" -eq 0 ] || fail "exit status $rc"
[ $(($(now_ms) - t0)) -lt 20000 ] || fail "smddp-run waited for its ranks' children"
[ "$(ls "$T"/a/child.* | wc -l)" -eq 2 ] || fail "children were not started"
expect_dead 0 $(pids_in "$T"/a/child.*)
grep -c started "$T/out" | grep -qx 2 || fail "output lost: $(cat "$T/out")"

# daemons (setsid, stdio closed), with and without tagging
for tag in --tag-output --no-tag-output; do
	rm -f "$T"/b/*
	rc=0
	timeout 60 "$RUN" -n 2 $tag "$PROG" daemon "$T/b" >/dev/null || rc=$?
	[ "$rc" -eq 0 ] || fail "$tag: exit status $rc"
	[ "$(ls "$T"/b/child.* | wc -l)" -eq 2 ] || fail "$tag: daemons were not started"
	expect_dead 0 $(pids_in "$T"/b/child.*)
done
exit 0
