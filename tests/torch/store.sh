# store.sh - torch's TCPStore clients against the store smddp-run serves
# (--store launcher): every query, from several ranks at once.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/torch/lib.sh"
need_shim
LAUNCH_OPTS="--store launcher" torch_job store-3 120 3 test_store.py
finish
