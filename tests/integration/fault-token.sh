# fault-token.sh - two processes started by hand with different job tokens must not form a job.
# Rank 1 (wrong token) is refused: SMDDP_ECONFIG mentioning the token.  Rank 0
# times out (SMDDP_TIMEOUT=3) with SMDDP_ETIMEDOUT naming rank 1 and logs a
# WARN line about the rejected connection.  Neither crashes.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"

port=$("$FAULT" freeport) || { echo "ERROR: no free port"; exit 99; }
common=(SMDDP_WORLD_SIZE=2 SMDDP_MASTER_ADDR=127.0.0.1 SMDDP_MASTER_PORT="$port" SMDDP_TIMEOUT=3 SMDDP_DEBUG=WARN)

t0=$(now)
env -i PATH="$PATH" HOME="${HOME:-/}" SMDDP_CONFIG=/dev/null SMDDP_RANK=0 SMDDP_JOB_TOKEN=aaa "${common[@]}" \
	timeout -k 5 30 "$FAULT" init >"$TDIR/rank0.out" 2>"$TDIR/rank0.err" &
pid0=$!
sleep 0.5
run_alone rank1 30 SMDDP_RANK=1 SMDDP_JOB_TOKEN=bbb "${common[@]}" -- "$FAULT" init
s1=$status
t1=$elapsed
wait "$pid0"
s0=$?
echo "--- rank0: SMDDP_RANK=0 SMDDP_JOB_TOKEN=aaa ${common[*]} fault init -> exit $s0 in $(since "$t0") s"
sed 's/^/    out: /' "$TDIR/rank0.out"
sed 's/^/    err: /' "$TDIR/rank0.err"

out1=$(cat "$TDIR/rank1.out")
out0=$(cat "$TDIR/rank0.out")
if [ "$s1" -eq 11 ]; then pass "rank 1: SMDDP_ECONFIG"; else fail "rank 1: exit $s1, expected 11 (SMDDP_ECONFIG)"; fi
if grep -qi token <<<"$out1"; then pass "rank 1: the message mentions the token"; else fail "rank 1: the message does not mention the token"; fi
if awk -v t="$t1" 'BEGIN { exit !(t < 5) }'; then pass "rank 1 refused in $t1 s"; else fail "rank 1 took $t1 s to be refused"; fi
if [ "$s0" -eq 4 ]; then pass "rank 0: SMDDP_ETIMEDOUT"; else fail "rank 0: exit $s0, expected 4 (SMDDP_ETIMEDOUT)"; fi
if names_rank "$out0" 1; then pass "rank 0: the message names rank 1"; else fail "rank 0: the message does not name rank 1"; fi
if grep -Eiq 'reject|refus' "$TDIR/rank0.err"; then
	pass "rank 0 logged the rejected connection"
else
	fail "rank 0's stderr (SMDDP_DEBUG=WARN) has no line about rejecting the connection"
fi
for f in rank0 rank1; do
	if grep -q '^INIT rc=' "$TDIR/$f.out"; then pass "$f returned from smddp_init"; else fail "$f crashed or hung (no INIT line)"; fi
done
finish
