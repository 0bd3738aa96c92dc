#!/usr/bin/env python3
"""modes-table.py DIR [ROOF-GBS]: the median tables of run-on-device.sh's modes stage.

DIR holds the stage's JSON runs (modes.tgz unpacked: CFG-nN-rR.json, CFG one
of nomps-auto, mps-auto, mps-0).  Per rank count, a Markdown table of the
median out-of-place time of each set-up over its runs, the queued time over
the blocking one without MPS, and, with ROOF-GBS (the GPU's copy rate in
GB/s, kernel-bench), the roofline 2 x N x size / ROOF-GBS and the queued
time's share of it.
"""
import json
import os
import re
import statistics
import sys

d = sys.argv[1]
roof = float(sys.argv[2]) if len(sys.argv) > 2 else 0
cfgs = [("mps-auto", "queued, MPS"), ("nomps-auto", "blocking, no MPS"), ("mps-0", "blocking, MPS")]
t = {}  # (n, cfg) -> size -> [us]
for f in sorted(os.listdir(d)):
    m = re.match(r"(.+)-n(\d+)-r\d+\.json$", f)
    if not m:
        continue
    cfg, n = m.group(1), int(m.group(2))
    for line in open(os.path.join(d, f)):
        line = re.sub(r"^\[\d+\] ", "", line.strip())
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        t.setdefault((n, cfg), {}).setdefault(r["size_bytes"], []).append(r["oop_time_us"])


def human(b):
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k:
            return "%d %s" % (b // k, unit)
    return "%d B" % b


for n in sorted({k[0] for k in t}):
    runs = min(len(v) for c, _ in cfgs for v in t.get((n, c), {0: [0]}).values())
    print("\n%d ranks (medians of %d runs)\n" % (n, runs))
    head = ["size"] + ["%s (us)" % name for _, name in cfgs] + ["queued/blocking no MPS"]
    if roof:
        head += ["roofline 2NS/%.2f TB/s (us)" % (roof / 1000), "queued MPS of roofline"]
    print("| " + " | ".join(head) + " |")
    print("|" + " ---: |" * len(head))
    for size in sorted(t[(n, cfgs[0][0])]):
        med = [statistics.median(t[(n, c)][size]) for c, _ in cfgs]
        row = [human(size)] + ["%.1f" % x for x in med] + ["%.2f" % (med[0] / med[1])]
        if roof:
            rl = 2 * n * size / (roof * 1e3)
            row += ["%.1f" % rl, "%d %%" % round(100 * rl / med[0])] if rl >= 1 else ["-", "-"]
        print("| " + " | ".join(row) + " |")
