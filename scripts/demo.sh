#!/bin/bash
# scripts/demo.sh - build quietly, run a multi-rank allreduce benchmark on this machine, say how it compares.
# usage: scripts/demo.sh [-n RANKS] [-- BENCH-ARGS...]
#
# The build's output goes to build/demo-build.log (its last lines are shown
# if it fails).  With Open MPI's mpirun (MPIRUN, default: mpirun from PATH)
# and a build that found Open MPI, the sweep runs under mpirun with
# --compare mpi, so that libsmddp and Open MPI are measured in the same
# processes, and the last line is the ratio of their busbw at 64 MiB (or at
# the largest size, when the arguments leave 64 MiB out).  Otherwise the
# sweep runs under smddp-run and the last line says why nothing was compared.
set -eu
cd "$(dirname "$0")/.."
nranks=2
if [ "${1:-}" = -n ]; then nranks=$2; shift 2; fi
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || set -- -b 8 -e 64M -f 4 -d float32 -o sum

mkdir -p build
log=$PWD/build/demo-build.log
echo "demo: building libsmddp (log: $log) ..."
if ! ./scripts/build.sh >"$log" 2>&1; then
	echo "demo: the build failed; the end of $log:" >&2
	tail -n 20 "$log" >&2
	exit 1
fi
cd build
bench=./cmd/bench/smddp-allreduce-bench
json=$(mktemp "${TMPDIR:-/tmp}/smddp-demo.XXXXXX")
trap 'rm -f "$json"' EXIT

mpirun=${MPIRUN:-mpirun}
why=""
if ! grep -q '^#define HAVE_MPI 1' config.h; then
	why="this build has no Open MPI (configure did not find libopenmpi-dev)"
elif ! command -v "$mpirun" >/dev/null 2>&1; then
	why="$mpirun not found (apt-get install openmpi-bin)"
fi

rc=0
if [ -z "$why" ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	echo "demo: $nranks ranks under $mpirun, libsmddp then Open MPI in the same processes"
	"$mpirun" -np "$nranks" --oversubscribe --bind-to none \
		-x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$((20000 + RANDOM % 20000)) \
		"$bench" "$@" --compare mpi -J "$json" || rc=$?
	[ "$rc" -eq 0 ] || why="the run under $mpirun failed (exit $rc)"
else
	echo "demo: $nranks ranks under smddp-run"
	./cmd/smddp-run -n "$nranks" --no-tag-output "$bench" "$@" -J "$json" || rc=$?
fi

# The verdict: the row of the first collective, type and op at 64 MiB, or at
# the largest size measured.  Out-of-place numbers; ratio = busbw of
# libsmddp / busbw of Open MPI (the bench's oop_ratio).
field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" <<<"$2"; }
ours=$(grep '"impl":"smddp"' "$json" 2>/dev/null | grep -v '"oop_time_us":null' || true)
if [ -z "$ours" ]; then
	echo "verdict: no result to judge${why:+ ($why)}; see the messages above"
	exit $((rc ? rc : 1))
fi
size=67108864
grep -q "\"size_bytes\":$size," <<<"$ours" ||
	size=$(for s in $(field size_bytes "$ours"); do echo "$s"; done | sort -n | tail -n 1)
row=$(grep "\"size_bytes\":$size," <<<"$ours" | head -n 1)
what="$(field collective "$row" | tr -d '"') $(field type "$row" | tr -d '"')"
[ "$(field redop "$row")" = '"none"' ] || what="$what $(field redop "$row" | tr -d '"')"
at="$what, $((size >> 20)) MiB"
[ "$size" -ge 1048576 ] || at="$what, $size B"
bw=$(printf '%.3g' "$(field oop_busbw_gbps "$row")")
if [ -n "$why" ]; then
	echo "verdict: $at on $nranks ranks: libsmddp busbw $bw GB/s; no comparison with Open MPI: $why"
	exit "$rc"
fi
theirs=$(grep '"impl":"mpi"' "$json" | grep "\"size_bytes\":$size," | grep -F "\"type\":$(field type "$row")," |
	grep -F "\"collective\":$(field collective "$row")," | head -n 1)
ratio=$(field oop_ratio "$theirs")
if [ -z "$theirs" ] || [ -z "$ratio" ] || [ "$ratio" = null ]; then
	echo "verdict: $at on $nranks ranks: libsmddp busbw $bw GB/s; Open MPI did not run this case (see the comment lines above)"
	exit "$rc"
fi
awk -v at="$at" -v n="$nranks" -v r="$ratio" -v a="$bw" -v b="$(field oop_busbw_gbps "$theirs")" 'BEGIN {
	word = (r >= 1.05) ? "faster" : (r > 0.95) ? "on par" : "slower"
	printf "verdict: %s on %d ranks: libsmddp is %.2fx Open MPI, %s (busbw %.3g vs %.3g GB/s, out of place, this run)\n",
		at, n, r, word, a, b
}'
exit "$rc"
