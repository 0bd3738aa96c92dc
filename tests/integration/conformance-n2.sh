# conformance-n2.sh - every collective, dtype, op, count and placement on 2 rank(s).
. "$top_srcdir/tests/integration/testlib.sh"
run_conformance 2
