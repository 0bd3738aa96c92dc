# conformance-eager.sh - the matrix on 3 ranks at the edge of the message way
# of small rooted calls (lib/coll/coll.c, EAGER_MAX 4096 bytes): 512 elements
# of 8 bytes go as messages, 513 through the barrier; roots 0 and 2, so that
# calls of different roots follow one another with no barrier between
# (SMDDP_CHECK_COLL=0: its comparison would add one).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_CHECK_COLL=0
run_conformance 3 --counts 1,512,513
