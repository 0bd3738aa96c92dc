#!/bin/bash
# tests/gpu/run-on-device.sh - on a GPU machine: the GPU tests, compute-sanitizer, the benchmarks; logs to $OUT.
#
# Takes a build made elsewhere with ../configure --with-cuda (default
# build-cuda/, carried with the working tree) and the libraries the GPU
# machine lacks (libcjson.so.1) in .devcarry/; installs and builds nothing.
# Runs the libtool-built programs from their .libs/ with LD_LIBRARY_PATH.
#
# Usage: tests/gpu/run-on-device.sh [STAGE...]
#   info       nvidia-smi, topology, smddp-topo
#   tests      the GPU tests with 1, 2, 4 and 8 ranks sharing the GPU(s)
#   sanitizer  compute-sanitizer memcheck and racecheck over a small matrix
#   kernel     reduction kernel against device-to-device copy, >= 256 MiB
#   bench      smddp-allreduce-bench --device cuda, 2 and 4 ranks, 8 B .. 256 MiB
# (default: all of them, in that order).  Environment: B (build tree),
# CARRY (carried libraries), OUT (log folder, default ./gpu-logs), GPU_TESTS
# (the tests stage's list, default: errors order dead matrix-n1 matrix-n2 matrix-n4 matrix-n8).
# Exit: 0 all stages passed, 1 a stage failed.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
B=$ROOT/${B:-build-cuda}
CARRY=$ROOT/${CARRY:-.devcarry}
OUT=${OUT:-$ROOT/gpu-logs}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$B/lib/.libs:$CARRY${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# NVLink multicast stays off (see the device notes): for NCCL and friends.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export top_builddir=$B top_srcdir=$ROOT SMDDP_CONFIG=/dev/null
export GPU_SMDDP_RUN=$B/cmd/smddp-run
export GPU_CONFORMANCE_BIN=$B/tests/gpu/.libs/gpu-conformance
BENCH=$B/cmd/bench/.libs/smddp-allreduce-bench
RUN=$GPU_SMDDP_RUN
stages=${*:-info tests sanitizer kernel bench}
rc=0
summary=$OUT/summary.txt
: >"$summary"

say() { echo "$*" | tee -a "$summary"; }
# stage NAME SECONDS COMMAND...: runs it with a deadline, log in $OUT/NAME.log
stage() {
	local name=$1 secs=$2 t0 st
	shift 2
	t0=$(date +%s.%N)
	timeout -k 10 "$secs" "$@" >"$OUT/$name.log" 2>&1
	st=$?
	say "$(printf '%-22s exit %3d  %6.1f s' "$name" "$st" "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')")"
	[ "$st" -eq 0 ] || rc=1
	return "$st"
}

for s in $stages; do
	case $s in
	info)
		{
			date -u; uname -a; nproc
			nvidia-smi; nvidia-smi topo -m
			LD_LIBRARY_PATH=$LD_LIBRARY_PATH "$B/cmd/.libs/smddp-topo" 2>&1 || "$B/cmd/smddp-topo"
		} >"$OUT/info.log" 2>&1
		say "info: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
		;;
	tests)
		for t in ${GPU_TESTS:-errors order dead matrix-n1 matrix-n2 matrix-n4 matrix-n8}; do
			stage "test-$t" 400 bash "$ROOT/tests/gpu/$t.sh"
			grep -h "^FAIL\|FAULT-BAD" "$OUT/test-$t.log" | head -5 | tee -a "$summary"
		done
		;;
	sanitizer)
		for tool in memcheck racecheck; do
			stage "sanitizer-$tool" 300 compute-sanitizer --tool "$tool" \
				--target-processes all --error-exitcode 9 \
				"$RUN" -n 2 --timeout 280 "$GPU_CONFORMANCE_BIN" matrix --small
			grep -h "ERROR SUMMARY\|^FAIL" "$OUT/sanitizer-$tool.log" | sort | uniq -c |
				head -5 | tee -a "$summary"
		done
		;;
	kernel)
		stage kernel-256M 120 "$B/tests/gpu/kernel-bench" -b 256M -n 20
		stage kernel-1G 120 "$B/tests/gpu/kernel-bench" -b 1G -n 10
		cat "$OUT/kernel-256M.log" "$OUT/kernel-1G.log" | tee -a "$summary"
		;;
	bench)
		for n in 2 4; do
			stage "bench-allreduce-n$n" 300 "$RUN" -n "$n" --timeout 280 "$BENCH" \
				--device cuda -b 8 -e 256M -f 2 -n 20 -w 5 -c 1 -C allreduce
			grep -v "^#  Rank" "$OUT/bench-allreduce-n$n.log" | tee -a "$summary"
		done
		stage bench-colls-n4 300 "$RUN" -n 4 --timeout 280 "$BENCH" --device cuda \
			-b 8 -e 64M -f 8 -n 10 -w 3 -c 1 -C all -d all -o all
		tail -5 "$OUT/bench-colls-n4.log" | tee -a "$summary"
		;;
	*)
		echo "run-on-device.sh: unknown stage '$s' (info tests sanitizer kernel bench)" >&2
		exit 2
		;;
	esac
done
say "run-on-device: $([ $rc -eq 0 ] && echo all stages passed || echo some stage FAILED)"
exit $rc
