#!/bin/bash
# tests/bench/json.sh - --json: one parsable object per size, the documented keys, rank 0 only
. "$top_srcdir/tests/bench/lib.sh"

command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }

bench 2 --coll all -b 8 -e 32K -f 16 -n 2 -w 1 --json
[ "$rc" -eq 0 ] || fail "--json: exit status $rc: $(cat "$T/err")"
python3 - "$T/out" <<'PY' || fail "--json: $(cat "$T/out")"
import json, sys
keys = ["collective", "size_bytes", "count", "type", "redop", "root",
        "oop_time_us", "oop_algbw_gbps", "oop_busbw_gbps", "oop_wrong",
        "ip_time_us", "ip_algbw_gbps", "ip_busbw_gbps", "ip_wrong", "nranks"]
lines = open(sys.argv[1]).read().splitlines()
# 4 sizes (8 B to 32 KiB by 16) x 8 collectives, printed once (by rank 0)
assert len(lines) == 32, "%d lines" % len(lines)
seen = set()
for line in lines:
    o = json.loads(line)
    for k in keys:
        assert k in o, "no key %s in %s" % (k, line)
    for k in keys[1:3] + keys[5:]:
        if o["collective"] in ("alltoallv", "sendrecv") and k.startswith("ip_"):
            # no in-place half: null, not a number
            assert o[k] is None, "%s is not null in %s" % (k, line)
            continue
        assert isinstance(o[k], (int, float)), "%s is not a number in %s" % (k, line)
    assert o["nranks"] == 2 and o["oop_wrong"] == 0, line
    assert o["ip_wrong"] == (None if o["collective"] in ("alltoallv", "sendrecv") else 0), line
    assert o["type"] == "float32", line
    assert "offset_bytes" not in o, line
    seen.add(o["collective"])
assert seen == {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall",
                "sendrecv", "alltoallv"}, seen
PY
# --offset: each row says so
bench 2 -b 8 -e 8 -n 2 -w 1 --offset 64K --json
[ "$rc" -eq 0 ] || fail "--json --offset: exit status $rc: $(cat "$T/err")"
python3 -c 'import json, sys; o = json.loads(open(sys.argv[1]).read()); assert o["offset_bytes"] == 65536, o' \
	"$T/out" || fail "--json --offset: $(cat "$T/out")"
exit 0
