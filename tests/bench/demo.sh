#!/bin/bash
# tests/bench/demo.sh - scripts/demo.sh: a quiet build (its log named), the table, and one
# verdict line last, against Open MPI when mpirun is there, else saying why not
. "$top_srcdir/tests/bench/lib.sh"

# demo.sh builds in the source tree's build/ (scripts/build.sh): only a test of that build
# may run it, or it would start a second build (distcheck's source tree is read-only)
[ "$top_srcdir/build" -ef "$top_builddir" ] ||
	{ echo "SKIP: this build is not \$top_srcdir/build, the one demo.sh makes"; exit 77; }
unset MAKEFLAGS MFLAGS MAKELEVEL   # its make is not a sub-make of make check's
src=$(cd "$top_srcdir" && pwd)
args=(-b 256K -e 1M -f 16 -n 2 -w 1 -c 1)

# demo ENV...: run demo.sh on 2 ranks with ENV; stdout in $T/out, exit status in $rc
demo() {
	rc=0
	env "$@" timeout 300 "$top_srcdir/scripts/demo.sh" -n 2 -- "${args[@]}" >"$T/out" 2>"$T/err" \
		</dev/null || rc=$?
	[ "$rc" -eq 0 ] || fail "demo.sh $*: exit status $rc: $(cat "$T/out" "$T/err")"
	[ "$(head -n 1 "$T/out")" = "demo: building libsmddp (log: $src/build/demo-build.log) ..." ] ||
		fail "demo.sh: first line: $(head -n 1 "$T/out")"
	[ -s "$src/build/demo-build.log" ] || fail "demo.sh: no build log"
	! grep -q -e '^ *CC' -e '^make' -e '^checking ' "$T/out" "$T/err" ||
		fail "demo.sh: the build was not quiet: $(grep -e '^ *CC' -e '^make' "$T/out" "$T/err" | head)"
	# the table (1 MiB is the last size: -e is always measured)
	grep -q '^ *1048576  *262144  *float32  *sum .* 0$' "$T/out" || fail "demo.sh: no table: $(cat "$T/out")"
	[ "$(grep -c '^verdict: ' "$T/out")" -eq 1 ] || fail "demo.sh: not one verdict: $(cat "$T/out")"
	verdict=$(tail -n 1 "$T/out")
}

# no mpirun: the verdict says why nothing was compared
demo MPIRUN=/nonexistent/mpirun
[[ $verdict =~ ^"verdict: allreduce float32 sum, 1 MiB on 2 ranks: libsmddp busbw "[0-9.e+-]+" GB/s; no comparison with Open MPI: /nonexistent/mpirun not found" ]] ||
	fail "demo.sh without mpirun: $verdict"
echo "ok: demo.sh without mpirun"

if grep -q '^#define HAVE_MPI 1' "$top_builddir/config.h" && command -v mpirun >/dev/null; then
	demo
	grep -q '^# Collective: allreduce (Open MPI)' "$T/out" || fail "demo.sh: no MPI table: $(cat "$T/out")"
	[[ $verdict =~ ^"verdict: allreduce float32 sum, 1 MiB on 2 ranks: libsmddp is "[0-9.]+"x Open MPI, "(faster|on par|slower)" (busbw " ]] ||
		fail "demo.sh with mpirun: $verdict"
	echo "ok: demo.sh against Open MPI: $verdict"
else
	echo "skip: demo.sh against Open MPI: no mpirun, or built without Open MPI"
fi
exit 0
