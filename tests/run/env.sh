#!/bin/bash
# tests/run/env.sh - the environment each rank receives, for 1 and 3 ranks
. "$top_srcdir/tests/run/lib.sh"

VARS="SMDDP_RANK SMDDP_WORLD_SIZE SMDDP_LOCAL_RANK SMDDP_LOCAL_WORLD_SIZE RANK
WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK ROLE_RANK ROLE_WORLD_SIZE
MASTER_ADDR MASTER_PORT SMDDP_MASTER_ADDR SMDDP_MASTER_PORT SMDDP_JOB_TOKEN
SMDDP_JOB_ID TORCHELASTIC_RUN_ID OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE
OMPI_COMM_WORLD_LOCAL_RANK SLURM_PROCID SLURM_NTASKS SLURM_LOCALID
SLURM_JOB_ID SMDDP_TEST_INHERITED SMDATAPARALLEL_LOCAL_RANK
SMDATAPARALLEL_SERVER_ADDR SMDATAPARALLEL_SERVER_PORT"
args=()
for v in $VARS; do
	args+=(env "$v")
done

# An outer launcher's variables, and stale values of ours, must not leak.
# (srun's step id says that smddp-run runs in a step, not in a batch
# script, where it would run the job through srun: tests/slurm/slurm.sh.)
outer=(env -u SMDDP_JOB_ID SMDDP_TEST_INHERITED=yes
	OMPI_COMM_WORLD_RANK=5 OMPI_COMM_WORLD_SIZE=9 OMPI_COMM_WORLD_LOCAL_RANK=1
	SLURM_PROCID=4 SLURM_NTASKS=8 SLURM_LOCALID=2 SLURM_JOB_ID=77 SLURM_STEP_ID=3
	SMDDP_RANK=7 RANK=7 WORLD_SIZE=99 MASTER_PORT=1 SMDDP_JOB_TOKEN=stale
	SMDATAPARALLEL_LOCAL_RANK=6 SMDATAPARALLEL_SERVER_ADDR=stale SMDATAPARALLEL_SERVER_PORT=1)

# check OUTPUT PREFIX NAME VALUE: OUTPUT has the line "PREFIXNAME=VALUE"
check() {
	grep -Fxq -- "$2$3=$4" <<<"$1" || fail "expected '$2$3=$4' in:
$1"
}
check_unset() {
	grep -Fxq -- "$2$3 unset" <<<"$1" || fail "expected $3 unset in:
$1"
}
value() {
	sed -n "s/^$(printf '%s' "$2" | sed 's/[][]/\\&/g')$3=//p" <<<"$1"
}

# ---- one rank: no tagging by default
out=$("${outer[@]}" timeout 60 "$RUN" -n 1 "$PROG" "${args[@]}") || fail "smddp-run -n 1 failed: $?"
for kv in SMDDP_RANK=0 SMDDP_WORLD_SIZE=1 SMDDP_LOCAL_RANK=0 SMDDP_LOCAL_WORLD_SIZE=1 \
	RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=0 ROLE_RANK=0 \
	ROLE_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 SMDDP_MASTER_ADDR=127.0.0.1 \
	SLURM_JOB_ID=77 SMDDP_TEST_INHERITED=yes SMDATAPARALLEL_LOCAL_RANK=0 \
	SMDATAPARALLEL_SERVER_ADDR=127.0.0.1; do
	check "$out" "" "${kv%%=*}" "${kv#*=}"
done
for v in OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK \
	SLURM_PROCID SLURM_NTASKS SLURM_LOCALID; do
	check_unset "$out" "" "$v"
done
port=$(value "$out" "" MASTER_PORT)
[[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65535 ] || fail "bad MASTER_PORT '$port'"
check "$out" "" SMDDP_MASTER_PORT "$port"
check "$out" "" SMDATAPARALLEL_SERVER_PORT "$port"
id=$(value "$out" "" SMDDP_JOB_ID)
[[ "$id" =~ ^[0-9a-f]{12}$ ]] || fail "bad SMDDP_JOB_ID '$id'"
check "$out" "" TORCHELASTIC_RUN_ID "$id"
token=$(value "$out" "" SMDDP_JOB_TOKEN)
[[ "$token" =~ ^[0-9a-f]{32}$ ]] || fail "bad SMDDP_JOB_TOKEN '$token'"

# ---- three ranks, tagged by default, one job id, token and port for all
out=$("${outer[@]}" timeout 60 "$RUN" -n 3 "$PROG" "${args[@]}") || fail "smddp-run -n 3 failed: $?"
[ "$(wc -l <<<"$out")" -eq $((3 * $(wc -w <<<"$VARS"))) ] || fail "unexpected line count:
$out"
id=$(value "$out" "[0] " SMDDP_JOB_ID)
token=$(value "$out" "[0] " SMDDP_JOB_TOKEN)
port=$(value "$out" "[0] " MASTER_PORT)
[[ "$id" =~ ^[0-9a-f]{12}$ ]] || fail "bad SMDDP_JOB_ID '$id'"
[[ "$token" =~ ^[0-9a-f]{32}$ ]] || fail "bad SMDDP_JOB_TOKEN '$token'"
for r in 0 1 2; do
	p="[$r] "
	for kv in SMDDP_RANK=$r SMDDP_WORLD_SIZE=3 SMDDP_LOCAL_RANK=$r SMDDP_LOCAL_WORLD_SIZE=3 \
		RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r LOCAL_WORLD_SIZE=3 GROUP_RANK=0 ROLE_RANK=$r \
		ROLE_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port SMDDP_MASTER_PORT=$port \
		SMDDP_JOB_ID=$id TORCHELASTIC_RUN_ID=$id SMDDP_JOB_TOKEN=$token \
		SMDATAPARALLEL_LOCAL_RANK=$r SMDATAPARALLEL_SERVER_ADDR=127.0.0.1 \
		SMDATAPARALLEL_SERVER_PORT=$port; do
		check "$out" "$p" "${kv%%=*}" "${kv#*=}"
	done
	check_unset "$out" "$p" OMPI_COMM_WORLD_RANK
	check_unset "$out" "$p" SLURM_PROCID
done

# ---- explicit address and port; an SMDDP_JOB_ID from outside is kept
out=$(SMDDP_JOB_ID=myjob42 timeout 60 "$RUN" -n 2 --master-addr 10.1.2.3 --master-port 29500 \
	"$PROG" env MASTER_ADDR env SMDDP_MASTER_ADDR env MASTER_PORT env SMDDP_JOB_ID \
	env TORCHELASTIC_RUN_ID) || fail "smddp-run with --master-* failed: $?"
for r in 0 1; do
	check "$out" "[$r] " MASTER_ADDR 10.1.2.3
	check "$out" "[$r] " SMDDP_MASTER_ADDR 10.1.2.3
	check "$out" "[$r] " MASTER_PORT 29500
	check "$out" "[$r] " SMDDP_JOB_ID myjob42
	check "$out" "[$r] " TORCHELASTIC_RUN_ID myjob42
done

# ---- the most ranks, under the usual soft limit of 1024 descriptors
hard=$(ulimit -Hn)
if [ "$hard" = unlimited ] || [ "$hard" -ge 2200 ]; then
	out=$(ulimit -Sn 1024 && timeout 60 "$RUN" -n 1024 "$PROG" env SMDDP_RANK) ||
		fail "-n 1024 failed: $?"
	[ "$(sed 's/^\[\([0-9]*\)\] SMDDP_RANK=\1$/ok/' <<<"$out" | sort | uniq -c | tr -s ' ')" = " 1024 ok" ] ||
		fail "-n 1024: $(head -5 <<<"$out")"
fi

# ---- the default rank count: one per /dev/nvidiaN, else 1
ngpu=$(ls /dev/ 2>/dev/null | grep -c '^nvidia[0-9][0-9]*$')
[ "$ngpu" -ge 1 ] || ngpu=1
out=$(timeout 60 "$RUN" --no-tag-output "$PROG" env WORLD_SIZE) || fail "default -n failed"
[ "$(sort -u <<<"$out")" = "WORLD_SIZE=$ngpu" ] || fail "default world size: $out (expected $ngpu)"
exit 0
