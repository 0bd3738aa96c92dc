# conformance-n3.sh - every collective, dtype, op, count and placement on 3 rank(s).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
run_conformance 3
