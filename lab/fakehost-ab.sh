#!/bin/bash
# lab/fakehost-ab.sh - builds A/B between two fake hosts on loopback, interleaved (ABBA).
#
# usage: lab/fakehost-ab.sh [-r ROUNDS] [-C COLL] BUILD[,V=X...]... [-- BENCH-ARGS...]
# Two ranks on this machine told they are on two hosts (tests/net/fakehost.sh:
# the paths between hosts, over loopback), ROUNDS (default 5) rounds in which
# every BUILD in turn (with its own environment, BUILD,V=X,...; every other
# round in reverse order, so that no build is always first) runs
# smddp-allreduce-bench --coll COLL through its own smddp-run.  Prints per
# size each build's median over the rounds, lowest-highest, and the first
# build's median over each other's (us, out of place).  No Open MPI (it
# would take its shared memory here): lab/hosts-ab.sh has it, on namespaces.
set -eu
cd "$(dirname "$0")/.."
rounds=5 coll=allgather builds=()
while [ $# -gt 0 ]; do
	case $1 in
	-r) rounds=$2; shift 2 ;;
	-C) coll=$2; shift 2 ;;
	--) shift; break ;;
	-*) echo "usage: $0 [-r ROUNDS] [-C COLL] BUILD[,V=X...]... [-- BENCH-ARGS...]" >&2; exit 2 ;;
	*) builds+=("$(cd "${1%%,*}" && pwd)${1#"${1%%,*}"}"); shift ;;
	esac
done
[ ${#builds[@]} -ge 1 ] || { echo "usage: $0 [-r ROUNDS] [-C COLL] BUILD... [-- BENCH-ARGS...]" >&2; exit 2; }
[ $# -gt 0 ] || set -- -b 256K -e 16M -f 2 -n 50 -w 5 -c 0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fake=$PWD/tests/net/fakehost.sh n=${#builds[@]}
echo "# $(uname -n): $(nproc) cores, $rounds rounds, $coll; builds: ${builds[*]}; bench $*"
for ((r = 1; r <= rounds; r++)); do
	for ((j = 0; j < n; j++)); do
		k=$((r % 2 ? j : n - 1 - j))
		b=${builds[$k]%%,*} benv=()
		IFS=, read -ra kv <<<"${builds[$k]#"$b"}"
		for x in "${kv[@]}"; do [ -z "$x" ] || benv+=("$x"); done
		echo "# round $r, build $k, $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
		env "${benv[@]}" timeout -k 5 600 "$b/cmd/smddp-run" -n 2 sh "$fake" \
			"$b/cmd/bench/smddp-allreduce-bench" --coll "$coll" "$@" 2>&1 |
			awk -v k="$k" '/^\[0\] +[0-9]/ { print k, $2, $7 }' >>"$out"
	done
done
python3 - "$out" "$n" <<'PY'
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    k, s, t = line.split()
    v.setdefault((int(s), int(k)), []).append(float(t))
n, med = int(sys.argv[2]), statistics.median
hdr = f"{'size':>9}" + "".join(f" {'b%d' % k:>9} {'min-max':>15}" for k in range(n))
print(hdr + "".join(f" {'b0/b%d' % k:>6}" for k in range(1, n)) + "   (us, out of place, median of the rounds)")
for s in sorted({x[0] for x in v}):
    a = [v.get((s, k), [0]) for k in range(n)]
    line = f"{s:>9}" + "".join(f" {med(x):>9.1f} {'%.1f-%.1f' % (min(x), max(x)):>15}" for x in a)
    line += "".join(f" {med(a[0]) / med(a[k]):>6.2f}" if med(a[k]) else "      -" for k in range(1, n))
    print(line)
PY
