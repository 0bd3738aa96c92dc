#!/bin/bash
# scripts/bench-vs-mpi.sh - libsmddp against Open MPI, side by side in the same processes,
# repeated, medians per size: the measurement behind the tables of docs/PERFORMANCE.md.
# usage: scripts/bench-vs-mpi.sh [-n RANKS] [-r REPEATS] [-C|--coll COLLECTIVE] [-o DIR] [-- BENCH-ARGS...]
# -o DIR keeps the runs' --json output there (runN.json) for scripts/bench-plot.py.
# Needs a build in ./build (scripts/demo.sh makes one) configured with Open MPI.
set -eu
here=$PWD
cd "$(dirname "$0")/.."
nranks=2 repeats=5 coll=allreduce keep=
while [ $# -gt 0 ]; do
	case $1 in
	-n) nranks=$2; shift 2 ;;
	-r) repeats=$2; shift 2 ;;
	-C | --coll) coll=$2; shift 2 ;;
	-o) case $2 in /*) keep=$2 ;; *) keep=$here/$2 ;; esac; shift 2 ;;
	--) shift; break ;;
	*) echo "usage: $0 [-n RANKS] [-r REPEATS] [-C|--coll COLLECTIVE] [-o DIR] [-- BENCH-ARGS...]" >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || set -- -b 8 -e 256M -f 4 -n 20 -w 5 -c 0
bench=build/cmd/bench/smddp-allreduce-bench
[ -x "$bench" ] || { echo "$0: $bench not built: run scripts/demo.sh first" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "$0: mpirun not found: apt-get install openmpi-bin" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ -n "$keep" ]; then
	# bench-median.py reads every file there: only this run's
	[ -z "$(ls -A "$keep" 2>/dev/null)" ] || { echo "$0: -o $keep: not empty" >&2; exit 2; }
	mkdir -p "$keep"
	out=$keep
else
	out=$(mktemp -d "${TMPDIR:-/tmp}/smddp-bench.XXXXXX")
	trap 'rm -rf "$out"' EXIT
fi
for i in $(seq 1 "$repeats"); do
	# below Linux's ephemeral range (32768-60999), where MPI's own
	# connections take their ports (scripts/bench-p2p-node.sh)
	port=$((20000 + RANDOM % 12000))
	# --oversubscribe: more ranks than cores is part of what is measured.
	timeout 1200 mpirun -np "$nranks" --oversubscribe --bind-to none \
		-x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$port \
		"$bench" --coll "$coll" --compare mpi --json "$@" >"$out/run$i.json"
	echo "run $i of $repeats done" >&2
done
python3 scripts/bench-median.py "$out" "$coll, $nranks ranks"
# issue 38's goal is every run at Open MPI's time or better, not the median
[ "$repeats" -lt 2 ] || python3 scripts/bench-median.py --lowest "$out" "$coll, $nranks ranks"
