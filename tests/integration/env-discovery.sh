# env-discovery.sh - rank discovery without smddp-run (DESIGN 4): SMDDP_RANK/SMDDP_WORLD_SIZE,
# torchrun's RANK/WORLD_SIZE, Open MPI's OMPI_COMM_WORLD_*, Slurm's SLURM_*; the
# first match wins, and SMDDP_MASTER_* wins over MASTER_*.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # bash, whatever make's SHELL is
. "$top_srcdir/tests/integration/lib.sh"

# job NAME "VARS OF RANK 0" "VARS OF RANK 1": both started by hand; each must
# come up as the rank it was given (the first word of its line is it) in a
# world of 2 whose allreduce works.
job() {
	local name=$1 v0=$2 v1=$3 i pids=() st
	local vars=("$v0" "$v1")
	for i in 0 1; do
		# shellcheck disable=SC2086
		env -i PATH="$PATH" HOME="${HOME:-/}" SMDDP_CONFIG=/dev/null SMDDP_TIMEOUT=10 ${vars[$i]} \
			timeout -k 5 30 "$FAULT" init >"$TDIR/$name.$i.out" 2>"$TDIR/$name.$i.err" &
		pids+=($!)
	done
	for i in 0 1; do
		wait "${pids[$i]}"
		st=$?
		echo "--- $name rank $i: ${vars[$i]} -> exit $st"
		sed 's/^/    /' "$TDIR/$name.$i.out" "$TDIR/$name.$i.err"
		if [ "$st" -ne 0 ]; then
			fail "$name: process $i exited $st"
		elif ! grep -q "^INIT rank=$i size=2 local_rank=$i local_size=2" "$TDIR/$name.$i.out"; then
			fail "$name: process $i is not rank $i of 2 (local $i of 2)"
		elif ! grep -q "^INIT allreduce rc=SMDDP_OK sum=2" "$TDIR/$name.$i.out"; then
			fail "$name: process $i: the allreduce failed"
		else
			pass "$name: process $i is rank $i of 2 and its allreduce works"
		fi
	done
}

m() { echo "MASTER_ADDR=127.0.0.1 MASTER_PORT=$("$FAULT" freeport)"; }

p=$(m)
job smddp "SMDDP_RANK=0 SMDDP_WORLD_SIZE=2 $p" "SMDDP_RANK=1 SMDDP_WORLD_SIZE=2 $p"
p=$(m)
job torchrun "RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 $p" \
	"RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 $p"
p=$(m)
job openmpi "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_COMM_WORLD_LOCAL_SIZE=2 $p" \
	"OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=1 OMPI_COMM_WORLD_LOCAL_SIZE=2 $p"
p=$(m)
job slurm "SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_LOCALID=0 $p" "SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=1 $p"
# SMDDP_RANK beats RANK, RANK beats OMPI_*, OMPI_* beats SLURM_*
p=$(m)
job precedence "SMDDP_RANK=0 SMDDP_WORLD_SIZE=2 RANK=1 WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 $p" \
	"SMDDP_RANK=1 SMDDP_WORLD_SIZE=2 RANK=0 WORLD_SIZE=2 SLURM_PROCID=0 SLURM_NTASKS=2 $p"
p=$(m)
job precedence2 "RANK=0 WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 $p" \
	"OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 SLURM_PROCID=0 SLURM_NTASKS=2 $p"
# SMDDP_MASTER_PORT beats MASTER_PORT (each process is given a different,
# useless MASTER_PORT: only the shared SMDDP_MASTER_PORT can join them)
port=$("$FAULT" freeport)
job master-precedence \
	"SMDDP_RANK=0 SMDDP_WORLD_SIZE=2 SMDDP_MASTER_ADDR=127.0.0.1 SMDDP_MASTER_PORT=$port MASTER_ADDR=127.0.0.1 MASTER_PORT=$("$FAULT" freeport)" \
	"SMDDP_RANK=1 SMDDP_WORLD_SIZE=2 SMDDP_MASTER_ADDR=127.0.0.1 SMDDP_MASTER_PORT=$port MASTER_ADDR=127.0.0.1 MASTER_PORT=$("$FAULT" freeport)"
finish
