#!/bin/bash
# tests/cluster/fail.sh - a rank failing on host 2 ends the whole job: the
# summary names host, rank and status, smddp-run exits with that status, and
# no process of the job is left on any host
. "$top_srcdir/tests/cluster/lib.sh"

cluster_up 2
MPIARGS=$(cl_mpirun_args)

# job ACTION...: 2 hosts x 2 ranks; sets RC, ERR, OUT and DT (ms)
job() {
	local t0
	t0=$(date +%s%N)
	RC=0
	on_host 1 timeout -k 5 90 "$RUN" --hosts "$(cl_hosts 2 2)" --network-interface eth0 \
		--mpirun-args "$MPIARGS" "$@" >"$CL_DIR/out" 2>"$CL_DIR/err" || RC=$?
	DT=$((($(date +%s%N) - t0) / 1000000))
	ERR=$(cat "$CL_DIR/err")
	OUT=$(cat "$CL_DIR/out")
}

# nothing_left: every host's namespace is empty within 10 s
nothing_left() {
	cl_wait_empty 100 || fail "processes left in the hosts: $(cl_host_pids | tr '\n' ' ')"
}

# rank 2, the first rank of h2, exits 5; the others would sleep 120 s
job "$ENVCHECK" 4 2 10.77.0.1 h fail 2 5
[ "$RC" -eq 5 ] || fail "exit status $RC, not 5: $ERR"
[ "$DT" -lt 60000 ] || fail "the other ranks were not stopped: ${DT} ms"
grep -Eq '^(\[1,2\]<stderr>:)?smddp-run: rank 2 on host h2 \(pid [0-9]+\) exited with status 5$' <<<"$ERR" ||
	fail "no summary naming host h2, rank 2 and status 5: $ERR"
grep -Eq '^smddp-run: mpirun \(pid [0-9]+\) exited with status 5: the job failed$' <<<"$ERR" ||
	fail "no final line: $ERR"
[ "$(grep -c 'smddp-run: rank [0-9]* on host' <<<"$ERR")" -eq 1 ] ||
	fail "ranks stopped by mpirun were reported as failures: $ERR"
nothing_left
echo "ok: exit 5 on h2"

# rank 3 is killed by SIGKILL: 128 + 9
job sh -c 'if [ "$RANK" = 3 ]; then kill -KILL $$; fi; exec sleep 120'
[ "$RC" -eq 137 ] || fail "SIGKILL: exit status $RC, not 137: $ERR"
grep -Eq 'smddp-run: rank 3 on host h2 \(pid [0-9]+\) was killed by signal 9 \(Killed\)$' <<<"$ERR" ||
	fail "SIGKILL: no summary: $ERR"
nothing_left
echo "ok: SIGKILL on h2"

# a program that does not exist: 127, named
job /nonexistent/program
[ "$RC" -eq 127 ] || fail "missing program: exit status $RC, not 127: $ERR"
grep -q "cannot execute '/nonexistent/program'" <<<"$ERR" || fail "missing program: $ERR"
nothing_left
echo "ok: missing program"
exit 0
