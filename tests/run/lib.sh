# tests/run/lib.sh - sourced by the smddp-run tests: paths, temp dir, cleanup
#
# Every process a test starts is recorded by pid (rank pid files written by
# rankprog, background launchers in BG_PIDS, with everything below them)
# and killed on exit, pass or fail.

set -u
: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"

RUN="$top_builddir/cmd/smddp-run"
# inside a Slurm allocation smddp-run would go through srun: these tests run here
unset SLURM_JOB_ID
PROG="$top_builddir/tests/run/rankprog"
T=$(mktemp -d "${TMPDIR:-/tmp}/smddp-run-test.XXXXXX") || exit 99
# the private dump directory of a launcher that a test kills stays in T
mkdir "$T/tmpdir" && export TMPDIR="$T/tmpdir"
BG_PIDS=""

# descendants PID: the processes below PID, children first
descendants() {
	local c
	for c in $(pgrep -P "$1" 2>/dev/null); do
		echo "$c"
		descendants "$c"
	done
}

cleanup() {
	local f p all
	# a background launcher and all below it (timeout(1), smddp-run, ranks),
	# taken before any dies, so that none is missed when re-parented
	for p in $BG_PIDS; do
		all="$p $(descendants "$p")"
		kill -KILL $all 2>/dev/null
	done
	for f in $(find "$T" -name 'pid.*' -o -name 'child.*' 2>/dev/null); do
		p=$(cat "$f")
		# a pid only: 0 or -N would be this shell's process group, or another's
		[[ $p =~ ^[1-9][0-9]*$ ]] && kill -KILL "$p" 2>/dev/null
	done
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

. "$top_srcdir/tests/lib.sh" # fail (stops the test), skip, now, since

# is_alive PID: running (a zombie counts as dead)
is_alive() {
	local st
	st=$(sed -n 's/^[0-9]* (.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# pids_in FILES...: the pids recorded in these files
pids_in() {
	local f
	for f in "$@"; do
		[ -f "$f" ] && cat "$f"
	done
}

# expect_dead WAIT_S PID...: every PID is gone (after at most WAIT_S seconds)
expect_dead() {
	local wait_s=$1 p i
	shift
	for p in "$@"; do
		for ((i = 0; i < wait_s * 10; i++)); do
			is_alive "$p" || break
			sleep 0.1
		done
		is_alive "$p" && fail "process $p is still alive"
	done
	return 0
}

# wait_files N PATTERN-PREFIX: until N files PREFIX.* exist (at most 30 s)
wait_files() {
	local n=$1 prefix=$2 i have
	for ((i = 0; i < 300; i++)); do
		have=$(ls "$prefix".* 2>/dev/null | grep -vc '\.tmp$')
		[ "$have" -ge "$n" ] && return 0
		sleep 0.1
	done
	fail "only $have of $n files $prefix.*"
}

# start_bg CMD...: runs CMD in the background in its own process group (so
# that SIGINT is not ignored in it) and sets BG to its pid.
start_bg() {
	set -m
	"$@" &
	BG=$!
	set +m
	BG_PIDS="$BG_PIDS $BG"
}

# wait_bg PID MAX_S: waits for a background command, sets RC; fails after MAX_S
wait_bg() {
	local pid=$1 max=$2 i
	for ((i = 0; i < max * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		# a finished but unreaped job still answers kill -0: ask /proc
		is_alive "$pid" || break
		sleep 0.1
	done
	if is_alive "$pid"; then
		kill -KILL "$pid" 2>/dev/null
		fail "command $pid still running after $max s"
	fi
	RC=0
	wait "$pid" || RC=$?
}

# now_ms: monotonic-enough wall clock in milliseconds
now_ms() {
	echo $(($(date +%s%N) / 1000000))
}

# free_ports: a port pair (PORT for the ranks, PORT+1 for per-node mode's
# launchers) that nothing listens on now
free_ports() {
	local p i
	for ((i = 0; i < 50; i++)); do
		p=$((20000 + (RANDOM % 20000) * 2))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null &&
		   ! (exec 3<>"/dev/tcp/127.0.0.1/$((p + 1))") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	fail "no free port pair"
}
