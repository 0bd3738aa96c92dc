#!/bin/bash
# lab/hosts-ab.sh - builds A/B between two namespace hosts, interleaved, each beside Open MPI, with busy loops.
#
# usage: lab/hosts-ab.sh [-r ROUNDS] [-b BUSY [-S]] [-C COLL] [-o DIR] [--env V=X]... [-W WRAPPER] [--no-mpi]
#                        BUILD[,V=X...]... [-- BENCH-ARGS...]
# One pair of hosts (tests/cluster/lib.sh) for the whole run, BUSY (default
# 0) shell loops spinning beside it (started here, killed by pid on exit;
# with -S each in a session of its own: another autogroup, as another
# user's compiler),
# then ROUNDS (default 5) rounds in which every BUILD in turn (with its own
# environment, BUILD,V=X,...; every other round in reverse order) runs
# smddp-allreduce-bench --coll COLL --compare mpi between h1 and h2 (one rank
# each).  No raw TCP anchor (scripts/bench-hosts.sh has one): this is for
# latency and A/B.  Prints per size each build's median over the rounds and
# Open MPI's of the same runs (time in us, out of place), with the spread
# (ours: lowest-highest run; Open MPI's: its highest run).
# -W runs each rank's bench through WRAPPER (strace -c, perf); --no-mpi
# leaves Open MPI out.
set -eu
cd "$(dirname "$0")/.."
rounds=5 busy=0 sess="" coll=allreduce keep="" envs=() builds=() wrap=() cmp=(--compare mpi)
while [ $# -gt 0 ]; do
	case $1 in
	-r) rounds=$2; shift 2 ;;
	-b) busy=$2; shift 2 ;;
	-S) sess=setsid; shift ;;
	-C) coll=$2; shift 2 ;;
	-o) keep=$2; shift 2 ;;
	-W) wrap=("$2"); shift 2 ;;
	--no-mpi) cmp=(); shift ;;
	--env) envs+=(--env "$2"); shift 2 ;;
	--) shift; break ;;
	*) builds+=("$(cd "${1%%,*}" && pwd)${1#"${1%%,*}"}"); shift ;;
	esac
done
[ ${#builds[@]} -ge 1 ] || { echo "usage: $0 [-r ROUNDS] [-b BUSY] [-C COLL] [-o DIR] BUILD... [-- BENCH-ARGS...]" >&2; exit 2; }
[ $# -gt 0 ] || set -- -b 8 -e 4096 -f 8 -n 2000 -w 100 -c 0
export top_builddir=${builds[0]%%,*} top_srcdir=$PWD
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
. tests/cluster/lib.sh
busy_pids=()
stop_busy() {
	[ ${#busy_pids[@]} -eq 0 ] || kill "${busy_pids[@]}" 2>/dev/null || true
	busy_pids=()
}
trap 'stop_busy; cluster_cleanup' EXIT
cluster_up 2
for ((i = 0; i < busy; i++)); do
	$sess sh -c 'while :; do :; done' &
	busy_pids+=($!)
done
dir=${keep:-$CL_DIR/runs}
echo "# $(uname -n): $(nproc) cores, $busy busy loops, $rounds rounds, $coll; builds: ${builds[*]}; bench $*"
for ((r = 1; r <= rounds; r++)); do
	for ((j = 0; j < ${#builds[@]}; j++)); do
		# even rounds in reverse order (ABBA): the first run of a round
		# is not like the others: no build is always first
		k=$((r % 2 ? j : ${#builds[@]} - 1 - j))
		b=${builds[$k]%%,*} benv=()
		IFS=, read -ra kv <<<"${builds[$k]#"$b"}"
		for x in "${kv[@]}"; do [ -z "$x" ] || benv+=(--env "$x"); done
		mkdir -p "$dir/$k"
		echo "# round $r, build $k, $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
		on_host 1 timeout -k 5 600 "$b/cmd/smddp-run" --hosts "$(cl_hosts 2 1)" \
			--network-interface eth0 --no-tag-output "${envs[@]}" "${benv[@]}" \
			--mpirun-args "$(cl_mpirun_args)" \
			"${wrap[@]}" "$b/cmd/bench/smddp-allreduce-bench" --coll "$coll" "${cmp[@]}" --json "$@" \
			>"$dir/$k/round$r.json"
	done
done
stop_busy
python3 - "$dir" "${#builds[@]}" <<'PY'
import glob, json, os, re, statistics, sys
d, nb = sys.argv[1], int(sys.argv[2])
v = {}
for k in range(nb):
    for f in glob.glob(os.path.join(d, str(k), "*.json")):
        for line in open(f):
            if line.strip():
                r = json.loads(re.sub(r"^\[[0-9]+\] ", "", line))
                v.setdefault((r["size_bytes"], k, r["impl"]), []).append(r["oop_time_us"])
med = statistics.median
hdr = f"{'size':>9}"
for k in range(nb):
    hdr += f" {'b%d' % k:>8} {'b%d min-max' % k:>15} {'mpi' + str(k):>8} {'mpi max':>8}"
print(hdr + "   (us, out of place, median of the rounds)")
for s in sorted({x[0] for x in v}):
    line = f"{s:>9}"
    for k in range(nb):
        a, m = v.get((s, k, "smddp"), [0]), v.get((s, k, "mpi"), [0])
        line += f" {med(a):>8.1f} {'%.1f-%.1f' % (min(a), max(a)):>15} {med(m):>8.1f} {max(m):>8.1f}"
    print(line)
PY
