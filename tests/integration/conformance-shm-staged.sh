# conformance-shm-staged.sh - the matrix on 3 ranks with every message on the
# single-copy path's sizes (SMDDP_SINGLE_COPY_MIN=0) but every call that may go
# either way forced the staged way (SMDDP_SHM_ALGO=staged).  The largest count
# makes an alltoall 4 MiB a rank or more, which may go either way (in place on
# every rank or only on some), and 8 MiB with 8-byte elements, where its
# copies into the output stream past the cache.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_SINGLE_COPY=1 SMDDP_SINGLE_COPY_MIN=0 SMDDP_SHM_ALGO=staged
run_conformance 3 --counts 1,7,1001,65537,349529
