# conformance-n1.sh - every collective, dtype, op, count and placement on 1 rank(s).
. "$top_srcdir/tests/integration/testlib.sh"
run_conformance 1
