#!/bin/bash
# tests/cluster/sagemaker.sh - smddp-run as SageMaker's launcher on 2 namespace hosts
#
# Each host has its own configuration folder (resourceconfig.json naming it
# the current host, hyperparameters.json with the distribution), found by
# auto-detection through SMDDP_SM_CONFIG_DIR, as /opt/ml/input/config would be:
#  - torch_distributed: each host's smddp-run starts its own 2 ranks, node
#    rank from the sorted host list, the same job id derived alike, the
#    token given on both (none is derived from public names); without one,
#    rank 0 refuses the other host's ranks, saying to set one;
#  - mpi (2 per host): host 1 runs mpirun; host 2's smddp-run waits for
#    Open MPI's daemon to come and go, and exits 0.
# The ranks then run smddp_init, a barrier and an allreduce across the hosts
# (over libsmddp's sockets in a build without libfabric).
. "$top_srcdir/tests/cluster/lib.sh"
across=init-ok

cluster_up 2 1gbit
MPIARGS=$(cl_mpirun_args)

# config HOST FORM-HYPERPARAMETERS: the configuration folder of host HOST
config() {
	local d="$CL_DIR/sm-h$1"
	mkdir -p "$d"
	cat >"$d/resourceconfig.json" <<RC
{"current_host": "10.77.0.$1", "hosts": ["10.77.0.2", "10.77.0.1"],
 "current_instance_type": "ml.c5.xlarge", "network_interface_name": "eth0"}
RC
	echo "$2" >"$d/hyperparameters.json"
	echo "$d"
}

# ---- torch_distributed: both hosts start at once, each its own ranks
hp='{"sagemaker_torch_distributed_enabled": "true", "epochs": "3"}'
d1=$(config 1 "$hp")
d2=$(config 2 "$hp")
tok=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
SMDDP_JOB_TOKEN=$tok SMDDP_SM_CONFIG_DIR=$d2 SM_NUM_GPUS=2 on_host 2 timeout -k 5 90 "$RUN" \
	"$ENVCHECK" 4 2 10.77.0.1 h $across >"$CL_DIR/out2" 2>"$CL_DIR/err2" &
pid2=$!
rc=0
SMDDP_JOB_TOKEN=$tok SMDDP_SM_CONFIG_DIR=$d1 SM_NUM_GPUS=2 on_host 1 timeout -k 5 90 "$RUN" \
	"$ENVCHECK" 4 2 10.77.0.1 h $across >"$CL_DIR/out1" 2>"$CL_DIR/err1" || rc=$?
rc2=0
wait "$pid2" || rc2=$?
[ "$rc" -eq 0 ] && [ "$rc2" -eq 0 ] || fail "torch_distributed: exit status $rc and $rc2:
$(cat "$CL_DIR/err1" "$CL_DIR/out1" "$CL_DIR/err2" "$CL_DIR/out2")"
for r in 0 1; do
	grep -qx "\[$r\] envcheck: rank $r on h1: env ok" "$CL_DIR/out1" || fail "torch_distributed: $(cat "$CL_DIR/out1")"
	grep -qx "\[$((r + 2))\] envcheck: rank $((r + 2)) on h2: env ok" "$CL_DIR/out2" ||
		fail "torch_distributed: $(cat "$CL_DIR/out2")"
done
# the two hosts met at the rendezvous (same job token): with libfabric they
# ran a job together; without, rank 0 saw h2's ranks and refused
if [ "$across" = init-ok ]; then
	for r in 0 1 2 3; do
		grep -q "envcheck: rank $r on h$((r / 2 + 1)): smddp_init, barrier, allreduce ok" \
			"$CL_DIR/out$((r / 2 + 1))" ||
			fail "torch_distributed: rank $r did not run the job: $(cat "$CL_DIR"/out* "$CL_DIR"/err*)"
	done
else
	grep -qx '\[0\] envcheck: rank 0 on h1: smddp_init: EUNSUPPORTED as expected' "$CL_DIR/out1" ||
		fail "torch_distributed: rank 0 did not refuse with EUNSUPPORTED: $(cat "$CL_DIR/out1" "$CL_DIR/err1")"
	grep -q 'runs on host h2/' "$CL_DIR/err1" || fail "torch_distributed: rank 0 never saw h2: $(cat "$CL_DIR/err1")"
fi
echo "ok: torch_distributed across 2 hosts"

# ---- torch_distributed without a token: ranks that reach rank 0 over the network are refused
if [ "$across" = init-ok ]; then
	# SMDDP_TIMEOUT bounds h2's attempts to reach rank 0 too: long enough
	# for h1's launcher to start on a loaded machine (4 s was not).
	SMDDP_TIMEOUT=20 SMDDP_SM_CONFIG_DIR=$d2 SM_NUM_GPUS=2 on_host 2 timeout -k 5 60 "$RUN" \
		"$ENVCHECK" 4 2 10.77.0.1 h init-ok >"$CL_DIR/out2" 2>"$CL_DIR/err2" &
	pid2=$!
	SMDDP_TIMEOUT=20 SMDDP_SM_CONFIG_DIR=$d1 SM_NUM_GPUS=2 on_host 1 timeout -k 5 60 "$RUN" \
		"$ENVCHECK" 4 2 10.77.0.1 h init-ok >"$CL_DIR/out1" 2>"$CL_DIR/err1" && fail "no token: host 1 passed"
	wait "$pid2" && fail "no token: host 2 passed"
	# Every rank reaches rank 0 through 10.77.0.1, not loopback: the first
	# refused rank (on h1 or h2, whichever came first) fails its launcher,
	# which may stop rank 0 before it answers the others; so the sentence
	# must reach some rank, and rank 0 must log a refusal.
	grep -q 'no job token and admits ranks without one only from this host (loopback): set SMDDP_JOB_TOKEN' \
		"$CL_DIR/out1" "$CL_DIR/err1" "$CL_DIR/out2" "$CL_DIR/err2" ||
		fail "no token: no rank was told why: $(cat "$CL_DIR/out1" "$CL_DIR/err1" "$CL_DIR/out2" "$CL_DIR/err2")"
	grep -q 'rejected connection from 10\.77\.0\.' "$CL_DIR/out1" "$CL_DIR/err1" ||
		fail "no token: rank 0 did not log the refusal: $(cat "$CL_DIR/err1")"
	echo "ok: torch_distributed without a token: ranks off loopback refused"
fi

# ---- mpi: host 2 waits for host 1's mpirun
hp='{"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2"}'
d1=$(config 1 "$hp")
d2=$(config 2 "$hp")
SMDDP_SM_CONFIG_DIR=$d2 on_host 2 timeout -k 5 90 "$RUN" --worker-wait 60 \
	"$ENVCHECK" 4 2 10.77.0.1 h $across >"$CL_DIR/out2" 2>"$CL_DIR/err2" &
pid2=$!
for ((i = 0; i < 300; i++)); do
	grep -q 'waiting for mpirun on 10.77.0.1' "$CL_DIR/err2" && break
	sleep 0.1
done
grep -q 'host 10.77.0.2 runs ranks 2..3 of this mpi job; waiting for mpirun on 10.77.0.1' "$CL_DIR/err2" ||
	fail "mpi: host 2 does not wait: $(cat "$CL_DIR/err2")"
rc=0
SMDDP_SM_CONFIG_DIR=$d1 on_host 1 timeout -k 5 90 "$RUN" --no-tag-output --mpirun-args "$MPIARGS" \
	"$ENVCHECK" 4 2 10.77.0.1 h $across >"$CL_DIR/out1" 2>"$CL_DIR/err1" || rc=$?
[ "$rc" -eq 0 ] || fail "mpi: exit status $rc: $(cat "$CL_DIR/err1" "$CL_DIR/out1")"
[ "$(grep -c ': env ok$' "$CL_DIR/out1")" -eq 4 ] || fail "mpi: $(cat "$CL_DIR/out1")"
for ((i = 0; i < 300; i++)); do
	kill -0 "$pid2" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$pid2" 2>/dev/null && fail "mpi: host 2's smddp-run still waits after the job ended"
rc2=0
wait "$pid2" || rc2=$?
[ "$rc2" -eq 0 ] || fail "mpi: host 2 exit status $rc2: $(cat "$CL_DIR/err2")"
echo "ok: mpi across 2 hosts, host 2 waited"

# ---- a worker that nobody reaches gives up after --worker-wait
rc=0
SMDDP_SM_CONFIG_DIR=$d2 on_host 2 timeout -k 5 60 "$RUN" --worker-wait 1 true 2>"$CL_DIR/err2" || rc=$?
[ "$rc" -eq 1 ] && grep -q 'mpirun on 10.77.0.1 did not reach host 10.77.0.2 within 1 seconds' "$CL_DIR/err2" ||
	fail "--worker-wait: exit status $rc: $(cat "$CL_DIR/err2")"
echo "ok: --worker-wait"
exit 0
