#!/bin/bash
# tests/gpu/fastcoll-device.sh - on a GPU machine, in one call: the fast path of every collective
# (lib/cuda/fast.c) under MPS, checked and timed.
#
# 1. correctness, queued (SMDDP_CUDA_ASYNC=auto under MPS): gpu-conformance's matrix (every
#    collective x dtype x op x placement; counts 1, 7 and 1003 take the fast path, the large
#    one (4- and 8-byte types) the direct path, every collective, in place through a stage
#    for reduce_scatter and alltoall) at 2 and 4 ranks, with each rank's count of fast and
#    direct calls per collective (INFO); then
#    mismatch, cancel and a dead rank met by the fast kernels of reduce_scatter, allgather
#    and broadcast; lateload (a late rank's first launch of a new kernel while the peer's
#    direct kernel waits: the DDP hang's candidate cause), lazy and eager module loading.
# 2. speed, per collective: smddp-allreduce-bench --device cuda --coll X, 16 B to 1 MiB
#    queued under MPS (auto: the fast path) against SMDDP_CUDA_ASYNC=0 (blocking), at
#    2 and 4 ranks, in this one run on this one card.  A summary line per run in info.txt:
#    out-of-place median time (us) at 16 B, 64 KiB and 1 MiB (the bench's size: the total of
#    allgather's output, reduce_scatter's input and alltoall's), and #wrong.  Then the
#    direct path: allreduce, reduce_scatter and alltoall, 4 to 256 MiB, queued against
#    blocking at 2 ranks (summary at 4, 64 and 256 MiB, and busbw at 256 MiB).
# Run from the tree with build-cuda/ and .devcarry/ (libcjson.so.1), as lab/gpu/queued-bench.sh:
#   bash tests/gpu/fastcoll-device.sh    (results in $OUT/o.tgz)
# PARTS picks what runs (default "check lateload bench big", and "threads" when named; all
# of it may not fit one 10-minute call: e.g. PARTS="check lateload", then PARTS="big bench").
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD B=$ROOT/build-cuda T0=$(date +%s)
O=${OUT:-/tmp/out}; export OUT=/tmp/o; mkdir -p $OUT $O
export LD_LIBRARY_PATH=$B/lib/.libs:$ROOT/.devcarry SMDDP_CONFIG=/dev/null
export top_builddir=$B top_srcdir=$ROOT GPU_SMDDP_RUN=$B/cmd/smddp-run GPU_CONFORMANCE_BIN=$B/tests/gpu/.libs/gpu-conformance
RUN=$B/cmd/smddp-run BENCH=$B/cmd/bench/.libs/smddp-allreduce-bench GC=$GPU_CONFORMANCE_BIN
left() { [ $(( $(date +%s) - T0 )) -lt $1 ]; }
el() { echo "[t+$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/info.txt; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; } | tee $OUT/info.txt
mps_start() { export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log; mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY; nvidia-cuda-mps-control -d; }
mps_stop() { echo quit | nvidia-cuda-mps-control; sleep 1; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; }
part() { case " ${PARTS:-check lateload bench big} " in *" $1 "*) return 0;; esac; return 1; }
mps_start
for n in 2 4; do
  part check || continue
  left 240 || { el "out of time before matrix n$n"; continue; }
  timeout 120 env SMDDP_CUDA_ASYNC=auto SMDDP_TIMEOUT=60 SMDDP_DEBUG=INFO SMDDP_DEBUG_SUBSYS=COLL \
    $RUN -n $n --timeout 110 $GC matrix > $OUT/matrix-n$n.log 2>&1
  el "matrix n$n exit $?: $(grep -h 'SUMMARY\|^\[.\] FAIL' $OUT/matrix-n$n.log | head -6 | tr '\n' ' ' | cut -c1-500)"
  el "  fast calls: $(grep -ho '^\[[0-9]\] .*fast path calls: .*' $OUT/matrix-n$n.log | sed -E 's/ [^ ]+ \[SMDDP INFO COLL\] device collectives on GPU [0-9]+: fast path calls://' | tr '\n' ' ' | cut -c1-700)"
  el "  direct calls: $(grep -ho "^\[[0-9]\] .* read the peers' buffers directly ([^)]*)" $OUT/matrix-n$n.log | sed -E 's/ [^ ]+ \[SMDDP INFO COLL\] device collectives on GPU [0-9]+://' | tr '\n' ' ' | cut -c1-700)"
done
for f in "mismatch --coll reduce_scatter:3" "cancelq --coll allgather:2" "dead 1 --coll broadcast:4"; do
  part check || continue
  left 300 || { el "out of time before $f"; continue; }
  args=${f%:*} n=${f##*:}
  timeout 60 env SMDDP_CUDA_ASYNC=auto SMDDP_TIMEOUT=30 $RUN -n $n --timeout 50 --grace 30 $GC $args > "$OUT/fault-${args%% *}.log" 2>&1
  el "$args ($n ranks) exit $?: $(grep -h 'FAULT-' "$OUT/fault-${args%% *}.log" | cut -c1-160 | tr '\n' ' ' | cut -c1-700)"
done
# the DDP hang's candidate cause (docs/internals/cuda.md, the direct path): a late rank's
# first launch of a kernel it never ran while the peer's direct kernel waits for it, under
# MPS with lazy loading (the default) and with it eager (the expected cure)
for ml in LAZY EAGER; do
  part lateload || continue
  left 330 || { el "out of time before lateload $ml"; continue; }
  timeout 60 env CUDA_MODULE_LOADING=$ml SMDDP_CUDA_ASYNC=auto SMDDP_TIMEOUT=15 $RUN -n 2 --timeout 50 \
    $GC lateload > $OUT/lateload-$ml.log 2>&1
  el "lateload $ml exit $?: $(grep -h 'lateload' $OUT/lateload-$ml.log | cut -c1-200 | tr '\n' ' ' | cut -c1-700)"
done
# threads (not in the default PARTS): three communicators driven by three threads of each
# rank at once (gpu-threads.c; tests/gpu/torch_threads.py's hang without torch), under MPS
# (all of a process's streams in one pool of queues), then without MPS with
# SMDDP_CUDA_ASYNC=1: all healthy, then rank 1's thread 2 stopping after 3 rounds
for mps in 1 0; do
  part threads || continue
  [ $mps = 1 ] || mps_stop
  for c in "healthy:--rounds 300 --stagger --jitter 200" "stop:--rounds 100 --stop 1:2:3"; do
    left 480 || { el "out of time before threads $c"; continue; }
    timeout 100 env SMDDP_CUDA_ASYNC=1 SMDDP_TIMEOUT=10 $RUN -n 2 --timeout 90 $GC threads ${c#*:} \
      > $OUT/threads-mps$mps-${c%%:*}.log 2>&1
    el "threads mps=$mps ${c%%:*} exit $?: $(grep -h 'THREADS-\|thread [0-9]:' $OUT/threads-mps$mps-${c%%:*}.log | cut -c1-220 | tr '\n' ' ' | cut -c1-1400)"
  done
  [ $mps = 1 ] || mps_start
done
mkdir -p $OUT/bench
summary() {
  awk '$1 == "[0]" && $2 ~ /^[0-9]+$/ { if ($2 == 16 || $2 == 65536 || $2 == 1048576) t = t " " $2 "B:" $7 "us"; w += $10 + $14 }
       END { printf "%s #wrong %d", t, w }' "$1"
}
for coll in allreduce reducescatter allgather broadcast reduce alltoall; do
  part bench || continue
  for mode in queued blocking; do
    case $mode in queued) E="SMDDP_CUDA_ASYNC=auto";; blocking) E="SMDDP_CUDA_ASYNC=0";; esac
    for n in 2 4; do
      left 540 || { el "out of time before bench $coll $mode n$n"; continue; }
      timeout 40 env SMDDP_TIMEOUT=20 $E $RUN -n $n --timeout 35 $BENCH --device cuda -b 16 -e 1M -f 4 \
        -n 50 -w 10 -c 1 --coll $coll -J $OUT/bench/$coll-$mode-n$n.json > $OUT/bench/$coll-$mode-n$n.log 2>&1
      el "bench $coll $mode n$n exit $?:$(summary $OUT/bench/$coll-$mode-n$n.log)"
    done
  done
done
# the direct path (above SMDDP_CUDA_FAST): queued reduce_scatter and alltoall were 68-72 us
# at 4 MiB through the proxy against 23-24 us blocking (docs/PERFORMANCE.md)
big() {
  awk '$1 == "[0]" && $2 ~ /^[0-9]+$/ { if ($2 == 4194304 || $2 == 67108864 || $2 == 268435456) t = t " " $2 "B:" $7 "us"; if ($2 == 268435456) b = $9; w += $10 + $14 }
       END { printf "%s busbw@256M %s #wrong %d", t, b, w }' "$1"
}
for coll in reducescatter alltoall allreduce; do
  part big || continue
  for mode in queued blocking; do
    case $mode in queued) E="SMDDP_CUDA_ASYNC=auto";; blocking) E="SMDDP_CUDA_ASYNC=0";; esac
    left 570 || { el "out of time before big $coll $mode"; continue; }
    timeout 30 env SMDDP_TIMEOUT=20 $E $RUN -n 2 --timeout 25 $BENCH --device cuda -b 4M -e 256M -f 4 \
      -n 20 -w 5 -c 1 --coll $coll -J $OUT/bench/big-$coll-$mode-n2.json > $OUT/bench/big-$coll-$mode-n2.log 2>&1
    el "big $coll $mode n2 exit $?:$(big $OUT/bench/big-$coll-$mode-n2.log)"
  done
done
mps_stop
el end
tar czf $O/o.tgz -C /tmp o
