#!/bin/bash
# scripts/bench-hosts-ab.sh - two builds of libsmddp between namespace hosts, interleaved, each against Open MPI.
#
# usage: scripts/bench-hosts-ab.sh [-r ROUNDS] [-o DIR] BUILD-A BUILD-B [BENCH-HOSTS-ARGS...]
# Runs scripts/bench-hosts.sh -r 1 with BUILD=BUILD-A, then BUILD-B, ROUNDS
# times (default 3): A and B take turns on the same kind of hosts under the
# same load, each beside Open MPI in its own processes.  BENCH-HOSTS-ARGS go
# to bench-hosts.sh as they are (-H, -N, --rate, -C, --env, -- BENCH-ARGS).
# Prints, per collective, out of place and then in place (where the
# collective has an in-place form), each build's median over the rounds
# (time in us) with Open MPI's of the same runs, A's time over B's (above 1:
# B is faster), and link% against the median raw TCP anchor of all runs.
# -o DIR keeps the JSON lines as DIR/A|B/COLL/roundI.json.  Root only, as
# bench-hosts.sh; the load average goes with every table.
set -eu
cd "$(dirname "$0")/.."
rounds=3 keep=""
while [ $# -gt 0 ]; do
	case $1 in
	-r) rounds=$2; shift 2 ;;
	-o) keep=$2; shift 2 ;;
	*) break ;;
	esac
done
[ $# -ge 2 ] || { echo "usage: $0 [-r ROUNDS] [-o DIR] BUILD-A BUILD-B [BENCH-HOSTS-ARGS...]" >&2; exit 2; }
a=$(cd "$1" && pwd) b=$(cd "$2" && pwd)
shift 2
dir=${keep:-$(mktemp -d /tmp/bench-hosts-ab.XXXXXX)}
mkdir -p "$dir"
echo "# $(uname -n): $(nproc) cores, A=$a B=$b, $rounds rounds; bench-hosts.sh $*"
for ((i = 1; i <= rounds; i++)); do
	for w in A B; do
		bld=$([ $w = A ] && echo "$a" || echo "$b")
		mkdir -p "$dir/$w"
		echo "# round $i, $w, $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
		BUILD=$bld ./scripts/bench-hosts.sh -r 1 -o "$dir/$w/r$i" "$@" >"$dir/$w/r$i.txt" 2>&1 ||
			{ echo "$w round $i failed:"; tail -20 "$dir/$w/r$i.txt"; exit 1; }
		grep '^# \(link\|ring\)' "$dir/$w/r$i.txt" | sed "s/^# /#   /"
		for c in "$dir/$w/r$i"/*/; do
			c=$(basename "$c")
			mkdir -p "$dir/$w/$c"
			cp "$dir/$w/r$i/$c/run1.json" "$dir/$w/$c/round$i.json"
		done
	done
done
echo "# done $(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$dir" <<'PY'
import glob, json, os, re, statistics, sys
d = sys.argv[1]
med = statistics.median
anchors = []
for f in glob.glob(os.path.join(d, "[AB]", "r*.txt")):
    t = open(f).read()
    m = re.search(r"^# ring .*: ([0-9.]+) MB/s", t, re.M) or re.search(r"^# link .*: ([0-9.]+) MB/s", t, re.M)
    if m:
        anchors.append(float(m.group(1)))
link = med(anchors) / 1000 if anchors else 0
colls = sorted({os.path.basename(p) for p in glob.glob(os.path.join(d, "[AB]", "*")) if os.path.isdir(p) and not re.fullmatch(r"r[0-9]+", os.path.basename(p))})
for c in colls:
    v = {}
    for w in "AB":
        for f in glob.glob(os.path.join(d, w, c, "*.json")):
            for line in open(f):
                if line.strip():
                    r = json.loads(re.sub(r"^\[[0-9]+\] ", "", line))
                    for place in ("oop", "ip"):
                        if r.get(place + "_time_us") is None:  # no in-place form (alltoallv, ...)
                            continue
                        k = (place, r["size_bytes"], w, r["impl"])
                        v.setdefault(k, {"t": [], "bw": []})
                        v[k]["t"].append(r[place + "_time_us"])
                        v[k]["bw"].append(r.get(place + "_busbw_gbps") or 0)
    for place, words in (("oop", "out of place"), ("ip", "in place")):
        sizes = sorted({k[1] for k in v if k[0] == place})
        if not sizes:
            continue
        print(f"# {c}, {words}, median of the rounds; time in us; link% = busbw / raw TCP ({link * 1000:.1f} MB/s, median of {len(anchors)} anchors)")
        print(f"{'size':>10} {'A':>10} {'A mpi':>10} {'B':>10} {'B mpi':>10} {'A/B':>6} {'mpi/A':>6} {'mpi/B':>6} {'A link%':>7} {'B link%':>7} {'mpi link%':>9}")
        for s in sizes:
            try:
                ta, tam = med(v[(place, s, "A", "smddp")]["t"]), med(v[(place, s, "A", "mpi")]["t"])
                tb, tbm = med(v[(place, s, "B", "smddp")]["t"]), med(v[(place, s, "B", "mpi")]["t"])
            except KeyError:
                continue
            pct = lambda w: 100 * med(v[(place, s, w, "smddp")]["bw"]) / link if link else 0
            mp = 100 * med(v[(place, s, "A", "mpi")]["bw"] + v[(place, s, "B", "mpi")]["bw"]) / link if link else 0
            print(f"{s:>10} {ta:>10.1f} {tam:>10.1f} {tb:>10.1f} {tbm:>10.1f} {ta / tb:>6.2f} {tam / ta:>6.2f} {tbm / tb:>6.2f} "
                  f"{pct('A'):>7.1f} {pct('B'):>7.1f} {mp:>9.1f}")
PY
[ -n "$keep" ] || rm -rf "$dir"
