#!/bin/bash
# tests/run/pernode.sh - per-node mode (--nnodes, --node-rank) with two
# "nodes" on this machine: both launchers on 127.0.0.1, each with its own
# ranks. The variables, the job id and token handed out by node 0, the
# checks of the join (sizes, node ranks, tokens), fail-fast both ways, a
# launcher that dies, one that never comes, and the usage errors.
# (Across real hosts: tests/cluster/pernode.sh.)
. "$top_srcdir/tests/run/lib.sh"

# launcher_of PID: the smddp-run below PID (a subshell, then timeout(1))
launcher_of() {
	local c d
	for c in $(pgrep -P "$1"); do
		[ "$(cat "/proc/$c/comm" 2>/dev/null)" = smddp-run ] && { echo "$c"; return 0; }
		d=$(launcher_of "$c") && { echo "$d"; return 0; }
	done
	return 1
}

# node I N [OPTIONS...] -- PROGRAM...: the launcher of node I of N, 2 ranks
node() {
	local i=$1 nn=$2
	shift 2
	timeout -k 5 60 "$RUN" --nnodes "$nn" --node-rank "$i" --master-addr 127.0.0.1 \
		--master-port "$PORT" -n 2 --join-timeout 20 "$@"
}

# ---- two nodes x 2 ranks: global ranks, one job id and token from node 0
PORT=$(free_ports)
start_bg node 1 2 -- "$PROG" env RANK env WORLD_SIZE env LOCAL_RANK env LOCAL_WORLD_SIZE \
	env GROUP_RANK env MASTER_PORT env SMDDP_JOB_ID env SMDDP_JOB_TOKEN \
	env SMDATAPARALLEL_LOCAL_RANK env SMDATAPARALLEL_SERVER_PORT >"$T/out1" 2>"$T/err1"
b1=$BG
rc=0
node 0 2 -- "$PROG" env RANK env WORLD_SIZE env LOCAL_RANK env LOCAL_WORLD_SIZE \
	env GROUP_RANK env MASTER_PORT env SMDDP_JOB_ID env SMDDP_JOB_TOKEN \
	env SMDATAPARALLEL_LOCAL_RANK env SMDATAPARALLEL_SERVER_PORT >"$T/out0" 2>"$T/err0" || rc=$?
wait_bg "$b1" 30
[ "$rc" -eq 0 ] && [ "$RC" -eq 0 ] || fail "2 x 2: exit status $rc and $RC: $(cat "$T"/err*)"
[ ! -s "$T/err0" ] && [ ! -s "$T/err1" ] || fail "2 x 2: unexpected stderr: $(cat "$T"/err*)"
for r in 0 1 2 3; do
	f="$T/out$((r / 2))"
	grep -qx "\[$r\] RANK=$r" "$f" || fail "rank $r: $(cat "$f")"
	grep -qx "\[$r\] WORLD_SIZE=4" "$f" || fail "rank $r: $(cat "$f")"
	grep -qx "\[$r\] LOCAL_RANK=$((r % 2))" "$f" || fail "rank $r: $(cat "$f")"
	grep -qx "\[$r\] LOCAL_WORLD_SIZE=2" "$f" || fail "rank $r: $(cat "$f")"
	grep -qx "\[$r\] GROUP_RANK=$((r / 2))" "$f" || fail "rank $r: $(cat "$f")"
	grep -qx "\[$r\] MASTER_PORT=$PORT" "$f" || fail "rank $r: $(cat "$f")"
	grep -qx "\[$r\] SMDATAPARALLEL_LOCAL_RANK=$((r % 2))" "$f" || fail "rank $r: $(cat "$f")"
	grep -qx "\[$r\] SMDATAPARALLEL_SERVER_PORT=$PORT" "$f" || fail "rank $r: $(cat "$f")"
done
[ "$(sed -n 's/^\[[0-9]\] SMDDP_JOB_ID=//p' "$T/out0" "$T/out1" | sort -u | wc -l)" -eq 1 ] ||
	fail "the nodes got different job ids: $(cat "$T"/out*)"
[ "$(sed -n 's/^\[[0-9]\] SMDDP_JOB_TOKEN=\([0-9a-f]\{32\}\)$/\1/p' "$T/out0" "$T/out1" | sort -u | wc -l)" -eq 1 ] ||
	fail "the nodes got different (or no) tokens: $(cat "$T"/out*)"
echo "ok: 2 nodes x 2 ranks, one job id and token"

# ---- strangers on the launcher port (junk, silence) change nothing
PORT=$(free_ports)
start_bg node 0 2 -- "$PROG" env RANK >"$T/out0" 2>"$T/err0"
b0=$BG
for ((i = 0; i < 100; i++)); do
	(exec 3<>"/dev/tcp/127.0.0.1/$((PORT + 1))") 2>/dev/null && break
	sleep 0.1
done
exec 4<>"/dev/tcp/127.0.0.1/$((PORT + 1))" || fail "strangers: cannot connect"
echo "GET / HTTP/1.0" >&4
exec 5<>"/dev/tcp/127.0.0.1/$((PORT + 1))" || fail "strangers: cannot connect"
rc=0
node 1 2 -- "$PROG" env RANK >"$T/out1" 2>"$T/err1" || rc=$?
wait_bg "$b0" 30
exec 4>&- 5>&-
[ "$rc" -eq 0 ] && [ "$RC" -eq 0 ] || fail "strangers: exit status $RC and $rc: $(cat "$T"/err*)"
[ "$(cat "$T/out0" "$T/out1" | sort | tr '\n' ' ')" = "[0] RANK=0 [1] RANK=1 [2] RANK=2 [3] RANK=3 " ] ||
	fail "strangers: $(cat "$T"/out*)"
echo "ok: strangers on the launcher port"

# ---- the user's token and id (--rdzv-id), the same on both
PORT=$(free_ports)
SMDDP_JOB_TOKEN=feedbeef00112233 start_bg node 1 2 --rdzv-id myjob -- "$PROG" env SMDDP_JOB_TOKEN \
	env SMDDP_JOB_ID >"$T/out1" 2>"$T/err1"
b1=$BG
rc=0
SMDDP_JOB_TOKEN=feedbeef00112233 node 0 2 --rdzv-id myjob -- "$PROG" env SMDDP_JOB_TOKEN \
	env SMDDP_JOB_ID >"$T/out0" 2>"$T/err0" || rc=$?
wait_bg "$b1" 30
[ "$rc" -eq 0 ] && [ "$RC" -eq 0 ] || fail "token: exit status $rc and $RC: $(cat "$T"/err*)"
[ "$(grep -c '^\[[0-3]\] SMDDP_JOB_TOKEN=feedbeef00112233$' "$T/out0" "$T/out1" | awk -F: '{s += $2} END {print s}')" -eq 4 ] ||
	fail "token: $(cat "$T"/out*)"
[ "$(grep -c '^\[[0-3]\] SMDDP_JOB_ID=myjob$' "$T/out0" "$T/out1" | awk -F: '{s += $2} END {print s}')" -eq 4 ] ||
	fail "--rdzv-id: $(cat "$T"/out*)"
echo "ok: SMDDP_JOB_TOKEN and --rdzv-id"

# ---- a node that disagrees is refused (2) and named; node 0 then misses it (1)
# refuse WHAT ENV0 ENV1 OPTS1...: node 0 in environment ENV0 (VAR=VALUE or
# ""), node 1 in ENV1 with OPTS1: node 1 is refused with a line matching WHAT
refuse() {
	local what=$1 e0=$2 e1=$3
	shift 3
	local o1=("$@")
	PORT=$(free_ports)
	start_bg env ${e0:+"$e0"} "$RUN" --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 \
		--master-port "$PORT" -n 2 --join-timeout 3 "$PROG" out hi >"$T/out0" 2>"$T/err0"
	local b0=$BG rc=0
	env ${e1:+"$e1"} timeout -k 5 60 "$RUN" "${o1[@]}" --master-addr 127.0.0.1 --master-port "$PORT" \
		--join-timeout 20 "$PROG" out hi >"$T/out1" 2>"$T/err1" || rc=$?
	[ "$rc" -eq 2 ] || fail "refused ($what): node 1 exit status $rc, not 2: $(cat "$T/err1")"
	grep -Eq "^smddp-run: node 1: node 0's launcher at 127\\.0\\.0\\.1:$((PORT + 1)) refused this one: $what" "$T/err1" ||
		fail "refused ($what): node 1 says: $(cat "$T/err1")"
	grep -Eq "^smddp-run: refused a launcher: $what" "$T/err0" ||
		fail "refused ($what): node 0 says: $(cat "$T/err0")"
	wait_bg "$b0" 30
	[ "$RC" -eq 1 ] || fail "refused ($what): node 0 exit status $RC, not 1: $(cat "$T/err0")"
	grep -q '^smddp-run: node 1 of 2 did not join within 3 s (--join-timeout): no smddp-run --node-rank 1 reached port' "$T/err0" ||
		fail "refused ($what): node 0 does not name the missing node: $(cat "$T/err0")"
	[ ! -s "$T/out0" ] || fail "refused ($what): ranks started: $(cat "$T/out0")"
}
refuse "node 1 \\(host [^ ]*, 127\\.0\\.0\\.1\\) runs 3 ranks, node 0 \\(host [^ ]*\\) 2: give every node the same --nproc-per-node" \
	"" "" --nnodes 2 --node-rank 1 -n 3
refuse "node 1 \\(host [^ ]*, 127\\.0\\.0\\.1\\) was started with --nnodes 3, node 0 \\(host [^ ]*\\) with --nnodes 2" \
	"" "" --nnodes 3 --node-rank 1 -n 2
refuse "node 1 \\(host [^ ]*, 127\\.0\\.0\\.1\\) presented a wrong job token: SMDDP_JOB_TOKEN differs between the nodes" \
	SMDDP_JOB_TOKEN=aaaaaaaaaaaa SMDDP_JOB_TOKEN=bbbbbbbbbbbb --nnodes 2 --node-rank 1 -n 2
refuse "node 1 \\(host [^ ]*, 127\\.0\\.0\\.1\\) has no job token but node 0 \\(host [^ ]*\\) has: set the same SMDDP_JOB_TOKEN on every node" \
	SMDDP_JOB_TOKEN=aaaaaaaaaaaa "" --nnodes 2 --node-rank 1 -n 2
refuse "node 1 \\(host [^ ]*, 127\\.0\\.0\\.1\\) belongs to job 'other', node 0 \\(host [^ ]*\\) to job 'mine'" \
	SMDDP_JOB_ID=mine SMDDP_JOB_ID=other --nnodes 2 --node-rank 1 -n 2
echo "ok: mismatched nodes are refused and named"

# ---- fail-fast: rank 3 (node 1) exits 7: both nodes stop, both exit 7
PORT=$(free_ports)
start_bg node 1 2 -- "$PROG" pid "$T" exit-if 3 7 sleep 50 >"$T/out1" 2>"$T/err1"
b1=$BG
t0=$(now_ms)
rc=0
node 0 2 -- "$PROG" pid "$T" sleep 50 >"$T/out0" 2>"$T/err0" || rc=$?
dt=$(($(now_ms) - t0))
wait_bg "$b1" 30
[ "$rc" -eq 7 ] && [ "$RC" -eq 7 ] || fail "fail-fast: exit status $rc and $RC, not 7: $(cat "$T"/err*)"
[ "$dt" -lt 20000 ] || fail "fail-fast: node 0 took ${dt} ms"
grep -Eq "^smddp-run: node 1 \\(host [^ ]+\\): rank 3 exited with status 7; stopping 2 ranks here$" "$T/err0" ||
	fail "fail-fast: node 0 does not name node 1 and rank 3: $(cat "$T/err0")"
grep -Eq "^smddp-run: rank 3 \\(pid [0-9]+\\) exited with status 7; stopping 1 other rank$" "$T/err1" ||
	fail "fail-fast: node 1 says: $(cat "$T/err1")"
expect_dead 0 $(pids_in "$T"/pid.*)
rm -f "$T"/pid.*
echo "ok: a rank failing on node 1 stops node 0"

# ---- and the other way: rank 0 (node 0) killed by SIGKILL: 137 on both
PORT=$(free_ports)
start_bg node 1 2 -- "$PROG" pid "$T" sleep 50 >"$T/out1" 2>"$T/err1"
b1=$BG
rc=0
node 0 2 -- "$PROG" pid "$T" waitn "$T" 4 kill-if 0 9 sleep 50 >"$T/out0" 2>"$T/err0" || rc=$?
wait_bg "$b1" 30
[ "$rc" -eq 137 ] && [ "$RC" -eq 137 ] || fail "SIGKILL on node 0: exit status $rc and $RC: $(cat "$T"/err*)"
grep -Eq "^smddp-run: node 0 \\(host [^ ]+\\): rank 0 was killed by signal 9 \\(Killed\\); stopping 2 ranks here$" "$T/err1" ||
	fail "SIGKILL on node 0: node 1 says: $(cat "$T/err1")"
expect_dead 0 $(pids_in "$T"/pid.*)
rm -f "$T"/pid.*
echo "ok: a rank killed on node 0 stops node 1"

# ---- node 0's --timeout after its own ranks are done: node 1 stops too, 124
PORT=$(free_ports)
start_bg node 1 2 -- "$PROG" pid "$T" sleep 50 >"$T/out1" 2>"$T/err1"
b1=$BG
rc=0
node 0 2 --timeout 3 -- "$PROG" out done >"$T/out0" 2>"$T/err0" || rc=$?
wait_bg "$b1" 30
[ "$rc" -eq 124 ] && [ "$RC" -eq 124 ] || fail "--timeout on node 0: exit status $rc and $RC: $(cat "$T"/err*)"
grep -qx "smddp-run: timeout: the job ran for 3 seconds; stopping the other nodes" "$T/err0" ||
	fail "--timeout on node 0: node 0 says: $(cat "$T/err0")"
grep -Eq "^smddp-run: node 0 \(host [^ ]+\): the job ran for 3 seconds \(--timeout\); stopping 2 ranks here$" "$T/err1" ||
	fail "--timeout on node 0: node 1 says: $(cat "$T/err1")"
expect_dead 5 $(pids_in "$T"/pid.*)
rm -f "$T"/pid.*
echo "ok: node 0's --timeout reaches node 1"

# ---- node 1's launcher dies (SIGKILL): node 0 names it and stops (1)
PORT=$(free_ports)
start_bg node 1 2 -- "$PROG" pid "$T" sleep 50 >"$T/out1" 2>"$T/err1"
b1=$BG
start_bg node 0 2 -- "$PROG" pid "$T" sleep 50 >"$T/out0" 2>"$T/err0"
b0=$BG
wait_files 4 "$T/pid"
# the launcher itself, not timeout(1) around it
l1=$(launcher_of "$b1") || fail "no launcher under $b1"
kill -KILL "$l1"
wait_bg "$b0" 30
[ "$RC" -eq 1 ] || fail "launcher killed: node 0 exit status $RC, not 1: $(cat "$T/err0")"
grep -Eq "^smddp-run: the launcher of node 1 \\(host [^ ]+, 127\\.0\\.0\\.1\\) went away without a word: killed, or its host is down; stopping 2 ranks here$" "$T/err0" ||
	fail "launcher killed: node 0 says: $(cat "$T/err0")"
wait_bg "$b1" 30
expect_dead 5 $(pids_in "$T"/pid.*)
rm -f "$T"/pid.*
echo "ok: node 1's launcher killed"

# ---- node 0 gets SIGTERM: node 1 stops too, both 143
PORT=$(free_ports)
start_bg node 1 2 -- "$PROG" pid "$T" sleep 50 >"$T/out1" 2>"$T/err1"
b1=$BG
start_bg node 0 2 -- "$PROG" pid "$T" sleep 50 >"$T/out0" 2>"$T/err0"
b0=$BG
wait_files 4 "$T/pid"
l0=$(launcher_of "$b0") || fail "no launcher under $b0"
kill -TERM "$l0"
wait_bg "$b1" 30
[ "$RC" -eq 143 ] || fail "SIGTERM on node 0: node 1 exit status $RC, not 143: $(cat "$T/err1")"
grep -Eq "^smddp-run: node 0 \\(host [^ ]+\\): its smddp-run got signal 15 \\(Terminated\\); stopping 2 ranks here$" "$T/err1" ||
	fail "SIGTERM on node 0: node 1 says: $(cat "$T/err1")"
wait_bg "$b0" 30
[ "$RC" -eq 124 ] || [ "$RC" -eq 143 ] || fail "SIGTERM on node 0: exit status $RC"
expect_dead 5 $(pids_in "$T"/pid.*)
rm -f "$T"/pid.*
echo "ok: SIGTERM to node 0 stops node 1"

# ---- Ctrl-C on node 0 before everyone joined: the node that came gives up, 130
PORT=$(free_ports)
start_bg node 1 3 -- "$PROG" out never >"$T/out1" 2>"$T/err1"
b1=$BG
start_bg node 0 3 -- "$PROG" out never >"$T/out0" 2>"$T/err0"
b0=$BG
# until node 1's launcher is connected to node 0's
for ((i = 0; i < 200; i++)); do
	if command -v ss >/dev/null 2>&1; then
		[ -n "$(ss -Htn state established "( dport = :$((PORT + 1)) )" 2>/dev/null)" ] && break
	elif [ "$i" -ge 20 ]; then
		break
	fi
	sleep 0.1
done
l0=$(launcher_of "$b0") || fail "no launcher under $b0"
kill -INT "$l0"
wait_bg "$b1" 30
[ "$RC" -eq 130 ] || fail "SIGINT on node 0 while joining: node 1 exit status $RC, not 130: $(cat "$T/err1")"
grep -Eq "^smddp-run: node 1: node 0's launcher at 127\.0\.0\.1:$((PORT + 1)) gave up: node 0 \(host [^ ]+\) got signal 2 \(Interrupt\) before the job started$" "$T/err1" ||
	fail "SIGINT on node 0 while joining: node 1 says: $(cat "$T/err1")"
wait_bg "$b0" 30
[ ! -s "$T/out0" ] && [ ! -s "$T/out1" ] || fail "SIGINT on node 0 while joining: ranks ran"
echo "ok: Ctrl-C on node 0 while the nodes join"

# ---- node 0 never comes: node 1 says so after --join-timeout
PORT=$(free_ports)
t0=$(now_ms)
rc=0
timeout -k 5 60 "$RUN" --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port "$PORT" \
	--join-timeout 1 "$PROG" out hi >"$T/out1" 2>"$T/err1" || rc=$?
dt=$(($(now_ms) - t0))
[ "$rc" -eq 1 ] || fail "no node 0: exit status $rc, not 1"
[ "$dt" -lt 10000 ] || fail "no node 0: took ${dt} ms"
grep -q "^smddp-run: node 1: node 0's launcher at 127.0.0.1:$((PORT + 1)) did not answer within 1 s (--join-timeout): Connection refused; start smddp-run --node-rank 0 there" "$T/err1" ||
	fail "no node 0: $(cat "$T/err1")"
echo "ok: node 0 missing"

# ---- usage errors: one line and exit 2
usage_error() {
	local want=$1 rc=0
	shift
	"$RUN" "$@" >"$T/uo" 2>"$T/ue" || rc=$?
	[ "$rc" -eq 2 ] || fail "$*: exit status $rc, not 2"
	grep -qF -- "$want" "$T/ue" || fail "$*: $(cat "$T/ue")"
}
usage_error "--nnodes 2: give node 0's address with --master-addr" --nnodes 2 --node-rank 0 true
usage_error "--nnodes 2: give this node's place with --node-rank (0 to 1)" --nnodes 2 --master-addr x true
usage_error "--node-rank 2: expected 0 to 1 (--nnodes 2)" --nnodes 2 --node-rank 2 --master-addr x true
usage_error "--node-rank needs --nnodes" --node-rank 1 true
usage_error "elastic jobs (a range of nodes) are not supported" --nnodes 1:4 true
usage_error "--standalone is one node on 127.0.0.1" --standalone --nnodes 2 true
usage_error "--master-addr and --rdzv-endpoint exclude each other" --master-addr a --rdzv-endpoint b:1 true
usage_error "invalid --rdzv-endpoint 'h:0'" --rdzv-endpoint h:0 true
usage_error "--nnodes (one smddp-run per node) and --hosts exclude each other" \
	--nnodes 2 --node-rank 0 --master-addr a --hosts a,b true
usage_error "--rdzv-backend etcd: only static and c10d" --rdzv-backend etcd true
usage_error "invalid number of ranks 'x': expected 1 to 1024, auto, gpu or cpu" --nproc-per-node x true
usage_error "--max-restarts 3: restarting failed ranks is not supported" --max-restarts 3 true
"$RUN" --max_restarts 0 --no_python --no-python -n 1 --dry-run prog >/dev/null ||
	fail "--max-restarts 0, --no-python: $?"
# a torchrun habit: the script without python
rc=0
(cd "$T" && timeout 60 "$RUN" -n 1 train.py >"$T/uo" 2>"$T/ue") || rc=$?
[ "$rc" -eq 127 ] || fail "train.py: exit status $rc, not 127"
grep -qx "smddp-run: 'train.py' is a Python script: run it as 'python3 train.py' (torchrun adds the python; smddp-run runs PROGRAM as it is given)" "$T/ue" ||
	fail "train.py: $(cat "$T/ue")"

# ---- torchrun's spellings, shown by --dry-run
out=$("$RUN" --nnodes=3 --node_rank=2 --rdzv_endpoint=10.1.2.3:4000 --nproc_per_node=2 \
	--rdzv_backend=c10d --dry-run prog) || fail "torchrun spellings: $out"
grep -qx '# smddp-run --dry-run: per-node on this host, node rank 2 of 3 hosts, 2 ranks here' <<<"$out" ||
	fail "torchrun spellings: $out"
grep -qx "# joins node 0's launcher at 10.1.2.3:4001 (at most 300 s) and takes the job id and token from it" <<<"$out" ||
	fail "torchrun spellings: $out"
grep -qx 'export MASTER_PORT=4000' <<<"$out" && grep -qx 'export WORLD_SIZE=6' <<<"$out" &&
	grep -qx '# rank 5: RANK=5 SMDDP_RANK=5 ROLE_RANK=5 LOCAL_RANK=1 SMDDP_LOCAL_RANK=1 SMDATAPARALLEL_LOCAL_RANK=1' <<<"$out" ||
	fail "torchrun spellings: $out"
grep -q 'SMDDP_JOB_TOKEN' <<<"$out" && fail "a token made up before node 0 gave one: $out"
out=$("$RUN" --nnodes 2 --node-rank 0 --master_addr h --master_port 7000 --launcher-port 9000 \
	--join-timeout 5 -n 1 --dry-run prog) || fail "--launcher-port: $out"
grep -qx '# waits (at most 5 s) for nodes 1..1 on launcher port 9000, then hands out the job id and token' <<<"$out" ||
	fail "--launcher-port: $out"
out=$("$RUN" --standalone -n 2 --dry-run prog) || fail "--standalone: $out"
grep -qx 'export MASTER_ADDR=127.0.0.1' <<<"$out" || fail "--standalone: $out"
echo "ok: usage errors and torchrun's spellings"

# ---- the verdict: rank 3 (node 1) skips call 3; node 1's launcher sends its
# ranks' dumps to node 0, whose one verdict names rank 3 and ranks 0-2 (rank
# 2's dump came from node 1); each launcher's private directory goes
FAULT="$top_builddir/tests/integration/fault"
if [ -x "$FAULT" ]; then
	mkdir "$T/tmp"
	PORT=$(free_ports)
	TMPDIR="$T/tmp" start_bg node 1 2 --grace 5 --env SMDDP_TIMEOUT=2 -- "$FAULT" hang 3 30 \
		>"$T/out1" 2>&1
	b1=$BG
	rc=0
	TMPDIR="$T/tmp" node 0 2 --grace 5 --env SMDDP_TIMEOUT=2 -- "$FAULT" hang 3 30 \
		>"$T/out0" 2>&1 || rc=$?
	wait_bg "$b1" 40
	[ "$rc" -ne 0 ] && [ "$RC" -ne 0 ] || fail "verdict: exit status $rc and $RC: $(cat "$T"/out*)"
	v=$(grep '^smddp-run: verdict: ' "$T/out0")
	[ "$v" = "smddp-run: verdict: rank 3 never entered call 3 (allreduce, 4099 x float32, sum); ranks 0-2 waited in it" ] ||
		fail "verdict: node 0 says '$v': $(cat "$T"/out*)"
	! grep -q verdict "$T/out1" || fail "verdict: node 1 gave one too: $(cat "$T/out1")"
	[ -z "$(ls -A "$T/tmp")" ] || fail "verdict: left in TMPDIR: $(ls -A "$T/tmp")"
	echo "ok: $v"
else
	echo "skip: the verdict: $FAULT is not built"
fi
exit 0
