#!/bin/bash
# scripts/bench-hosts-p2p.sh - sendrecv and alltoallv against Open MPI between namespace hosts.
#
# usage: scripts/bench-hosts-p2p.sh [--rates RATE,...] [-N PER-HOST,...] [-r REPEATS]
#                                   [-o DIR] [-- BENCH-ARGS...]
# For every link rate (default 2gbit,unshaped; "unshaped" means no tc tbf)
# and ranks per host (default 1,2) on 2 namespace hosts, runs
# scripts/bench-hosts.sh -C sendrecv,alltoallv: libsmddp (over its sockets
# by default; --env SMDDP_NET_TRANSPORT=fabric for libfabric's tcp;ofi_rxm)
# against Open MPI's tcp btl, side by side in the same
# processes, REPEATS times (default 3), and prints each median table with
# the link's raw TCP rate measured on the same hosts just before (link% =
# busbw as a percentage of it).  Every configuration makes its own
# namespaces and removes them on any exit (tests/cluster/lib.sh); -o DIR
# keeps the JSON lines as DIR/RATE-2xN/COLL/runI.json.  Root only; needs
# ./build configured with libfabric and Open MPI.
#
# Why 2gbit and not 10gbit: on a small machine the veth pair between two
# namespaces does not carry much more than 10 Gbit/s anyway (the kernel's
# TCP work runs on the same cores as the ranks), so a 10gbit shaper would
# measure the same as none; 2gbit makes the link the limit, as between
# real hosts.  Pass --rates 10gbit on a larger machine.
set -eu
cd "$(dirname "$0")/.."
rates=2gbit,unshaped pers=1,2 repeats=3 keep=""
usage() {
	echo "usage: $0 [--rates RATE,...] [-N PER-HOST,...] [-r REPEATS] [-o DIR] [-- BENCH-ARGS...]"
}
while [ $# -gt 0 ]; do
	case $1 in
	--rates) rates=$2; shift 2 ;;
	-N) pers=$2; shift 2 ;;
	-r) repeats=$2; shift 2 ;;
	-o) keep=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	--) shift; break ;;
	*) usage >&2; exit 2 ;;
	esac
done
# 8 B to 256 MiB by factors of 2; -c 0: correctness is the tests' job
# (tests/cluster/net-p2p.sh), and checking would halve the rate measured.
[ $# -gt 0 ] || set -- -b 8 -e 256M -f 2 -n 5 -w 2 -c 0
echo "# $(uname -n): $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +'%F %H:%M UTC'); bench args: $*"
for rate in ${rates//,/ }; do
	for per in ${pers//,/ }; do
		args=(-H 2 -N "$per" -r "$repeats" -C "sendrecv,alltoallv")
		[ "$rate" = unshaped ] || args+=(--rate "$rate")
		[ -z "$keep" ] || args+=(-o "$keep/$rate-2x$per")
		echo "## 2 hosts x $per ranks, link $rate, from $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1 /proc/loadavg)"
		./scripts/bench-hosts.sh "${args[@]}" -- "$@"
	done
done
