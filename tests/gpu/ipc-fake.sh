# ipc-fake.sh - lib/cuda/ipc.c's registry of the peers' mappings under threads, without a GPU:
# tests/gpu/ipc-fake on tests/gpu/fakecuda.c.  A slow close of a mapping's last reference holds
# back no open, not even of the same handle, and unmaps nothing that open handed out; threads
# opening and closing at random keep what they hold mapped; retired mappings flushed go to
# the closer thread without waiting for it, as does a single reference dropped to it.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
PROG=$top_builddir/tests/gpu/ipc-fake
. "$top_srcdir/tests/gpu/fakelib.sh"

run_fake ipc 60 1 --
expect_summary ipc 1
finish
