# collectives.sh - every collective x dtype x op of the smddp backend against gloo, 1 to 4 ranks.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/torch/lib.sh"
need_shim
export SMDDP_TIMEOUT=120
for n in 1 2 3 4; do
	torch_job "collectives-$n" 600 "$n" test_collectives.py
done
finish
