#!/bin/bash
# scripts/tsan-torch.sh [OUT] - the PyTorch backend's threads under ThreadSanitizer (CPU tensors).
#
# libsmddp built with gcc -fsanitize=thread in OUT/tsan (check-sanitize's
# tsan build, made here if missing: same flags), the shim (python/smddp/csrc)
# built with -fsanitize=thread against it into OUT/tsan-torch/site, then
# 2-rank jobs of python/tests through smddp-run: test_collectives,
# test_ddp, test_p2p, test_groups (300 groups made, used and destroyed:
# workers started and stopped) and test_pipeline (TSAN_TORCH_TESTS
# picks), on CPU tensors against gloo.  Python and torch are not instrumented: the ranks run with
# libtsan.so.2 preloaded (an instrumented library cannot load it later),
# and TSan sees the accesses of libsmddp and of the shim, with the
# synchronisation (mutexes, condition variables, threads) of everything.
# What it reports inside torch alone, or because torch's own atomics are
# invisible to it, is suppressed in tests/tsan.supp, each entry with why
# it is not ours; nothing there names libsmddp or the shim.
#
# Every rank writes its reports to OUT/tsan-torch/logs/TEST.PID
# (halt_on_error=0: all of them, not the first).  A test passes when its
# job exits 0, both ranks print TORCH-OK, and no report is left; otherwise
# the distinct reports are listed (by TSan's SUMMARY line, "ours" when a
# frame of either access is in lib/ or python/smddp/csrc) with the first
# ones in full.  About 4 minutes on 2 cores: 3 to build the shim, then
# under a minute of jobs.
#
# Environment: TORCH_PYTHON (default .venv-torch/bin/python of the source
# tree, as scripts/test.sh), TSAN_TORCH_TESTS (default "collectives ddp
# p2p groups pipeline"), TSAN_TORCH_OPTIONS (more TSan options, after ours: e.g.
# ignore_noninstrumented_modules=0 to see torch's side too), JOBS.  Exit: 0 clean, 1 reports or a failed test, 77 no torch.
set -u
srcdir=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$PWD/sanitize}
mkdir -p "$out"
out=$(cd "$out" && pwd)
jobs=${JOBS:-$(nproc)}
PY=${TORCH_PYTHON:-$srcdir/.venv-torch/bin/python}
if ! "$PY" -c 'import torch' 2>/dev/null; then
	echo "tsan-torch: SKIP: no torch for $PY (scripts/torch-venv.sh makes .venv-torch; or set TORCH_PYTHON)"
	exit 77
fi
libtsan=$(gcc -print-file-name=libtsan.so.2)
if [ ! -f "$libtsan" ]; then
	echo "tsan-torch: SKIP: gcc has no libtsan.so.2"
	exit 77
fi
libtsan=$(readlink -f "$libtsan")
B=$out/tsan
T=$out/tsan-torch
[ -x "$srcdir/configure" ] || (cd "$srcdir" && autoreconf -fi) || exit 1

# libsmddp and smddp-run under TSan (the flags of check-sanitize's tsan stage)
if [ ! -f "$B/Makefile" ]; then
	mkdir -p "$B"
	(cd "$B" && "$srcdir/configure" -q --without-cuda CC=gcc \
		CFLAGS="-g -O1 -fno-omit-frame-pointer -fsanitize=thread" LDFLAGS=-fsanitize=thread) \
		>"$B/configure.out" 2>&1 || {
		cat "$B/configure.out"
		echo "tsan-torch: configure of $B failed"
		exit 1
	}
fi
make -C "$B" -s -j"$jobs" >/dev/null || {
	echo "tsan-torch: the build in $B failed"
	exit 1
}

# The shim, instrumented (setup.py's compiler takes CFLAGS and LDFLAGS), when
# it or the library changed.  The CPU path only: no GPU here.
so=$(ls "$T"/site/smddp/_C*.so 2>/dev/null | head -1)
if [ -z "$so" ] || [ -n "$(find "$srcdir/python/smddp" "$srcdir/python/setup.py" \
	"$B/lib/.libs/libsmddp.so" -newer "$so" -print -quit 2>/dev/null)" ]; then
	rm -rf "$T/site" "$T/src"
	mkdir -p "$T"
	cp -r "$srcdir/python" "$T/src"
	chmod -R u+w "$T/src"
	t0=$(date +%s)
	# one translation unit (python/setup.py, SMDDP_UNITY_BUILD): a third of the CPU
	if ! SMDDP_BUILD_DIR=$B SMDDP_SOURCE_DIR=$srcdir SMDDP_TORCH_CUDA=0 SMDDP_UNITY_BUILD=1 \
		CFLAGS="-g -O1 -fno-omit-frame-pointer -fsanitize=thread" LDFLAGS=-fsanitize=thread \
		"$PY" -m pip install -q --no-build-isolation --no-deps --no-index --target "$T/site" \
		"$T/src" >"$T/pip.out" 2>&1; then
		tail -30 "$T/pip.out"
		echo "tsan-torch: building the shim failed"
		exit 1
	fi
	so=$(ls "$T"/site/smddp/_C*.so | head -1)
	if ! nm -D "$so" | grep -q __tsan_func_entry; then
		echo "tsan-torch: $so is not instrumented (-fsanitize=thread did not reach the compiler)"
		exit 1
	fi
	echo "tsan-torch: shim built in $(($(date +%s) - t0)) s"
fi

# TSAN_OPTIONS of the ranks (and the canary's) but the log's name.
# ignore_noninstrumented_modules: the C library functions that torch and
# python call (free, memcpy, pthread_cond_destroy...) record no accesses
# (their locks and threads still count): torch's own memory is torch's
# business, and without its atomics TSan would misjudge it.
opts="halt_on_error=0:second_deadlock_stack=1:ignore_noninstrumented_modules=1"
opts="$opts:suppressions=$srcdir/tests/tsan.supp${TSAN_TORCH_OPTIONS:+:$TSAN_TORCH_OPTIONS}"
rm -rf "$T/logs" "$T/canary"
mkdir -p "$T/logs" "$T/canary"

# The canary (tests/tsan-canary.c): python with the same runtime and
# options loads a small instrumented library whose two threads write one
# int unlocked.  If that race is not reported and counted, a clean run
# below would prove nothing.
gcc -g -O1 -shared -fPIC -fsanitize=thread -o "$T/canary/canary.so" "$srcdir/tests/tsan-canary.c" \
	-lpthread &&
	env LD_PRELOAD="$libtsan" TSAN_OPTIONS="$opts:log_path=$T/canary/log" "$PY" -c \
		"import ctypes, sys; sys.exit(ctypes.CDLL(sys.argv[1]).canary() != 2)" \
		"$T/canary/canary.so" >"$T/canary/out" 2>&1
if ! cat "$T"/canary/log.* 2>/dev/null | grep -q "^WARNING: ThreadSanitizer: data race"; then
	cat "$T/canary/out"
	echo "tsan-torch: the canary's race was not reported: TSan does not work in $PY here"
	exit 1
fi

export PYTHONPATH=$T/site:$srcdir/python/tests PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 \
	SMDDP_CONFIG=/dev/null SMDDP_TIMEOUT=120
rc=0
for t in ${TSAN_TORCH_TESTS:-collectives ddp p2p groups pipeline}; do
	t0=$(date +%s)
	# TSAN_OPTIONS through env: smddp-run is instrumented too, and its
	# reports go to the terminal, the ranks' to the logs.
	timeout -k 10 600 "$B/cmd/smddp-run" -n 2 --timeout 580 env LD_PRELOAD="$libtsan" \
		TSAN_OPTIONS="$opts:log_path=$T/logs/$t" "$PY" "$srcdir/python/tests/test_$t.py" >"$T/$t.out" 2>&1
	st=$?
	ok=$(grep -c "TORCH-OK rank=" "$T/$t.out")
	n=$(cat "$T/logs/$t".* 2>/dev/null | grep -c "^WARNING: ThreadSanitizer")
	supp=$(cat "$T/logs/$t".* 2>/dev/null | sed -n 's/^ *\([0-9][0-9]*\) race:.*/\1/p' | awk '{s+=$1} END {print s+0}')
	echo "tsan-torch: $t: exit $st, $ok of 2 ranks TORCH-OK, $n report(s), $supp suppressed, $(($(date +%s) - t0)) s"
	if [ "$st" != 0 ] || [ "$ok" != 2 ] || [ "$n" != 0 ]; then
		rc=1
		[ "$ok" = 2 ] || tail -20 "$T/$t.out"
	fi
done
if [ "$rc" != 0 ] && ls "$T"/logs/* >/dev/null 2>&1; then
	# the distinct reports, ours first
	"$PY" - "$srcdir" "$T"/logs/* <<'EOF'
import re, sys
src = sys.argv[1]
seen = {}
for path in sys.argv[2:]:
    for rep in open(path, errors="replace").read().split("==================\n"):
        if "WARNING: ThreadSanitizer" not in rep:
            continue
        m = re.search(r"^SUMMARY: ThreadSanitizer: (.*)$", rep, re.M)
        key = re.sub(r"\+0x[0-9a-f]+|\(pid=\d+\)", "", m.group(1) if m else "?")
        # the accesses: the blocks before "Location is", "Mutex" or "Thread"
        access = re.split(r"\n  (?:Location is|Mutex|Thread T)", rep)[0]
        ours = bool(re.search(re.escape(src) + r"/lib/|/smddp/csrc/|libsmddp\.so|/smddp/_C", access))
        if key not in seen:
            seen[key] = [0, ours, rep]
        seen[key][0] += 1
for key, (n, ours, rep) in sorted(seen.items(), key=lambda kv: (not kv[1][1], -kv[1][0])):
    print(f"tsan-torch: {n:4d} x {'OURS ' if ours else 'torch'} {key[:200]}")
shown = 0
for key, (n, ours, rep) in sorted(seen.items(), key=lambda kv: (not kv[1][1], -kv[1][0])):
    if shown < 3:
        print(rep[:4000])
        shown += 1
EOF
fi
echo "tsan-torch: $([ $rc = 0 ] && echo clean || echo FAILED) (logs in $T/logs)"
exit $rc
