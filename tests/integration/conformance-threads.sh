# conformance-threads.sh - the matrix on 4 ranks, run at the same time on the world
# and on a copy of it from a second thread of every rank.
. "$top_srcdir/tests/integration/testlib.sh"
run_conformance 4 --threads --skip-split --counts 0,1,7,1001,65537
