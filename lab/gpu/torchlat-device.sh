#!/bin/bash
# lab/gpu/torchlat-device.sh - on the GPU machine, in one call of under 9 minutes: the torch backend's CUDA path (issue 35) tested and timed beside NCCL; a verdict in $OUT.
#
# Run from the working tree carried with its CUDA build (build-cuda/) and
# libcjson (.devcarry/), as tests/gpu/torch-cuda.sh takes them:
#   cd .gpu-carry && bash lab/gpu/torchlat-device.sh
# tests/gpu/torch-cuda.sh's stages, most telling first, each under a
# deadline that keeps the whole within BUDGET seconds (default 510): the
# extension built afresh (SMDDP_TORCH_CUDA=1), queued (under MPS: the
# collectives on the caller's thread, async_op=False on the current stream
# with no Work, DDP, p2p), dead (a peer dies after the call returned, with
# async_op=True and False), threads (three groups from three threads), latency
# (a small all_reduce: smddp's paths and NCCL side by side), blocking
# (without MPS, every CUDA work on the worker), profile (one call's host
# time per operator).  A stage that no longer fits is not run and fails.
# Logs: $OUT/torchlat-summary.txt (one line per check, the latency table, the
# verdict), summary.txt and torch-cuda.log (torch-cuda.sh's).
# Exit: 0 every check passed, 1 one failed (the summary names it).
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-logs}
export OUT
mkdir -p "$OUT"
BUDGET=${BUDGET:-510}
S=$OUT/torchlat-summary.txt
LOG=$OUT/torch-cuda.log
: >"$S"
: >"$LOG"
: >"$OUT/summary.txt"
: >"$OUT/torchlat-run.log"
rc=0
say() { echo "$*" | tee -a "$S"; }
check() { # check WHAT STATUS: passed if STATUS is 0
	if [ "$2" -eq 0 ]; then say "PASS  $1"; else say "FAIL  $1"; rc=1; fi
}
atleast() { # atleast WHAT COUNT MIN
	[ "${2:-0}" -ge "$3" ]
	check "$1" $?
}

say "torchlat-device.sh $(date -u +%FT%TZ) on $(hostname)"
say "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
say "torch: $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda, "NCCL", torch.cuda.nccl.version())' 2>&1 | tail -1)"
missing=
for f in build-cuda/cmd/smddp-run build-cuda/lib/.libs/libsmddp.so .devcarry; do
	[ -e "$f" ] || missing="$missing $f"
done
command -v nvidia-cuda-mps-control >/dev/null || missing="$missing nvidia-cuda-mps-control"
if [ -n "$missing" ]; then
	say "FAIL  the carried tree lacks:$missing"
	say "VERDICT: FAIL (nothing run)"
	exit 1
fi

t_start=$SECONDS
# run NAME CAP STAGE...: torch-cuda.sh STAGE... within min(CAP, what is left)
run() {
	local name=$1 cap=$2 left st
	shift 2
	left=$((BUDGET - (SECONDS - t_start) - 5))
	[ "$cap" -gt "$left" ] && cap=$left
	if [ "$cap" -lt 30 ]; then
		say "FAIL  $name: not run, ${left} s left of the budget of $BUDGET s"
		rc=1
		return 1
	fi
	timeout -k 10 "$cap" env SITE="$SITE" bash tests/gpu/torch-cuda.sh "$@" >>"$OUT/torchlat-run.log" 2>&1
	st=$?
	[ "$st" -eq 124 ] || [ "$st" -eq 137 ] && say "      $name: stopped at its deadline of $cap s"
	check "$name (torch-cuda.sh $*: exit $st, $((SECONDS - t_start)) s in)" "$st"
	return "$st"
}
# A fresh build of the extension against this torch (the first stage builds it).
SITE=$(mktemp -d /tmp/smddp-torchlat-site.XXXXXX)
rmdir "$SITE"

run queued 200 queued
if [ ! -f "$SITE/.built" ]; then
	say "FAIL  the extension did not build (torch-cuda.log, the build stage)"
	grep -A30 "===== build" "$LOG" | tail -30 | sed 's/^/      /' | tee -a "$S"
	say "VERDICT: FAIL (nothing else run)"
	exit 1
fi
# What the stages said, from torch-cuda.sh's log.
n=$(grep -c "TORCH-OK rank=" "$LOG" 2>/dev/null)
atleast "queued: TORCH-OK from 2 ranks of each of collectives and p2p ($n lines)" "$n" 4
grep -h "no Work for async_op=False" "$LOG" | head -1 | sed 's/^/      /' | tee -a "$S"
grep -q "no Work for async_op=False: True; unguarded wait() after opts.asyncOp in: none" "$LOG"
check "torch's Python skips wait() on None, and the shim returns None for async_op=False" $?
grep -q "CUDA works: {'mode': 'queued', 'inline': [1-9]" "$LOG"
check "queued: collectives ran on the caller's thread" $?
n=$(grep -c "max difference 0" "$LOG")
atleast "queued: DDP matches gloo ($n lines of max difference 0)" "$n" 8

run dead 200 dead
n=$(grep -c "ERRORS-OK rank=0 dead cuda" "$LOG")
atleast "dead: rank 0 saw the peer's death through its Work ($n ERRORS-OK lines)" "$n" 3
n=$(grep -c "ERRORS-OK rank=0 deadsync cuda" "$LOG")
atleast "deadsync: with no Work, the next call raised, naming rank 1 ($n ERRORS-OK lines)" "$n" 2

run threads 150 threads
n=$(grep -c "THREADS-OK" "$LOG")
atleast "threads: three groups from three threads, every result right ($n ranks)" "$n" 2

run latency 150 latency
say "latency (us per call; smddp: caller's thread, current stream, no Work; smddp-async: side stream, wait(); nccl: NCCL_HOSTID per rank):"
sed -n '/===== latency/,/=====/p' "$LOG" | grep -E "^\[0\] +(bytes|[0-9])|^\[0\] # " | sed 's/^\[0\] /  /' | tee -a "$S"
# The goal: smddp's loop time at 8 B at most NCCL's (nccl/smddp >= 1.00x).
ratio=$(sed -n '/===== latency/,/=====/p' "$LOG" | awk '$1 == "[0]" && $2 == 8 { print $NF }' | tr -d x | head -1)
say "      8 B: nccl/smddp loop time ${ratio:-?}x (the goal: >= 1.00x; reported, not a test failure)"

run blocking 150 blocking
n=$(sed -n '/===== blocking-collectives/,/=====/p' "$LOG" | grep -c "TORCH-OK rank=")
atleast "blocking: test_collectives.py without MPS, every CUDA work on the worker ($n ranks)" "$n" 2

run profile 100 profile
sed -n '/===== profile/,/=====/p' "$LOG" | grep -E "^\[0\] (##|#)" | sed 's/^\[0\] /  /' | tee -a "$S"

say "took $((SECONDS - t_start)) s of the budget of $BUDGET s"
if [ "$rc" -eq 0 ]; then say "VERDICT: PASS"; else say "VERDICT: FAIL (the FAIL lines above)"; fi
exit "$rc"
