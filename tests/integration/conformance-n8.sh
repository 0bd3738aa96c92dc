# conformance-n8.sh - every collective, dtype, op, count and placement on 8 rank(s).
. "$top_srcdir/tests/integration/testlib.sh"
run_conformance 8
