#!/bin/bash
# lab/shm/way-probe.sh - build lab/shm/way-probe.c against build/ and run it under mpirun, ranks bound to cores.
#
# usage: lab/shm/way-probe.sh [-n RANKS] CALLS COLLS SIZE...
#   e.g. lab/shm/way-probe.sh 40 ar-oop,mpi-ar-oop,ar-ip,mpi-ar-ip 256K 1M 4M 16M
# One mpirun per size.  SMDDP_SHM_ALGO=single or staged in the environment
# forces a way (passed on to the ranks), as auto (the default) chooses.
# Prints way-probe's table per size: min and median us, and the medians of
# the calls made while the cores did and did not share a cache (the round
# trip of a cache line between ranks 0 and 1, measured before each block).
set -eu
cd "$(dirname "$0")/../.."
n=2
if [ "${1:-}" = -n ]; then n=$2; shift 2; fi
[ $# -ge 3 ] || { echo "usage: $0 [-n RANKS] CALLS COLLS SIZE..." >&2; exit 2; }
calls=$1 colls=$2; shift 2
lib=$PWD/build/lib/.libs
[ -e "$lib/libsmddp.so" ] || { echo "$0: build/ has no libsmddp: run scripts/demo.sh first" >&2; exit 1; }
bin=$(mktemp "${TMPDIR:-/tmp}/way-probe.XXXXXX")
trap 'rm -f "$bin"' EXIT
mpicc -O2 -I lib/include -o "$bin" lab/shm/way-probe.c -L "$lib" -lsmddp -Wl,-rpath,"$lib"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bind=core
[ "$n" -le "$(nproc)" ] || bind=none
for size in "$@"; do
	bytes=$(numfmt --from=iec "$size")
	mpirun -np "$n" --bind-to "$bind" --oversubscribe -x SMDDP_SHM_ALGO="${SMDDP_SHM_ALGO:-auto}" \
		-x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$((20000 + RANDOM % 12000)) \
		"$bin" "$bytes" "$calls" "$colls"
done
