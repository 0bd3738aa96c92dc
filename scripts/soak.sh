#!/bin/bash
# scripts/soak.sh - the long soak: RSS and descriptors of each rank over many calls and lifetimes.
#
# Usage: scripts/soak.sh [-n RANKS] [CALLS [LIFETIMES]]   (defaults: 2 ranks, 1000000, 1000)
# Runs tests/integration/soak from ./build under smddp-run and prints, per rank
# and phase, RSS and open descriptors at each tenth, then the growth after the
# first tenth.  Exit: 0 flat, 1 grew or failed, 2 usage.
set -u
cd "$(dirname "$0")/.." || exit 2
n=2
if [ "${1:-}" = -n ]; then
	n=${2:?-n needs a number}
	shift 2
fi
case "${1:-}" in -h | --help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
calls=${1:-1000000} lives=${2:-1000}
B=${B:-build}
[ -x "$B/tests/integration/soak" ] || make -C "$B" tests/integration/soak >/dev/null || exit 1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$B/cmd/smddp-run" -n "$n" --timeout 3600 "$B/tests/integration/soak" "$calls" "$lives" >"$out" 2>&1
st=$?
awk '/SOAK rank=/ {
	for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
	key = v["rank"] " " v["phase"]
	if (!(key in first)) { first[key] = v["rss_kb"]; ffd[key] = v["fds"] }
	printf "rank %s %-9s %9s  rss %7s kB  fds %s\n", v["rank"], v["phase"], v["n"], v["rss_kb"], v["fds"]
	last[key] = v["rss_kb"]; lfd[key] = v["fds"]
}
END { for (k in first) printf "rank/phase %s: rss %+d kB, fds %+d from the first sample\n", k, last[k] - first[k], lfd[k] - ffd[k] }' "$out"
grep "SOAK-BAD\|SOAK-OK" "$out"
exit $((st != 0))
