#!/bin/bash
# tests/gpu/torch-cuda.sh - on a GPU machine: the torch backend's CUDA path in both modes, then a small all_reduce against NCCL.
#
# Takes the build made with ../configure --with-cuda (B, default build-cuda/,
# carried with the working tree; libcjson.so.1 in .devcarry/, as
# lab/gpu/run-on-device.sh takes them), builds the extension there as a
# user does (SMDDP_TORCH_CUDA=1 pip install --no-build-isolation) into
# $SITE (default /tmp/smddp-torch-cuda-site, kept for the next run; REBUILD=1
# builds again), then, 2 ranks on GPU 0:
#   blocking  without MPS the ranks are time-sliced and libsmddp's device
#             calls return once done: python/tests/test_collectives.py on
#             CUDA tensors against gloo, every CUDA work on the worker
#             (EXPECT_CUDA_PATH=worker)
#   queued    under the CUDA MPS daemon (a private pipe folder) calls return
#             once queued: test_collectives.py with the collectives that
#             queue on the caller's thread (EXPECT_CUDA_PATH=inline),
#             test_ddp.py, test_p2p.py
#   dead      without MPS, SMDDP_CUDA_ASYNC=1 (queued, so on the caller's
#             thread): tests/gpu/torch_errors.py dead, a rank dies after
#             queueing and the other learns of it by itself; deadsync, the
#             same with async_op=False (no Work: the next call raises)
#   threads   under MPS: tests/gpu/torch_threads.py, three groups driven
#             by three threads of each rank at once (the shared event
#             pool, the caller's-thread path, futures made when asked for);
#             groups whose kernels wait for each other in MPS's shared
#             queues must fail at their 20 s timeout, naming a rank
#             (THREADS-CROSSED), while the others finish
#   latency   under MPS: python/bench/torch_latency.py, a small all_reduce
#             through torch, smddp (caller's thread: its current stream, and
#             async_op=True on its side stream), smddp (worker) and NCCL
#             side by side (NCCL_HOSTID per rank: two "hosts" to NCCL)
#   profile   under MPS: torch_latency.py PROFILE=1, where the host time of
#             one 8 B all_reduce goes on each path (torch.profiler: the
#             c10d op, the CUDA calls), about half a minute; not a default
# Usage: tests/gpu/torch-cuda.sh [STAGE...] (default: blocking dead queued latency)
# Logs: $OUT (default ./gpu-logs): summary.txt and torch-cuda.log.
# Exit: 0 every stage passed, 1 one failed.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
B=$ROOT/${B:-build-cuda}
CARRY=$ROOT/${CARRY:-.devcarry}
OUT=${OUT:-$ROOT/gpu-logs}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$B/lib/.libs:$CARRY${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 SMDDP_CONFIG=/dev/null
RUN=$B/cmd/smddp-run
SITE=${SITE:-/tmp/smddp-torch-cuda-site}
TMPD=$(mktemp -d "${TMPDIR:-/tmp}/smddp-torch-cuda.XXXXXX")
summary=$OUT/summary.txt
rc=0
MPS=0
trap '[ "$MPS" = 1 ] && echo quit | nvidia-cuda-mps-control; rm -rf "$TMPD"' EXIT

say() { echo "$*" | tee -a "$summary"; }
# stage NAME SECONDS COMMAND...: with a deadline; its output in $OUT/torch-cuda.log
stage() {
	local name=$1 secs=$2 t0=$SECONDS st
	shift 2
	timeout -k 10 "$secs" "$@" >"$TMPD/$name.log" 2>&1
	st=$?
	{ echo "===== $name: $*: exit $st"; cat "$TMPD/$name.log"; } >>"$OUT/torch-cuda.log"
	say "$(printf '%-24s exit %3d  %4d s' "$name" "$st" $((SECONDS - t0)))"
	[ "$st" -eq 0 ] || rc=1
	return "$st"
}
mps_start() {
	export CUDA_MPS_PIPE_DIRECTORY=$TMPD/mps-pipe CUDA_MPS_LOG_DIRECTORY=$TMPD/mps-log
	mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
	nvidia-cuda-mps-control -d && MPS=1 || { say "nvidia-cuda-mps-control -d failed"; rc=1; }
}
mps_stop() {
	[ "$MPS" = 1 ] && echo quit | nvidia-cuda-mps-control
	MPS=0
	sleep 1
	unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
# job NAME SECONDS SCRIPT [ENV=VALUE...]: 2 ranks of python SCRIPT on CUDA tensors
job() {
	local name=$1 secs=$2 script=$3
	shift 3
	stage "$name" "$secs" env DEVICE=cuda "$@" "$RUN" -n 2 --timeout $((secs - 10)) python3 "$script"
	grep -h "TORCH-\|CUDA works\|max difference" "$TMPD/$name.log" | head -8 | tee -a "$summary"
}

say "torch-cuda.sh $(date -u +%FT%TZ): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
# Built once per machine: a later run (another stage, within one command's
# time) reuses it unless REBUILD=1.
if [ "${REBUILD:-0}" = 1 ] || [ ! -f "$SITE/.built" ]; then
	rm -rf "$SITE"
	cp -r "$ROOT/python" "$TMPD/pysrc"
	rm -rf "$TMPD/pysrc/build" "$TMPD"/pysrc/*.egg-info
	stage build 500 env SMDDP_BUILD_DIR="$B" SMDDP_SOURCE_DIR="$ROOT" SMDDP_TORCH_CUDA=1 \
		MAX_JOBS=16 python3 -m pip install -q --no-build-isolation --no-deps --no-index \
		--target "$SITE" "$TMPD/pysrc" || { tail -30 "$TMPD/build.log"; exit 1; }
	touch "$SITE/.built"
fi
export PYTHONPATH=$SITE:$ROOT/python/tests PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
T=$ROOT/python/tests

for s in ${*:-blocking dead queued latency}; do
	case $s in
	blocking)
		job blocking-collectives 300 "$T/test_collectives.py" EXPECT_CUDA_PATH=worker
		;;
	queued)
		mps_start
		job queued-collectives 300 "$T/test_collectives.py" EXPECT_CUDA_PATH=inline
		job queued-ddp 300 "$T/test_ddp.py"
		job queued-p2p 300 "$T/test_p2p.py"
		mps_stop
		;;
	dead)
		# A collective that fails on the GPU after its call returned (rank
		# 1 dies, issue 14), its call made on the caller's thread
		# (SMDDP_CUDA_ASYNC=1: queued without MPS too): rank 0 learns of it
		# without a call, from the worker's poll, and says so once.
		stage dead 90 env SMDDP_CUDA_ASYNC=1 SMDDP_TIMEOUT=30 "$RUN" -n 2 --timeout 80 \
			python3 "$ROOT/tests/gpu/torch_errors.py" dead cuda
		grep -h "ERRORS-\|work queued on the GPU failed" "$TMPD/dead.log" | head -6 |
			tee -a "$summary"
		grep -q "smddp: rank 0 of 2: work queued on the GPU failed: " "$TMPD/dead.log" ||
			{ say "dead: rank 0 did not say that work queued on the GPU failed"; rc=1; }
		stage deadsync 90 env SMDDP_CUDA_ASYNC=1 SMDDP_TIMEOUT=30 "$RUN" -n 2 --timeout 80 \
			python3 "$ROOT/tests/gpu/torch_errors.py" deadsync cuda
		grep -h "ERRORS-\|work queued on the GPU failed" "$TMPD/deadsync.log" | head -6 |
			tee -a "$summary"
		;;
	threads)
		mps_start
		stage threads 140 env THREADS_GROUP_TIMEOUT_S=20 THREADS_CROSS_OK=1 "$RUN" -n 2 \
			--timeout 130 python3 "$ROOT/tests/gpu/torch_threads.py" cuda 300
		grep -h "THREADS-" "$TMPD/threads.log" | head -6 | tee -a "$summary"
		mps_stop
		;;
	latency)
		mps_start
		stage latency 400 "$RUN" -n 2 --timeout 390 python3 "$ROOT/python/bench/torch_latency.py"
		grep -v "WARN" "$TMPD/latency.log" | tee -a "$summary"
		mps_stop
		;;
	profile)
		mps_start
		stage profile 200 env PROFILE=1 "$RUN" -n 2 --timeout 190 python3 \
			"$ROOT/python/bench/torch_latency.py"
		grep -v "WARN" "$TMPD/profile.log" | tee -a "$summary"
		mps_stop
		;;
	*)
		echo "torch-cuda.sh: unknown stage '$s' (blocking dead queued threads latency profile)" >&2
		exit 2
		;;
	esac
done
exit $rc
