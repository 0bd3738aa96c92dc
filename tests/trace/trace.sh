#!/bin/bash
# tests/trace/trace.sh - smddp-trace on hand-written dumps: a good job, a rank behind, ranks
# that disagree, a split, bad input, several jobs, and the usage boilerplate.
set -u
: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"
. "$top_srcdir/tests/lib.sh"
TRACE=$top_builddir/cmd/smddp-trace
F=$top_srcdir/tests/trace
T=$(mktemp -d "${TMPDIR:-/tmp}/smddp-trace-test.XXXXXX") || exit 99
trap 'rm -rf "$T"' EXIT

# run ARGS...: output in $T/out and $T/err, exit status in $rc
run() {
	rc=0
	timeout 60 "$TRACE" "$@" >"$T/out" 2>"$T/err" </dev/null || rc=$?
}
verdicts() { grep '^verdict: ' "$T/out"; }

run "$F/good"
[ "$rc" -eq 0 ] || fail "good: exit $rc: $(cat "$T/out" "$T/err")"
[ "$(verdicts)" = "verdict: no rank was behind and no ranks disagreed" ] || fail "good: $(cat "$T/out")"
grep -q '^  rank 2 on n1, pid 100, dumped on request: call 3 (barrier) done$' "$T/out" ||
	fail "good: no last call of rank 2: $(cat "$T/out")"

run "$F/hang"
[ "$rc" -eq 3 ] || fail "hang: exit $rc, not 3"
[ "$(verdicts)" = "verdict: rank 2 never entered call 17 (allreduce, 1024 x float32, sum); ranks 0,1,3 waited in it" ] ||
	fail "hang: $(cat "$T/out")"
# the same without rank 2's dump: the others say whom they waited for
mkdir "$T/nodump"
cp "$F"/hang/smddp-trace.jobh.[013].jsonl "$T/nodump"
run "$T/nodump"
[ "$rc" -eq 3 ] || fail "nodump: exit $rc, not 3"
[ "$(verdicts)" = "verdict: rank 2 never entered call 17 (allreduce, 1024 x float32, sum); ranks 0,1,3 waited in it; no dump from rank 2" ] ||
	fail "nodump: $(cat "$T/out")"
grep -q '^  rank 2: no dump$' "$T/out" || fail "nodump: $(cat "$T/out")"

run "$F/mismatch"
[ "$rc" -eq 3 ] || fail "mismatch: exit $rc, not 3"
[ "$(verdicts)" = "verdict: ranks disagree in call 5 (ranks 0,2: broadcast, 1000 x int32, root 0; rank 1: broadcast, 1000 x int32, root 1)" ] ||
	fail "mismatch: $(cat "$T/out")"

run "$F/split"
[ "$rc" -eq 3 ] || fail "split: exit $rc, not 3"
[ "$(verdicts)" = "verdict: communicator 0.2.1: rank 1 (world rank 3) never entered call 1 (allgather, 16 x uint8); rank 0 waited in it" ] ||
	fail "split: $(cat "$T/out")"

# --json: one line per rank and communicator, one per finding; files as arguments
run --json "$F"/hang/*.jsonl
[ "$rc" -eq 3 ] || fail "json: exit $rc, not 3"
[ "$(grep -c '^{"type":"rank",' "$T/out")" -eq 4 ] || fail "json: $(cat "$T/out")"
grep -qx '{"type":"finding","job":"jobh","kind":"behind","comm":"0","seq":17,"behind":\[2\],"waiting":\[0,1,3\],"message":"rank 2 never entered call 17 (allreduce, 1024 x float32, sum); ranks 0,1,3 waited in it"}' "$T/out" ||
	fail "json: no finding line: $(cat "$T/out")"
grep -q '"rank":0,"dump":true,"world_rank":0,"host":"n1","pid":100,"reason":"timeout","calls":17,"last_seq":17,"coll":"allreduce","count":1024,"dtype":"float32","op":"sum","state":"failed","error":"SMDDP_ETIMEDOUT","waited_on":\[2\],"time_us":600000}' "$T/out" ||
	fail "json: rank 0: $(cat "$T/out")"

# SMDDP_TRACE_DIR without arguments
rc=0
SMDDP_TRACE_DIR=$F/good timeout 60 "$TRACE" >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 0 ] || fail "SMDDP_TRACE_DIR: exit $rc: $(cat "$T/err")"

# bad input: exit 1 and one line naming the file and the line
run "$F/bad"
[ "$rc" -eq 1 ] || fail "bad: exit $rc, not 1"
[ "$(cat "$T/err")" = "smddp-trace: $F/bad/smddp-trace.jobb.0.jsonl:4: not a JSON object" ] ||
	fail "bad: $(cat "$T/err")"
[ ! -s "$T/out" ] || fail "bad: stdout: $(cat "$T/out")"
printf '{"rank":0}\n' >"$T/notdump.jsonl"
run "$T/notdump.jsonl"
[ "$rc" -eq 1 ] || fail "not a dump: exit $rc, not 1"
grep -q 'notdump.jsonl:1: not a flight recorder dump' "$T/err" || fail "not a dump: $(cat "$T/err")"
mkdir "$T/empty"
run "$T/empty"
[ "$rc" -eq 1 ] || fail "empty: exit $rc, not 1"
grep -q 'no flight recorder dumps (smddp-trace.\*.jsonl) in' "$T/err" || fail "empty: $(cat "$T/err")"
run "$T/missing"
[ "$rc" -eq 1 ] || fail "missing: exit $rc, not 1"
cp "$F"/good/smddp-trace.jobg.0.jsonl "$T/empty/smddp-trace.jobg.7.jsonl"
run "$F/good" "$T/empty"
[ "$rc" -eq 1 ] || fail "rank twice: exit $rc, not 1"
grep -q 'are both rank 0 of job jobg' "$T/err" || fail "rank twice: $(cat "$T/err")"

# several jobs: a usage error unless --job picks one
run "$F/good" "$F/hang"
[ "$rc" -eq 2 ] || fail "several jobs: exit $rc, not 2"
[ "$(head -n 1 "$T/err")" = "smddp-trace: dumps of 2 jobs: jobg jobh: pick one with --job" ] ||
	fail "several jobs: $(cat "$T/err")"
run --job jobg "$F/good" "$F/hang"
[ "$rc" -eq 0 ] || fail "--job jobg: exit $rc: $(cat "$T/err")"

# the usage boilerplate
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"/\1/p' "$top_builddir/config.h")
run --version
[ "$rc" -eq 0 ] && [ "$(cat "$T/out")" = "smddp-trace from libsmddp $version" ] || fail "--version: $(cat "$T/out")"
run --help
[ "$rc" -eq 0 ] && grep -q '^Usage: smddp-trace ' "$T/out" || fail "--help: $(cat "$T/out")"
for bad in "--bogus" "--job" "-x"; do
	run $bad "$F/good"
	[ "$rc" -eq 2 ] || fail "$bad: exit $rc, not 2"
	[ "$(tail -n 1 "$T/err")" = "Try 'smddp-trace --help'." ] || fail "$bad: $(cat "$T/err")"
done
rc=0
env -u SMDDP_TRACE_DIR timeout 60 "$TRACE" >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 2 ] || fail "no DIR: exit $rc, not 2"
grep -q 'no DIR given and SMDDP_TRACE_DIR is not set' "$T/err" || fail "no DIR: $(cat "$T/err")"
echo "ok: smddp-trace"
