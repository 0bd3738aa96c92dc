# trace-verdict.sh - a planted hang (rank 1 skips the 3rd allreduce) and a mismatch, through
# smddp-run: one verdict line from the ranks' flight recorders names the rank and the call.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
unset SMDDP_TRACE_DIR SMDDP_TRACE_SIGNAL SMDDP_TRACE_ENTRIES
# smddp-run's private directory goes under TMPDIR: it must be gone after each job
export TMPDIR=$TDIR/tmp
mkdir "$TMPDIR"

# verdict NAME REGEX: exactly one verdict line, and it matches
verdict() {
	local v
	v=$(grep '^smddp-run: verdict: ' "$TDIR/$1.out")
	if [ "$(grep -c . <<<"$v")" -ne 1 ]; then
		fail "$1: expected one verdict line, got: ${v:-none}"
	elif grep -Eq "$2" <<<"$v"; then
		pass "$1: $v"
	else
		fail "$1: the verdict does not match /$2/: $v"
	fi
}
no_private_dir() {
	if [ -n "$(ls -A "$TMPDIR")" ]; then
		fail "$1: smddp-run left $(ls -A "$TMPDIR") in TMPDIR"
		rm -rf "${TMPDIR:?}"/*
	fi
}

# The hang: ranks 0 and 2 time out in call 3 and dump; rank 1, asleep in its
# own code, dumps on smddp-run's SIGUSR1 (its last call: 2, done).
export SMDDP_TIMEOUT=2
WANT_STATUS=42
LAUNCH_OPTS="--grace 5"
run_job hang 60 3 "$FAULT" hang 1 30
expect_witnesses hang 0 2
verdict hang '^smddp-run: verdict: rank 1 never entered call 3 \(allreduce, 4099 x float32, sum\); ranks 0,2 waited in it$'
no_private_dir hang

# The same, dumps kept with --trace-dir: rank 1's came from the signal
LAUNCH_OPTS="--grace 5 --trace-dir $TDIR/kept"
run_job kept 60 3 "$FAULT" hang 1 30
verdict kept '^smddp-run: verdict: rank 1 never entered call 3 '
f=$(ls "$TDIR"/kept/smddp-trace.*.1.jsonl 2>/dev/null)
if [ -n "$f" ] && head -n 1 "$f" | grep -q '"reason":"signal"' &&
	tail -n 1 "$f" | grep -q '"seq":2,"coll":"allreduce",.*"state":"done"'; then
	pass "kept: rank 1 wrote its recorder on SIGUSR1"
else
	fail "kept: no dump of rank 1 from the signal in $TDIR/kept: $(ls "$TDIR/kept"; cat "$f" 2>/dev/null)"
fi
[ "$(ls "$TDIR"/kept/*.jsonl | wc -l)" -eq 3 ] || fail "kept: $(ls "$TDIR/kept")"
no_private_dir kept

# SMDDP_TRACE_SIGNAL=0: no signal, rank 1 writes nothing, the others name it
LAUNCH_OPTS="--grace 5"
SMDDP_TRACE_SIGNAL=0 run_job nosignal 60 3 "$FAULT" hang 1 30
verdict nosignal '^smddp-run: verdict: rank 1 never entered call 3 \(allreduce, 4099 x float32, sum\); ranks 0,2 waited in it; no dump from rank 1$'
no_private_dir nosignal

# Across hosts (2 fake hosts of 2 ranks: libfabric between them, shared
# memory inside), no signal: rank 3 writes nothing, and the verdict can name
# it only because the network waits of ranks 0 and 1 (the rail) and rank 2's
# wait inside its host record whom they waited on (waited_on).
if grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h"; then
	LAUNCH_OPTS="--grace 5 --trace-dir $TDIR/hosts"
	SMDDP_TRACE_SIGNAL=0 run_job hosts 60 4 --env CONFORMANCE_PER_HOST=2 \
		/bin/sh "$top_srcdir/tests/net/fakehost.sh" "$FAULT" hang 3 30
	verdict hosts '^smddp-run: verdict: rank 3 never entered call 3 \(allreduce, 4099 x float32, sum\); ranks 0-2 waited in it; no dump from rank 3$'
	for r in 0 1 2; do
		grep -q '"seq":3,.*"waited_on":\[[23]\]' "$TDIR"/hosts/smddp-trace.*.$r.jsonl ||
			fail "hosts: rank $r's dump names nobody it waited on in call 3: $(cat "$TDIR"/hosts/*.$r.jsonl)"
	done
	no_private_dir hosts
else
	echo "skip: hosts: built without libfabric"
fi

# No library timeout, smddp-run's --timeout instead: every rank writes its
# recorder on SIGUSR1, ranks 0 and 2 from inside the allreduce they wait in
export SMDDP_TIMEOUT=120
WANT_STATUS=124
LAUNCH_OPTS="--grace 5"
run_job jobtimeout 8 3 "$FAULT" hang 1 60
[ "$status" -eq 124 ] || fail "jobtimeout: smddp-run exited $status, not 124"
verdict jobtimeout '^smddp-run: verdict: rank 1 never entered call 3 \(allreduce, 4099 x float32, sum\); ranks 0,2 waited in it$'
no_private_dir jobtimeout

# smddp-run is hung up on (SIGHUP) while rank 1 sleeps: every rank dumps before
# the forwarded SIGHUP, which Linux would deliver before the pending SIGUSR1
# and so kill the rank undumped
mkdir "$TDIR/hup"
SMDDP_TRACE_DIR=$TDIR/hup timeout -k 5 120 "$RUN" -n 3 --timeout 100 --grace 5 \
	"$FAULT" hang 1 60 >"$TDIR/hup.out" 2>&1 &
hup_pid=$!
for ((i = 0; i < 600; i++)); do
	grep -q "FAULT rank=1 asleep" "$TDIR/hup.out" && break
	sleep 0.1
done
kill -HUP "$hup_pid"
wait "$hup_pid"
status=$?
echo "--- hup: smddp-run -n 3, SIGHUP once rank 1 sleeps -> exit $status"
sed 's/^/    /' "$TDIR/hup.out"
[ "$status" -eq 129 ] || fail "hup: smddp-run exited $status, not 129 (SIGHUP)"
for r in 0 1 2; do
	[ -s "$TDIR"/hup/smddp-trace.*."$r".jsonl ] || fail "hup: rank $r wrote no dump"
done
if grep -q "no dump from" "$TDIR/hup.out"; then
	fail "hup: $(grep verdict "$TDIR/hup.out")"
else
	pass "hup: every rank dumped before the SIGHUP"
fi

# A mismatch (SMDDP_CHECK_COLL): every rank dumps the call they disagree on
export SMDDP_TIMEOUT=60
WANT_STATUS=42
LAUNCH_OPTS="--grace 30"
SMDDP_CHECK_COLL=1 run_job mismatch 60 3 "$FAULT" mismatch count
expect_witnesses mismatch 0 1 2
verdict mismatch '^smddp-run: verdict: ranks disagree in call 2 \(ranks 0,2: allreduce, 1000 x int32, sum; rank 1: allreduce, 1001 x int32, sum\)$'
no_private_dir mismatch

# A job that works: no verdict
WANT_STATUS=
run_job good 60 2 "$FAULT" dump
[ "$status" -eq 0 ] || fail "good: smddp-run exited $status"
if grep -q verdict "$TDIR/good.out"; then fail "good: a verdict: $(grep verdict "$TDIR/good.out")"; else pass "good: no verdict"; fi
no_private_dir good
finish
