# conformance-threads.sh - the matrix on 4 ranks, run at the same time on the world
# and on a copy of it from a second thread of every rank, with the single-copy
# path taken from 4 KiB per rank up (SMDDP_SINGLE_COPY_MIN=4096).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
export SMDDP_SINGLE_COPY_MIN=4096
# make check-sanitize's TSan build, some 10 times slower, runs a smaller
# matrix: THREADS_RANKS ranks, THREADS_COUNTS counts.
run_conformance "${THREADS_RANKS:-4}" --threads --skip-split --counts "${THREADS_COUNTS:-0,1,7,1001,65537}"
