#!/bin/bash
# scripts/bench-p2p-node.sh - sendrecv and alltoallv against Open MPI on one node: medians of repeated runs.
#
# usage: scripts/bench-p2p-node.sh [-n RANKS,...] [-C COLL,...] [-r REPEATS] [-o DIR]
#                                  [-m MPIRUN-PLACEMENT] BUILD-DIR [-- BENCH-ARGS...]
# For every rank count (default 2,4) and collective (default
# sendrecv,alltoallv), runs BUILD-DIR/cmd/bench/smddp-allreduce-bench
# --compare mpi --json REPEATS times (default 3) through mpirun, and prints
# the median table of each (scripts/bench-median.py: MPI's time / ours, and
# the spread of the single runs).  The runs' JSON lines stay in DIR
# (default: a new folder under ${TMPDIR:-/tmp}, named on stderr), as
# DIR/COLL-nRANKS/runI.json.  Needs bash, mpirun and python3 only, so that
# it runs from a build tree on a machine that has nothing else.
#
# The runs of one configuration follow each other directly and each run
# has libsmddp and MPI side by side in the same processes: a ratio compares
# the two under the same load.  Ranks are not bound (--bind-to none) and
# may oversubscribe the cores, unless -m gives mpirun's placement instead
# ("--bind-to core": neighbouring cores; "--map-by socket --bind-to core":
# one socket each); say which when quoting the numbers.
#
# The roof of the large sizes: before the runs of each rank count, that
# many processes copy ROOF_BYTES (default 256 MiB) at once, with memcpy
# and then from another process with process_vm_readv as the single copy
# does (scripts/memcpy-rate.c, compiled with cc where there is one), and
# the header gives each one's rate; a single-copy sendrecv moves its
# bytes with one such copy per rank.
set -eu
usage() {
	echo "usage: $0 [-n RANKS,...] [-C COLL,...] [-r REPEATS] [-o DIR] [-m MPIRUN-PLACEMENT]" \
		"BUILD-DIR [-- BENCH-ARGS...]"
}
here=$(cd "$(dirname "$0")" && pwd)
nlist=2,4 colls=sendrecv,alltoallv repeats=3 keep= place="--bind-to none"
while [ $# -gt 0 ]; do
	case $1 in
	-n) nlist=$2; shift 2 ;;
	-C | --coll) colls=$2; shift 2 ;;
	-r) repeats=$2; shift 2 ;;
	-o) keep=$2; shift 2 ;;
	-m) place=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	--) break ;;
	-*) usage >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { usage >&2; exit 2; }
build=$1
shift
if [ $# -gt 0 ]; then
	[ "$1" = -- ] || { usage >&2; exit 2; }
	shift
fi
[ $# -gt 0 ] || set -- -b 8 -e 256M -f 2 -n 20 -w 5
bench=$build/cmd/bench/smddp-allreduce-bench
[ -x "$bench" ] || { echo "$0: $bench: not built" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "$0: mpirun not found (Debian: openmpi-bin)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "$0: python3 not found" >&2; exit 1; }
if [ -n "$keep" ]; then
	[ -z "$(ls -A "$keep" 2>/dev/null)" ] || { echo "$0: -o $keep: not empty" >&2; exit 2; }
	mkdir -p "$keep"
	out=$keep
else
	out=$(mktemp -d "${TMPDIR:-/tmp}/smddp-p2p.XXXXXX")
fi
echo "$0: JSON runs in $out" >&2
# a root shell (containers, CI) is allowed; harmless otherwise
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "# $(uname -n): $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +'%F %H:%M UTC'); mpirun $place; bench args: $*"
roof=
tmp=$(mktemp -d "${TMPDIR:-/tmp}/smddp-roof.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if command -v cc >/dev/null && cc -O2 -o "$tmp/memcpy-rate" "$here/memcpy-rate.c" 2>"$tmp/cc.err"; then
	roof=$tmp/memcpy-rate
else
	echo "$0: no memcpy roof (no cc, or it failed: $(head -1 "$tmp/cc.err" 2>/dev/null))" >&2
fi
for n in ${nlist//,/ }; do
	if [ -n "$roof" ]; then
		for how in memcpy cma; do
			pids=()
			for ((i = 0; i < n; i++)); do
				"$roof" "${ROOF_BYTES:-268435456}" 10 ${how#memcpy} >"$tmp/roof$i" &
				pids+=($!)
			done
			bad=0
			for p in "${pids[@]}"; do wait "$p" || bad=$((bad + 1)); done
			echo "# $how of ${ROOF_BYTES:-268435456} bytes, $n processes at once (unbound), GB/s each:" \
				"$(cat "$tmp"/roof* | tr '\n' ' ')$([ "$bad" -eq 0 ] || echo "($bad failed)")"
			rm -f "$tmp"/roof*
		done
	fi
	for c in ${colls//,/ }; do
		dir=$out/$c-n$n
		mkdir -p "$dir"
		for ((i = 1; i <= repeats; i++)); do
			# every wait in the bench has a deadline (SMDDP_TIMEOUT); this
			# bounds a hung MPI side too.  The port lies below Linux's
			# ephemeral range (32768-60999), where MPI's own connections
			# take theirs; a port still taken by another program costs a
			# second try on another.
			for try in 1 2 3; do
				port=$((20000 + RANDOM % 12000))
				timeout -k 10 1800 mpirun -np "$n" --oversubscribe $place \
					-x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$port \
					"$bench" --coll "$c" --compare mpi --json "$@" \
					>"$dir/run$i.json" 2>"$out/run.err" && break
				grep -q "cannot listen" "$out/run.err" || break
			done
			cat "$out/run.err" >&2
			rm -f "$out/run.err"
			echo "$c, $n ranks: run $i of $repeats done" >&2
		done
		python3 "$here/bench-median.py" "$dir" "$c, $n ranks on one node"
	done
done
