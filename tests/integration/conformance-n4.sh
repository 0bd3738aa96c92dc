# conformance-n4.sh - every collective, dtype, op, count and placement on 4 rank(s).
. "$top_srcdir/tests/integration/testlib.sh"
run_conformance 4
