# shrink.sh - dist.shrink_group (torch 2.15+): a rank SIGKILLed mid-training
# (DDP, FSDP), rank 0 included, or dropped from a healthy group; the
# survivors go on.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/torch/lib.sh"
need_shim
if ! "$PY" -c 'import sys, torch.distributed as d; sys.exit(not hasattr(d, "shrink_group"))'; then
	echo "SKIP: torch $("$PY" -c 'import torch; print(torch.__version__)') has no dist.shrink_group (torch 2.15 and later)"
	exit 77
fi
export SMDDP_TIMEOUT=60
# the survivors must go on when a rank dies
LAUNCH_OPTS="--on-failure continue --grace 10"

# expect_survivors NAME VICTIM N: every rank but VICTIM said TORCH-OK, none
# TORCH-BAD, and smddp-run exited 0 having named the dead rank
expect_survivors() {
	local name=$1 victim=$2 n=$3 r
	for r in $(seq 0 $((n - 1))); do
		[ "$r" = "$victim" ] && continue
		grep -q "TORCH-OK rank=[0-9]* .*old rank $r of $n, now" "$TDIR/$name.out" &&
			pass "$name: old rank $r shrank the group and trained on" ||
			fail "$name: old rank $r did not"
	done
	! grep -q TORCH-BAD "$TDIR/$name.out" || fail "$name: $(grep TORCH-BAD "$TDIR/$name.out" | head -3)"
	[ "$status" -eq 0 ] && pass "$name: smddp-run exited 0" || fail "$name: smddp-run exited $status"
	grep -q "rank $victim (pid [0-9]*) was killed by signal 9" "$TDIR/$name.out" ||
		fail "$name: smddp-run did not name the dead rank $victim"
}

# smddp-run serves torch's store (--store launcher, the default with
# --on-failure continue): any rank may die, rank 0 included
run_job kill-2-of-4 180 4 "$PY" "$TESTS_PY/test_shrink.py" kill 2
expect_survivors kill-2-of-4 2 4
grep -q "TORCH-OK .*store=launcher" "$TDIR/kill-2-of-4.out" ||
	fail "kill-2-of-4: the ranks were not clients of smddp-run's store"
run_job kill-0-of-3 180 3 "$PY" "$TESTS_PY/test_shrink.py" kill 0
expect_survivors kill-0-of-3 0 3

# per-node mode, two launchers on this machine, 2 ranks each: node 0's
# launcher serves the store for both; rank 0 dies, the 3 others shrink
port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pernode() {
	timeout -k 5 240 "$RUN" --nnodes 2 --node-rank "$1" --master-addr 127.0.0.1 --master-port "$port" \
		-n 2 --join-timeout 60 --timeout 180 $LAUNCH_OPTS "$PY" "$TESTS_PY/test_shrink.py" kill 0
}
pernode 1 >"$TDIR/pernode-1.out" 2>&1 &
node1=$!
pernode 0 >"$TDIR/pernode.out" 2>&1
status=$?
wait "$node1"
status1=$?
cat "$TDIR/pernode-1.out" >>"$TDIR/pernode.out"
echo "--- pernode: node 0 exited $status, node 1 $status1"
sed 's/^/    /' "$TDIR/pernode.out"
expect_survivors pernode 0 4
[ "$status1" -eq 0 ] || fail "pernode: node 1's smddp-run exited $status1"

# FSDP: rank 0 dies; the survivors rebuild FSDP on the new group from the
# full parameters of the last completed step and agree with a fresh job of 2
run_job fsdp-0-of-3 240 3 "$PY" "$TESTS_PY/test_shrink.py" fsdp 0
expect_survivors fsdp-0-of-3 0 3

# env://'s own way, the store in rank 0 (--store rank0): a victim other than rank 0
LAUNCH_OPTS="$LAUNCH_OPTS --store rank0" \
	run_job kill-1-of-3-abort 180 3 "$PY" "$TESTS_PY/test_shrink.py" kill 1 abort
expect_survivors kill-1-of-3-abort 1 3

# a planned shrink of a healthy group: the excluded rank leaves with 0
LAUNCH_OPTS="--grace 10" torch_job planned-3 120 3 test_shrink.py planned 1
finish
