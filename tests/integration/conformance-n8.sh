# conformance-n8.sh - the conformance matrix on 8 ranks (oversubscribed on small
# machines, hence a smaller "large" count: 131075 instead of 262147).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
run_conformance 8 --large 131075
