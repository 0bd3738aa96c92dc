#!/bin/bash
# tests/gpu/shrink-device.sh - on a GPU machine, in one call: ranks die in the middle of device
# collectives, the survivors shrink the communicator and go on (issue 36, the device run).
#
# 1. C, device buffers, the ranks sharing the GPU (gpu-conformance shrink, tests/gpu/gpu-shrink.c:
#    each survivor gets an error naming the dead rank with its pid, its streams released within
#    20 s, shrinks, sees a device call on the old communicator fail at once, frees the old one,
#    prints the GPU's free memory before and after (SHRINK-MEM), and passes the matrix --quick on
#    the new communicator; SHRINK-OK per survivor):
#      without MPS (auto: calls return when done, as the ranks are time-sliced):
#        nomps-n3   3 ranks, rank 1 dies                  (3 -> 2)
#        nomps-n4   4 ranks, rank 0, then world rank 2    (4 -> 3 -> 2)
#      under MPS (auto: queued; small calls on the fast path's kernels, large allreduces,
#      allgathers, broadcasts and reduces on the direct path's, the rest through the proxy):
#        mps-n4         4 ranks, rank 0 at a random moment, then world rank 2
#        mps-n3-fast    3 ranks, rank 2 dies just before a fast call (the peers' kernels wait
#                       for it; the failure must name that allgather)
#        mps-n3-direct  3 ranks: a planned shrink first (world rank 1 is left out alive: its
#                       device call on the old communicator must fail at once), then rank 0
#                       dies just before a direct allreduce (3 -> 2 -> 1)
# 2. torch on CUDA tensors: examples/torch/shrink.py --device cuda, 3 ranks under
#    smddp-run --on-failure continue, rank 0 SIGKILLed at step 5: the 2 others shrink, train
#    to step 10 and agree (parameter checksums); under MPS and without.  The extension is
#    built as tests/gpu/torch-cuda.sh builds it, into SITE (default
#    /tmp/smddp-torch-cuda-site), reused when present (the build is outside the time below).
#    A torch without dist.shrink_group (before 2.15) runs the example on 2 ranks without a
#    death instead, and info.txt says so.  TORCH=auto (default): only where SITE is built
#    already (tests/gpu/torch-cuda.sh earlier on the same machine); TORCH=1 builds it first
#    (minutes); TORCH=0 leaves torch out.
# About 3 minutes (each run bounded by its timeout; a C run is left out past 170 s, a torch
# run past 220 s).
# Run from the tree with build-cuda/ and .devcarry/ (libcjson.so.1), as fastcoll-device.sh:
#   bash tests/gpu/shrink-device.sh    (summary in $OUT/info.txt, logs in $OUT/logs.tgz)
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD B=$ROOT/build-cuda T0=$(date +%s)
O=${OUT:-/tmp/out}
L=$(mktemp -d /tmp/shrink-device.XXXXXX)
mkdir -p "$O"
export LD_LIBRARY_PATH=$B/lib/.libs:$ROOT/.devcarry SMDDP_CONFIG=/dev/null
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
RUN=$B/cmd/smddp-run GC=${GC:-$B/tests/gpu/.libs/gpu-conformance}
SITE=${SITE:-/tmp/smddp-torch-cuda-site}
INFO=$O/info.txt
MPS=0
mps_start() {
	export CUDA_MPS_PIPE_DIRECTORY=$L/mps-pipe CUDA_MPS_LOG_DIRECTORY=$L/mps-log
	mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
	nvidia-cuda-mps-control -d && MPS=1 || el "nvidia-cuda-mps-control -d failed"
}
mps_stop() {
	[ "$MPS" = 1 ] && echo quit | nvidia-cuda-mps-control
	MPS=0
	sleep 1
	unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
finish() {
	mps_stop
	el "end"
	tar czf "$O/logs.tgz" -C "$L" --exclude mps-pipe . 2>/dev/null
	rm -rf "$L"
}
trap finish EXIT
left() { [ $(($(date +%s) - T0)) -lt "$1" ]; }
el() { echo "[t+$(($(date +%s) - T0))s] $*" | tee -a "$INFO"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; } | tee "$INFO"
job=0

# c NAME NRANKS [ENV=VALUE...] -- ARGS...: gpu-conformance shrink ARGS, then its summary:
# exit, the survivors that finished (SHRINK-OK) and in what size, SHRINK-BAD, what the first
# survivor's failure said, the matrices, the memory lines, leftovers in /dev/shm
c() {
	local name=$1 n=$2 envs=() st
	shift 2
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	left 170 || { el "$name: out of time, left out"; return; }
	job=$((job + 1))
	timeout -k 5 80 env SMDDP_TIMEOUT=30 SMDDP_JOB_ID=shrinkdev$$x$job SMDDP_DEBUG=INFO \
		SMDDP_DEBUG_SUBSYS=COLL "${envs[@]}" "$RUN" -n "$n" --timeout 75 --on-failure continue \
		"$GC" shrink "$@" >"$L/$name.log" 2>&1
	st=$?
	el "$name (${envs[*]} shrink $*): exit $st; $(grep -ho 'SHRINK-OK rank=[0-9]* [a-z]*=*[0-9]*' "$L/$name.log" | tr '\n' ' ')"
	grep -h "SHRINK-BAD\|SUMMARY\|FAIL rank" "$L/$name.log" | head -6 | sed 's/^/    /' | cut -c1-300 | tee -a "$INFO"
	grep -h "failed with\|shrank in\|the matrix on\|excluded:" "$L/$name.log" | head -14 | sed 's/^/    /' | cut -c1-300 | tee -a "$INFO"
	grep -h "SHRINK-MEM" "$L/$name.log" | sed 's/^/    /' | tee -a "$INFO"
	grep -ho "^\[[0-9]\] .*fast path calls: .*\|^\[[0-9]\] .* call(s) read the peers' buffers directly ([^)]*)" "$L/$name.log" |
		sed -E 's/ [^ ]+ \[SMDDP INFO COLL\] device collectives on GPU [0-9]+://' | head -8 | sed 's/^/    /' | tee -a "$INFO"
	! ls /dev/shm | grep -q "smddp-shrinkdev$$x$job" || el "    left in /dev/shm: $(ls /dev/shm | grep "smddp-shrinkdev$$x$job" | tr '\n' ' ')"
}

c nomps-n3 3 SMDDP_CUDA_ASYNC=auto -- --quick 1
c nomps-n4 4 SMDDP_CUDA_ASYNC=auto -- --quick 0 2
mps_start
c mps-n4 4 SMDDP_CUDA_ASYNC=auto -- --quick 0 2
c mps-n3-fast 3 SMDDP_CUDA_ASYNC=auto SHRINK_IN=fast -- --quick 2
c mps-n3-direct 3 SMDDP_CUDA_ASYNC=auto SHRINK_IN=direct -- --quick p1 0
mps_stop

# ---- torch (TORCH=0: left out; a build of the extension takes minutes: with TORCH=auto,
# the default, it runs only where SITE holds one already)
if [ "${TORCH:-auto}" = 0 ] || { [ "${TORCH:-auto}" = auto ] && [ ! -f "$SITE/.built" ]; }; then
	el "torch left out (TORCH=${TORCH:-auto}; $SITE/.built: $([ -f "$SITE/.built" ] && echo yes || echo no)): TORCH=1 builds the extension"
	exit 0
fi
tar czf "$O/logs.tgz" -C "$L" --exclude mps-pipe . 2>/dev/null # the C runs' logs, should the build run out of time
if [ ! -f "$SITE/.built" ]; then
	el "building the torch extension into $SITE (as tests/gpu/torch-cuda.sh does)"
	tb=$(date +%s)
	rm -rf "$SITE" "$L/pysrc"
	cp -r "$ROOT/python" "$L/pysrc"
	rm -rf "$L/pysrc/build" "$L"/pysrc/*.egg-info
	timeout 500 env SMDDP_BUILD_DIR="$B" SMDDP_SOURCE_DIR="$ROOT" SMDDP_TORCH_CUDA=1 MAX_JOBS=16 \
		python3 -m pip install -q --no-build-isolation --no-deps --no-index --target "$SITE" \
		"$L/pysrc" >"$L/torch-build.log" 2>&1
	st=$?
	[ "$st" = 0 ] && touch "$SITE/.built"
	rm -rf "$L/pysrc"
	el "built: exit $st ($(tail -1 "$L/torch-build.log" | cut -c1-200))"
	T0=$((T0 + $(date +%s) - tb)) # the runs' time budget leaves the build out
fi
export PYTHONPATH=$SITE PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
shrinks=$(python3 -c 'import torch, torch.distributed as d; print(torch.__version__, int(hasattr(d, "shrink_group")))' 2>&1)
el "torch: $shrinks"
# t NAME: the example on CUDA tensors, 3 ranks, rank 0 dies at step 5 (2 ranks, no death,
# where torch has no shrink_group)
t() {
	local name=$1 st n=3 kill="--kill 0 --at 5" a
	[ "${shrinks##* }" = 1 ] || { n=2 kill=; }
	left 220 || { el "$name: out of time, left out"; return; }
	job=$((job + 1))
	timeout -k 5 90 env SMDDP_TIMEOUT=30 SMDDP_JOB_ID=shrinkdev$$x$job "$RUN" -n $n --timeout 85 \
		--on-failure continue python3 "$ROOT/examples/torch/shrink.py" --device cuda $kill \
		>"$L/$name.log" 2>&1
	st=$?
	a=$(sed -n 's/^.*rank [0-9]*: 10 steps on cuda, 2 ranks at the end, parameter checksum //p' "$L/$name.log" | sort | uniq -c | tr -s ' ')
	el "$name (${kill:-no death: torch has no shrink_group}): exit $st; checksums: $a"
	grep -h "failed; ranks\|now rank\|Error\|error" "$L/$name.log" | head -8 | sed 's/^/    /' | cut -c1-300 | tee -a "$INFO"
	if [ "$st" = 0 ] && [ "$(awk '{print $1}' <<<"$a")" = 2 ] &&
		{ [ -z "$kill" ] || grep -q "rank 1: now rank 0 of 2" "$L/$name.log"; }; then
		el "    $name: PASS (2 ranks on cuda agree${kill:+ after rank 0 died})"
	else
		el "    $name: FAIL"
	fi
}
if [ -f "$SITE/.built" ]; then
	mps_start
	t torch-mps
	mps_stop
	t torch-nomps
fi
