# groups.sh - sub-groups beside the world, and 300 create/use/destroy cycles.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/torch/lib.sh"
need_shim
export SMDDP_TIMEOUT=120
for n in 1 2 4; do
	torch_job "groups-$n" 600 "$n" test_groups.py
done
finish
