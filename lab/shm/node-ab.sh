#!/bin/bash
# lab/shm/node-ab.sh - one node: builds (or one build under several environments) A/B, alternated round by round, beside Open MPI.
#
# usage: lab/shm/node-ab.sh [-r ROUNDS] [-o DIR] NAME=BENCH[,VAR=VALUE...]... [-- BENCH-ARGS...]
#   e.g. lab/shm/node-ab.sh -r 10 main=/tmp/main/build/cmd/bench/smddp-allreduce-bench \
#            new=build/cmd/bench/smddp-allreduce-bench -- --coll alltoall -b 4M -e 128M -f 2 -n 20 -w 5 -c 0
# Each round runs every variant once (2 ranks, mpirun as scripts/bench-vs-mpi.sh
# does, --compare mpi), in reverse order every other round (ABBA), so that a
# load that comes and goes falls on all alike.  Prints per size: each
# variant's median time, Open MPI's time over it (median and lowest of the
# rounds), and the first variant's time over each other's in the same round
# (median, lowest, highest: above 1, that one is faster).  -o keeps the runs'
# JSON (NAME.rROUND.json).
set -eu
rounds=6 out=
while [ $# -gt 0 ]; do
	case $1 in
	-r) rounds=$2; shift 2 ;;
	-o) out=$2; shift 2 ;;
	--) break ;;
	*=*) break ;;
	*) echo "usage: $0 [-r ROUNDS] [-o DIR] NAME=BENCH[,VAR=VALUE...]... [-- BENCH-ARGS...]" >&2; exit 2 ;;
	esac
done
vars=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
[ $# -gt 0 ] && shift
[ ${#vars[@]} -ge 1 ] || { echo "$0: no NAME=BENCH given" >&2; exit 2; }
[ $# -gt 0 ] || set -- -b 512K -e 32M -f 4 -n 20 -w 5 -c 0
if [ -z "$out" ]; then
	out=$(mktemp -d "${TMPDIR:-/tmp}/node-ab.XXXXXX")
	trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 IPATH_NO_BACKTRACE=1 HFI_NO_BACKTRACE=1
for r in $(seq 1 "$rounds"); do
	order=("${vars[@]}")
	if [ $((r % 2)) = 0 ]; then
		order=()
		for ((i = ${#vars[@]} - 1; i >= 0; i--)); do order+=("${vars[$i]}"); done
	fi
	for v in "${order[@]}"; do
		name=${v%%=*} rest=${v#*=}
		IFS=, read -ra parts <<<"$rest"
		envs=()
		for p in "${parts[@]:1}"; do envs+=(-x "$p"); done
		# below Linux's ephemeral range, as scripts/bench-vs-mpi.sh
		timeout 1200 mpirun -np 2 --oversubscribe --bind-to none \
			-x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$((20000 + RANDOM % 12000)) "${envs[@]}" \
			"${parts[0]}" --compare mpi --json "$@" 2>/dev/null | grep '^{' >"$out/$name.r$r.json"
	done
	echo "round $r of $rounds done" >&2
done
python3 - "$out" "${vars[@]%%=*}" <<'PY'
import collections, json, statistics as st, sys
d, names = sys.argv[1], sys.argv[2:]
t = collections.defaultdict(dict)  # (name, round) -> {(impl, size): row}
rounds = set()
for n in names:
    r = 1
    while True:
        try:
            f = open('%s/%s.r%d.json' % (d, n, r))
        except OSError:
            break
        for l in f:
            x = json.loads(l)
            t[(n, r)][(x['impl'], x['size_bytes'])] = x
        rounds.add(r)
        r += 1
sizes = sorted({k[1] for v in t.values() for k in v})
print('# per size: NAME us (median) mpi/NAME median lowest; %s/NAME per round: median [lowest highest]' % names[0])
for p in ('oop', 'ip'):
    print('#', p)
    for s in sizes:
        line = '%10d' % s
        for n in names:
            us, ratio, pair = [], [], []
            for r in sorted(rounds):
                a = t[(n, r)].get(('smddp', s), {}).get(p + '_time_us')
                m = t[(n, r)].get(('mpi', s), {}).get(p + '_time_us')
                b = t[(names[0], r)].get(('smddp', s), {}).get(p + '_time_us')
                if not a:
                    continue
                us.append(a)
                if m:
                    ratio.append(m / a)
                if b and n != names[0]:
                    pair.append(b / a)
            if not us:
                continue
            line += ' | %s %9.1f' % (n, st.median(us))
            if ratio:
                line += ' %5.2f %5.2f' % (st.median(ratio), min(ratio))
            if pair:
                line += ' [%4.2f %4.2f %4.2f]' % (st.median(pair), min(pair), max(pair))
        print(line)
PY
