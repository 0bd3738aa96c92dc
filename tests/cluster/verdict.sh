#!/bin/bash
# tests/cluster/verdict.sh - smddp-run's flight recorder verdict when the ranks are on 2 namespace hosts
#
# 2 hosts x 2 ranks; rank 3 (the second rank of h2) does two allreduces,
# then sleeps instead of the third (tests/integration/fault.c, "hang");
# SMDDP_TIMEOUT=2, so the others fail in call 3 and dump.  The one verdict
# must name rank 3, call 3 and the ranks that waited in it:
#  - per-node mode (one smddp-run per host, private dump directories): h2's
#    launcher sends its ranks' dumps to node 0 over the launchers' channel,
#    and only h1 prints the verdict (ranks 0-2 waited: rank 2's dump came
#    from h2); again with the signal off (rank 3 writes nothing: named from
#    the others' waited_on), and with one --trace-dir for both hosts (a
#    shared file system: nothing is copied over it);
#  - Slurm (srun runs smddp-run per node): as per-node mode;
#  - --hosts (mpirun) with a shared --trace-dir: the verdict from it;
#    without one: one line saying where each host keeps them (and
#    smddp-trace on that directory gives the verdict).
# Every job is bounded (timeout), nothing is left in the hosts, and no
# directory of smddp-run's in TMPDIR.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/cluster/lib.sh"

FAULT="$top_builddir/tests/integration/fault"
[ -x "$FAULT" ] || fail "$FAULT is not built"
grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h" || skip "built without libfabric"

cluster_up 2
# (TMPDIR is $CL_DIR/tmp: tests/cluster/lib.sh)
WANT='^smddp-run: verdict: rank 3 never entered call 3 \(allreduce, 4099 x float32, sum\); ranks 0-2 waited in it'

# pernode OPTIONS...: smddp-run on h2 and h1 (node 1 and 0), 2 ranks each,
# fault hang 3; sets RCS[i], out.i (stdout and stderr) and DT (ms)
pernode() {
	local i t0 pids=()
	t0=$(date +%s%N)
	for i in 2 1; do
		on_host "$i" timeout -k 5 120 "$RUN" --nnodes 2 --node-rank $((i - 1)) \
			--master-addr 10.77.0.1 -n 2 --network-interface eth0 --join-timeout 60 \
			--grace 5 --env SMDDP_TIMEOUT=2 "$@" -- "$FAULT" hang 3 30 \
			>"$CL_DIR/out.$i" 2>&1 &
		pids[i]=$!
	done
	for i in 1 2; do
		RCS[i]=0
		wait "${pids[i]}" || RCS[i]=$?
	done
	DT=$((($(date +%s%N) - t0) / 1000000))
}

everything() {
	local i
	for i in 1 2; do
		[ -f "$CL_DIR/out.$i" ] && echo "--- h$i" && tail -40 "$CL_DIR/out.$i"
	done
}

# one_verdict NAME FILE REGEX: FILE has exactly one verdict line, matching
one_verdict() {
	local v
	v=$(grep '^smddp-run: verdict: ' "$2")
	[ "$(grep -c . <<<"$v")" -eq 1 ] || fail "$1: expected one verdict line, got: ${v:-none}: $(everything)"
	grep -Eq "$3" <<<"$v" || fail "$1: the verdict does not match /$3/: $v: $(everything)"
	echo "ok: $1: $v"
}

nothing_left() {
	cl_wait_empty 100 || fail "$1: processes left in the hosts"
	# Open MPI's session directory (ompi.HOST.UID) is its daemon's, which
	# removes it as it exits; one stopped during mpirun's teardown on a
	# loaded machine leaves it (once in CI, h2's): not smddp-run's to judge.
	rm -rf "$TMPDIR"/ompi.*
	[ -z "$(ls -A "$TMPDIR")" ] || fail "$1: left in TMPDIR: $(ls -A "$TMPDIR")"
}

# ---- per-node mode, each host's dumps in its own private directory
pernode
[ "${RCS[1]}" -ne 0 ] && [ "${RCS[2]}" -ne 0 ] || fail "pernode: exit status ${RCS[1]} and ${RCS[2]}: $(everything)"
[ "$DT" -lt 60000 ] || fail "pernode: took $DT ms"
one_verdict pernode "$CL_DIR/out.1" "$WANT\$"
! grep -q 'verdict' "$CL_DIR/out.2" || fail "pernode: h2 gave a verdict too: $(everything)"
nothing_left pernode

# ---- no signal: rank 3 writes nothing, the others' waits name it
pernode --env SMDDP_TRACE_SIGNAL=0
one_verdict nosignal "$CL_DIR/out.1" "$WANT; no dump from rank 3\$"
nothing_left nosignal

# ---- one --trace-dir for both (as on a shared file system): kept, whole
pernode --trace-dir "$CL_DIR/shared"
one_verdict shared "$CL_DIR/out.1" "$WANT\$"
n=$(ls "$CL_DIR/shared" | grep -c '^smddp-trace\..*\.[0-3]\.jsonl$')
[ "$n" -eq 4 ] && [ "$(ls "$CL_DIR/shared" | wc -l)" -eq 4 ] ||
	fail "shared: expected the 4 ranks' dumps alone in $CL_DIR/shared: $(ls -l "$CL_DIR/shared")"
nothing_left shared

# ---- --hosts: mpirun runs the ranks (and gives none the signal)
# The witnesses ignore SIGTERM: mpirun's SIGKILL must come after rank 2's
# own timeout (4 s into call 3) for it to dump.
MPIARGS="$(cl_mpirun_args) --mca odls_base_sigkill_timeout 6"
JOB="vd$$"
HOSTDIR="$TMPDIR/smddp-trace.$JOB"   # the ranks inherit TMPDIR here
# hosts NAME OPTIONS...: smddp-run --hosts on h1, 2 x 2 ranks, fault hang 3
hosts() {
	local name=$1 t0
	shift
	t0=$(date +%s%N)
	RC=0
	SMDDP_JOB_ID=$JOB on_host 1 timeout -k 5 120 "$RUN" --hosts "$(cl_hosts 2 2)" \
		--network-interface eth0 --mpirun-args "$MPIARGS" --env SMDDP_TIMEOUT=2 "$@" \
		-- "$FAULT" hang 3 20 >"$CL_DIR/out.1" 2>&1 || RC=$?
	DT=$((($(date +%s%N) - t0) / 1000000))
	rm -f "$CL_DIR/out.2"
	[ "$RC" -ne 0 ] || fail "$name: exit status 0: $(everything)"
	[ "$DT" -lt 90000 ] || fail "$name: took $DT ms"
}

# a shared --trace-dir: read as it is, rank 3 (no signal) named by the others
hosts mpirun-shared --trace-dir "$CL_DIR/mshared"
one_verdict mpirun-shared "$CL_DIR/out.1" "$WANT; no dump from rank 3\$"
nothing_left mpirun-shared

# none: each host's ranks dump to TMPDIR/smddp-trace.JOB there; one line says so
hosts mpirun-hostdirs
grep -q '^smddp-run: verdict' "$CL_DIR/out.1" && fail "mpirun-hostdirs: a verdict from one host's dumps: $(everything)"
want="^smddp-run: flight recorder: the ranks' dumps are in $HOSTDIR on each host (or under its TMPDIR): gather them and run smddp-trace on them, or give --trace-dir on a file system all hosts share\$"
[ "$(grep -c '^smddp-run: flight recorder' "$CL_DIR/out.1")" -eq 1 ] && grep -q "$want" "$CL_DIR/out.1" ||
	fail "mpirun-hostdirs: no line saying where the dumps are: $(everything)"
# (the hosts share this file system: the dumps of both are in the one directory)
"$top_builddir/cmd/smddp-trace" "$HOSTDIR" >"$CL_DIR/trace.out" 2>&1
grep -Eq "rank 3 never entered call 3" "$CL_DIR/trace.out" ||
	fail "mpirun-hostdirs: smddp-trace $HOSTDIR says: $(cat "$CL_DIR/trace.out")"
echo "ok: mpirun-hostdirs: $(grep '^smddp-run: flight recorder' "$CL_DIR/out.1")"
rm -rf "$HOSTDIR"
nothing_left mpirun-hostdirs

# a job that works leaves no directory on any host
hosts_ok() {
	SMDDP_JOB_ID=$JOB on_host 1 timeout -k 5 120 "$RUN" --hosts "$(cl_hosts 2 2)" \
		--network-interface eth0 --mpirun-args "$MPIARGS" -- "$ENVCHECK" 4 2 10.77.0.1 h init-ok \
		>"$CL_DIR/out.1" 2>&1
}
hosts_ok || fail "mpirun-good: exit status $?: $(everything)"
[ ! -e "$HOSTDIR" ] || fail "mpirun-good: left $HOSTDIR"
nothing_left mpirun-good
echo "ok: mpirun-good: no directory left"

# ---- Slurm: srun (tests/slurm/fake-srun) runs smddp-run per node, and
# node 0's gives the verdict, on srun's output; each node's dumps stay in a
# private directory of its own until node 0 has them
RC=0
SLURM_JOB_ID=31 SLURM_JOB_NODELIST='10.77.0.[1-2]' SLURM_JOB_NUM_NODES=2 \
	SMDDP_SRUN="$top_srcdir/tests/slurm/fake-srun" FAKE_SRUN_AGENT="$CL_AGENT" \
	FAKE_SRUN_HOSTS="10.77.0.1 10.77.0.2" FAKE_SRUN_LOG="$CL_DIR/srun.log" \
	on_host 1 timeout -k 5 120 "$RUN" --network-interface eth0 --join-timeout 60 -n 2 \
	--grace 5 --env SMDDP_TIMEOUT=2 -- "$FAULT" hang 3 20 >"$CL_DIR/out.1" 2>&1 || RC=$?
[ "$RC" -ne 0 ] || fail "slurm: exit status 0: $(everything)"
one_verdict slurm "$CL_DIR/out.1" "$WANT\$"
nothing_left slurm
exit 0
