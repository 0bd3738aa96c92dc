#!/bin/bash
# lab/gpu/run-on-device.sh - on a GPU machine: the GPU tests, compute-sanitizer, the benchmarks; logs to $OUT.
#
# Takes a build made elsewhere with ../configure --with-cuda (default
# build-cuda/, carried with the working tree) and the libraries the GPU
# machine lacks (libcjson.so.1) in .devcarry/; installs and builds nothing.
# Runs the libtool-built programs from their .libs/ with LD_LIBRARY_PATH.
#
# Usage: lab/gpu/run-on-device.sh [STAGE...]
#   info       nvidia-smi, topology, smddp-topo
#   tests      the GPU tests with 1, 2, 4 and 8 ranks sharing the GPU(s)
#   sanitizer  compute-sanitizer memcheck and racecheck over a small matrix; the
#              late-map probe (memcheck and memory mapped after a launch)
#   kernel     reduction kernel against device-to-device copy, 1 MiB .. 1 GiB, and
#              the queued launch (arguments copied to the GPU, or read from host memory)
#   bench      smddp-allreduce-bench --device cuda, 2 and 4 ranks, 8 B .. 512 MiB
#   p2p        device sends and receives (CUDA IPC inside the node): tests/gpu/p2p.sh
#              with its P2P-PERF lines, then the sendrecv and alltoallv benches,
#              device against host memory, 2 and 4 ranks, 8 B .. 256 MiB
#   staged     device memory between "hosts" on loopback against host memory
#              through the same path, and pinned copy bandwidth (3 runs each)
#   sockets    between "hosts" on loopback, host and device memory: libfabric's
#              tcp (SMDDP_NET_TRANSPORT=fabric) against libsmddp's sockets with
#              2 and 4 data connections per peer, 3 rounds alternated (JSON lines)
#   stream     between "hosts" under MPS: whole staged chunks against streamed
#              ones (SMDDP_CUDA_STREAM 0/1) alternated $STREAM_REPS times (2): the
#              C bench (checked), then through torch the DDP step and the
#              collectives against NCCL's sockets (python/bench/torch_nccl_bench.py)
#   chunk      between "hosts" under MPS, streamed: SMDDP_CUDA_STREAM_CHUNK 0
#              (quarters) against 16M (one chunk a call up to 16 MiB),
#              alternated $CHUNK_REPS times (2): the C bench, checked, 1-256 MiB,
#              then through torch the DDP step and the collectives beside NCCL
#   phases     between "hosts" under MPS, streamed: host against device memory
#              (allgather, reducescatter, allreduce, 256 KiB-16 MiB), then
#              SMDDP_DEBUG=TRACE of 1 MiB calls, the phases' medians
#   async      the stream-ordering test with SMDDP_CUDA_ASYNC=1, phases traced
#   connections  the queued mode with CUDA_DEVICE_MAX_CONNECTIONS 1 and 32, on one
#              node and staged between "hosts", without and under MPS (the
#              suspect of the queued-mode hangs, docs/internals/gpu-measurements.md)
#   modes      the allreduce bench, blocking without MPS, queued and blocking
#              under MPS, alternated $MODES_REPS times (default 3; JSON lines in
#              modes.tgz)
#   footprint  the allreduce bench at 2-8 ranks up to 2 GiB, and the copy;
#              4 ranks at 512 MiB with the buffers at 0, 4K and 68K apart
#              (that alone with FOOTPRINT_SCAN=0)
#   pages      tests/gpu/ipc-pages: the one-GPU allreduce's kernel over peers'
#              buffers mapped by legacy IPC, by cuMemMap (2 MiB and 1 GiB
#              units) and all local, 4 ranks x 256 MiB and 2 x 512 MiB,
#              $PAGES_ROUNDS rounds (default 6) of fresh allocations
#   dip        the 4 GiB dip against the probe, $DIP_REPS times (default 2): the
#              allreduce bench, 4 ranks, blocking without MPS, 256M..512M and
#              512M alone, then ipc-pages 4 x 512 MiB (ipc and local)
#   mps        under the CUDA MPS daemon: the order test traced, $MPS_TESTS and
#              the allreduce bench, with SMDDP_CUDA_ASYNC in $MPS_MODES (auto 0)
#   nccl       lab/gpu/multigpu-vs-nccl.sh with one rank per GPU
#   torch      the PyTorch backend (python/) built there against its torch and
#              this build; $TORCH_TESTS (default: collectives collectives-queued
#              ddp p2p pipeline; NAME-queued: with SMDDP_CUDA_ASYNC=1, since two
#              ranks on one GPU without MPS block) on CUDA tensors against gloo, 2
#              ranks on the GPU(s); python/bench/torch_bench.py on CUDA
#   torch-errors  the backend's error paths (tests/gpu/torch_errors.py) on CPU
#              and CUDA tensors, 2 ranks: raised, or a crash (then its stack,
#              from cuda-gdb; gcc and torch's C++ ABI are in the summary);
#              then its dead case: with SMDDP_CUDA_ASYNC=1 a rank dies after
#              queueing, and the other learns of it without a call (issue 14)
#   threads    lib/cuda/ipc.c's close beside other threads' mappings: tests/gpu/ipc-close
#              (what cudaIpcCloseMemHandle waits for, whether an open beside it goes
#              through and a re-open of the same handle survives the close: PROBE
#              lines), then gpu-conformance threads, 2 ranks, SMDDP_CUDA_ASYNC=1,
#              SMDDP_CUDA_FAST=16K (the large rounds direct), plain and with one
#              communicator destroyed mid-run while the others map new buffers
#              (--fresh --leave 1:16; no round of theirs may take 2 s), and with
#              new buffers every round, old mappings retired and closed (--fresh
#              --every 1: the closer thread), without MPS and under it
#              (--bounded there: the one-queue hazard of threads-fake.sh may
#              fail a call, in time)
#   tsan       ThreadSanitizer over the CUDA path's host side (the proxy
#              thread of queued calls: lib/cuda/proxy.c, move.c, ipc.c,
#              device.c): gpu-conformance order, overlap, errors and
#              matrix --small, 2 ranks, SMDDP_CUDA_ASYNC=1 under MPS; the
#              count of reports and the first ones (all in $OUT/tsan/).
#              Needs B=build-tsan-cuda, made here as
#                mkdir build-tsan-cuda && cd build-tsan-cuda &&
#                ../configure --with-cuda CFLAGS='-g -O1 -fno-omit-frame-pointer
#                  -fsanitize=thread' LDFLAGS=-fsanitize=thread &&
#                make -j2 && make -j2 tests/gpu/gpu-conformance &&
#                gcc -g -fsanitize=thread -DCANARY_MAIN -o tsan-canary ../tests/tsan-canary.c
#              (nvcc compiles kernels*.cu uninstrumented; the host C is), and
#              gcc's TSan runtime of this machine carried beside libcjson:
#                cp -L "$(gcc -print-file-name=libtsan.so.2)" .devcarry/ &&
#                strip --strip-debug .devcarry/libtsan.so.2
#              Run alone: B=build-tsan-cuda lab/gpu/run-on-device.sh tsan
#              (TSAN_MPS=0: without MPS, the ranks time-sliced on one GPU;
#              TSAN_GPU_TESTS: a part of "order overlap errors matrix")
# (default: info tests sanitizer kernel bench).  Environment: B (build tree),
# CARRY (carried libraries), OUT (log folder, default ./gpu-logs), SANITIZE_SECS
# (each sanitizer run's deadline, default 200), GPU_TESTS
# (the tests stage's list, default: errors order overlap mismatch p2p dead cancel staged matrix-n1
# matrix-n2 matrix-n4 matrix-n8).
# Exit: 0 all stages passed, 1 a stage failed.
# Through the device tool, which brings back at most 8 files, keep the logs
# elsewhere and bring back one archive:
#   O=$OUT; OUT=/tmp/o lab/gpu/run-on-device.sh kernel modes mps; tar czf $O/o.tgz -C /tmp o
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
# sanitize PREFIX: compute-sanitizer memcheck over the small matrix and
# racecheck (shared-memory hazards, slow) over the stream-ordering test, one
# sanitizer per rank as with mpirun (wrapping the launcher with
# --target-processes all never exited)
sanitize() {
	local tool what
	for tool in memcheck racecheck; do
		what="matrix --small"
		[ "$tool" = racecheck ] && what=order
		stage "$1-$tool" "${SANITIZE_SECS:-200}" "$RUN" -n 2 --timeout $((${SANITIZE_SECS:-200} - 10)) \
			compute-sanitizer --tool "$tool" \
			--error-exitcode 9 --report-api-errors no "$GPU_CONFORMANCE_BIN" $what
		grep -h "ERROR SUMMARY\|^FAIL" "$TMPD/$1-$tool.log" | sort | uniq -c | head -5 |
			tee -a "$summary"
	done
}
# mps_start / mps_stop: the CUDA MPS daemon, in a private pipe folder
mps_start() {
	export CUDA_MPS_PIPE_DIRECTORY=$TMPD/mps-pipe CUDA_MPS_LOG_DIRECTORY=$TMPD/mps-log
	mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
	nvidia-cuda-mps-control -d || { say "mps: nvidia-cuda-mps-control -d failed"; rc=1; return 1; }
}
mps_stop() {
	echo quit | nvidia-cuda-mps-control
	sleep 1
	cat "$CUDA_MPS_LOG_DIRECTORY"/control.log >>"$OUT/mps.log" 2>/dev/null
	unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
# stage NAME SECONDS COMMAND...: runs it with a deadline; its output goes
# to $TMPD/NAME.log and is appended to $OUT/$GROUP.log (few files come back).
TMPD=$(mktemp -d "${TMPDIR:-/tmp}/smddp-dev.XXXXXX")
trap 'rm -rf "$TMPD"' EXIT
GROUP=misc
stage() {
	local name=$1 secs=$2 t0 st
	shift 2
	t0=$(date +%s.%N)
	timeout -k 10 "$secs" "$@" >"$TMPD/$name.log" 2>&1
	st=$?
	{ echo "===== $name: $*: exit $st"; cat "$TMPD/$name.log"; } >>"$OUT/$GROUP.log"
	say "$(printf '%-22s exit %3d  %6.1f s' "$name" "$st" "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')")"
	[ "$st" -eq 0 ] || rc=1
	return "$st"
}

# torch_build: the PyTorch backend built against this build into $TMPD/site, once
torch_build() {
	[ -d "$TMPD/site/smddp" ] && return 0
	rm -rf "$TMPD/pysrc"
	cp -r "$ROOT/python" "$TMPD/pysrc"
	stage torch-build 500 env SMDDP_BUILD_DIR="$B" SMDDP_SOURCE_DIR="$ROOT" \
		SMDDP_TORCH_CUDA=1 MAX_JOBS=8 python3 -m pip install -q --no-build-isolation \
		--no-deps --no-index --target "$TMPD/site" "$TMPD/pysrc"
}

for s in $stages; do
	GROUP=$s
	case $s in
	info)
		{
			date -u; uname -a; nproc
			nvidia-smi; nvidia-smi topo -m
			LD_LIBRARY_PATH=$LD_LIBRARY_PATH "$B/cmd/.libs/smddp-topo" 2>&1 || "$B/cmd/smddp-topo"
		} >>"$OUT/info.log" 2>&1
		say "info: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
		;;
	tests)
		for t in ${GPU_TESTS:-errors order overlap mismatch p2p dead cancel staged matrix-n1 matrix-n2 matrix-n4 matrix-n8}; do
			secs=200
			[ "$t" = staged ] && secs=450
			[ "$t" = p2p ] && secs=400
			stage "test-$t" "$secs" bash "$ROOT/tests/gpu/$t.sh"
			grep -h "^FAIL\|FAULT-BAD" "$TMPD/test-$t.log" | head -5 | tee -a "$summary"
		done
		;;
	sanitizer)
		sanitize sanitizer
		# memcheck against memory given to a kernel after its launch, as
		# the queued mode maps the peers' buffers (tests/gpu/late-map.cu)
		for w in early late; do
			[ -x "$B/tests/gpu/late-map" ] || break
			say "late-map $w without a sanitizer: $(timeout -k 5 30 "$B/tests/gpu/late-map" "$w" 2>&1)"
			timeout -k 5 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
				"$B/tests/gpu/late-map" "$w" >"$TMPD/late-map-$w.log" 2>&1
			say "late-map $w under memcheck: exit $?;" \
				"$(grep -h "ERROR SUMMARY\|^late-map" "$TMPD/late-map-$w.log" | tr '\n' ' ')"
			cat "$TMPD/late-map-$w.log" >>"$OUT/$GROUP.log"
		done
		;;
	kernel)
		# 1M and 16M: where the queued launch's arguments cost most
		# (gpu-measurements.md, "Why the queued mode is built the way it is")
		stage kernel-1M 60 "$B/tests/gpu/kernel-bench" -b 1M -n 50 -d float32
		stage kernel-16M 60 "$B/tests/gpu/kernel-bench" -b 16M -n 50 -d float32
		stage kernel-256M 120 "$B/tests/gpu/kernel-bench" -b 256M -n 20
		stage kernel-1G 120 "$B/tests/gpu/kernel-bench" -b 1G -n 10
		cat "$TMPD"/kernel-{1M,16M,256M,1G}.log | tee -a "$summary"
		;;
	bench)
		for n in 2 4; do
			stage "bench-allreduce-n$n" 200 "$RUN" -n "$n" --timeout 190 "$BENCH" \
				--device cuda -b 8 -e 512M -f 2 -n 20 -w 5 -c 1 --coll allreduce \
				-J "$OUT/bench-allreduce-n$n.json"
			grep -v "^#  Rank" "$TMPD/bench-allreduce-n$n.log" | tee -a "$summary"
		done
		stage bench-colls-n4 200 "$RUN" -n 4 --timeout 190 "$BENCH" --device cuda \
			-b 8 -e 64M -f 8 -n 10 -w 3 -c 1 --coll all
		grep -v "^#  Rank" "$TMPD/bench-colls-n4.log" | tee -a "$summary"
		# every dtype and op, checked, on a small and an odd size
		stage bench-check-n3 200 "$RUN" -n 3 --timeout 190 "$BENCH" --device cuda \
			-b 4K -e 12K -f 3 -n 1 -w 0 -c 1 --coll all -d all -o all -r all
		tail -3 "$TMPD/bench-check-n3.log" | tee -a "$summary"
		;;
	p2p)
		stage test-p2p 580 bash "$ROOT/tests/gpu/p2p.sh"
		grep -h "P2P-PERF\|^ok:\|^FAIL" "$TMPD/test-p2p.log" | tee -a "$summary"
		for n in 2 4; do
			for coll in sendrecv alltoallv; do
				for dev in cuda host; do
					t=bench-$coll-$dev-n$n
					stage "$t" 300 "$RUN" -n "$n" --timeout 290 "$BENCH" --device "$dev" \
						-b 8 -e 256M -f 4 -n 20 -w 3 -c 1 --coll "$coll" -J "$OUT/$t.json"
					grep -v "^#  Rank" "$TMPD/$t.log" | tee -a "$summary"
				done
			done
		done
		;;
	nccl)
		# issue 8's script on the GPUs here (one rank per GPU)
		stage nccl 500 env OUT="$TMPD/nccl" MAXBYTES=${NCCL_MAXBYTES:-1G} \
			bash "$ROOT/lab/gpu/multigpu-vs-nccl.sh"
		grep -h "^# \(allreduce\|allgather\|reducescatter\):\|Out of bounds" "$TMPD/nccl.log" |
			tee -a "$summary"
		;;
	staged)
		# device memory between "hosts" (tests/net/fakehost.sh, tcp on loopback)
		# against host memory through the same path and the pinned copies
		stage pinned 120 "$B/tests/gpu/kernel-bench" -b 256M -n 10 -d float32
		grep "pinned" "$TMPD/pinned.log" | tee -a "$summary"
		for rep in 1 2 3; do
			for mem in cuda host; do
				stage "staged-$mem-$rep" 150 env CONFORMANCE_PER_HOST=1 \
					SMDDP_FABRIC_PROVIDER=tcp "$RUN" -n 2 --timeout 140 /bin/sh \
					"$ROOT/tests/net/fakehost.sh" "$BENCH" --device "$mem" -b 8 -e 256M \
					-f 2 -n 5 -w 2 -c 0 --json
			done
		done
		;;
	sockets)
		# between "hosts" on loopback: libfabric's tcp against libsmddp's
		# sockets (the default here: a thread per data connection, 2 per
		# peer; then 4), host and device memory, 3 rounds alternated
		for rep in 1 2 3; do
			for tr in fabric socket socket4; do
				for mem in host cuda; do
					stage "sockets-$tr-$mem-$rep" 150 env CONFORMANCE_PER_HOST=1 \
						SMDDP_NET_TRANSPORT=${tr%4} \
						SMDDP_SOCKET_NSOCKS=$([ "$tr" = socket4 ] && echo 4 || echo 0) \
						"$RUN" -n 2 --timeout 140 /bin/sh "$ROOT/tests/net/fakehost.sh" \
						"$BENCH" --device "$mem" -b 8 -e 256M -f 4 -n 5 -w 2 -c 0 --json
				done
			done
		done
		;;
	stream)
		# between "hosts" under MPS, whole chunks against streamed ones
		# (SMDDP_CUDA_STREAM=0/1, every call in parts of lib/cuda/staged.c),
		# alternated $STREAM_REPS times (default 2): the C bench, checked,
		# then through torch the DDP step and the collectives against NCCL's
		# socket transport (python/bench/torch_nccl_bench.py)
		mps_start || continue
		for rep in $(seq "${STREAM_REPS:-2}"); do
			for st in 0 1; do
				stage "stream$st-bench-$rep" 200 env SMDDP_CUDA_STREAM=$st CONFORMANCE_PER_HOST=1 \
					"$RUN" -n 2 --timeout 190 /bin/sh "$ROOT/tests/net/fakehost.sh" "$BENCH" \
					--device cuda -b 256K -e 256M -f 4 -n 10 -w 2 -c 1 --coll allreduce
				grep -v "^#  Rank" "$TMPD/stream$st-bench-$rep.log" | tee -a "$summary"
			done
		done
		if torch_build; then
			export PYTHONPATH=$TMPD/site PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
			for rep in $(seq "${STREAM_REPS:-2}"); do
				for st in 0 1; do
					for what in ddp coll; do
						stage "stream$st-$what-$rep" 300 env SMDDP_CUDA_STREAM=$st FAKE_HOSTS=1 \
							DDP_STEPS=5 REPEATS=3 SIZES=1048576,16777216,268435456 "$RUN" -n 2 \
							--timeout 290 python3 "$ROOT/python/bench/torch_nccl_bench.py" "$what"
						grep -v "WARN" "$TMPD/stream$st-$what-$rep.log" | tee -a "$summary"
					done
				done
			done
		fi
		mps_stop
		;;
	chunk)
		# streamed chunks: quarters of up to 4 MiB (SMDDP_CUDA_STREAM_CHUNK=0)
		# against one chunk a call up to 16 MiB, between "hosts" under MPS,
		# alternated $CHUNK_REPS times (2): the C bench, checked, then
		# through torch the DDP step and the collectives beside NCCL
		mps_start || continue
		# the C benches of both settings first: a call cut short by its
		# time limit still has the A/B
		for rep in $(seq "${CHUNK_REPS:-2}"); do
			for coll in allreduce allgather reducescatter; do
				for sc in 0 16M; do
					stage "chunk$sc-$coll-$rep" 120 env SMDDP_CUDA_STREAM_CHUNK=$sc \
						CONFORMANCE_PER_HOST=1 "$RUN" -n 2 --timeout 110 /bin/sh \
						"$ROOT/tests/net/fakehost.sh" "$BENCH" --device cuda -b 1M -e 256M \
						-f 4 -n 10 -w 2 -c 1 --coll "$coll"
					grep -v "^#  Rank" "$TMPD/chunk$sc-$coll-$rep.log" | tee -a "$summary"
				done
			done
		done
		torch_build && export PYTHONPATH=$TMPD/site PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
		for rep in $(seq "${CHUNK_REPS:-2}"); do
			for sc in 0 16M; do
				[ -d "$TMPD/site/smddp" ] || continue
				for what in ddp coll; do
					stage "chunk$sc-torch-$what-$rep" 200 env SMDDP_CUDA_STREAM_CHUNK=$sc \
						FAKE_HOSTS=1 DDP_STEPS=5 REPEATS=3 \
						SIZES=1048576,4194304,16777216,67108864,268435456 "$RUN" -n 2 \
						--timeout 190 python3 "$ROOT/python/bench/torch_nccl_bench.py" "$what"
					grep -v "WARN" "$TMPD/chunk$sc-torch-$what-$rep.log" | tee -a "$summary"
				done
			done
		done
		mps_stop
		;;
	phases)
		# where a staged call's time goes between "hosts", under MPS,
		# streamed: host memory against device memory through the same path
		# (C bench, 256 KiB-16 MiB, allgather, reducescatter, allreduce),
		# then SMDDP_DEBUG=TRACE of 1 MiB calls: per chunk the wait for its
		# copy up and the host collective, and the stream's end after the
		# last release (medians over rank 0's traced calls)
		mps_start || continue
		for coll in allgather reducescatter allreduce; do
			for mem in host cuda; do
				stage "phases-$coll-$mem" 120 env CONFORMANCE_PER_HOST=1 "$RUN" -n 2 \
					--timeout 110 /bin/sh "$ROOT/tests/net/fakehost.sh" "$BENCH" \
					--device "$mem" -b 256K -e 16M -f 4 -n 10 -w 2 -c 0 --coll "$coll"
				grep -v "^#  Rank" "$TMPD/phases-$coll-$mem.log" | tee -a "$summary"
			done
			stage "phases-$coll-trace" 120 env CONFORMANCE_PER_HOST=1 SMDDP_DEBUG=TRACE \
				SMDDP_DEBUG_SUBSYS=COLL "$RUN" -n 2 --timeout 110 /bin/sh \
				"$ROOT/tests/net/fakehost.sh" "$BENCH" --device cuda -b 1M -e 1M -n 20 \
				-w 3 -c 0 --coll "$coll"
			grep "^\[0\].*staged c" "$TMPD/phases-$coll-trace.log" | awk -v c="$coll" '
				function med(a, n,   i, j, t) {
					for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
						if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
					return n ? a[int((n + 1) / 2)] : -1
				}
				/staged chunk/ { for (i = 1; i <= NF; i++) if ($i == "us") {
					k++; v = $(i - 1)
					if (k % 3 == 1) q[++nq] = v; else if (k % 3 == 2) w[++nw] = v; else h[++nh] = v } }
				/passed its end/ { for (i = 1; i <= NF; i++) if ($i == "us") e[++ne] = $(i - 1) }
				END { printf "phases %s 1 MiB rank 0, medians of %d chunks: %.1f us queued to taken, " \
					"%.1f waiting for the copy up, %.1f host collective; end %.1f us after " \
					"the last release (%d calls)\n", c, nq, med(q, nq), med(w, nw), med(h, nh),
					med(e, ne), ne }' | tee -a "$summary"
		done
		mps_stop
		;;
	async)
		# SMDDP_CUDA_ASYNC=1 (queue and return), phases traced
		stage async-order 40 env SMDDP_CUDA_ASYNC=1 SMDDP_DEBUG=TRACE SMDDP_DEBUG_SUBSYS=COLL \
			SMDDP_TIMEOUT=10 "$RUN" -n 2 --timeout 30 "$GPU_CONFORMANCE_BIN" order
		grep -h "GPU call\|^\[.\] FAIL\|SUMMARY" "$TMPD/async-order.log" | head -20 | tee -a "$summary"
		;;
	mps)
		# the same under the CUDA MPS daemon (ranks share the GPU
		# concurrently, as separate GPUs would), async then blocking
		mps_start || continue
		for mode in ${MPS_MODES:-auto 0}; do
			stage "mps-async$mode-order" 60 env SMDDP_CUDA_ASYNC=$mode SMDDP_DEBUG=TRACE \
				SMDDP_DEBUG_SUBSYS=COLL SMDDP_TIMEOUT=10 "$RUN" -n 2 --timeout 50 \
				"$GPU_CONFORMANCE_BIN" order
			grep -h "GPU call\|^\[.\] FAIL\|SUMMARY\|mode" "$TMPD/mps-async$mode-order.log" |
				head -12 | tee -a "$summary"
			for t in ${MPS_TESTS:-order overlap mismatch dead cancel matrix-n2 matrix-n4 matrix-n8}; do
				stage "mps-async$mode-$t" 200 env SMDDP_CUDA_ASYNC=$mode bash "$ROOT/tests/gpu/$t.sh"
				grep -h "^FAIL\|FAULT-BAD" "$TMPD/mps-async$mode-$t.log" | head -5 | tee -a "$summary"
			done
			for n in 2 4; do
				stage "mps-async$mode-bench-n$n" 200 env SMDDP_CUDA_ASYNC=$mode "$RUN" -n "$n" \
					--timeout 190 "$BENCH" --device cuda -b 8 -e 512M -f 2 -n 20 -w 5 -c 1 \
					--coll allreduce -J "$OUT/bench-mps-async$mode-n$n.json"
				grep -v "^#  Rank" "$TMPD/mps-async$mode-bench-n$n.log" | tee -a "$summary"
			done
		done
		if [ "${MPS_SANITIZE:-0}" = 1 ]; then
			# compute-sanitizer under MPS: auto recognizes the sanitizer
			# and blocks (docs/internals/gpu-measurements.md), which this
			# checks (not yet run on the GPU); off unless MPS_SANITIZE=1
			sanitize mps-sanitizer
		fi
		mps_stop
		;;
	connections)
		# the queued mode with the hardware queues shared
		# (gpu-measurements.md, "Why the queued mode is built the way
		# it is"): every kernel is on the user's stream, so one queue
		# per process and 32 both pass, with and without MPS, on one
		# node and staged between "hosts".
		for mc in 1 32; do
			stage "conn$mc-order" 60 env CUDA_DEVICE_MAX_CONNECTIONS=$mc SMDDP_CUDA_ASYNC=1 \
				SMDDP_TIMEOUT=10 "$RUN" -n 2 --timeout 50 "$GPU_CONFORMANCE_BIN" order
			stage "conn$mc-staged-order" 60 env CUDA_DEVICE_MAX_CONNECTIONS=$mc \
				SMDDP_CUDA_ASYNC=1 SMDDP_TIMEOUT=10 CONFORMANCE_PER_HOST=1 \
				SMDDP_FABRIC_PROVIDER=tcp "$RUN" -n 2 --timeout 50 /bin/sh \
				"$ROOT/tests/net/fakehost.sh" "$GPU_CONFORMANCE_BIN" order
		done
		mps_start || continue
		for mc in 1 32; do
			stage "mps-conn$mc-errors" 120 env CUDA_DEVICE_MAX_CONNECTIONS=$mc \
				SMDDP_CUDA_ASYNC=1 SMDDP_TIMEOUT=10 "$RUN" -n 2 --timeout 110 \
				"$GPU_CONFORMANCE_BIN" errors
			stage "mps-conn$mc-staged-order" 60 env CUDA_DEVICE_MAX_CONNECTIONS=$mc \
				SMDDP_CUDA_ASYNC=1 SMDDP_TIMEOUT=10 CONFORMANCE_PER_HOST=1 \
				SMDDP_FABRIC_PROVIDER=tcp "$RUN" -n 2 --timeout 50 /bin/sh \
				"$ROOT/tests/net/fakehost.sh" "$GPU_CONFORMANCE_BIN" order
		done
		mps_stop
		grep -h "SUMMARY\|FAIL" "$TMPD"/*conn*.log | head -20 | tee -a "$summary"
		;;
	modes)
		# allreduce in the three set-ups, alternated, 3 times: blocking
		# without MPS, queued under MPS (auto), blocking under MPS; JSON
		# lines in $OUT/modes.tgz for scripts/bench-median.py
		mkdir -p "$TMPD/modes"
		for rep in $(seq "${MODES_REPS:-3}"); do
			for cfg in nomps-auto mps-auto mps-0; do
				case $cfg in mps-auto) mps_start || continue 2 ;; esac
				for n in 2 4; do
					stage "modes-$cfg-n$n-r$rep" 200 env SMDDP_CUDA_ASYNC=${cfg#*-} "$RUN" \
						-n "$n" --timeout 190 "$BENCH" --device cuda -b 8 -e 512M -f 2 \
						-n 20 -w 5 -c 0 --coll allreduce \
						-J "$TMPD/modes/$cfg-n$n-r$rep.json" >/dev/null
				done
				case $cfg in mps-0) mps_stop ;; esac
			done
		done
		tar -C "$TMPD" -czf "$OUT/modes.tgz" modes
		;;
	footprint)
		# the 512 MiB question: time per byte against the bytes one
		# call's kernel touches (2 x ranks x size), for 2, 4 and 8 ranks
		[ "${FOOTPRINT_SCAN:-1}" = 1 ] &&
			stage fp-copy 120 "$B/tests/gpu/kernel-bench" -b 2G -n 10 &&
			grep -v "^#" "$TMPD/fp-copy.log" | tee -a "$summary"
		[ "${FOOTPRINT_SCAN:-1}" = 1 ] && for nb in "2 256M 2G" "4 128M 1G" "8 64M 512M"; do
			set -- $nb
			stage "fp-n$1" 300 "$RUN" -n "$1" --timeout 290 "$BENCH" --device cuda -b "$2" \
				-e "$3" -f 2 -n 20 -w 5 -c 0 --coll allreduce
			grep -v "^#  Rank" "$TMPD/fp-n$1.log" | grep "^\[0\] *[0-9]" | tee -a "$summary"
		done
		# does the dip go when the ranks' buffers lie at other offsets
		# (gpu-measurements.md, "The dip": it did not)?  4 ranks,
		# 512 MiB, alternated twice: no offset, 4 KiB, 68 KiB apart
		for i in 1 2; do
			for off in 0 4K 68K; do
				stage "fp-off$off-$i" 120 "$RUN" -n 4 --timeout 110 "$BENCH" --device cuda \
					-b 512M -e 512M -n 20 -w 5 -c 0 --coll allreduce --offset "$off"
				echo "--offset $off: $(grep "^\[0\] *[0-9]" "$TMPD/fp-off$off-$i.log")" |
					tee -a "$summary"
			done
		done
		;;
	dip)
		# the library's 4 x 512 MiB allreduce took 1.79 ms where the
		# probe's kernel over the same mappings took 1.09 (2026-12-06):
		# is it the sweep before it, or the library around the kernel?
		for rep in $(seq "${DIP_REPS:-2}"); do
			for how in "sweep -b 256M -e 512M -f 2" "alone -b 512M -e 512M"; do
				set -- $how
				name=dip-$1-$rep
				shift
				stage "$name" 120 env SMDDP_CUDA_ASYNC=0 "$RUN" -n 4 --timeout 110 "$BENCH" \
					--device cuda "$@" -n 20 -w 3 -c 0
				grep -E '^\[0\] +[0-9]' "$TMPD/$name.log" | tee -a "$summary"
			done
			stage "dip-probe-$rep" 120 "$B/tests/gpu/ipc-pages" -N 4 -b 512M -n 20 -r 2 \
				-m ipc,local
			tee -a "$summary" <"$TMPD/dip-probe-$rep.log"
		done
		;;
	pages)
		# the dip's probe (gpu-measurements.md): does only "ipc", the
		# legacy IPC mappings, show two speeds across rounds?
		for nb in "4 256M" "2 512M"; do
			set -- $nb
			stage "pages-n$1" 300 "$B/tests/gpu/ipc-pages" -N "$1" -b "$2" -n 20 \
				-r "${PAGES_ROUNDS:-6}"
			tee -a "$summary" <"$TMPD/pages-n$1.log"
		done
		;;
	torch)
		torch_build
		export PYTHONPATH=$TMPD/site:$ROOT/python/tests PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
		for t in ${TORCH_TESTS:-collectives collectives-queued ddp p2p pipeline}; do
			queued=
			case $t in *-queued) queued=SMDDP_CUDA_ASYNC=1 ;; esac
			stage "torch-$t" 300 env DEVICE=cuda $queued "$RUN" -n 2 --timeout 290 python3 \
				"$ROOT/python/tests/test_${t%-queued}.py"
			grep -h "TORCH-\|max difference" "$TMPD/torch-$t.log" | head -12 | tee -a "$summary"
		done
		# DDP step of a ~100 M parameter MLP (3 layers of 5760 x 5760), batch 8
		[ "${TORCH_BENCH:-1}" = 1 ] || continue
		stage torch-bench 400 env DEVICE=cuda DDP_WIDTH=5760 REPEATS=5 "$RUN" -n 2 \
			--timeout 390 python3 "$ROOT/python/bench/torch_bench.py" all
		grep -v "WARN" "$TMPD/torch-bench.log" | tee -a "$summary"
		;;
	torch-errors)
		# Whether the backend's error paths raise or crash (issue 18: a
		# SIGSEGV while a message was formatted, on this machine's build
		# of the shim only); a crash is rerun under cuda-gdb for its stack.
		cp -r "$ROOT/python" "$TMPD/pysrc"
		stage torch-build 500 env SMDDP_BUILD_DIR="$B" SMDDP_SOURCE_DIR="$ROOT" \
			SMDDP_TORCH_CUDA=1 MAX_JOBS=8 python3 -m pip install -v --no-build-isolation \
			--no-deps --no-index --target "$TMPD/site" "$TMPD/pysrc" || continue
		say "$(g++ --version | head -1); $(python3 -c 'import torch; print("torch", torch.__version__, "cxx11 abi", torch._C._GLIBCXX_USE_CXX11_ABI)' 2>&1)"
		grep -o "D_GLIBCXX_USE_CXX11_ABI=[01]" "$TMPD/torch-build.log" | sort | uniq -c | tee -a "$summary"
		export PYTHONPATH=$TMPD/site PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
		for c in "splits cpu" "root cpu" "size cpu" "splits cuda" "size cuda"; do
			set -- $c
			stage "err-$1-$2" 60 "$RUN" -n 2 --timeout 50 python3 \
				"$ROOT/tests/gpu/torch_errors.py" "$1" "$2"
			st=$?
			grep -h "ERRORS-\|signal\|Segmentation" "$TMPD/err-$1-$2.log" | head -4 | tee -a "$summary"
			[ "$st" -eq 0 ] && continue
			stage "gdb-$1-$2" 200 "$RUN" -n 2 --timeout 190 cuda-gdb -q -batch \
				-ex "set pagination off" -ex run -ex bt -ex "info sharedlibrary" \
				--args python3 "$ROOT/tests/gpu/torch_errors.py" "$1" "$2"
			grep -h -A30 "received signal" "$TMPD/gdb-$1-$2.log" | head -60 | tee -a "$summary"
		done
		# Issue 14: an all_reduce queued on the GPU fails after its call
		# returned (rank 1 dies): rank 0 must see it by itself, within 2 s
		# + SMDDP_LIVENESS_MS, well before SMDDP_TIMEOUT, and say it once.
		stage err-dead-cuda 90 env SMDDP_CUDA_ASYNC=1 SMDDP_TIMEOUT=30 "$RUN" -n 2 \
			--timeout 80 python3 "$ROOT/tests/gpu/torch_errors.py" dead cuda
		grep -h "ERRORS-\|work queued on the GPU failed\|signal\|Segmentation" \
			"$TMPD/err-dead-cuda.log" | head -6 | tee -a "$summary"
		if ! grep -q "^\(\[0\] \)\?smddp: rank 0 of 2: work queued on the GPU failed: " \
			"$TMPD/err-dead-cuda.log"; then
			say "err-dead-cuda: rank 0 did not say 'smddp: rank 0 of 2: work queued on the GPU failed: ...' on stderr"
			rc=1
		fi
		;;
	threads)
		if [ -x "$B/tests/gpu/ipc-close" ]; then
			stage ipc-close 60 "$B/tests/gpu/ipc-close" 1000
			grep -h "^PROBE" "$TMPD/ipc-close.log" | tee -a "$summary"
		else
			say "threads: no $B/tests/gpu/ipc-close (make tests/gpu/ipc-close in $B)"
			rc=1
		fi
		for mps in 0 1; do
			bounded=
			if [ "$mps" = 1 ]; then
				mps_start || continue
				bounded=--bounded
			fi
			for how in plain leave churn; do
				more=
				[ "$how" = leave ] && more="--fresh --leave 1:16 --slow 4000"
				[ "$how" = churn ] && more="--fresh --every 1"
				stage "threads-mps$mps-$how" 200 env SMDDP_CUDA_ASYNC=1 SMDDP_CUDA_FAST=16K \
					SMDDP_TIMEOUT=30 "$RUN" -n 2 --timeout 190 "$GPU_CONFORMANCE_BIN" threads \
					--rounds 200 --jitter 20000 $bounded $more
				grep -h "^\[.\] \(ok\|FAIL\|THREADS\)" "$TMPD/threads-mps$mps-$how.log" |
					sort -u | head -10 | tee -a "$summary"
			done
			[ "$mps" = 1 ] && mps_stop
		done
		;;
	tsan)
		if ! nm -D "$B/lib/.libs/libsmddp.so" 2>/dev/null | grep -q " __tsan_init"; then
			say "tsan: $B is no -fsanitize=thread build (B=build-tsan-cuda: see the header)"
			rc=1
			continue
		fi
		# the programs are instrumented and need the runtime they were
		# built with: gcc 12's, carried (the one here may be missing or
		# another gcc's); LD_LIBRARY_PATH finds it in $CARRY first
		if ! ldd "$GPU_CONFORMANCE_BIN" | grep -q "libtsan.so.2 => $CARRY/"; then
			say "tsan: no libtsan.so.2 in $CARRY (copy it there: see the header)"
			ldd "$GPU_CONFORMANCE_BIN" | grep tsan | tee -a "$summary"
			rc=1
			continue
		fi
		# every report, not the first (halt_on_error=0), in $OUT/tsan/TEST.PID;
		# exitcode=0: a test's status says whether it passed, the count
		# below whether TSan found something.  ignore_noninstrumented_modules:
		# the C library calls of the CUDA driver (libcuda, its own threads)
		# record no accesses; the runtime (cudart) is linked into libsmddp,
		# so its calls still do.  setarch -R: without address
		# randomisation, as this gcc's TSan needs on kernels that randomise
		# 32 bits of mmap addresses ("unexpected memory mapping").
		rm -rf "$OUT/tsan"
		mkdir -p "$OUT/tsan"
		# the canary's race must be reported, or 0 reports below mean nothing
		if [ ! -x "$B/tsan-canary" ]; then
			say "tsan: no $B/tsan-canary (build it: see the header)"
			rc=1
			continue
		fi
		TSAN_OPTIONS="exitcode=0:log_path=$OUT/tsan/canary" setarch "$(uname -m)" -R \
			"$B/tsan-canary" >"$TMPD/tsan-canary.log" 2>&1
		if grep -qs "^WARNING: ThreadSanitizer: data race" "$OUT"/tsan/canary.*; then
			say "tsan: the canary's race is reported"
			rm -f "$OUT"/tsan/canary.*
		else
			say "tsan: the canary's race was NOT reported: TSan does not work here"
			cat "$TMPD/tsan-canary.log" "$OUT"/tsan/canary.* 2>/dev/null | head -20 | tee -a "$summary"
			rc=1
			continue
		fi
		[ "${TSAN_MPS:-1}" = 0 ] || mps_start || continue
		# deadlines that fit one 600 s call of the device tool in all
		for t in ${TSAN_GPU_TESTS:-order overlap errors matrix}; do
			args=$t
			secs=100
			[ "$t" = matrix ] && args="matrix --small" secs=220
			stage "tsan-$t" "$secs" env SMDDP_CUDA_ASYNC=1 SMDDP_TIMEOUT=60 \
				TSAN_OPTIONS="halt_on_error=0:exitcode=0:second_deadlock_stack=1:ignore_noninstrumented_modules=1:log_path=$OUT/tsan/$t:suppressions=$ROOT/tests/tsan.supp" \
				setarch "$(uname -m)" -R "$RUN" -n 2 --timeout $((secs - 20)) \
				"$GPU_CONFORMANCE_BIN" $args
			grep -h "^\[.\] FAIL\|SUMMARY rank\|FATAL" "$TMPD/tsan-$t.log" | head -6 | tee -a "$summary"
		done
		[ "${TSAN_MPS:-1}" = 0 ] || mps_stop
		n=$(cat "$OUT"/tsan/* 2>/dev/null | grep -c "^WARNING: ThreadSanitizer")
		say "tsan: $n report(s) in $OUT/tsan; distinct, by where they are:"
		cat "$OUT"/tsan/* 2>/dev/null | sed -n 's/^SUMMARY: ThreadSanitizer: //p' |
			sed 's/+0x[0-9a-f]*//; s/ (pid=[0-9]*)//' | sort | uniq -c | sort -rn | head -20 |
			tee -a "$summary"
		# the first two in full
		cat "$OUT"/tsan/* 2>/dev/null | awk '/^WARNING: ThreadSanitizer/ { n++ } n >= 1 && n <= 2' |
			head -120 | tee -a "$summary"
		[ "$n" = 0 ] || rc=1
		;;
	*)
		echo "run-on-device.sh: unknown stage '$s' (info tests sanitizer kernel bench p2p staged sockets async mps modes footprint pages nccl torch torch-errors threads tsan)" >&2
		exit 2
		;;
	esac
done
say "run-on-device: $([ $rc -eq 0 ] && echo all stages passed || echo some stage FAILED)"
exit $rc
