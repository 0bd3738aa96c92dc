# conformance-shm-auto.sh - the matrix on 3 ranks with every message on the
# single-copy path's sizes (SMDDP_SINGLE_COPY_MIN=0) and allreduce's way chosen
# by rank 0's timings (SMDDP_SHM_ALGO=auto): calls of one size switch between
# single copy and the staged pipeline, and every rank must follow rank 0.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_SINGLE_COPY=1 SMDDP_SINGLE_COPY_MIN=0 SMDDP_SHM_ALGO=auto
run_conformance 3 --counts 1,7,1001,65537
