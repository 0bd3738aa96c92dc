#!/bin/bash
# soak.sh - RSS and open descriptors stay flat over many small allreduces and many
# communicator lifetimes (a short run; scripts/soak.sh runs the long one).
FAIL_GOES_ON=1
. "$top_srcdir/tests/lib.sh"
RUN=$top_builddir/cmd/smddp-run
PROG=$top_builddir/tests/integration/soak
out=$(timeout -k 5 300 "$RUN" -n 2 --timeout 280 "$PROG" "${SOAK_CALLS:-20000}" \
	"${SOAK_LIFETIMES:-100}" 2>&1)
st=$?
echo "$out" | grep -v "^\[.\] SOAK rank" | head -20
echo "$out" | grep "n=.*0 rss" | tail -4
[ "$st" -eq 0 ] || fail "soak exited $st"
for r in 0 1; do
	echo "$out" | grep -q "SOAK-OK rank=$r" && pass "rank $r: flat" || fail "rank $r: $(echo "$out" | grep "SOAK-BAD rank=$r" | head -1)"
done
finish
