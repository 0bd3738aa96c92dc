#!/bin/bash
# tests/cluster/net-fault.sh - faults between real (namespace) hosts: a rank SIGKILLed, a link down
#
# The ranks of netloop (tests/cluster/netloop.c) allreduce 4 MiB in a loop
# across 2 hosts (1 and 2 ranks per host) with SMDDP_TIMEOUT=10, and then
#   kill      the last rank (on h2) is SIGKILLed from outside, mid-run;
#   linkdown  h2's eth0 is set down mid-run (and up again once every rank
#             has reported, so that mpirun can end the job).
# Every rank that is left must return an error from its allreduce within
# SMDDP_TIMEOUT (+3 s) of the fault: SMDDP_EPEER or SMDDP_ENETWORK (and, for
# a link, SMDDP_ETIMEDOUT), whose smddp_last_error() names a lost rank by its
# rank in the job and its host; the next call must fail at once and
# smddp_comm_destroy() must return.  smddp-run must exit non-zero, and
# nothing may be left: no process in the hosts, no /dev/shm/smddp-JOB-* file.
# netloop's watchdog ends a rank whose call lasts 30 s ("hang:"), so that a
# hang in the library fails the test instead of the build.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/cluster/lib.sh"

NETLOOP="$top_builddir/tests/cluster/netloop"
[ -x "$NETLOOP" ] || fail "$NETLOOP is not built"
grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h" || skip "built without libfabric"

TMO=10
cluster_up 2
# The survivors ignore SIGTERM and must outlive mpirun's abort of the job
# (SIGTERM, then SIGKILL after odls_base_sigkill_timeout) to report.
MPIARGS="$(cl_mpirun_args) --mca odls_base_sigkill_timeout 3"
failures=0

bad() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

now() { date +%s.%N; }
# secs A B: B - A, to the millisecond
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
# lt X Y: X < Y, as numbers
lt() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x < y) }'; }

# Does text name rank R ("rank 1", "ranks 0, 1", "rank(s) 1 and 2")?  As in
# tests/integration/lib.sh.
names_rank() { grep -Eiq "ranks?(\(s\))?:? *\[?([0-9]+ *(,|and|&|or|/) *)*$2([^0-9]|\$)" <<<"$1"; }
# ("host h2", "on h2/BOOT-ID")
names_host() { grep -Eq "(^|[^[:alnum:]])$2([^[:alnum:]]|\$)" <<<"$1"; }

# ranks_reported: how many of the job's ranks printed a final line
ranks_reported() {
	cat "$JD"/rank.* 2>/dev/null | grep -Ec '^NETLOOP rank=[0-9]+ (destroy rc=|hang:|bad:|no failure)'
}

# start NAME N: netloop on h1 and h2, N ranks each, in the background; waits
# until every rank has done 3 good allreduces
start() {
	local i
	NAME=$1
	NPER=$2
	W=$((2 * NPER))
	JD="$CL_DIR/$NAME"
	mkdir -p "$JD"
	on_host 1 timeout -k 5 150 "$RUN" --hosts "$(cl_hosts 2 "$NPER")" --network-interface eth0 \
		--mpirun-args "$MPIARGS" --env SMDDP_TIMEOUT=$TMO --env D="$JD" \
		sh -c 'exec "$@" >"$D/rank.$RANK" 2>&1' sh "$NETLOOP" 1048576 100 30 \
		>"$JD/out" 2>&1 &
	JOB=$!
	CL_PIDS="$CL_PIDS $JOB"
	for ((i = 0; i < 300; i++)); do
		[ "$(cat "$JD"/rank.* 2>/dev/null | grep -c ' ready$')" -eq "$W" ] && break
		sleep 0.1
	done
	[ "$i" -lt 300 ] || fail "$NAME: the ranks did not all start within 30 s: $(cat "$JD"/out "$JD"/rank.*)"
	JOBID=$(sed -n 's/^NETLOOP rank=0 .* job=\([^ ]*\) ready$/\1/p' "$JD/rank.0")
}

# pid_of R: the pid of rank R, as it printed it
pid_of() { sed -n "s/^NETLOOP rank=$1 pid=\([0-9]*\) .*/\1/p" "$JD/rank.$1"; }

# await N: until N ranks reported (at most SMDDP_TIMEOUT + 25 s after the
# fault), or the job ended
await() {
	local i
	for ((i = 0; i < (TMO + 25) * 10; i++)); do
		[ "$(ranks_reported)" -ge "$1" ] && return 0
		kill -0 "$JOB" 2>/dev/null || return 0
		sleep 0.1
	done
	return 1
}

# finish_job: waits for smddp-run (bounded by its timeout) and shows the output
finish_job() {
	RC=0
	wait "$JOB" || RC=$?
	echo "--- $NAME: smddp-run exited $RC, $(secs "$TF" "$(now)") s after the fault"
	sed 's/^/    out: /' "$JD/out"
	for f in "$JD"/rank.*; do
		sed "s/^/    ${f##*/}: /" "$f"
	done
}

# fate R: "; smddp-run: rank R on host H (pid P) was killed by ...", if it said so
fate() { grep -m1 "smddp-run: rank $1 on host" "$JD/out" | sed 's/^[^:]*<stderr>://; s/^/; /'; }

# judge R ALLOWED-RCS CULPRIT-RANKS CULPRIT-HOST: rank R's report
judge() {
	local r=$1 rcs=$2 culprits=$3 host=$4 line rc msg at el x ok=0 f0=$failures
	line=$(grep "^NETLOOP rank=$r call=" "$JD/rank.$r")
	if [ -z "$line" ]; then
		# what it said last, and what became of it
		x=$(grep -E '^NETLOOP rank=[0-9]+ (hang|bad|no failure)' "$JD/rank.$r")
		bad "$NAME: rank $r returned no error: ${x:-nothing reported}$(grep 'SMDDP WARN' "$JD/rank.$r" | tail -1 | sed 's/^/ (its last words: /; s/$/)/')$(fate "$r")"
		return
	fi
	rc=$(sed -n 's/.* rc=\([A-Z_]*\) .*/\1/p' <<<"$line")
	at=$(sed -n 's/.* at=\([0-9.]*\) .*/\1/p' <<<"$line")
	msg=${line#* msg=}
	el=$(secs "$TF" "$at")
	echo "$NAME: rank $r: $rc $el s after the fault: $msg"
	grep -qw -- "$rc" <<<"$rcs" || bad "$NAME: rank $r returned $rc, expected one of $rcs"
	lt "$el" $((TMO + 3)) || bad "$NAME: rank $r returned $el s after the fault (SMDDP_TIMEOUT=$TMO)"
	for x in $culprits; do
		names_rank "$msg" "$x" && ok=1
	done
	[ "$ok" -eq 1 ] || bad "$NAME: rank $r: the message names none of the lost ranks ($culprits) by their rank in the job: $msg"
	names_host "$msg" "$host" || bad "$NAME: rank $r: the message does not name host $host: $msg"
	line=$(grep "^NETLOOP rank=$r next " "$JD/rank.$r")
	if [ -z "$line" ] || grep -q ' rc=SMDDP_OK ' <<<"$line"; then
		bad "$NAME: rank $r: the next call did not fail: ${line:-no line}"
	else
		lt "$(sed -n 's/.* elapsed=\([0-9.]*\) .*/\1/p' <<<"$line")" 2 ||
			bad "$NAME: rank $r: the next call took 2 s or more to fail: $line"
	fi
	grep -q "^NETLOOP rank=$r destroy " "$JD/rank.$r" ||
		bad "$NAME: rank $r: smddp_comm_destroy did not return$(fate "$r")"
	[ "$failures" -eq "$f0" ] && echo "ok: $NAME: rank $r"
	return 0
}

# nothing_left: no process in the hosts within 15 s, no segment of the job
nothing_left() {
	local i
	if ! cl_wait_empty 150; then
		bad "$NAME: processes left in the hosts: $(cl_host_pids | xargs -r ps -o pid=,args= -p)"
		for i in $(cl_host_pids); do
			kill -KILL "$i" 2>/dev/null
		done
	fi
	if [ -z "$JOBID" ]; then
		bad "$NAME: rank 0 printed no job id"
	elif compgen -G "/dev/shm/smddp-$JOBID-*" >/dev/null; then
		bad "$NAME: left in /dev/shm: $(ls /dev/shm/smddp-"$JOBID"-*)"
		rm -f /dev/shm/smddp-"$JOBID"-*
	fi
}

# kill_case NPER [TAG]: SIGKILL the last rank (on h2) from outside
kill_case() {
	local v r pid
	start "kill-2x$1${2:-}" "$1"
	v=$((W - 1))
	pid=$(pid_of "$v")
	ip netns pids "$CL_ID-h2" | grep -qx "$pid" || fail "$NAME: rank $v (pid $pid) is not in h2"
	TF=$(now)
	kill -KILL "$pid"
	await $((W - 1)) || bad "$NAME: the survivors had not all reported $((TMO + 25)) s after the fault"
	finish_job
	for ((r = 0; r < W - 1; r++)); do
		judge "$r" "SMDDP_EPEER SMDDP_ENETWORK" "$v" h2
	done
	[ "$RC" -ne 0 ] || bad "$NAME: smddp-run exited 0"
	[ "$RC" -ne 124 ] || bad "$NAME: smddp-run timed out"
	nothing_left
}

# linkdown NPER: h2's eth0 down mid-run, up again once every rank reported
linkdown_case() {
	local r
	start "linkdown-2x$1" "$1"
	TF=$(now)
	ip -n "$CL_ID-h2" link set eth0 down || fail "cannot set h2's eth0 down"
	await "$W" || bad "$NAME: the ranks had not all reported $((TMO + 25)) s after the link went down"
	ip -n "$CL_ID-h2" link set eth0 up || fail "cannot set h2's eth0 up again"
	finish_job
	for ((r = 0; r < W; r++)); do
		if [ "$r" -lt "$NPER" ]; then
			judge "$r" "SMDDP_EPEER SMDDP_ENETWORK SMDDP_ETIMEDOUT" "$(seq -s ' ' "$NPER" $((W - 1)))" h2
		else
			judge "$r" "SMDDP_EPEER SMDDP_ENETWORK SMDDP_ETIMEDOUT" "$(seq -s ' ' 0 $((NPER - 1)))" h1
		fi
	done
	[ "$RC" -ne 0 ] || bad "$NAME: smddp-run exited 0"
	[ "$RC" -ne 124 ] || bad "$NAME: smddp-run timed out"
	nothing_left
	cl_wait_reach 1 10.77.0.2 || fail "h1 cannot reach h2 again"
}

# three times: a crash of the survivor after the death was seen showed up
# in about one run of five
kill_case 1 -a
kill_case 1 -b
kill_case 1 -c
kill_case 2
linkdown_case 1
linkdown_case 2

if [ "$failures" -ne 0 ]; then
	echo "$failures check(s) failed"
	exit 1
fi
echo "all checks passed"
exit 0
