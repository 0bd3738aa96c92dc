# conformance-reuse.sh - 200 rounds of every collective on 4 ranks with 512 KiB per rank
# (the single-copy path), each send buffer wiped the moment its call returns:
# no peer may read a buffer after the call that lent it has returned.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
run_conformance 4 --reuse 200 --skip-split
