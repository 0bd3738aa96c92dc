#!/bin/sh
# rank0-env.sh VAR=VALUE PROGRAM ARGS... - run PROGRAM with VAR=VALUE in rank 0 only (RANK, from
# smddp-run): ranks that differ in one setting, as SMDDP_CUDA_ASYNC's auto decides per rank.
case $RANK in 0) export "$1" ;; esac
shift
exec "$@"
