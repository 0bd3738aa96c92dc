#!/bin/bash
# scripts/bench-shrink.sh - time to go on after a rank's death (shrink) against a restart.
#
# usage: scripts/bench-shrink.sh [-H HOSTS] [-N RANKS-PER-HOST] [-r REPEATS]
# Makes HOSTS network namespace hosts on a bridge (tests/cluster/lib.sh) and
# runs examples/shrink (HOSTS x RANKS-PER-HOST ranks, through smddp-run
# --hosts and mpirun) REPEATS times each way:
#   shrink   a rank SIGKILLs itself at step 4 (rank 0 on odd runs, the first
#            rank of the last host on even ones); measured on the survivors:
#            from the first survivor's failed call (the error) to the last
#            survivor's first completed AllReduce on the shrunk communicator,
#            and from the death itself to that point;
#   restart  the same death without going on (mpirun stops the job, as it
#            does by default), then the same job launched afresh by
#            smddp-run: from the launch to the last rank's first completed
#            AllReduce, and from the death to that point (stopping the
#            failed job included); a restart costs at least that, before
#            any reload of a checkpoint.
# Prints the medians (and min, max) as a Markdown table. Times come from
# CLOCK_REALTIME, one clock for every namespace host of this machine. Root
# only; needs a build in ./build (or $BUILD) with libfabric and Open MPI.
# Everything is removed on exit.
set -eu
[ -z "${BUILD:-}" ] || BUILD=$(cd "$BUILD" && pwd) || { echo "$0: BUILD=$BUILD: no such folder" >&2; exit 1; }
cd "$(dirname "$0")/.."
hosts=2 per=4 repeats=20
while [ $# -gt 0 ]; do
	case $1 in
	-H) hosts=$2; shift 2 ;;
	-N) per=$2; shift 2 ;;
	-r) repeats=$2; shift 2 ;;
	*) echo "usage: $0 [-H HOSTS] [-N RANKS-PER-HOST] [-r REPEATS]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "$0: network namespaces need root" >&2; exit 1; }
export top_builddir=${BUILD:-$PWD/build} top_srcdir=$PWD
[ -x "$top_builddir/cmd/smddp-run" ] || { echo "$0: no build in $top_builddir" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
. tests/cluster/lib.sh
grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h" || { echo "$0: built without libfabric" >&2; exit 1; }
libdir=$top_builddir/lib/.libs
prog=$CL_DIR/shrink
cc -O2 -Wall -I"$top_srcdir/lib/include" examples/shrink.c -o "$prog" -L"$libdir" -Wl,-rpath,"$libdir" -lsmddp
cluster_up "$hosts"
n=$((hosts * per))
GOON="--mca orte_abort_on_non_zero_status 0 --mca odls_base_sigkill_timeout 20"

# job NAME ARGS...: one run of the example across the hosts; output in $CL_DIR/NAME
job() {
	local name=$1
	shift
	on_host 1 env SMDDP_JOB_ID="bs$$$name" timeout -k 5 120 "$top_builddir/cmd/smddp-run" \
		--timeout 90 --hosts "$(cl_hosts "$hosts" "$per")" --network-interface eth0 \
		--mpirun-args "$(cl_mpirun_args) ${MPIMORE-$GOON}" --env SMDDP_TIMEOUT=30 "$prog" "$@" \
		>"$CL_DIR/$name" 2>&1 || true
	cl_wait_empty 60 || { echo "$0: $name left processes behind" >&2; exit 1; }
}

# ms A B: (B - A) in milliseconds, from nanoseconds
ms() { echo "scale=1; ($2 - $1) / 1000000" | bc; }
val() { grep -o "$1=[0-9]*" "$2" | cut -d= -f2 | sort -n; }

: >"$CL_DIR/shrink.ms" && : >"$CL_DIR/death.ms" && : >"$CL_DIR/restart.ms" && : >"$CL_DIR/full.ms"
for ((i = 1; i <= repeats; i++)); do
	victim=$([ $((i % 2)) = 1 ] && echo 0 || echo $(((hosts - 1) * per)))
	job "s$i" "$victim"
	ok=$(grep -c "steps on $((n - 1)) ranks at the end, 0 wrong" "$CL_DIR/s$i" || true)
	if [ "$ok" -ne $((n - 1)) ]; then
		echo "$0: run $i (victim $victim): $ok of $((n - 1)) survivors finished right:" >&2
		sed 's/^/    /' "$CL_DIR/s$i" >&2
		exit 1
	fi
	err=$(val err_ns "$CL_DIR/s$i" | head -1)
	done=$(val done_ns "$CL_DIR/s$i" | tail -1)
	died=$(val died_ns "$CL_DIR/s$i" | head -1)
	ms "$err" "$done" >>"$CL_DIR/shrink.ms"
	ms "$died" "$done" >>"$CL_DIR/death.ms"
	# the same death, the job stopped by mpirun, and launched again at once
	MPIMORE="" job "k$i" "$victim"
	died=$(val died_ns "$CL_DIR/k$i" | head -1)
	[ -n "$died" ] || { echo "$0: run $i: the victim did not die:" >&2; sed 's/^/    /' "$CL_DIR/k$i" >&2; exit 1; }
	t0=$(date +%s%N)
	job "r$i"
	first=$(val first_ns "$CL_DIR/r$i" | tail -1)
	[ "$(grep -c "steps on $n ranks at the end, 0 wrong" "$CL_DIR/r$i" || true)" -eq "$n" ] ||
		{ echo "$0: restart run $i failed:" >&2; sed 's/^/    /' "$CL_DIR/r$i" >&2; exit 1; }
	ms "$t0" "$first" >>"$CL_DIR/restart.ms"
	ms "$died" "$first" >>"$CL_DIR/full.ms"
	echo "# run $i: victim $victim: shrink $(tail -1 "$CL_DIR/shrink.ms") ms after the error," \
		"$(tail -1 "$CL_DIR/death.ms") ms after the death; restart $(tail -1 "$CL_DIR/restart.ms") ms" \
		"after the launch, $(tail -1 "$CL_DIR/full.ms") ms after the death" >&2
done

stat() { sort -n "$1" | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
	printf "%.0f ms | %.0f ms | %.0f ms", m, v[1], v[NR] }'; }
echo "$n ranks on $hosts namespace hosts ($per each), $repeats runs each, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "| from | to | median | min | max |"
echo "|---|---|---|---|---|"
echo "| the error (first survivor's failed call) | first AllReduce done on the shrunk communicator (last survivor) | $(stat "$CL_DIR/shrink.ms") |"
echo "| the death (SIGKILL) | first AllReduce done on the shrunk communicator (last survivor) | $(stat "$CL_DIR/death.ms") |"
echo "| launch by smddp-run (a restart) | first AllReduce done (last rank) | $(stat "$CL_DIR/restart.ms") |"
echo "| the death (SIGKILL), the job stopped and launched again | first AllReduce done (last rank) | $(stat "$CL_DIR/full.ms") |"
