# initrank.sh - communicators made from a unique id (smddp_comm_init_rank), released locally.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"
INITRANK=$top_builddir/tests/integration/initrank
for n in 1 2 3 4; do
	mkdir -p "$TDIR/ids-$n"
	run_job "basic-$n" 120 "$n" "$INITRANK" basic "$TDIR/ids-$n"
	[ "$status" -eq 0 ] && [ "$(grep -c 'INITRANK-OK rank=' "$TDIR/basic-$n.out")" -eq "$n" ] &&
		pass "$n ranks: two communicators from ids, released in any order" ||
		fail "$n ranks: exit $status"
done
for mode in errors timeout; do
	run_alone "$mode" 60 -- "$INITRANK" "$mode"
	[ "$status" -eq 0 ] && grep -q '^INITRANK-OK' "$TDIR/$mode.out" &&
		pass "$mode" || fail "$mode: exit $status"
done
finish
