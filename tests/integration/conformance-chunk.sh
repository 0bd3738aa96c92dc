# conformance-chunk.sh - the matrix on 3 ranks with the smallest pipeline chunks
# (SMDDP_SHM_CHUNK=4160, not a power of two), no spinning (SMDDP_SPIN=0) and
# the cross-rank argument check on (SMDDP_CHECK_COLL=1, which must not object)
# and every message through the shared segment (SMDDP_SINGLE_COPY=0),
# so that counts cross many chunk boundaries and every wait sleeps.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_SHM_CHUNK=4160 SMDDP_SPIN=0 SMDDP_CHECK_COLL=1 SMDDP_SINGLE_COPY=0
run_conformance 3 --counts 1,7,1001,4099,65537
