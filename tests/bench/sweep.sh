#!/bin/bash
# tests/bench/sweep.sh - the sizes of a sweep: from -b by -f (or -i), always ending exactly at -e
. "$top_srcdir/tests/bench/lib.sh"

# sizes ARGS...: the size column of a 2-rank allreduce sweep, on one line
sizes() {
	bench 2 -n 1 -w 0 -c 0 "$@"
	[ "$rc" -eq 0 ] || fail "'$*': exit status $rc: $(cat "$T/err")"
	rows "$T/out" | awk '{ printf "%s%s", sep, $1; sep = " " } END { print "" }'
}

# the factor jumps over -e (8 * 8^6 = 2M): 1M is added as the last point
got=$(sizes -b 8 -e 1M -f 8)
[ "$got" = "8 64 512 4096 32768 262144 1048576" ] || fail "-b 8 -e 1M -f 8: $got"
# the factor lands on -e: no size twice
got=$(sizes -b 8 -e 32K -f 8)
[ "$got" = "8 64 512 4096 32768" ] || fail "-b 8 -e 32K -f 8: $got"
# the step jumps over -e
got=$(sizes -b 1K -e 8K -i 3K)
[ "$got" = "1024 4096 7168 8192" ] || fail "-b 1K -e 8K -i 3K: $got"
# one size
got=$(sizes -b 4K -e 4K -f 2)
[ "$got" = "4096" ] || fail "-b 4K -e 4K -f 2: $got"
# the header still says what was asked
grep -q '^# nRanks 2 minBytes 4096 maxBytes 4096 step: 2(factor) ' "$T/out" ||
	fail "header: $(head -n 3 "$T/out")"
echo "ok: the sweep ends at -e"
exit 0
