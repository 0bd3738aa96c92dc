#!/bin/bash
# tests/run/pernode-auth.sh - the admission of per-node mode's launchers
# (cmd/run/nodes-join.c, protocol v2): the job token is proved, never sent; a
# node 0 that cannot prove it is refused; a joiner that never answers the
# challenge is named after --join-timeout; launchers of protocol v1 get a
# clear error; refused strangers do not flood stderr. The other end is
# tests/run/fakelauncher.py, which speaks the protocol right or wrong.
. "$top_srcdir/tests/run/lib.sh"
command -v python3 >/dev/null || skip "no python3 for the scripted launcher"
FAKE="$top_srcdir/tests/run/fakelauncher.py"
TOKEN=s3cr3t-t0ken-of-this-job

# node I N [OPTIONS...] -- PROGRAM...: the launcher of node I of N, 2 ranks
node() {
	local i=$1 nn=$2
	shift 2
	timeout -k 5 60 "$RUN" --nnodes "$nn" --node-rank "$i" --master-addr 127.0.0.1 \
		--master-port "$PORT" -n 2 "$@"
}

# wait_port PORT: until something listens there (at most 10 s)
wait_port() {
	local i
	for ((i = 0; i < 100; i++)); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	fail "nothing listens on port $1"
}

# ---- a node 0 that knows the token: the joiner's answer is the one the
# design comment specifies, the token is nowhere on the wire, and the
# joiner takes node 0's proof and runs its ranks
PORT=$(free_ports)
start_bg python3 "$FAKE" node0 $((PORT + 1)) "$T/wire" "$TOKEN"
f=$BG
rc=0
SMDDP_JOB_TOKEN=$TOKEN node 1 2 --join-timeout 20 -- "$PROG" env SMDDP_JOB_ID env SMDDP_JOB_TOKEN \
	>"$T/out1" 2>"$T/err1" || rc=$?
wait_bg "$f" 30
[ "$rc" -eq 0 ] || fail "proof: node 1 exit status $rc: $(cat "$T/err1")"
grep -Eq "^JOIN v=2 node=1 nnodes=2 nproc=2 port=$PORT host=[^ ]+ job=- nonce=[0-9a-f]{64} mac=[0-9a-f]{64}$" "$T/wire" ||
	fail "proof: node 1's JOIN: $(cat "$T/wire")"
grep -qx "join-mac ok" "$T/wire" || fail "proof: node 1's MAC is not the specified one: $(cat "$T/wire")"
grep -qF "$TOKEN" "$T/wire" && fail "proof: the token went over the wire: $(cat "$T/wire")"
grep -qx "EXIT status=0" "$T/wire" || fail "proof: no EXIT: $(cat "$T/wire")"
[ "$(grep -c "SMDDP_JOB_ID=fakejob" "$T/out1")" -eq 2 ] &&
	[ "$(grep -c "SMDDP_JOB_TOKEN=$TOKEN$" "$T/out1")" -eq 2 ] || fail "proof: $(cat "$T/out1")"
echo "ok: the token is proved, not sent"

# ---- a node 0 that does not know the token (a stranger on the address):
# the joiner refuses it (2), and no rank starts
impostor() {
	local key=$1 what=$2 rc=0
	PORT=$(free_ports)
	start_bg python3 "$FAKE" node0 $((PORT + 1)) "$T/wire" "$key"
	local f=$BG
	SMDDP_JOB_TOKEN=$TOKEN node 1 2 --join-timeout 20 -- "$PROG" out ran >"$T/out1" 2>"$T/err1" || rc=$?
	wait_bg "$f" 30
	[ "$rc" -eq 2 ] || fail "impostor ($what): node 1 exit status $rc, not 2: $(cat "$T/err1")"
	grep -qx "smddp-run: node 1: node 0's launcher at 127.0.0.1:$((PORT + 1)) could not prove that it knows the job token: refused it (is it smddp-run's node 0 of this job, with the same SMDDP_JOB_TOKEN?)" "$T/err1" ||
		fail "impostor ($what): node 1 says: $(cat "$T/err1")"
	grep -qx "join-mac bad" "$T/wire" || fail "impostor ($what): $(cat "$T/wire")"
	[ ! -s "$T/out1" ] || fail "impostor ($what): ranks ran: $(cat "$T/out1")"
}
impostor other-token-entirely "a MAC under another key"
impostor - "a token instead of a proof"
echo "ok: a node 0 that cannot prove the token is refused"

# ---- a joiner that takes the challenge and never answers: node 0 names
# it after --join-timeout (1), and the HELLO said nothing about the job
PORT=$(free_ports)
start_bg node 0 2 --join-timeout 3 -- "$PROG" out ran >"$T/out0" 2>"$T/err0"
b0=$BG
wait_port $((PORT + 1))
start_bg python3 "$FAKE" silent $((PORT + 1)) "$T/wire"
f=$BG
t0=$(now_ms)
wait_bg "$b0" 30
dt=$(($(now_ms) - t0))
[ "$RC" -eq 1 ] || fail "silent joiner: node 0 exit status $RC, not 1: $(cat "$T/err0")"
[ "$dt" -lt 15000 ] || fail "silent joiner: node 0 took $dt ms"
grep -Eq "^smddp-run: node 1 of 2 did not join within 3 s \(--join-timeout\): no smddp-run --node-rank 1 reached port $((PORT + 1)) of host [^ ]+ \(1 connection, from 127\.0\.0\.1, took the challenge but never answered it\)$" "$T/err0" ||
	fail "silent joiner: node 0 says: $(cat "$T/err0")"
wait_bg "$f" 30
grep -Eqx "HELLO v=2 nonce=[0-9a-f]{64}" <(head -1 "$T/wire") || fail "silent joiner: the challenge: $(cat "$T/wire")"
grep -q "^STOP status=1 msg=node 1 of 2 did not join" "$T/wire" && grep -qx closed "$T/wire" ||
	fail "silent joiner: what it got: $(cat "$T/wire")"
[ ! -s "$T/out0" ] || fail "silent joiner: ranks ran"
echo "ok: a joiner that never answers the challenge"

# ---- with SMDDP_JOB_TOKEN, such a connection is not told why node 0
# stopped: the reason names hosts and ports, which are the job's
PORT=$(free_ports)
SMDDP_JOB_TOKEN=$TOKEN start_bg node 0 2 --join-timeout 3 -- "$PROG" out ran >"$T/out0" 2>"$T/err0"
b0=$BG
wait_port $((PORT + 1))
start_bg python3 "$FAKE" silent $((PORT + 1)) "$T/wire"
f=$BG
wait_bg "$b0" 30
[ "$RC" -eq 1 ] || fail "silent stranger: node 0 exit status $RC, not 1: $(cat "$T/err0")"
wait_bg "$f" 30
[ "$(sed -n 2p "$T/wire")" = "STOP status=1 msg=node 0 stopped before this launcher proved the job token" ] ||
	fail "silent stranger: what it got: $(cat "$T/wire")"
# (after the HELLO, whose random hex may hold any digits)
sed 1d "$T/wire" | grep -q -e "$PORT" -e "$(hostname)" && fail "silent stranger: told about the job: $(cat "$T/wire")"
echo "ok: an unproved connection learns nothing of the job"

# ---- ... and one that holds its place in silence is closed after 10 s,
# so that such connections cannot lock the real launchers out
PORT=$(free_ports)
start_bg node 0 2 --join-timeout 40 -- "$PROG" out ran >"$T/out0" 2>"$T/err0"
b0=$BG
wait_port $((PORT + 1))
start_bg python3 "$FAKE" silent $((PORT + 1)) "$T/wire"
f=$BG
wait_bg "$f" 25
grep -qx closed "$T/wire" || fail "silent place holder: not closed: $(cat "$T/wire")"
grep -qx "smddp-run: node 0: closed a connection from 127.0.0.1 that did not answer the challenge within 10 s" "$T/err0" ||
	fail "silent place holder: node 0 says: $(cat "$T/err0")"
rc=0
node 1 2 --join-timeout 20 -- "$PROG" out ran >"$T/out1" 2>"$T/err1" || rc=$?
wait_bg "$b0" 30
[ "$rc" -eq 0 ] && [ "$RC" -eq 0 ] || fail "silent place holder: exit status $RC and $rc: $(cat "$T"/err*)"
echo "ok: a silent connection is closed after 10 s"

# ---- launchers of protocol v1: a clear error either way
PORT=$(free_ports)
start_bg node 0 2 --join-timeout 3 -- "$PROG" out ran >"$T/out0" 2>"$T/err0"
b0=$BG
wait_port $((PORT + 1))
start_bg python3 "$FAKE" v1join $((PORT + 1)) "$T/wire"
f=$BG
wait_bg "$b0" 30
[ "$RC" -eq 1 ] || fail "v1 joiner: node 0 exit status $RC, not 1: $(cat "$T/err0")"
want="node 1 (host oldhost, 127.0.0.1) runs an older smddp-run (launcher protocol v1, node 0 speaks v2): use the same smddp-run version on every node"
grep -qxF "smddp-run: refused a launcher: $want" "$T/err0" || fail "v1 joiner: node 0 says: $(cat "$T/err0")"
wait_bg "$f" 30
grep -qxF "ERR status=2 msg=$want" "$T/wire" || fail "v1 joiner: it was told: $(cat "$T/wire")"
echo "ok: a v1 joiner is told to use the same version"

PORT=$(free_ports)
start_bg python3 "$FAKE" mute0 $((PORT + 1)) "$T/wire"
f=$BG
rc=0
t0=$(now_ms)
node 1 2 --join-timeout 2 -- "$PROG" out ran >"$T/out1" 2>"$T/err1" || rc=$?
dt=$(($(now_ms) - t0))
wait_bg "$f" 30
[ "$rc" -eq 1 ] || fail "v1 node 0: node 1 exit status $rc, not 1: $(cat "$T/err1")"
[ "$dt" -lt 15000 ] || fail "v1 node 0: node 1 took $dt ms"
grep -qx "smddp-run: node 1: node 0's launcher at 127.0.0.1:$((PORT + 1)) took the connection but sent no challenge within 5 s: an older smddp-run there (use the same smddp-run version on every node), or not smddp-run at all (check --master-addr and --launcher-port)" "$T/err1" ||
	fail "v1 node 0: node 1 says: $(cat "$T/err1")"
echo "ok: a node 0 that never challenges (v1) is named"

# ---- strangers that send junk are refused, but at most 5 are told per
# 10 s, then how many were not; the real node still joins
PORT=$(free_ports)
start_bg node 0 2 --join-timeout 20 -- "$PROG" out ran >"$T/out0" 2>"$T/err0"
b0=$BG
wait_port $((PORT + 1))
fds=()
for ((i = 0; i < 12; i++)); do
	exec {fd}<>"/dev/tcp/127.0.0.1/$((PORT + 1))" || fail "junk: cannot connect"
	echo "GET / HTTP/1.0" >&"$fd"
	fds+=("$fd")
done
sleep 1
rc=0
node 1 2 --join-timeout 20 -- "$PROG" out ran >"$T/out1" 2>"$T/err1" || rc=$?
wait_bg "$b0" 30
for fd in "${fds[@]}"; do
	exec {fd}>&-
done
[ "$rc" -eq 0 ] && [ "$RC" -eq 0 ] || fail "junk: exit status $RC and $rc: $(cat "$T"/err*)"
n=$(grep -c "^smddp-run: node 0: closed a connection from 127.0.0.1 that is no launcher: its first line is not a JOIN (unknown message)$" "$T/err0")
[ "$n" -eq 5 ] || fail "junk: $n refusals told, not 5: $(cat "$T/err0")"
grep -qx "smddp-run: (7 more refused connections not shown)" "$T/err0" || fail "junk: $(cat "$T/err0")"
echo "ok: refusals are rate-limited"
exit 0
