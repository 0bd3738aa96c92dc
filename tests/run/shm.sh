#!/bin/bash
# tests/run/shm.sh - /dev/shm/smddp-JOBID-* of the job are removed at its end,
# nobody else's are
. "$top_srcdir/tests/run/lib.sh"

[ -d /dev/shm ] && [ -w /dev/shm ] || { echo "SKIP: /dev/shm is not writable"; exit 77; }
id="t$$r$RANDOM"
mine="/dev/shm/smddp-$id"
keep1="/dev/shm/smddp-${id}x-other"   # another job whose id starts like ours
keep2="/dev/shm/smddp-other$id-seg"
trap 'rm -f "$mine"-* "$keep1" "$keep2"; cleanup' EXIT
touch "$keep1" "$keep2" || fail "cannot create files in /dev/shm"

# a crashing rank leaves its segments behind
rc=0
SMDDP_JOB_ID=$id timeout 60 "$RUN" -n 3 "$PROG" shm seg pid "$T" waitn "$T" 3 kill-if 1 9 sleep 50 \
	2>"$T/err" || rc=$?
[ "$rc" -eq 137 ] || fail "exit status $rc, not 137: $(cat "$T/err")"
left=$(ls "$mine"-* 2>/dev/null)
[ -z "$left" ] || fail "left in /dev/shm: $left"
[ -e "$keep1" ] && [ -e "$keep2" ] || fail "another job's segments were removed"
[ "$(grep -c '^smddp-run:' "$T/err")" -eq 1 ] || fail "unexpected messages: $(cat "$T/err")"

# an id with '-' (as the library allows): neither "a" nor "a-b" takes the other's
id2="t$$-r$RANDOM"
other1="/dev/shm/smddp-$id2-x-0123456789abcdef"   # job "$id2-x"
other2="/dev/shm/smddp-${id2%-*}-0123456789abcdef" # job "${id2%-*}"
trap 'rm -f "$mine"-* "$keep1" "$keep2" /dev/shm/smddp-"$id2"-* "$other1" "$other2"; cleanup' EXIT
touch "$other1" "$other2" || fail "cannot create files in /dev/shm"
rc=0
SMDDP_JOB_ID=$id2 timeout 60 "$RUN" -n 2 "$PROG" shm seg kill-if 0 9 sleep 50 2>"$T/err" || rc=$?
[ "$rc" -eq 137 ] || fail "id with '-': exit status $rc, not 137: $(cat "$T/err")"
[ -z "$(ls /dev/shm/smddp-"$id2"-seg.* 2>/dev/null)" ] || fail "id with '-': segments left"
[ -e "$other1" ] && [ -e "$other2" ] || fail "id with '-': another job's segments were removed"

# and after a clean exit, with a generated job id
rc=0
out=$(timeout 60 "$RUN" -n 2 "$PROG" shm seg env SMDDP_JOB_ID) || rc=$?
[ "$rc" -eq 0 ] || fail "clean run: exit status $rc"
gid=$(sed -n 's/^\[0\] SMDDP_JOB_ID=//p' <<<"$out")
[ -n "$gid" ] || fail "no job id: $out"
left=$(ls /dev/shm/smddp-"$gid"-* 2>/dev/null)
[ -z "$left" ] || fail "left in /dev/shm: $left"
exit 0
