# lifecycle.sh - 30 split/use/destroy cycles leak no descriptor or /dev/shm mapping,
# destroying the world unmaps everything, and smddp_init works again afterwards.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
run_conformance 3 --lifecycle
