#!/bin/bash
# tests/bench/mpi.sh - --compare mpi under mpirun: a second table with the busbw ratio
. "$top_srcdir/tests/bench/lib.sh"

grep -q '^#define HAVE_MPI 1' "$top_builddir/config.h" ||
	{ echo "SKIP: built without Open MPI"; exit 77; }
command -v mpirun >/dev/null || { echo "SKIP: mpirun is not installed"; exit 77; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# libsmddp finds its rank in OMPI_COMM_WORLD_*, and its rendezvous in MASTER_*.
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + $$ % 20000))
rc=0
timeout 120 mpirun -np 2 --oversubscribe --bind-to none -x MASTER_ADDR -x MASTER_PORT \
	"$BENCH" --compare mpi --coll all -d float32 -b 8 -e 32K -f 16 -n 2 -w 1 \
	>"$T/out" 2>"$T/err" </dev/null || rc=$?
[ "$rc" -eq 0 ] || fail "mpirun: exit status $rc: $(cat "$T/err")"
grep -q '^# Collective: allreduce (libsmddp)' "$T/out" || fail "no libsmddp table: $(cat "$T/out")"
grep -q '^# Collective: allreduce (Open MPI)' "$T/out" || fail "no MPI table: $(cat "$T/out")"
for c in sendrecv alltoallv; do
	grep -q "^# Collective: $c (Open MPI)" "$T/out" || fail "no MPI table for $c: $(cat "$T/out")"
done
[ "$(grep -c '^# Out of bounds values : 0 OK$' "$T/out")" -eq 2 ] ||
	fail "not two clean summaries: $(grep '^# Out' "$T/out")"
# the MPI rows carry two ratio columns after nccl-tests' 13
[ "$(rows "$T/out" | awk 'NF == 15' | wc -l)" -eq 32 ] || fail "ratio rows: $(cat "$T/out")"

# scripts/bench-p2p-node.sh, from this build tree: 2 rank counts x 2
# collectives x 2 runs, a median table each, the JSON kept under -o.
rc=0
timeout 300 "$top_srcdir/scripts/bench-p2p-node.sh" -n 1,2 -r 2 -o "$T/p2p" "$top_builddir" \
	-- -b 8 -e 4K -f 8 -n 2 -w 1 >"$T/out" 2>"$T/err" </dev/null || rc=$?
[ "$rc" -eq 0 ] || fail "bench-p2p-node.sh: exit status $rc: $(cat "$T/err")"
[ "$(grep -c '^# \(sendrecv\|alltoallv\), [12] ranks on one node, median of 2 runs' "$T/out")" -eq 4 ] ||
	fail "bench-p2p-node.sh: not 4 tables: $(cat "$T/out")"
[ "$(grep -Ec '^ *[0-9]+( +[0-9.]+){6}$' "$T/out")" -eq 16 ] ||
	fail "bench-p2p-node.sh: not 4 rows of 7 numbers per table: $(cat "$T/out")"
[ "$(ls "$T"/p2p/*/run*.json | wc -l)" -eq 8 ] || fail "bench-p2p-node.sh -o: $(ls -R "$T/p2p")"
exit 0
