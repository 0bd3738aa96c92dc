#!/bin/bash
# scripts/bench-hosts.sh - libsmddp against Open MPI (tcp btl) between namespace hosts on this machine.
#
# usage: scripts/bench-hosts.sh [-H HOSTS] [-N RANKS-PER-HOST] [--rate RATE] [--mtu MTU]
#                               [-r REPEATS] [-C|--coll COLL[,COLL...]] [--env VAR=VALUE]...
#                               [-o DIR] [-- BENCH-ARGS...]
# Makes HOSTS network namespaces on a bridge (tests/cluster/lib.sh), shapes
# every host's link with tc tbf at RATE (e.g. 2gbit) when given, sets the MTU,
# measures raw TCP between h1 and h2 both ways at once (scripts/tcp-rate.py,
# the link's payload rate; with 3 hosts or more also around the ring, which
# link% then uses), then runs smddp-allreduce-bench --compare mpi through smddp-run --hosts
# (mpirun) REPEATS times and prints the medians per size, for each collective
# in turn on the same hosts (-C sendrecv,alltoallv).  Root only; needs a
# build in ./build (or $BUILD) with libfabric and Open MPI.  Everything is removed on exit
# but the runs' JSON lines, which -o DIR keeps as DIR/COLL/runN.json.
set -eu
# BUILD as the caller names it, before the cd below
[ -z "${BUILD:-}" ] || BUILD=$(cd "$BUILD" && pwd) || { echo "$0: BUILD=$BUILD: no such folder" >&2; exit 1; }
cd "$(dirname "$0")/.."
hosts=2 per=1 rate="" mtu="" repeats=3 coll=allreduce envs=() keep=
while [ $# -gt 0 ]; do
	case $1 in
	-H) hosts=$2; shift 2 ;;
	-N) per=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--mtu) mtu=$2; shift 2 ;;
	-r) repeats=$2; shift 2 ;;
	-C | --coll) coll=$2; shift 2 ;;
	--env) envs+=(--env "$2"); shift 2 ;;
	-o) keep=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "usage: $0 [-H HOSTS] [-N PER-HOST] [--rate RATE] [--mtu MTU] [-r REPEATS] [-C|--coll COLL,...] [--env V=X]... [-o DIR] [-- BENCH-ARGS...]" >&2; exit 2 ;;
	esac
done
[ $# -gt 0 ] || set -- -b 8 -e 256M -f 4 -n 10 -w 3 -c 0
[ "$(id -u)" = 0 ] || { echo "$0: network namespaces need root" >&2; exit 1; }
export top_builddir=${BUILD:-$PWD/build} top_srcdir=$PWD
bench=$top_builddir/cmd/bench/smddp-allreduce-bench
[ -x "$bench" ] || { echo "$0: $bench not built: run scripts/demo.sh first" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
. tests/cluster/lib.sh
cluster_up "$hosts" "$rate"
if [ -n "$mtu" ]; then
	for ((i = 1; i <= hosts; i++)); do
		ip -n "$CL_ID-br" link set "h$i" mtu "$mtu"
		ip -n "$CL_ID-h$i" link set eth0 mtu "$mtu"
	done
fi
# The anchor: raw TCP between h1 and h2, both ways at once (median of 3).
tcp=()
for ((i = 1; i <= 3; i++)); do
	bytes=$([ -n "$rate" ] && echo 268435456 || echo 1073741824)
	on_host 2 timeout 150 python3 scripts/tcp-rate.py 10.77.0.2 10.77.0.1 "$bytes" >"$CL_DIR/tcp2" &
	tcp+=("$(on_host 1 timeout 150 python3 scripts/tcp-rate.py 10.77.0.1 10.77.0.2 "$bytes")")
	wait $! || true
done
tcp_mbs=$(printf '%s\n' "${tcp[@]}" | sort -n | sed -n 2p)
echo "# link h1-h2: raw TCP both ways at once, $((bytes >> 20)) MiB each way: ${tcp_mbs} MB/s per direction (median of ${tcp[*]})"
# With 3 hosts or more, also around the ring, every hI to the next at once
# (what a ring's step moves; on a small machine more streams share the
# cores): the slowest host of a round, median of 3; link% is against it.
if [ "$hosts" -ge 3 ]; then
	ring=()
	for ((i = 1; i <= 3; i++)); do
		for ((j = 1; j <= hosts; j++)); do
			on_host "$j" timeout 150 python3 scripts/tcp-rate.py "10.77.0.$j" \
				"10.77.0.$((j % hosts + 1))" "$bytes" >"$CL_DIR/ring$j" &
		done
		wait || true
		ring+=("$(cat "$CL_DIR"/ring* | sort -n | head -1)")
	done
	tcp_mbs=$(printf '%s\n' "${ring[@]}" | sort -n | sed -n 2p)
	echo "# ring h1-..-h$hosts: raw TCP, every host to the next at once: ${tcp_mbs} MB/s per host (median of ${ring[*]}, each the slowest host's)"
fi
for c in ${coll//,/ }; do
	out="$CL_DIR/runs-$c" # bench-median.py reads every file there: one collective's
	mkdir -p "$out"
	for ((i = 1; i <= repeats; i++)); do
		on_host 1 timeout -k 5 1200 "$top_builddir/cmd/smddp-run" --hosts "$(cl_hosts "$hosts" "$per")" \
			--network-interface eth0 --no-tag-output "${envs[@]}" \
			--mpirun-args "$(cl_mpirun_args)" \
			"$bench" --coll "$c" --compare mpi --json "$@" >"$out/run$i.json"
		echo "$c: run $i of $repeats done" >&2
	done
	python3 scripts/bench-median.py "$out" \
		"$c, $hosts hosts x $per ranks, link ${rate:-unshaped}, MTU ${mtu:-1500}" "$tcp_mbs"
	if [ -n "$keep" ]; then
		mkdir -p "$keep/$c"
		cp "$out"/*.json "$keep/$c/"
	fi
done
