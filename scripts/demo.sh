#!/bin/bash
# scripts/demo.sh - install, build, and run a multi-rank allreduce benchmark on this machine.
# usage: scripts/demo.sh [-n RANKS] [-- BENCH-ARGS...]
set -eu
cd "$(dirname "$0")/.."
nranks=2
if [ "${1:-}" = -n ]; then nranks=$2; shift 2; fi
[ "${1:-}" = -- ] && shift
if [ "$(id -u)" = 0 ] && ! pkg-config --exists libcjson 2>/dev/null; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(cat .ci/packages)
fi
[ -x configure ] || autoreconf -fi
mkdir -p build
cd build
[ -f Makefile ] || ../configure
make -j"$(nproc)"
[ $# -gt 0 ] || set -- -b 8 -e 64M -f 4 -d float32 -o sum
exec ./cmd/smddp-run -n "$nranks" ./cmd/bench/smddp-allreduce-bench "$@"
