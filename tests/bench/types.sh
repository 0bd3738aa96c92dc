#!/bin/bash
# tests/bench/types.sh - -d all -o all: every dtype and op, checked, 0 wrong
. "$top_srcdir/tests/bench/lib.sh"

bench 3 --coll allreduce -d all -o all -b 64 -e 4K -f 64 -n 1 -w 0
expect_clean_table "allreduce -d all -o all"
got=$(rows "$T/out" | wc -l)
[ "$got" -eq $((10 * 5 * 2)) ] || fail "allreduce: $got rows, not 100"
for t in int8 uint8 int32 uint32 int64 uint64 float16 bfloat16 float32 float64; do
	for o in sum prod min max avg; do
		rows "$T/out" | awk -v t=$t -v o=$o '$3 == t && $4 == o { f = 1 } END { exit !f }' ||
			fail "no row for $t $o"
	done
done

bench 2 --coll reducescatter -d all -o all -b 64 -e 64 -n 1 -w 0
expect_clean_table "reducescatter -d all -o all"
bench 2 --coll reduce -d all -o all -r all -b 64 -e 64 -n 1 -w 0
expect_clean_table "reduce -d all -o all -r all"

# nccl-tests' names are accepted too
bench 2 -d half -b 64 -e 64 -n 1 -w 0
expect_clean_table "-d half"
rows "$T/out" | awk '$3 != "float16" { exit 1 }' || fail "-d half: $(rows "$T/out")"
exit 0
