#!/bin/bash
# tests/cluster/torch-hosts.sh - the PyTorch backend between namespace hosts, launched as multi-node jobs are
#
# python/tests/test_hosts.py (collectives, sub-groups, send/recv and a DDP
# training, each against gloo; HOSTS checks that the ranks span the hosts)
# on hosts h1..h3 whose names resolve in each other (/etc/netns/NS/hosts),
# h1 with a first interface that leads nowhere (10.88.0.1, before eth0):
#  - torchrun --nnodes 2, static rendezvous (--master-addr, --node-rank):
#    2 x 1 and 2 x 2;
#  - torchrun's c10d rendezvous (--rdzv-endpoint h1:PORT, node ranks
#    assigned by torchrun): 3 x 1;
#  - smddp-run's per-node mode: 2 x 2 and 3 x 1;
#  - smddp-run through srun (tests/slurm/fake-srun): 2 x 1;
# and, in C, communicators made from a unique id (smddp_comm_init_rank)
# across hosts: tests/integration/initrank on 2 x 2 and 3 x 1.
# Every torch job's rank 0 makes the unique id: the path where ranks on
# different hosts, or on rank 0's host, once opened libfabric endpoints of
# different address formats.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/cluster/lib.sh"

grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h" ||
	skip "built without libfabric: no transport between hosts"
PY=${TORCH_PYTHON:-python3}
SITE=${TORCH_SITE:-$top_builddir/tests/torch/site}
TESTS_PY=$top_srcdir/python/tests
"$PY" -c 'import torch' 2>/dev/null ||
	skip "no torch for $PY (make a venv with scripts/torch-venv.sh and set TORCH_PYTHON)"
PYTHONPATH=$SITE:$TESTS_PY "$PY" -c 'import smddp.torch' 2>"$CL_DIR/import.err" ||
	fail "the backend built by tests/torch/shim.sh does not import: $(cat "$CL_DIR/import.err")"
INITRANK=$top_builddir/tests/integration/initrank

# h1 has an interface before eth0 that leads nowhere (a container bridge,
# say): the unique id must carry the address other hosts reach.
aux_first() {
	[ "$1" = 1 ] || return 0
	ip -n "$2" link add aux0 type veth peer name aux1 &&
		ip -n "$2" link set aux0 up && ip -n "$2" link set aux1 up &&
		ip -n "$2" addr add 10.88.0.1/24 dev aux0 || skip "cannot add a second interface to h1"
}
CL_HOST_HOOK=aux_first
cluster_up 3
# Host names that resolve on every host, as in a cluster's DNS: ip netns
# exec mounts /etc/netns/NS/hosts over /etc/hosts.
for i in 1 2 3; do
	CL_ETC="${CL_ETC:-} /etc/netns/$CL_ID-h$i"
	mkdir -p "/etc/netns/$CL_ID-h$i" || skip "cannot write /etc/netns"
	printf '127.0.0.1 localhost\n10.77.0.1 h1\n10.77.0.2 h2\n10.77.0.3 h3\n' \
		>"/etc/netns/$CL_ID-h$i/hosts"
done
trap 'cluster_cleanup; rm -rf $CL_ETC' EXIT

# Each host's processes run in $CL_DIR (what a crash leaves lands there).
ENVS=(PYTHONPATH="$SITE:$TESTS_PY" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 SMDDP_CONFIG=/dev/null
	SMDDP_TIMEOUT=120 TORCH_NCCL_ASYNC_ERROR_HANDLING=0)
PORT=$((29500 + $$ % 1000))

# nodes NAME H HOSTLIST CMD...: CMD on each host of HOSTLIST at once (with
# the variables ENVS and EXTRA), with NODE (the node rank, host i is node
# i-1) substituted in CMD's words; waits for all; sets RCS[i], LAUNCHED and
# DT (ms); out.NAME.i has stdout and stderr.
nodes() {
	local name=$1 h=$2 hosts=$3 i t0 pids=() w words
	shift 3
	LAUNCHED=$hosts
	t0=$(date +%s%N)
	for i in $hosts; do
		words=()
		for w in "$@"; do
			words+=("${w//NODE/$((i - 1))}")
		done
		(cd "$CL_DIR" && on_host "$i" env "${ENVS[@]}" ${EXTRA[@]+"${EXTRA[@]}"} timeout -k 5 240 "${words[@]}") \
			>"$CL_DIR/out.$name.$i" 2>&1 &
		pids[i]=$!
	done
	for i in $hosts; do
		RCS[i]=0
		wait "${pids[i]}" || RCS[i]=$?
	done
	DT=$((($(date +%s%N) - t0) / 1000000))
}

outputs() {
	local f
	for f in "$CL_DIR"/out."$1".*; do
		echo "--- $f"
		grep -Ev '^ *(File |raise |return |\^|[a-z_.]+\()' "$f" | head -60
	done
}

# expect NAME H TOTAL WHAT: every launch exited 0 and TOTAL ranks said TORCH-OK on H hosts
expect() {
	local name=$1 h=$2 total=$3 what=$4 i ok
	for i in $LAUNCHED; do
		[ "${RCS[i]}" -eq 0 ] || fail "$what: h$i exited ${RCS[i]}: $(outputs "$name")"
	done
	ok=$(cat "$CL_DIR"/out."$name".* | grep -c "TORCH-OK rank=[0-9]* .* on $h hosts")
	[ "$ok" -eq "$total" ] || fail "$what: $ok of $total ranks said TORCH-OK: $(outputs "$name")"
	cl_wait_empty 100 || fail "$what: processes left in the hosts: $(cl_host_pids | tr '\n' ' ')"
	echo "ok: $what: $total ranks on $h hosts agree with gloo ($DT ms)"
}

hosts_of() { seq -s ' ' "$1" -1 1; } # node 0 last, as a scheduler might

# ---- torchrun, static rendezvous
for hn in "2 1" "2 2"; do
	set -- $hn
	PORT=$((PORT + 1))
	EXTRA=(HOSTS=$1)
	nodes "static-$1x$2" "$1" "$(hosts_of "$1")" "$PY" -m torch.distributed.run \
		--nnodes "$1" --node-rank NODE --nproc-per-node "$2" --master-addr 10.77.0.1 \
		--master-port "$PORT" "$TESTS_PY/test_hosts.py"
	expect "static-$1x$2" "$1" $(($1 * $2)) "torchrun --nnodes $1 --nproc-per-node $2 (static)"
done

# ---- torchrun, c10d rendezvous by host name
PORT=$((PORT + 1))
EXTRA=(HOSTS=3)
nodes c10d-3x1 3 "$(hosts_of 3)" "$PY" -m torch.distributed.run --nnodes 3 --nproc-per-node 1 \
	--rdzv-backend c10d --rdzv-endpoint "h1:$PORT" --rdzv-id "job$$" "$TESTS_PY/test_hosts.py"
expect c10d-3x1 3 3 "torchrun --nnodes 3 --rdzv-backend c10d --rdzv-endpoint h1"

# ---- smddp-run per node
for hn in "2 2" "3 1"; do
	set -- $hn
	EXTRA=(HOSTS=$1)
	nodes "pernode-$1x$2" "$1" "$(hosts_of "$1")" "$RUN" --nnodes "$1" --node-rank NODE \
		--master-addr 10.77.0.1 -n "$2" --network-interface eth0 --join-timeout 60 -- \
		"$PY" "$TESTS_PY/test_hosts.py"
	expect "pernode-$1x$2" "$1" $(($1 * $2)) "smddp-run --nnodes $1 -n $2"
done

# ---- smddp-run inside a Slurm allocation (srun's stand-in starts one per node)
EXTRA=(HOSTS=2 SLURM_JOB_ID=41 "SLURM_JOB_NODELIST=10.77.0.[1-2]" SLURM_JOB_NUM_NODES=2
	SMDDP_SRUN="$top_srcdir/tests/slurm/fake-srun" FAKE_SRUN_AGENT="$CL_AGENT"
	"FAKE_SRUN_HOSTS=10.77.0.1 10.77.0.2")
nodes slurm-2x1 1 1 "$RUN" --network-interface eth0 --join-timeout 60 -n 1 -- \
	"$PY" "$TESTS_PY/test_hosts.py"
expect slurm-2x1 2 2 "smddp-run through srun, 2 nodes"
EXTRA=()

# ---- C: communicators from a unique id, across hosts (ids through files)
for hn in "2 2" "3 1"; do
	set -- $hn
	mkdir -p "$CL_DIR/ids-$1x$2"
	nodes "initrank-$1x$2" "$1" "$(hosts_of "$1")" "$RUN" --nnodes "$1" --node-rank NODE \
		--master-addr 10.77.0.1 -n "$2" --network-interface eth0 --join-timeout 60 -- \
		"$INITRANK" basic "$CL_DIR/ids-$1x$2"
	for i in $LAUNCHED; do
		[ "${RCS[i]}" -eq 0 ] || fail "initrank $1 x $2: h$i exited ${RCS[i]}: $(outputs "initrank-$1x$2")"
	done
	ok=$(cat "$CL_DIR"/out.initrank-$1x$2.* | grep -c "INITRANK-OK rank=")
	[ "$ok" -eq $(($1 * $2)) ] || fail "initrank $1 x $2: $ok ranks OK: $(outputs "initrank-$1x$2")"
	echo "ok: smddp_comm_init_rank across $1 hosts x $2 ranks ($DT ms)"
done
