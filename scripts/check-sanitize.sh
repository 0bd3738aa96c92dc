#!/bin/bash
# scripts/check-sanitize.sh - the tests again under the sanitizers (make check-sanitize).
#
# Four stages, each in its own build under OUT (default ./sanitize, beside
# the build that runs it):
#   asan  gcc -fsanitize=address,undefined: the library and every tool, then
#         the unit, integration, fault, launcher, topology and fuzz-replay tests
#         (make print-sanitize-tests);
#   tsan  gcc -fsanitize=thread: the tests that run threads in one process
#         (make print-tsan-tests): two communicators used from two threads of
#         every rank, the parameter registry and the shared topology read from
#         many threads, the fault program's killer thread.  Left out here:
#         the CUDA proxy thread (lib/cuda/proxy.c needs CUDA to build and a
#         GPU to run: the tsan stage of lab/gpu/run-on-device.sh);
#   tsan-torch  the PyTorch shim's worker and completer threads: the shim
#         built with -fsanitize=thread against the tsan build, 2-rank jobs
#         of python/tests (collectives, ddp, p2p, groups, pipeline) on CPU
#         tensors with the TSan runtime preloaded into python
#         (scripts/tsan-torch.sh, about 4 minutes); skipped, and said so,
#         without a torch venv (TORCH_PYTHON, else .venv-torch of the
#         source tree);
#   fuzz  clang -fsanitize=fuzzer,address,undefined: every fuzz target of
#         tests/fuzz for FUZZ_SECONDS (default 5) from its corpus
#         (scripts/fuzz.sh); skipped (said so) without clang and libFuzzer.
# STAGES="asan tsan tsan-torch fuzz" picks them.  The automake summaries of the stages
# are printed ("# PASS: N"), for .ci/run to count; the exit status is 1 when
# any stage failed.
#
# UBSan stops at the first report (-fno-sanitize-recover=all, built in: the
# launcher and some tests run programs with a clean environment, without
# UBSAN_OPTIONS).  Every program of a build is instrumented, so no
# LD_PRELOAD of the runtime is needed; programs from elsewhere (mpirun,
# python) are not, and load no instrumented library.  Leak detection: see
# the asan stage below.
set -u
srcdir=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$PWD/sanitize}
stages=${STAGES:-asan tsan tsan-torch fuzz}
jobs=${JOBS:-$(nproc)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -x "$srcdir/configure" ] || (cd "$srcdir" && autoreconf -fi) || exit 1

rc=0
t_all=$(date +%s)
# Instrumented processes run 2 to 15 times slower: the tests that time
# their own processes (test_bootstrap's scenarios) stretch their limits.
export TEST_TIME_SCALE=${TEST_TIME_SCALE:-4}

# build NAME CC CFLAGS LDFLAGS: configure (once) and make in $out/NAME
build() {
	local name=$1 cc=$2 cflags=$3 ldflags=$4
	mkdir -p "$out/$name"
	if [ ! -f "$out/$name/Makefile" ]; then
		(cd "$out/$name" && "$srcdir/configure" -q --without-cuda CC="$cc" CFLAGS="$cflags" \
			LDFLAGS="$ldflags") >"$out/$name/configure.out" 2>&1 || {
			cat "$out/$name/configure.out"
			echo "check-sanitize: configure of the $name build failed (config.log in $out/$name)"
			return 1
		}
	fi
	make -C "$out/$name" -s -j"$jobs" >/dev/null || {
		echo "check-sanitize: the $name build failed"
		return 1
	}
}

# check NAME TESTS...: make check of those tests, the failures' logs shown
check() {
	local name=$1 t0
	shift
	if [ $# = 0 ]; then
		echo "check-sanitize: $name: no tests listed"
		return 1
	fi
	t0=$(date +%s)
	rm -f "$out/$name/test-suite.log"
	make -C "$out/$name" -j"$jobs" check TESTS="$*" >"$out/$name/check.out" 2>&1
	local s=$?
	grep -E '^(PASS|FAIL|ERROR|XPASS|SKIP|XFAIL|# [A-Z]+:)' "$out/$name/check.out"
	# no summary: make failed before running anything
	if ! grep -qs '^# TOTAL: *[1-9]' "$out/$name/test-suite.log"; then
		grep -v '^ar: ' "$out/$name/check.out" | tail -n 30
		echo "check-sanitize: $name: no test ran (make's output above)"
		s=1
	fi
	if [ "$s" != 0 ]; then
		for t in $*; do
			local log=$out/$name/${t%.sh}.log
			if [ -f "$log" ] && grep -qE '^:test-result: (FAIL|ERROR)' "$out/$name/${t%.sh}.trs" 2>/dev/null; then
				echo "---- $log (last 60 lines)"
				tail -n 60 "$log"
			fi
		done
	fi
	echo "check-sanitize: $name: $(($(date +%s) - t0)) s of tests"
	return "$s"
}

for stage in $stages; do
	t0=$(date +%s)
	case $stage in
	asan)
		# halt_on_error: the first report fails the test.  abort_on_error
		# off: a report is exit 1 with its text, not a core dump.
		# detect_stack_use_after_return off: its fake stacks cost memory
		# that 8 oversubscribed ranks on a small VM do not have.
		opts=halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=0
		export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
		build asan gcc "-g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all" \
			"-fsanitize=address,undefined" || rc=1
		if [ -f "$out/asan/Makefile" ] && [ "$rc" = 0 ]; then
			# With leak detection: the unit tests, the parsers' corpora,
			# smddp-topo and smddp-check-az, and a job that creates,
			# splits and destroys communicators and exits cleanly
			# (lifecycle).
			ASAN_OPTIONS=$opts:detect_leaks=1 \
				check asan $(make -C "$out/asan" -s --no-print-directory print-sanitize-leak-tests) || rc=1
			# Without, for jobs and smddp-run: the fault tests' ranks
			# leave on purpose with communicators and buffers alive
			# (exit() on the first error, as a training script would),
			# smddp-run keeps its plan's strings to its exit, and
			# LeakSanitizer's report then replaces the exit status
			# the tests check; at the end of smddp-run, signalled, its
			# exit-time scan stalled the launcher past the tests'
			# deadlines.  handle_segv off: tests/run kills ranks with
			# SIGSEGV and checks status 139, which ASan's handler would
			# turn into 1 (a real crash still fails its test).
			ASAN_OPTIONS=$opts:detect_leaks=0:handle_segv=0 \
				check asan $(make -C "$out/asan" -s --no-print-directory print-sanitize-tests) || rc=1
		fi
		unset UBSAN_OPTIONS
		;;
	tsan)
		# halt_on_error: a race fails its test.  second_deadlock_stack
		# for readable lock-order reports.
		export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$srcdir/tests/tsan.supp"
		# the threads' matrix on 4 ranks, its largest count cut from
		# 65537 to 5000 (still past the single-copy threshold of 4 KiB):
		# the full one takes minutes under TSan
		export THREADS_RANKS=4 THREADS_COUNTS=0,1,7,1001,5000
		build tsan gcc "-g -O1 -fno-omit-frame-pointer -fsanitize=thread" "-fsanitize=thread" &&
			check tsan $(make -C "$out/tsan" -s --no-print-directory print-tsan-tests) || rc=1
		unset TSAN_OPTIONS THREADS_RANKS THREADS_COUNTS
		;;
	tsan-torch)
		# its own summary, in automake's words, for .ci/run to count
		"$srcdir/scripts/tsan-torch.sh" "$out" | tee "$out/tsan-torch.out"
		st=${PIPESTATUS[0]}
		p=$(grep -c '^tsan-torch: [a-z0-9_]*: exit 0, 2 of 2 ranks TORCH-OK, 0 report' "$out/tsan-torch.out")
		t=$(grep -c '^tsan-torch: [a-z0-9_]*: exit ' "$out/tsan-torch.out")
		if [ "$st" = 77 ]; then
			printf '# TOTAL: 1\n# PASS:  0\n# SKIP:  1\n# FAIL:  0\n'
		else
			[ "$st" = 0 ] || rc=1
			[ "$st" = 0 ] || [ "$t" -gt 0 ] || t=1 # failed before any test ran
			printf '# TOTAL: %d\n# PASS:  %d\n# SKIP:  0\n# FAIL:  %d\n' "$t" "$p" $((t - p))
		fi
		;;
	fuzz)
		"$srcdir/scripts/fuzz.sh" "${FUZZ_SECONDS:-5}" "$out/fuzz" || rc=1
		;;
	*)
		echo "check-sanitize: unknown stage '$stage' (asan, tsan, tsan-torch or fuzz)"
		rc=1
		;;
	esac
	echo "check-sanitize: stage $stage took $(($(date +%s) - t0)) s"
done
echo "check-sanitize: $(($(date +%s) - t_all)) s in all, exit $rc"
exit $rc
