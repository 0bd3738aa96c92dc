#!/bin/bash
# tests/run/pet-env.sh - torchrun's PET_* variables give the options the
# command line does not (command line > PET_* > default); a bad value is a
# usage error (2) that names the variable
. "$top_srcdir/tests/run/lib.sh"

for v in $(env | sed -n 's/^\(PET_[A-Za-z0-9_]*\)=.*/\1/p'); do
	unset "$v"
done

# sizes: PROGRAM prints RANK WORLD_SIZE LOCAL_WORLD_SIZE, sorted into $T/out
sizes() {
	RC=0
	timeout 60 env "$@" --no-tag-output "$PROG" env WORLD_SIZE env LOCAL_WORLD_SIZE \
		>"$T/raw" 2>"$T/err" || RC=$?
	sort -u "$T/raw" >"$T/out"
}

sizes PET_NPROC_PER_NODE=3 "$RUN"
[ "$RC" -eq 0 ] || fail "PET_NPROC_PER_NODE=3: exit status $RC: $(cat "$T/err")"
[ "$(cat "$T/out")" = "LOCAL_WORLD_SIZE=3
WORLD_SIZE=3" ] || fail "PET_NPROC_PER_NODE=3: $(cat "$T/out")"
[ "$(wc -l <"$T/raw")" -eq 6 ] || fail "PET_NPROC_PER_NODE=3: not 3 ranks: $(cat "$T/raw")"

# the command line wins
sizes PET_NPROC_PER_NODE=3 "$RUN" -n 2
[ "$RC" -eq 0 ] || fail "PET_NPROC_PER_NODE=3 -n 2: exit status $RC: $(cat "$T/err")"
[ "$(cat "$T/out")" = "LOCAL_WORLD_SIZE=2
WORLD_SIZE=2" ] || fail "PET_NPROC_PER_NODE=3 -n 2: $(cat "$T/out")"
# an empty variable is not there
sizes PET_NPROC_PER_NODE= "$RUN" -n 2
[ "$RC" -eq 0 ] || fail "PET_NPROC_PER_NODE empty: exit status $RC: $(cat "$T/err")"

# Kubeflow's set, per-node mode: seen in the plan (--dry-run starts nothing)
out=$(PET_NNODES=2 PET_NODE_RANK=1 PET_NPROC_PER_NODE=2 PET_MASTER_ADDR=10.0.0.1 \
	PET_MASTER_PORT=1234 timeout 60 "$RUN" --dry-run "$PROG" 2>&1) ||
	fail "Kubeflow's PET_*: exit status $?: $out"
for want in '^# smddp-run --dry-run: per-node on this host, node rank 1 of 2 hosts, 2 ranks here' \
	'^export MASTER_ADDR=10.0.0.1$' '^export MASTER_PORT=1234$' '^export WORLD_SIZE=4$'; do
	grep -q "$want" <<<"$out" || fail "Kubeflow's PET_*: no '$want' in: $out"
done
out=$(PET_NNODES=2 PET_NODE_RANK=1 PET_MASTER_ADDR=10.0.0.1 PET_MASTER_PORT=1234 \
	timeout 60 "$RUN" --dry-run --master-port 2345 --node-rank 0 "$PROG" 2>&1) ||
	fail "PET_* and options: exit status $?: $out"
grep -q '^export MASTER_PORT=2345$' <<<"$out" || fail "--master-port did not win: $out"
grep -q 'node rank 0 of 2' <<<"$out" || fail "--node-rank did not win: $out"
# a command-line address leaves PET_MASTER_ADDR alone (no "exclude each other")
out=$(PET_MASTER_ADDR=10.0.0.1 timeout 60 "$RUN" --dry-run -n 1 \
	--rdzv-endpoint 127.0.0.1:5555 "$PROG" 2>&1) || fail "--rdzv-endpoint and PET_MASTER_ADDR: $out"
grep -q '^export MASTER_ADDR=127.0.0.1$' <<<"$out" || fail "--rdzv-endpoint did not win: $out"

# bad values: 2, naming the variable
bad() {
	local want=$1 rc=0
	shift
	env "$@" timeout 60 "$RUN" "$PROG" >"$T/out" 2>"$T/err" || rc=$?
	[ "$rc" -eq 2 ] || fail "$*: exit status $rc, not 2: $(cat "$T/err")"
	grep -q -- "$want" "$T/err" || fail "$*: no '$want' in: $(cat "$T/err")"
}
bad "^smddp-run: PET_NNODES: invalid --nnodes 'abc': .*fix or unset PET_NNODES" PET_NNODES=abc
bad "^smddp-run: PET_NPROC_PER_NODE: invalid number of ranks 'x'" PET_NPROC_PER_NODE=x
bad "^smddp-run: PET_STANDALONE: invalid value 'yes'" PET_STANDALONE=yes
bad "^smddp-run: PET_MAX_RESTARTS: --max-restarts 3: restarting" PET_MAX_RESTARTS=3
# the checks made once all options are read name the variable too
bad "^smddp-run: PET_NODE_RANK needs --nnodes" PET_NODE_RANK=1
bad "^smddp-run: PET_NODE_RANK 3: expected 0 to 1 (PET_NNODES 2)" PET_NNODES=2 PET_NODE_RANK=3
bad "^smddp-run: PET_NNODES 2: give node 0's address" PET_NNODES=2 PET_NODE_RANK=1
rc=0
timeout 60 "$RUN" --node-rank 0 "$PROG" >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "^smddp-run: --node-rank needs --nnodes" "$T/err" ||
	fail "--node-rank alone: exit status $rc: $(cat "$T/err")"
exit 0
