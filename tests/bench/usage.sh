#!/bin/bash
# tests/bench/usage.sh - --help, --version and command-line errors (exit 2 + "Try")
. "$top_srcdir/tests/bench/lib.sh"

out=$(timeout 60 "$BENCH" --help) || fail "--help: exit status $?"
grep -q '^Usage: smddp-allreduce-bench ' <<<"$out" || fail "--help: $out"
out=$(timeout 60 "$BENCH" -h) || fail "-h: exit status $?"
grep -q -- '--minbytes' <<<"$out" || fail "-h: $out"
out=$(timeout 60 "$BENCH" -V) || fail "-V: exit status $?"
grep -q '^smddp-allreduce-bench from libsmddp [0-9][0-9.]*$' <<<"$out" || fail "-V: $out"
[ "$(timeout 60 "$BENCH" --version)" = "$out" ] || fail "--version differs from -V"

# bad ARGS...: exit 2, one error line and the "Try" line on stderr, nothing on stdout
bad() {
	local rc=0
	timeout 60 "$BENCH" "$@" >"$T/out" 2>"$T/err" </dev/null || rc=$?
	[ "$rc" -eq 2 ] || fail "'$*': exit status $rc, not 2"
	[ ! -s "$T/out" ] || fail "'$*': stdout: $(cat "$T/out")"
	[ "$(wc -l <"$T/err")" -eq 2 ] || fail "'$*': stderr: $(cat "$T/err")"
	grep -q '^smddp-allreduce-bench: ..*' "$T/err" || fail "'$*': stderr: $(cat "$T/err")"
	[ "$(tail -n 1 "$T/err")" = "Try 'smddp-allreduce-bench --help'." ] ||
		fail "'$*': no Try line: $(cat "$T/err")"
}
bad --bogus
bad -x
bad extra-argument
bad -b
bad -b 1X
bad -b 1M -e 1K
bad -n 0
bad -n abc
bad -w -1
bad -c 2
bad -z 2
bad -f 0
bad -d float128
bad -o xor
bad -C allreduce2
bad --coll allreduce2
bad --coll 1
bad -C 2
bad -C -1
bad -a 4
bad -m x
bad -G -1
bad -p 2
bad -y 2
bad -R 3
bad -T -1
bad -J ''
bad --offset 2G
bad --offset x
bad --offset 4100
bad -J
bad -r -1
bad -g 2
bad --tolerance 101
bad --min-busbw abc
bad --compare nccl
bad --json=1
if grep -q '^#define HAVE_MPI 1' "$top_builddir/config.h"; then
	# built with Open MPI: outside mpirun, --compare mpi is a usage error
	(unset OMPI_COMM_WORLD_SIZE; bad --compare mpi)
else
	bad --compare mpi
	grep -q 'built without Open MPI' "$T/err" || fail "--compare mpi: $(cat "$T/err")"
fi
exit 0
