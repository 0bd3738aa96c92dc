#!/bin/bash
# scripts/bench-slow-calls.sh - count slow allreduce calls, two libraries interleaved, with or without busy loops.
#
# usage: scripts/bench-slow-calls.sh [-r RUNS] [-b BUSY] [-n RANKS] [-s SLOW_US]
#                                    BUILD-DIR LIBDIR... [-- MIN MAX FACTOR ITERS WARMUP]
# Runs scripts/slow-calls.c (built here with cc) through BUILD-DIR's
# smddp-run on RANKS ranks (default 2), RUNS times (default 6) with each
# LIBDIR's libsmddp.so.1 in turn (named A, B, C... in the output), and
# prints each run's lines, then per library and size: the range of the medians, the
# calls over SLOW_US (default 1000) of all runs, and how many runs had
# one.  BUSY (default 0) shell loops spin in this script's own session
# meanwhile (one autogroup with the ranks: what a make or CI run started
# from the same shell does); they are killed by pid at the end.  The
# default sweep is 64K 4M 4 20 2.  Make LIBDIR-A from an older commit:
# build it, then copy its build/lib/.libs/libsmddp.so.1 into a folder.
set -eu
usage() {
	echo "usage: $0 [-r RUNS] [-b BUSY] [-n RANKS] [-s SLOW_US] BUILD-DIR LIBDIR..." \
		"[-- MIN MAX FACTOR ITERS WARMUP]"
}
here=$(cd "$(dirname "$0")" && pwd)
runs=6 busy=0 ranks=2 slow=1000
while [ $# -gt 0 ]; do
	case $1 in
	-r) runs=$2; shift 2 ;;
	-b) busy=$2; shift 2 ;;
	-n) ranks=$2; shift 2 ;;
	-s) slow=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	-*) usage >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -ge 2 ] || { usage >&2; exit 2; }
build=$(cd "$1" && pwd)
shift
libs=() names=() desc=
for n in A B C D E F G H; do
	[ $# -gt 0 ] && [ "$1" != -- ] || break
	libs+=("$(cd "$1" && pwd)")
	names+=("$n")
	desc="$desc $n ${libs[-1]};"
	shift
done
[ ${#libs[@]} -gt 0 ] || { usage >&2; exit 2; }
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || set -- 65536 4194304 4 20 2
tmp=$(mktemp -d)
pids=()
cleanup() {
	[ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cc -O2 -o "$tmp/slow-calls" "$here/slow-calls.c" -I"$here/../lib/include" -L"${libs[0]}" \
	-l:libsmddp.so.1
for ((i = 0; i < busy; i++)); do
	sh -c 'while :; do :; done' &
	pids+=($!)
done
echo "# $runs runs each, $ranks ranks, $busy busy loops, slow: over $slow us; sweep $*;$desc" \
	"$(date -u '+%F %T') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= runs; r++)); do
	for i in "${!libs[@]}"; do
		LD_LIBRARY_PATH=${libs[$i]} timeout 600 "$build/cmd/smddp-run" -n "$ranks" \
			"$tmp/slow-calls" "$@" "${names[$i]}" "$slow" | sed 's/^\[0\] //' |
			tee -a "$tmp/all"
	done
done
echo "# lib size: medians (us) min-max, slow calls of all runs, runs with a slow call"
awk '$2 == "size" {
	k = $1 " " $3
	if (!(k in n)) { lo[k] = $5; hi[k] = $5; order[++m] = k }
	n[k]++; if ($5 < lo[k]) lo[k] = $5; if ($5 > hi[k]) hi[k] = $5
	s[k] += $7; if ($7 > 0) r[k]++
} END { for (i = 1; i <= m; i++) { k = order[i]; printf "%s: %s-%s, %d slow, %d of %d runs\n", k, lo[k], hi[k], s[k], r[k] + 0, n[k] } }' "$tmp/all" | sort -s -k1,1
