#!/bin/bash
# scripts/demo.sh - install, build, and run a multi-rank allreduce benchmark on this machine.
# usage: scripts/demo.sh [-n RANKS] [-- BENCH-ARGS...]
set -eu
cd "$(dirname "$0")/.."
nranks=2
if [ "${1:-}" = -n ]; then nranks=$2; shift 2; fi
[ "${1:-}" = -- ] && shift
./scripts/build.sh
cd build
[ $# -gt 0 ] || set -- -b 8 -e 64M -f 4 -d float32 -o sum
exec ./cmd/smddp-run -n "$nranks" ./cmd/bench/smddp-allreduce-bench "$@"
