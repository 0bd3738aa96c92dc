#!/usr/bin/env python3
"""bench-median.py [--lowest] DIR TITLE [LINK-MBS]: median table of the --json runs in DIR (ours against MPI).

Shared by scripts/bench-vs-mpi.sh, scripts/bench-hosts.sh and
scripts/bench-p2p-node.sh: every file in DIR holds one
smddp-allreduce-bench --compare mpi --json run; per size, the median time
of each implementation, out of place and in place, and the ratio (MPI's
time / ours, so > 1 means we are faster), plus our bus bandwidth.  With
LINK-MBS (a link's payload rate, MB/s), also each busbw as a percentage of
it ("link%": ours, then MPI's).  A line may begin with smddp-run's "[R] "
tag (`smddp-run -n N smddp-allreduce-bench --json >FILE`).

Collectives without an in-place form (sendrecv, alltoallv, ...) report
null in place; for them the table has one side only, plus the lowest and
highest ratio of the single runs, because on a loaded machine the spread
says how far the median can be trusted.

--lowest prints, per size, the median and the lowest of the single runs'
ratios (each run's MPI time / ours), out of place and in place: issue
38's goal is the lowest at 1.0 or more.
"""
import json
import os
import re
import statistics
import sys

args = sys.argv[1:]
lowest = "--lowest" in args
args = [a for a in args if a != "--lowest"]
d, title = args[0], args[1]
link = float(args[2]) / 1000 if len(args) > 2 and args[2] else 0
rows = {}
runs = {}  # (size, type, op, place) -> each run's MPI time / ours
files = sorted(os.listdir(d))
nruns = 0  # files with at least one record: the folder may hold logs too
for f in files:
    times = {}
    had = False
    for line in open(os.path.join(d, f)):
        if not line.strip():
            continue
        text = re.sub(r"^\[[0-9]+\] ", "", line).strip()
        try:
            r = json.loads(text)
        except json.JSONDecodeError:
            if text.startswith("{"):  # a record cut short: say so, not a silent gap
                print(f"bench-median: {f}: skipped a broken record: {text[:60]}",
                      file=sys.stderr)
            continue
        had = True
        for place in ("oop", "ip"):
            if r.get(place + "_time_us") is not None:
                times[(r["size_bytes"], r["type"], r["redop"], place, r["impl"])] = \
                    r[place + "_time_us"]
        v = rows.setdefault((r["size_bytes"], r["type"], r["redop"]), {})
        for place in ("oop", "ip"):
            if r.get(place + "_time_us") is None:
                continue
            v.setdefault((r["impl"], place), []).append(r[place + "_time_us"])
            v.setdefault((r["impl"], place + "_busbw"), []).append(r.get(place + "_busbw_gbps", 0))
            if r["impl"] == "mpi" and r.get(place + "_ratio") is not None:
                v.setdefault(("ratio", place), []).append(r[place + "_ratio"])
    nruns += had
    for (size, t, op, place, impl), us in times.items():
        m = times.get((size, t, op, place, "mpi"))
        if impl == "smddp" and m is not None and us:
            runs.setdefault((size, t, op, place), []).append(m / us)
med = statistics.median
if lowest:
    print(f"# {title}: MPI's time / ours, median and lowest of {nruns} runs")
    for key in sorted({k[:3] for k in runs}):
        line = f"{key[0]:>10}"
        for place in ("oop", "ip"):
            rr = runs.get(key + (place,))
            if rr:
                line += f"  {place} med {med(rr):.2f} min {min(rr):.2f} "
        print(line.rstrip())
    sys.exit(0)
places = [p for p in ("oop", "ip") if any(("mpi", p) in v for v in rows.values())]
spread = places == ["oop"]
print(f"# {title}, median of {nruns} runs; time in us; "
      + ("ratio = MPI's time / ours (min, max: of the single runs); busbw of ours, GB/s"
         if spread else
         "ratio = MPI's time / ours, out of place (oop) and in place (ip); busbw of ours, GB/s"))
lk = f" {'link%':>5} {'mpi%':>5}" if link else ""
if spread:
    print(f"{'size':>12} {'smddp':>10} {'mpi':>10} {'ratio':>6} {'min':>6} {'max':>6} {'busbw':>7}{lk}")
else:
    print(f"{'size':>12} {'oop smddp':>10} {'oop mpi':>10} {'ratio':>6} {'busbw':>7}{lk} "
          f"{'ip smddp':>10} {'ip mpi':>10} {'ratio':>6} {'busbw':>7}{lk}")
for (size, t, op), v in sorted(rows.items()):
    if ("mpi", "oop") not in v:
        continue
    cols = []
    for place in places:
        s_, m_ = med(v[("smddp", place)]), med(v[("mpi", place)])
        bw = med(v[("smddp", place + "_busbw")])
        col = f"{s_:>10.2f} {m_:>10.2f} {m_ / s_ if s_ else 0:>6.2f}"
        if spread:
            rr = v.get(("ratio", place), [0])
            col += f" {min(rr):>6.2f} {max(rr):>6.2f}"
        col += f" {bw:>7.3f}"
        if link:
            mbw = med(v[("mpi", place + "_busbw")])
            col += f" {100 * bw / link:>5.1f} {100 * mbw / link:>5.1f}"
        cols.append(col)
    print(f"{size:>12} " + " ".join(cols))
