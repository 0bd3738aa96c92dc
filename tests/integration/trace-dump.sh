# trace-dump.sh - the flight recorder's files: smddp_comm_dump() writes one per rank, 0600,
# a header then the calls; a timeout writes the failed call with the ranks it waited for.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_TIMEOUT=60 SMDDP_JOB_ID=tracedump

# line N of rank R's file
line() { sed -n "$2p" "$D/smddp-trace.$SMDDP_JOB_ID.$1.jsonl"; }

D=$TDIR/dump
mkdir "$D"
SMDDP_TRACE_DIR=$D run_job dump 60 3 "$FAULT" dump
[ "$status" -eq 0 ] || fail "dump: smddp-run exited $status"
for r in 0 1 2; do
	f=$D/smddp-trace.$SMDDP_JOB_ID.$r.jsonl
	if [ ! -f "$f" ]; then
		fail "dump: no $f"
		continue
	fi
	[ "$(stat -c %a "$f")" = 600 ] || fail "dump: $f has mode $(stat -c %a "$f"), not 600"
	grep -q "^{\"smddp_trace\":1,\"rank\":$r,\"nranks\":3,\"host\":\".*\",\"pid\":[0-9]*,\"job\":\"tracedump\",\"reason\":\"request\"" <<<"$(line $r 1)" ||
		fail "dump: rank $r header: $(line $r 1)"
	grep -q "^{\"comm\":\"0\",\"comm_rank\":$r,\"comm_size\":3,\"calls\":3,\"entries\":3}" <<<"$(line $r 2)" ||
		fail "dump: rank $r comm line: $(line $r 2)"
	grep -q '^{"comm":"0","seq":1,"coll":"allreduce","count":4099,"dtype":"float32","op":"sum","mem":"host","state":"done","start_us":[0-9]*,"end_us":[0-9]*}$' <<<"$(line $r 3)" ||
		fail "dump: rank $r call 1: $(line $r 3)"
	grep -q '^{"comm":"0","seq":3,"coll":"barrier","mem":"host","state":"done",' <<<"$(line $r 5)" ||
		fail "dump: rank $r call 3: $(line $r 5)"
	[ "$(wc -l <"$f")" -eq 5 ] || fail "dump: rank $r: $(wc -l <"$f") lines, expected 5"
done
ls "$D" | grep -q tmp && fail "dump: temporary files left: $(ls "$D")"
pass "dump: smddp_comm_dump wrote a header and 3 calls per rank"

# SMDDP_TRACE_DIR that does not exist yet: the first dump makes it (0700)
D=$TDIR/made
SMDDP_TRACE_DIR=$D run_job made 60 2 "$FAULT" dump
[ "$status" -eq 0 ] || fail "made: smddp-run exited $status"
if [ "$(stat -c %a "$D" 2>/dev/null)" = 700 ] && [ "$(ls "$D" | grep -c '\.jsonl$')" -eq 2 ]; then
	pass "made: the dump made $D (0700) and wrote both ranks there"
else
	fail "made: $(ls -ld "$D" "$D"/* 2>&1)"
fi

# a timeout: the witnesses write the failed call and whom they waited for
D=$TDIR/hang
mkdir "$D"
export SMDDP_TIMEOUT=2
WANT_STATUS=42
LAUNCH_OPTS="--grace 5"
SMDDP_TRACE_DIR=$D SMDDP_TRACE_SIGNAL=0 run_job hang 60 3 "$FAULT" hang 1 30
expect_witnesses hang 0 2
for r in 0 2; do
	grep -q '^{"comm":"0","seq":3,"coll":"allreduce","count":4099,"dtype":"float32","op":"sum","mem":"host","state":"failed","result":4,"error":"SMDDP_ETIMEDOUT","waited_on":\[1\],' <<<"$(line $r 5)" ||
		fail "hang: rank $r call 3: $(line $r 5)"
	grep -q '"reason":"timeout"' <<<"$(line $r 1)" || fail "hang: rank $r header: $(line $r 1)"
done
finish
