#!/bin/bash
# lab/gpu/multigpu-vs-nccl.sh - libsmddp against NCCL on the GPUs of one machine, one rank per GPU.
#
# For allreduce, allgather and reducescatter from 8 B to 1 GiB: the sweep
# through libsmddp and then the same sweep through NCCL, in the same
# processes, buffers and stream (smddp-allreduce-bench --device cuda
# --compare nccl; time = median over iterations of the slowest rank), with
# the busbw ratio (ours / NCCL's) per size; beside them nvidia-smi topo -m
# and smddp-topo of the machine.  Builds and installs nothing: it takes a
# build made with ../configure --with-cuda (B, default build-cuda/, where
# configure found NCCL) and the libraries the machine lacks (CARRY, default
# .devcarry/: libcjson.so.1).  NVLink multicast stays off.
#
# Usage: lab/gpu/multigpu-vs-nccl.sh [NRANKS]   (default: every GPU)
# Environment: OUT (logs, default ./gpu-logs), MAXBYTES (default 1G), ITERS (default 20).
# Exit: 0 done, 1 a run failed, 3 wrong results.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
B=$ROOT/${B:-build-cuda}
CARRY=$ROOT/${CARRY:-.devcarry}
OUT=${OUT:-$ROOT/gpu-logs}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$B/lib/.libs:$CARRY${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export SMDDP_CONFIG=/dev/null
RUN=$B/cmd/smddp-run
BENCH=$B/cmd/bench/.libs/smddp-allreduce-bench
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
n=${1:-$ngpus}
if [ "$ngpus" -lt 1 ]; then
	echo "multigpu-vs-nccl: no GPU here" >&2
	exit 1
fi
if [ "$n" -gt "$ngpus" ]; then
	echo "multigpu-vs-nccl: $n ranks need $n GPUs, this machine has $ngpus (NCCL refuses two ranks on one GPU)" >&2
	exit 1
fi
{
	echo "# $(date -u) $(uname -n): $n rank(s) on $ngpus GPU(s)"
	nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
	nvidia-smi topo -m
	"$B/cmd/.libs/smddp-topo" 2>&1 || "$B/cmd/smddp-topo" 2>&1
} >"$OUT/nccl-topo.log" 2>&1
cat "$OUT/nccl-topo.log"
rc=0
for coll in allreduce allgather reducescatter; do
	log=$OUT/nccl-$coll.log
	timeout -k 10 900 "$RUN" -n "$n" --timeout 880 "$BENCH" --device cuda --compare nccl \
		--coll "$coll" -b 8 -e "${MAXBYTES:-1G}" -f 2 -n "${ITERS:-20}" -w 5 -c 1 >"$log" 2>&1
	st=$?
	echo "# $coll: exit $st (log $log)"
	grep -v '^\[[0-9]*\] #  Rank' "$log" | sed 's/^\[0\] //'
	[ "$st" -eq 0 ] || rc=$st
done
exit $rc
