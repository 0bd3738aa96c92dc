#!/bin/bash
# tests/run/on-failure.sh - --on-failure continue: a rank killed or failing
# leaves the others running to their end; the job fails only if none exits 0
. "$top_srcdir/tests/run/lib.sh"

# rank 1 is SIGKILLed at once; the others sleep 2 s and finish: 0, and both spoke
rc=0
t0=$(now_ms)
out=$(timeout 60 "$RUN" -n 3 --grace 0 --on-failure continue "$PROG" pid "$T" kill-if 1 9 \
	sleep 2 out "finished" 2>"$T/err") || rc=$?
dt=$(($(now_ms) - t0))
[ "$rc" -eq 0 ] || fail "continue: exit status $rc, not 0: $(cat "$T/err")"
[ "$(sort <<<"$out" | tr '\n' '|')" = "[0] finished|[2] finished|" ] ||
	fail "continue: the survivors did not finish: $out"
[ "$dt" -ge 2000 ] || fail "continue: ended after ${dt} ms, before the survivors' sleep"
pid1=$(cat "$T/pid.1")
# (the others may not all be started yet when rank 1 dies: 1 or 2 go on then)
grep -Exq "smddp-run: rank 1 \(pid $pid1\) was killed by signal 9 \(Killed\); the other (1 rank goes|2 ranks go) on \(--on-failure continue\)" "$T/err" ||
	fail "continue: no line for the lost rank: $(cat "$T/err")"
grep -Fxq "smddp-run: 1 rank failed and the job went on without it (--on-failure continue); 2 exited 0; the first failure: rank 1 was killed by signal 9 (Killed)" "$T/err" ||
	fail "continue: no summary: $(cat "$T/err")"
expect_dead 0 $(pids_in "$T"/pid.*)

# the default still stops the job at the first failure
rc=0
t0=$(now_ms)
timeout 60 "$RUN" -n 3 --grace 0 "$PROG" kill-if 1 9 sleep 30 >/dev/null 2>"$T/err2" || rc=$?
dt=$(($(now_ms) - t0))
[ "$rc" -eq 137 ] || fail "stop: exit status $rc, not 137"
[ "$dt" -lt 20000 ] || fail "stop: the others were not stopped: ${dt} ms"
rc=0
timeout 60 "$RUN" -n 3 --grace 0 --on-failure stop "$PROG" kill-if 1 9 sleep 30 \
	>/dev/null 2>"$T/err2" || rc=$?
[ "$rc" -eq 137 ] || fail "--on-failure stop: exit status $rc, not 137"

# every rank fails: the first failure's status
rc=0
timeout 60 "$RUN" -n 2 --on-failure continue "$PROG" exit-if 1 3 sleep 1 exit-if 0 5 \
	>/dev/null 2>"$T/err3" || rc=$?
[ "$rc" -eq 3 ] || fail "all failed: exit status $rc, not 3: $(cat "$T/err3")"
grep -Fq "no rank exited 0: the job failed (--on-failure continue); the first failure: rank 1 exited with status 3" "$T/err3" ||
	fail "all failed: no summary: $(cat "$T/err3")"

# --timeout still ends a job that goes on
rc=0
timeout 60 "$RUN" -n 2 --grace 0 --timeout 2 --on-failure continue "$PROG" exit-if 1 3 \
	sleep 30 >/dev/null 2>"$T/err4" || rc=$?
[ "$rc" -eq 124 ] || fail "timeout: exit status $rc, not 124: $(cat "$T/err4")"

# bad values, and mpirun (which stops the job itself) refused
rc=0
"$RUN" -n 2 --on-failure maybe true 2>"$T/err5" || rc=$?
[ "$rc" -eq 2 ] && grep -Fq "invalid --on-failure 'maybe': expected stop or continue" "$T/err5" ||
	fail "bad value: exit $rc: $(cat "$T/err5")"
rc=0
"$RUN" --hosts a:1,b:1 --on-failure continue true 2>"$T/err6" || rc=$?
[ "$rc" -eq 2 ] && grep -Fq -- "--on-failure continue: only for the ranks smddp-run starts itself" "$T/err6" ||
	fail "mpirun: exit $rc: $(cat "$T/err6")"

# --on-failure continue on one host: smddp-run serves torch's store on
# MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE), libsmddp's rendezvous elsewhere;
# a client that says VALIDATE and PING gets its nonce back
rc=0
out=$(timeout 60 "$RUN" -n 2 --no-tag-output --on-failure continue bash -c '
	[ "$RANK" = 0 ] || exit 0
	echo "$TORCHELASTIC_USE_AGENT_STORE $TORCHELASTIC_RESTART_COUNT $MASTER_PORT $SMDDP_MASTER_PORT"
	exec 3<>"/dev/tcp/$MASTER_ADDR/$MASTER_PORT" || exit 9
	printf "\x00\xce\xf7\x85\x3c\x0d\x01\x02\x03\x04" >&3
	head -c 4 <&3 | od -An -tx1 | tr -d " \n"; echo' 2>"$T/err7") || rc=$?
read -r flag count mport sport pong <<<"$(tr '\n' ' ' <<<"$out")"
[ "$rc" -eq 0 ] && [ "$flag" = True ] && [ "$count" = 0 ] && [ "$mport" != "$sport" ] &&
	[ "$pong" = 01020304 ] || fail "store: exit $rc, out '$out': $(cat "$T/err7")"
# ... not without --on-failure continue (nor with --store rank0), and an
# inherited TORCHELASTIC_USE_AGENT_STORE goes
out=$(TORCHELASTIC_USE_AGENT_STORE=True timeout 60 "$RUN" -n 1 bash -c \
	'echo "${TORCHELASTIC_USE_AGENT_STORE-unset} $MASTER_PORT $SMDDP_MASTER_PORT"')
read -r flag mport sport <<<"$out"
[ "$flag" = unset ] && [ "$mport" = "$sport" ] || fail "no store: $out"
out=$(timeout 60 "$RUN" -n 1 --on-failure continue --store rank0 bash -c \
	'echo "${TORCHELASTIC_USE_AGENT_STORE-unset}"')
[ "$out" = unset ] || fail "--store rank0: $out"
rc=0
"$RUN" -n 2 --store nowhere true 2>"$T/err8" || rc=$?
[ "$rc" -eq 2 ] && grep -Fq "invalid --store 'nowhere': expected launcher or rank0" "$T/err8" ||
	fail "bad --store: exit $rc: $(cat "$T/err8")"
rc=0
"$RUN" --hosts a:1,b:1 --store launcher true 2>"$T/err9" || rc=$?
[ "$rc" -eq 2 ] && grep -Fq -- "--store launcher: only for the ranks smddp-run starts itself" "$T/err9" ||
	fail "--store launcher through mpirun: exit $rc: $(cat "$T/err9")"

# per-node mode, two nodes on this machine: node 0's launcher serves the
# store at MASTER_PORT for every node's ranks, libsmddp's rendezvous is the
# launcher port + 1 on all of them; a rank of node 1 reaches the store
PORT=$(free_ports)
pernode_rank() {
	echo "$TORCHELASTIC_USE_AGENT_STORE $MASTER_PORT $SMDDP_MASTER_PORT"
	[ "$RANK" = 2 ] || exit 0
	exec 3<>"/dev/tcp/$MASTER_ADDR/$MASTER_PORT" || exit 9
	printf "\x00\xce\xf7\x85\x3c\x0d\x05\x06\x07\x08" >&3
	echo "$(head -c 4 <&3 | od -An -tx1 | tr -d " \n")"   # one write: node 1's ranks share the file
}
export -f pernode_rank
start_bg timeout -k 5 60 "$RUN" --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 \
	--master-port "$PORT" -n 2 --join-timeout 20 --on-failure continue --no-tag-output \
	bash -c pernode_rank >"$T/pn1" 2>"$T/pnerr1"
b1=$BG
rc=0
timeout -k 5 60 "$RUN" --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port "$PORT" \
	-n 2 --join-timeout 20 --on-failure continue --no-tag-output bash -c pernode_rank \
	>"$T/pn0" 2>"$T/pnerr0" || rc=$?
wait_bg "$b1" 30
want="True $PORT $((PORT + 2))"
[ "$rc" -eq 0 ] && [ "$RC" -eq 0 ] && [ "$(sort -u "$T/pn0")" = "$want" ] &&
	[ "$(grep -v 05060708 "$T/pn1" | sort -u)" = "$want" ] && grep -qx 05060708 "$T/pn1" ||
	fail "per-node store: exit $rc and $RC: $(cat "$T"/pn*)"
exit 0
