#!/bin/bash
# tests/bench/collectives.sh - every collective, checked, on 2 and 3 ranks (and with
# --offset): 0 wrong, exit 0
. "$top_srcdir/tests/bench/lib.sh"

for n in 2 3; do
	bench "$n" --coll all -r all -b 8 -e 256K -f 8 -n 2 -w 1 -c 1
	expect_clean_table "-C all on $n ranks"
	for c in allreduce allgather reducescatter broadcast reduce alltoall sendrecv alltoallv; do
		grep -q "^# Collective: $c " "$T/out" || fail "$n ranks: no table for $c"
	done
	# 6 sizes (8 B to 256 KiB by 8): 6 unrooted collectives + 2 rooted ones on every root
	want=$((6 * (6 + 2 * n)))
	got=$(rows "$T/out" | wc -l)
	[ "$got" -eq "$want" ] || fail "$n ranks: $got rows, not $want"
	# nccl-tests' sizes (float32): the whole buffer; count per rank for
	# allgather and reducescatter, per peer for alltoall (nominal for
	# alltoallv), the whole message for sendrecv.
	awk -v n="$n" '
		/^# Collective: / { c = $3; next }
		/^#/ || NF == 0 { next }
		c == "allgather" || c == "reducescatter" || c == "alltoall" || c == "alltoallv" {
			if ($1 != $2 * 4 * n) { print c ": " $0; bad = 1 }; next }
		{ if ($1 != $2 * 4) { print c ": " $0; bad = 1 } }
		END { exit bad }' "$T/out" >&2 || fail "$n ranks: size and count disagree"
done
# --offset: each rank's buffers elsewhere in their allocations (4112: off the
# page, 16 past it; rank 2 is 32 past), every type, still 0 wrong in and out of place
bench 3 --coll all -d all -b 16 -e 64K -f 64 -n 2 -w 1 -c 1 --offset 4112
expect_clean_table "--offset 4112 on 3 ranks"
grep -q "^# --offset 4112: rank r's buffers start r x 4112 bytes" "$T/out" ||
	fail "--offset: the header does not say so"
exit 0
