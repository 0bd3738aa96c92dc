# conformance-signals.sh - the matrix on 3 ranks, each interrupted by SIGALRM every
# 200 us (no SA_RESTART): every wait and system call must survive EINTR.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
run_conformance 3 --signals --counts 0,1,7,1001,65537
