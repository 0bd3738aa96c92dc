# conformance-chunk-n2.sh - conformance-chunk.sh on 2 ranks: the staged
# allreduce and reduce of two ranks, where each rank reduces every piece
# itself (one barrier a piece, no copy out), over many pieces of 4160 bytes.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_SHM_CHUNK=4160 SMDDP_SPIN=0 SMDDP_CHECK_COLL=1 SMDDP_SINGLE_COPY=0
run_conformance 2 --counts 1,7,1001,4099,65537
