#!/bin/bash
# scripts/fuzz.sh - run the fuzz targets of tests/fuzz under libFuzzer (clang, ASan+UBSan).
#
# usage: scripts/fuzz.sh [SECONDS [OUTDIR [NAME...]]]
#   SECONDS  per target (default 60; make check-sanitize runs 5)
#   OUTDIR   the build and the grown corpora (default ./fuzz-build)
#   NAME     targets to run, as in tests/fuzz/fuzz-NAME (default all)
# New inputs go to OUTDIR/corpus/NAME, never into the source tree; a crash
# leaves OUTDIR/crashes/NAME-crash-* and fails.  Once the bug is fixed, copy
# that input into tests/fuzz/corpus/NAME/ (as regress-WHAT): make check
# replays it from then on.  Without clang and libFuzzer (Debian: clang
# libclang-rt-14-dev) it says so and exits 0: make check's replay of the
# corpora still runs the parsers.  JOBS targets run at once (default: every
# CPU).  Prints automake-style totals ("# PASS: N").
set -u
srcdir=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-60}
out=${2:-$PWD/fuzz-build}
shift $(($# < 2 ? $# : 2))
cc=${FUZZ_CC:-clang}

mkdir -p "$out"
out=$(cd "$out" && pwd)
probe=$out/probe.c
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
	'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return d && n ? 0 : 0; }' >"$probe"
if ! command -v "$cc" >/dev/null || ! "$cc" -fsanitize=fuzzer "$probe" -o "$out/probe" 2>/dev/null; then
	echo "fuzz: $cc cannot link -fsanitize=fuzzer (install clang libclang-rt-14-dev): libFuzzer runs left out"
	exit 0
fi
[ -x "$srcdir/configure" ] || (cd "$srcdir" && autoreconf -fi) || exit 1
if [ ! -f "$out/Makefile" ]; then
	(cd "$out" && "$srcdir/configure" -q --without-cuda --enable-fuzzer CC="$cc" \
		CFLAGS="-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -Wno-unknown-warning-option" \
		LDFLAGS="-fsanitize=address,undefined") >"$out/configure.out" 2>&1 || {
		cat "$out/configure.out"
		echo "fuzz: configure failed (config.log in $out)"
		exit 1
	}
fi
names=("$@")
if [ ${#names[@]} = 0 ]; then
	for d in "$srcdir"/tests/fuzz/corpus/*/; do
		d=${d%/}
		names+=("${d##*/}")
	done
fi
progs=()
for n in "${names[@]}"; do
	# smddp-check-az's targets need libcurl, as the tool does
	grep -q "^tests/fuzz/fuzz-$n\$" <(make -C "$out" -s print-fuzz-targets | tr ' ' '\n') &&
		progs+=("tests/fuzz/fuzz-$n")
done
make -C "$out" -s -j"${JOBS:-$(nproc)}" "${progs[@]}" >"$out/make.out" 2>&1 || {
	tail -n 40 "$out/make.out"
	echo "fuzz: the build failed (all of it in $out/make.out)"
	exit 1
}

# run_one PROG: PROG for SECONDS from its corpora; "EXIT SECONDS" into NAME.result.
# -timeout: one input taking 10 s is a hang; -rss_limit_mb: one ballooning
# is a bug too.  The first folder gets what is new.
run_one() {
	local n=${1##*/fuzz-} t0 rc=0
	mkdir -p "$out/corpus/$n"
	t0=$(date +%s)
	"$out/$1" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
		-artifact_prefix="$out/crashes/$n-" -print_final_stats=1 \
		"$out/corpus/$n" "$srcdir/tests/fuzz/corpus/$n" >"$out/$n.log" 2>&1 || rc=$?
	echo "$rc $(($(date +%s) - t0))" >"$out/$n.result"
}

# as many targets at once as there are jobs (each fuzzer is one process)
mkdir -p "$out/crashes"
running=()
for p in "${progs[@]}"; do
	run_one "$p" &
	running+=($!)
	if [ "${#running[@]}" -ge "${JOBS:-$(nproc)}" ]; then
		wait "${running[0]}"
		running=("${running[@]:1}")
	fi
done
wait

pass=0 fail=0
for p in "${progs[@]}"; do
	n=${p##*/fuzz-}
	log=$out/$n.log
	read -r rc took <"$out/$n.result"
	if [ "$rc" = 0 ]; then
		pass=$((pass + 1))
		echo "PASS: fuzz-$n ($took s, $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" |
			grep -o '[0-9]*$') runs, corpus $(ls "$out/corpus/$n" | wc -l) new)"
	else
		fail=$((fail + 1))
		echo "FAIL: fuzz-$n: the report, from $log:"
		grep -v '^#[0-9]' "$log" | tail -n 60
		ls "$out/crashes/$n-"* 2>/dev/null | sed 's/^/  input: /'
	fi
done
echo "# TOTAL: $((pass + fail))"
echo "# PASS:  $pass"
echo "# FAIL:  $fail"
[ "$fail" = 0 ]
