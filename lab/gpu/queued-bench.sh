#!/bin/bash
# lab/gpu/queued-bench.sh - on a GPU machine, in one call: correctness of the queued paths (fast, direct) under MPS,
# the modes bench (3 repeats), the copy roofline, GPU tests under MPS and without, and the
# host-memory bench between fake hosts over libfabric and over the socket endpoint.
cd "$(dirname "$0")/../.." || exit 1  # the tree, with build-cuda/ and .devcarry/ (libcjson.so.1) as run-on-device.sh takes them
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
mps_start
for n in 2 4; do
  timeout 60 env SMDDP_TIMEOUT=15 $RUN -n $n --timeout 50 $BENCH --device cuda -b 8 -e 256M -f 4 -n 5 -w 2 -c 1 --coll allreduce > $OUT/smoke-n$n.log 2>&1
  el "check n$n exit $?: wrong column: $(grep -v '^#' $OUT/smoke-n$n.log | awk '$1 ~ /^\[0\]/ && NF > 10 {print $10, $14}' | sort | uniq -c | tr '\n' ' ')"
  timeout 60 env SMDDP_TIMEOUT=20 $RUN -n $n --timeout 50 $GC regs > $OUT/regs-n$n.log 2>&1
  el "regs n$n exit $?: $(grep -h 'SUMMARY\|FAIL' $OUT/regs-n$n.log | tr '\n' ' ' | cut -c1-400)"
done
mps_stop
mkdir -p $OUT/modes
for rep in 1 2 3; do
  for cfg in mps-auto mps-proxy mps-block nomps-auto; do
    case $cfg in mps-auto) E="SMDDP_CUDA_ASYNC=auto";; mps-proxy) E="SMDDP_CUDA_ASYNC=auto SMDDP_CUDA_FAST=0 SMDDP_CUDA_DIRECT=0";; mps-block) E="SMDDP_CUDA_ASYNC=0";; nomps-auto) E="SMDDP_CUDA_ASYNC=auto";; esac
    case $cfg in mps-auto) mps_start;; esac
    for n in 2 4; do
      left 300 || { el "out of time before $cfg n$n r$rep"; continue; }
      timeout 40 env SMDDP_TIMEOUT=20 $E $RUN -n $n --timeout 35 $BENCH --device cuda -b 8 -e 256M -f 4 -n 20 -w 5 -c 0 --coll allreduce -J $OUT/modes/$cfg-n$n-r$rep.json > /dev/null 2>$OUT/modes/$cfg-n$n-r$rep.err
      el "$cfg n$n r$rep exit $?"
    done
    case $cfg in mps-block) mps_stop;; esac
  done
done
timeout 30 $B/tests/gpu/kernel-bench -b 1G -n 10 > $OUT/copy.log 2>&1; tail -2 $OUT/copy.log
mps_start
for t in order mismatch cancel dead matrix-n2 matrix-n4; do
  left 400 || { el "out of time before test $t"; continue; }
  timeout 60 env SMDDP_CUDA_ASYNC=auto bash $ROOT/tests/gpu/$t.sh > $OUT/test-mps-$t.log 2>&1
  el "mps test $t exit $?: $(grep -h '^FAIL\|FAULT-BAD' $OUT/test-mps-$t.log | head -3 | cut -c1-300)"
done
mps_stop
for t in errors order dead matrix-n2; do
  left 450 || { el "out of time before test $t"; continue; }
  timeout 60 bash $ROOT/tests/gpu/$t.sh > $OUT/test-nomps-$t.log 2>&1
  el "no-MPS test $t exit $?: $(grep -h '^FAIL\|FAULT-BAD' $OUT/test-nomps-$t.log | head -3 | cut -c1-300)"
done
# host memory between two fake hosts on loopback: libfabric tcp against the socket endpoint
mkdir -p $OUT/hosts
for rep in 1 2 3; do
  for t in fabric socket; do
    left 540 || { el "out of time before hosts $t r$rep"; continue; }
    timeout 40 env SMDDP_NET_TRANSPORT=$t $RUN -n 2 --timeout 35 /bin/sh $ROOT/tests/net/fakehost.sh $BENCH -b 8 -e 256M -f 4 -n 20 -w 5 -c 0 --coll allreduce -J $OUT/hosts/$t-r$rep.json > /dev/null 2>$OUT/hosts/$t-r$rep.err
    el "hosts $t r$rep exit $?"
  done
done
el end
tar czf $O/o.tgz -C /tmp o
