# conformance-n3.sh - every collective, dtype, op, count and placement on 3 rank(s).
. "$top_srcdir/tests/integration/testlib.sh"
run_conformance 3
