# conformance-single-copy.sh - the matrix on 3 ranks with every message, even one
# element, on the single-copy path (SMDDP_SINGLE_COPY_MIN=0): empty partitions,
# odd counts, both in-place forms, the staged fall-back of in-place
# reduce_scatter decided alike by all ranks, in-place alltoall's pairwise swap
# (every rank in place, or only the odd ones); allreduce always the
# single-copy way (SMDDP_SHM_ALGO=single: conformance-shm-auto.sh mixes both).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_SINGLE_COPY=1 SMDDP_SINGLE_COPY_MIN=0 SMDDP_SHM_ALGO=single
run_conformance 3 --counts 1,7,1001,65537
