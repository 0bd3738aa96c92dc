#!/bin/bash
# tests/run/hosts.sh - --hosts and --hostfile: parsing, --dry-run plans, the
# options of the mpirun mode, clear errors (exit 2) for malformed host lists
# and a missing mpirun; --env and --network-interface in local mode
. "$top_srcdir/tests/run/lib.sh"

# bad PATTERN ARGS...: exit 2, no stdout, stderr matches PATTERN
bad() {
	local pat=$1 rc=0
	shift
	env -i PATH=/usr/bin:/bin timeout 60 "$RUN" "$@" >"$T/out" 2>"$T/err" </dev/null || rc=$?
	[ "$rc" -eq 2 ] || fail "'$*': exit status $rc, not 2: $(cat "$T/err")"
	[ ! -s "$T/out" ] || fail "'$*': stdout: $(cat "$T/out")"
	grep -Eq "^smddp-run: .*$pat" "$T/err" || fail "'$*': expected /$pat/ in: $(cat "$T/err")"
}
bad 'malformed host list .a,,b.: an empty host name' --hosts a,,b true
bad 'malformed host list .,a.' --hosts ,a true
bad 'malformed host list .a,.' --hosts a, true
bad "malformed host list 'a:0': 'a:0': expected a number of ranks from 1 to 1024" --hosts a:0 true
bad "'a:x'" --hosts a:x true
bad "invalid host name 'a b'" --hosts 'a b' true
bad "'fe80::1': IPv6 addresses are not supported" --hosts fe80::1 true
bad "host 'a' is given twice" --hosts a:2,a:2 true
bad 'hosts with different rank counts \(a:2, b:4\): give -n N' --hosts a:2,b:4 true
bad '--hosts and --hostfile exclude each other' --hosts a --hostfile /dev/null true
bad "cannot open hostfile '/nonexistent'" --hostfile /nonexistent true
printf 'a slots=2\nb slot=2\n' >"$T/hf"
bad "$T/hf:2: malformed hostfile entry 'slot=2'" --hostfile "$T/hf" true
printf '# nothing\n\n' >"$T/hf"
bad "hostfile '$T/hf' names no host" --hostfile "$T/hf" true
bad "invalid --bind 'socket'" --bind socket true
bad '--mpirun-args applies to jobs across hosts' --mpirun-args -v true
bad "--mpirun-args '-x \"A': a quote is not closed" --hosts a --mpirun-args '-x "A' true
bad "invalid --env '1A=2'" --env 1A=2 true
bad '--env NOT_SET_ANYWHERE: NOT_SET_ANYWHERE is not set' --env NOT_SET_ANYWHERE true
bad "--env 'RANK=3': smddp-run sets RANK itself" --env RANK=3 true
bad "invalid --network-interface 'a b'" --network-interface 'a b' true
# mpirun missing: named, with the package to install
mkdir "$T/nobin"
rc=0
env -i PATH="$T/nobin" "$(command -v timeout)" 60 "$RUN" --hosts a:1 true >"$T/out" 2>"$T/err" || rc=$?
[ "$rc" -eq 2 ] && [ ! -s "$T/out" ] &&
	grep -q '^smddp-run: mpirun not found in PATH: .*apt-get install openmpi-bin' "$T/err" ||
	fail "no mpirun: exit status $rc: $(cat "$T/err")"
rc=0
SMDDP_MPIRUN=/nonexistent/mpirun timeout 60 "$RUN" --hosts a:1 true 2>"$T/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q '^smddp-run: /nonexistent/mpirun not found: ' "$T/err" ||
	fail "SMDDP_MPIRUN: $rc $(cat "$T/err")"
# the wrapper outside mpirun
rc=0
env -u OMPI_COMM_WORLD_RANK timeout 60 "$RUN" --rank-wrapper -- true 2>"$T/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q 'OMPI_COMM_WORLD_RANK is not set: this mode runs under Open MPI' "$T/err" ||
	fail "--rank-wrapper: $rc $(cat "$T/err")"
# a crash after a forwarded SIGUSR1 (a dump request) is still reported with
# host, rank and status; after SIGTERM (a stop) it is mpirun's to report
for sig in USR1 TERM; do
	mkdir "$T/w$sig"
	# env execs the wrapper: BG is its pid
	start_bg env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_LOCAL_RANK=0 \
		OMPI_COMM_WORLD_LOCAL_SIZE=1 "$RUN" --rank-wrapper -- "$PROG" ignore 10 ignore 15 pid "$T/w$sig" \
		waitn "$T/w$sig" 2 exit-if 0 3 2>"$T/w$sig/err"
	wrapper=$BG
	wait_files 1 "$T/w$sig/pid"
	# pending before the rank can exit: the wrapper takes it first (lower number)
	kill -"$sig" "$wrapper"
	# the second file waitn counts; the rank's pid, for cleanup to kill
	cp "$T/w$sig/pid.0" "$T/w$sig/pid.1"
	wait_bg "$wrapper" 60
	[ "$RC" -eq 3 ] || fail "--rank-wrapper, SIG$sig: exit status $RC: $(cat "$T/w$sig/err")"
done
grep -Fxq "smddp-run: rank 0 on host $(hostname) (pid $(cat "$T/wUSR1/pid.0")) exited with status 3" \
	"$T/wUSR1/err" || fail "--rank-wrapper, SIGUSR1: no report: $(cat "$T/wUSR1/err")"
[ ! -s "$T/wTERM/err" ] || fail "--rank-wrapper, SIGTERM: $(cat "$T/wTERM/err")"

# ---- a hostfile with comments, blank lines and max_slots, in a --dry-run
cat >"$T/hosts" <<'HF'
# the training hosts
node-a slots=4 max_slots=8

node-b.example.com    slots=4   # the second one
HF
plan() {
	env -i PATH=/usr/bin:/bin SMDDP_JOB_ID=job7 FOO=inherited timeout 60 "$RUN" "$@" |
		sed -e 's/\(SMDDP_JOB_TOKEN=\)[0-9a-f]\{32\}$/\1TOKEN/' -e "s|$RUN|SMDDP_RUN|"
}
out=$(plan --hostfile "$T/hosts" --dry-run --bind numa --network-interface ens5 --env FOO \
	--env 'BAR=x y' --master-port 1234 --mpirun-args "--mca pml ob1 -x 'Q=a b'" \
	python3 -c 'print(1)') || fail "hostfile --dry-run failed"
expected=$(cat <<'EXP'
# smddp-run --dry-run: hosts through mpirun, 2 hosts x 4 ranks
export BAR='x y'
export GLOO_SOCKET_IFNAME=ens5
export HFI_NO_BACKTRACE=1
export IPATH_NO_BACKTRACE=1
export MASTER_ADDR=node-a
export MASTER_PORT=1234
export NCCL_SOCKET_IFNAME=ens5
export SMDATAPARALLEL_SERVER_ADDR=node-a
export SMDATAPARALLEL_SERVER_PORT=1234
export SMDDP_JOB_ID=job7
export SMDDP_JOB_TOKEN=TOKEN
export SMDDP_MASTER_ADDR=node-a
export SMDDP_MASTER_PORT=1234
mpirun \
  --allow-run-as-root \
  -np 8 \
  --host node-a:4,node-b.example.com:4 \
  --bind-to numa \
  --tag-output \
  --mca btl_tcp_if_include ens5 \
  --mca oob_tcp_if_include ens5 \
  -x BAR \
  -x FOO \
  -x GLOO_SOCKET_IFNAME \
  -x HFI_NO_BACKTRACE \
  -x IPATH_NO_BACKTRACE \
  -x MASTER_ADDR \
  -x MASTER_PORT \
  -x NCCL_SOCKET_IFNAME \
  -x PATH \
  -x SMDATAPARALLEL_SERVER_ADDR \
  -x SMDATAPARALLEL_SERVER_PORT \
  -x SMDDP_JOB_ID \
  -x SMDDP_JOB_TOKEN \
  -x SMDDP_MASTER_ADDR \
  -x SMDDP_MASTER_PORT \
  --mca pml ob1 \
  -x 'Q=a b' \
  SMDDP_RUN --rank-wrapper -- python3 -c 'print(1)'
EXP
)
[ "$out" = "$expected" ] || fail "hostfile --dry-run:
$(diff <(echo "$expected") <(echo "$out"))"

# -n overrides the slots; one rank in all: no tagging; --master-addr wins
out=$(plan --hosts a -n 1 --master-addr 10.0.0.9 --dry-run true) || fail "--hosts a -n 1"
grep -qx -- '  -np 1 \\' <<<"$out" && grep -qx -- '  --host a:1 \\' <<<"$out" &&
	! grep -q -- --tag-output <<<"$out" && grep -qx 'export MASTER_ADDR=10.0.0.9' <<<"$out" ||
	fail "--hosts a -n 1: $out"
out=$(plan --hosts a:8,b:8 -n 2 --no-tag-output --dry-run true) || fail "-n 2"
grep -qx -- '  -np 4 \\' <<<"$out" && grep -qx -- '  --host a:2,b:2 \\' <<<"$out" ||
	fail "-n 2: $out"

# ---- local mode: --env and --network-interface reach the ranks
out=$(BAR=old timeout 60 "$RUN" -n 2 --env BAR=new --env 'BAZ=a b' --network-interface lo \
	"$PROG" env BAR env BAZ env NCCL_SOCKET_IFNAME env GLOO_SOCKET_IFNAME) || fail "local --env"
for r in 0 1; do
	for kv in BAR=new 'BAZ=a b' NCCL_SOCKET_IFNAME=lo GLOO_SOCKET_IFNAME=lo; do
		grep -Fxq "[$r] $kv" <<<"$out" || fail "local --env: no '[$r] $kv' in: $out"
	done
done
# an explicit --env wins over --network-interface
out=$(timeout 60 "$RUN" -n 1 --network-interface lo --env NCCL_SOCKET_IFNAME=eth9 "$PROG" \
	env NCCL_SOCKET_IFNAME) || fail "--env over --network-interface"
[ "$out" = NCCL_SOCKET_IFNAME=eth9 ] || fail "--env over --network-interface: $out"

# ---- --bind on one machine: core i mod cores, or the NUMA node i mod nodes
allowed=$(sed -n 's/^Cpus_allowed_list:\t//p' /proc/self/status)
out=$(timeout 60 "$RUN" -n 2 --bind core sh -c 'sed -n "s/^Cpus_allowed_list:\t//p" /proc/self/status' \
	2>"$T/err") || fail "--bind core: $(cat "$T/err")"
b0=$(sed -n 's/^\[0\] //p' <<<"$out")
b1=$(sed -n 's/^\[1\] //p' <<<"$out")
[ -n "$b0" ] && [ -n "$b1" ] && [ "$b0" != "$allowed" ] || [ "$(nproc)" -eq 1 ] ||
	fail "--bind core: rank 0 not bound: '$b0' (all: '$allowed')"
cores=$(cat /sys/devices/system/cpu/cpu*/topology/thread_siblings_list 2>/dev/null | sort -u | wc -l)
[ "$cores" -lt 2 ] || [ "$b0" != "$b1" ] || fail "--bind core: ranks 0 and 1 share '$b0' on $cores cores"
out=$(timeout 60 "$RUN" -n 2 --bind numa sh -c 'sed -n "s/^Cpus_allowed_list:\t//p" /proc/self/status' \
	2>"$T/err") || fail "--bind numa: $(cat "$T/err")"
[ ! -s "$T/err" ] || fail "--bind numa: $(cat "$T/err")"
node0=$(cat /sys/devices/system/node/node0/cpulist 2>/dev/null) || node0=$allowed
[ "$(sed -n 's/^\[0\] //p' <<<"$out")" = "$node0" ] || [ "$node0" != "$allowed" ] ||
	fail "--bind numa: rank 0: $out (node 0: $node0)"

# ---- through mpirun on this machine, when Open MPI is installed
if command -v mpirun >/dev/null 2>&1; then
	out=$(timeout 120 "$RUN" --hosts localhost:2 --no-tag-output \
		--env SMDDP_TEST_X=1 "$PROG" env RANK env LOCAL_RANK env GROUP_RANK env WORLD_SIZE \
		env SMDDP_TEST_X env SMDDP_JOB_TOKEN env SMDATAPARALLEL_LOCAL_RANK \
		env SMDATAPARALLEL_SERVER_ADDR 2>"$T/err") || fail "mpirun: exit status $?: $(cat "$T/err")"
	for kv in RANK=0 RANK=1 LOCAL_RANK=0 LOCAL_RANK=1 GROUP_RANK=0 WORLD_SIZE=2 SMDDP_TEST_X=1 \
		SMDATAPARALLEL_LOCAL_RANK=0 SMDATAPARALLEL_LOCAL_RANK=1; do
		grep -Fxq "$kv" <<<"$out" || fail "mpirun: no '$kv' in: $out"
	done
	[ "$(grep -c '^SMDDP_JOB_TOKEN=[0-9a-f]\{32\}$' <<<"$out")" -eq 2 ] &&
		[ "$(grep '^SMDDP_JOB_TOKEN=' <<<"$out" | sort -u | wc -l)" -eq 1 ] || fail "mpirun: token: $out"
	[ "$(grep -c '^SMDATAPARALLEL_SERVER_ADDR=.' <<<"$out")" -eq 2 ] || fail "mpirun: server address: $out"
	rc=0
	timeout 120 "$RUN" --hosts localhost:3 "$PROG" exit-if 1 4 sleep 60 \
		>"$T/out" 2>"$T/err" || rc=$?
	[ "$rc" -eq 4 ] || fail "mpirun: a rank exits 4: exit status $rc: $(cat "$T/err")"
	grep -Eq "smddp-run: rank 1 on host $(hostname) \(pid [0-9]+\) exited with status 4$" "$T/err" ||
		fail "mpirun: no summary: $(cat "$T/err")"
	# --timeout stops mpirun and with it every rank: 124
	rc=0
	timeout 120 "$RUN" --hosts localhost:2 --timeout 2 --grace 5 "$PROG" pid "$T" sleep 60 \
		>"$T/out" 2>"$T/err" || rc=$?
	[ "$rc" -eq 124 ] || fail "mpirun --timeout: exit status $rc: $(cat "$T/err")"
	grep -q '^smddp-run: timeout: the job ran for 2 seconds; stopping mpirun$' "$T/err" ||
		fail "mpirun --timeout: $(cat "$T/err")"
	expect_dead 10 $(pids_in "$T"/pid.*)
fi
exit 0
