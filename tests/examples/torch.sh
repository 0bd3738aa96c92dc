# tests/examples/torch.sh - the PyTorch examples: examples/torch/ddp.py trains on 2
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
# ranks to gloo's parameters, and on 2 Slurm nodes x 2 (examples/slurm/ddp.sbatch
# through tests/slurm/fake-srun); the ones this machine cannot run are checked
# as far as it allows: the SageMaker launch and the Kubernetes job through
# smddp-run --dry-run, the container recipe's entrypoint and files.
. "$top_srcdir/tests/torch/lib.sh"
. "$top_srcdir/tests/examples/lib.sh"
need_shim

# checksums NAME: the "parameter checksum" lines of a job, rank numbers dropped
checksums() { sed -n 's/^.*rank [0-9]* of \([0-9]*\): parameter checksum /\1 /p' "$TDIR/$1.out" | sort -u; }

# ---- ddp.py on smddp and on gloo: every replica the same, and the same as gloo's
run_job ddp-smddp 300 2 "$PY" "$E/torch/ddp.py" --cpu
run_job ddp-gloo 300 2 "$PY" "$E/torch/ddp.py" --cpu --backend gloo
a=$(checksums ddp-smddp)
b=$(checksums ddp-gloo)
if [ "$status" -eq 0 ] && [ "$(wc -l <<<"$a")" -eq 1 ] && [ -n "$a" ] && [ "$a" = "$b" ]; then
	pass "examples/torch/ddp.py: 2 ranks agree, and with gloo ($a)"
else
	fail "examples/torch/ddp.py: smddp '$a', gloo '$b' (exit $status)"
fi

# ---- shrink.py: rank 0 dies at step 5 of 3; the two others shrink, train
# on, and agree (smddp-run --on-failure continue serves the store)
if "$PY" -c 'import sys, torch.distributed as d; sys.exit(not hasattr(d, "shrink_group"))'; then
	LAUNCH_OPTS="--on-failure continue" run_job shrink-smddp 300 3 "$PY" "$E/torch/shrink.py" --kill 0 --at 5
	a=$(sed -n 's/^.*rank [12]: 10 steps on cpu, 2 ranks at the end, parameter checksum //p' "$TDIR/shrink-smddp.out" | sort | uniq -c | tr -s ' ')
	[ "$status" -eq 0 ] && [ "$(awk '{print $1}' <<<"$a")" = 2 ] &&
		grep -q "rank 1: now rank 0 of 2" "$TDIR/shrink-smddp.out" &&
		pass "examples/torch/shrink.py: rank 0 died, the 2 others went on and agree" ||
		fail "examples/torch/shrink.py: exit $status, checksums: $a"
else
	echo "examples/torch/shrink.py is left out: this torch has no dist.shrink_group (2.15 and later)"
fi

# ---- the Slurm batch script, in an allocation of 2 nodes x 2 tasks on this machine
t0=$(now)
(cd "$top_srcdir" && env SLURM_JOB_ID=5 SLURM_JOB_NODELIST='127.0.0.[1-2]' SLURM_JOB_NUM_NODES=2 \
	SLURM_NTASKS_PER_NODE=2 SLURM_CPUS_ON_NODE=2 SLURM_SUBMIT_DIR="$top_srcdir" \
	SMDDP_SRUN="$top_srcdir/tests/slurm/fake-srun" PYTHON="$PY" \
	timeout -k 5 300 bash "$E/slurm/ddp.sbatch") >"$TDIR/slurm.out" 2>&1
status=$?
sed 's/^/    /' "$TDIR/slurm.out"
c=$(sed -n 's/^.*rank [0-9]* of 4: parameter checksum //p' "$TDIR/slurm.out" | sort | uniq -c | tr -s ' ')
[ "$status" -eq 0 ] && [ "$(wc -l <<<"$c")" -eq 1 ] && [ "$(awk '{print $1}' <<<"$c")" = 4 ] &&
	pass "examples/slurm/ddp.sbatch: 2 nodes x 2 ranks agree in $(since "$t0") s" ||
	fail "examples/slurm/ddp.sbatch: exit $status, checksums: $c"

# ---- the SageMaker launch: the hyperparameters its estimator passes, on 2
# p4d instances as SageMaker describes them to the container (its "train")
mkdir -p "$TDIR/sm"
cp "$top_srcdir/tests/sagemaker/p4d/resourceconfig.json" "$TDIR/sm/"
"$PY" "$E/sagemaker/launch.py" --hyperparameters >"$TDIR/sm/hyperparameters.json" ||
	fail "launch.py --hyperparameters failed"
out=$(env -i PATH="$PATH" SMDDP_SM_CONFIG_DIR="$TDIR/sm" SM_NUM_GPUS=8 SMDDP_JOB_TOKEN=0123456789abcdef \
	smddp-run --dry-run train 2>&1)
echo "$out" | sed 's/^/    /'
grep -q '^# smddp-run --dry-run: torch_distributed on algo-1, node rank [01] of 2 hosts, 8 ranks here' <<<"$out" &&
	grep -qx 'train' <<<"$out" && pass "examples/sagemaker/launch.py: torch_distributed, 2 hosts x 8" ||
	fail "examples/sagemaker/launch.py: the plan: $out"

# ---- the Kubernetes job: pod 1's smddp-run, with the environment the job gives it
if python3 -c 'import yaml' 2>/dev/null; then
	mapfile -t k8s < <(python3 - "$E/kubernetes/ddp-job.yaml" <<'PY'
import sys, yaml
docs = list(yaml.safe_load_all(open(sys.argv[1])))
job = next(d for d in docs if d["kind"] == "Job")
svc = next(d for d in docs if d["kind"] == "Service")
assert svc["spec"]["clusterIP"] == "None" and job["spec"]["completionMode"] == "Indexed"
c = job["spec"]["template"]["spec"]["containers"][0]
for e in c["env"]:
    print(f"{e['name']}={e.get('value', 1)}")   # PET_NODE_RANK: pod 1's index
print("--")
print("\n".join(c["command"] + c.get("args", [])))
PY
)
	envs=()
	i=0
	while [ "${k8s[$i]}" != "--" ]; do envs+=("${k8s[$i]}"); i=$((i + 1)); done
	cmd=("${k8s[@]:$((i + 1))}")
	out=$(env -i PATH="$PATH" "${envs[@]}" "${cmd[0]}" --dry-run "${cmd[@]:1}" 2>&1)
	echo "$out" | sed 's/^/    /'
	grep -q '^# smddp-run --dry-run: per-node on this host, node rank 1 of 2 hosts, 8 ranks here' <<<"$out" &&
		grep -q "joins node 0's launcher at smddp-ddp-0.smddp-ddp:29501" <<<"$out" &&
		pass "examples/kubernetes/ddp-job.yaml: pod 1 is node 1 of 2, 8 ranks, node 0 its rendezvous" ||
		fail "examples/kubernetes/ddp-job.yaml: the plan: $out"
else
	echo "no PyYAML for python3: examples/kubernetes/ddp-job.yaml is not checked"
fi

# ---- the container recipe: smddp-run as entrypoint; what it copies exists
D=$E/container/Dockerfile
grep -qx 'ENTRYPOINT \["smddp-run"\]' "$D" && pass "examples/container: the entrypoint is smddp-run" ||
	fail "examples/container/Dockerfile: no ENTRYPOINT [\"smddp-run\"]"
for f in $(sed -n 's/^COPY \([^ ]*\) .*/\1/p' "$D"); do
	[ -e "$top_srcdir/$f" ] || fail "examples/container/Dockerfile copies $f, which is not in the source tree"
done
sh -n "$E/container/train" && bash -n "$E/slurm/ddp.sbatch" || fail "a shell example does not parse"
finish
