#!/bin/bash
# tests/bench/p2p.sh - sendrecv and alltoallv: every dtype, odd counts, 1, 4 and 5 ranks, table and JSON
. "$top_srcdir/tests/bench/lib.sh"

command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }

# 3 B to 50421 B by 7: odd counts, and alltoallv blocks of 0 elements
# (the ramp's first blocks at small counts).
for n in 1 4 5; do
	for c in sendrecv alltoallv; do
		bench "$n" --coll "$c" -d all -b 3 -e 50421 -f 7 -n 2 -w 1 -c 1
		expect_clean_table "-C $c -d all on $n ranks"
		grep -q "^# Collective: $c (libsmddp)" "$T/out" || fail "$c on $n ranks: no table"
	done
done

# JSON on 4 ranks: sendrecv's busbw is its algbw (nccl-tests' factor 1);
# alltoallv moves as much as alltoall of the same size, with alltoall's
# factor (n-1)/n; neither has an in-place half (null).
bench 4 --coll sendrecv -b 8 -e 256K -f 32 -n 2 -w 1 --json
[ "$rc" -eq 0 ] || fail "sendrecv --json: exit status $rc: $(cat "$T/err")"
cp "$T/out" "$T/sendrecv.json"
bench 4 --coll alltoallv -b 8 -e 256K -f 32 -n 2 -w 1 --json
[ "$rc" -eq 0 ] || fail "alltoallv --json: exit status $rc: $(cat "$T/err")"
python3 - "$T/sendrecv.json" "$T/out" <<'PY' || fail "--json: $(cat "$T/sendrecv.json" "$T/out")"
import json, sys
for path, coll in zip(sys.argv[1:], ["sendrecv", "alltoallv"]):
    lines = open(path).read().splitlines()
    assert len(lines) == 4, "%s: %d lines" % (coll, len(lines))  # 8 B .. 256 KiB by 32
    for line in lines:
        o = json.loads(line)
        assert o["collective"] == coll and o["impl"] == "smddp" and o["nranks"] == 4, line
        assert o["redop"] == "none" and o["root"] == -1 and o["oop_wrong"] == 0, line
        if coll == "sendrecv":
            assert o["size_bytes"] == o["count"] * 4, line
            assert o["oop_busbw_gbps"] == o["oop_algbw_gbps"], line
        else:
            assert o["size_bytes"] == o["count"] * 4 * 4, line
            assert abs(o["oop_busbw_gbps"] - o["oop_algbw_gbps"] * 3 / 4) <= \
                1e-5 * o["oop_algbw_gbps"], line
        for k in ("time_us", "algbw_gbps", "busbw_gbps", "wrong"):
            assert o["ip_" + k] is None, line
PY

# scripts/bench-median.py takes them (no in-place half: one side, with
# the spread of the single runs; an MPI row made from ours, since mpirun
# may be absent here: tests/bench/mpi.sh runs the real thing).
mkdir "$T/runs"
{ cat "$T/out"; sed 's/"impl":"smddp"/"impl":"mpi"/; s/}$/,"oop_ratio":1.0,"ip_ratio":null}/' \
	"$T/out"; } >"$T/runs/run1.json"
out=$(python3 "$top_srcdir/scripts/bench-median.py" "$T/runs" test) ||
	fail "bench-median.py on alltoallv: $out"
grep -q '^ *size *smddp *mpi *ratio *min *max *busbw$' <<<"$out" || fail "bench-median.py header: $out"
[ "$(grep -Ec '^ *[0-9]+ +[0-9.]+ +[0-9.]+ +1\.00 +1\.00 +1\.00 +[0-9.]+$' <<<"$out")" -eq 4 ] ||
	fail "bench-median.py rows: $out"
echo "ok: bench-median.py takes a collective without an in-place form"

# A saved alltoallv run (its in-place busbw null) is a usable --baseline.
bench 4 --coll alltoallv -b 1M -e 1M -n 1 -w 0 -c 0 --json
[ "$rc" -eq 0 ] || fail "alltoallv 1M --json: exit status $rc: $(cat "$T/err")"
sed -e 's/"oop_busbw_gbps":[^,]*/"oop_busbw_gbps":0/' "$T/out" >"$T/base.json"
bench 4 --coll alltoallv -b 1M -e 1M -n 1 -w 0 -c 0 --baseline "$T/base.json" --min-busbw 0
[ "$rc" -eq 0 ] || fail "alltoallv --baseline: exit status $rc: $(cat "$T/err")"
exit 0
