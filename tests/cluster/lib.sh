# tests/cluster/lib.sh - a cluster of H "hosts" on one machine, for tests that span hosts
#
# Sourced by tests/cluster/*.sh (root only; others skip with 77):
#
#   cluster_up H [RATE]   hosts h1..hH: network namespaces smddp-PID-hN, each
#                         with eth0 at 10.77.0.N/24, joined by a bridge that
#                         lives in a namespace of its own (smddp-PID-br), so the
#                         machine's own interfaces and routes are never touched;
#                         RATE (e.g. 1gbit) shapes every eth0 with tc tbf.
#                         CL_HOST_HOOK, if set, is called as "HOOK N NS" for
#                         each host before its eth0 exists (interfaces made
#                         there come first in the host's list).
#   on_host N CMD...      runs CMD in host N: its network namespace and a UTS
#                         namespace of its own whose hostname is hN; bound it
#                         with timeout(1).
#   CL_AGENT              a launch agent for mpirun (--mca plm_rsh_agent):
#                         "AGENT [OPTIONS] 10.77.0.N COMMAND..." runs COMMAND
#                         through sh in host N, as ssh would.
#   cl_mpirun_args        the options smddp-run passes to mpirun here (agent,
#                         no tree spawn), for --mpirun-args.
#   cl_hosts H N          "10.77.0.1:N,...,10.77.0.H:N", for --hosts.
#
# Everything is removed on exit, also on failure or interrupt: the processes
# still in the namespaces (by pid, from ip netns pids), then the namespaces
# (which takes the veths and the bridge along), then the temporary folder.

set -u
: "${top_builddir:?run through make check}"
: "${top_srcdir:?run through make check}"

RUN="$top_builddir/cmd/smddp-run"
# inside a Slurm allocation smddp-run would go through srun: these tests run here
unset SLURM_JOB_ID
ENVCHECK="$top_builddir/tests/cluster/envcheck"
CL_ID="smddp-$$"
CL_NS=""
CL_DIR=""
CL_PIDS=""

. "$top_srcdir/tests/lib.sh" # fail (stops the test), skip, now, since

cluster_cleanup() {
	local ns p
	set +e # a script with set -e (scripts/bench-hosts.sh) must not stop at the first kill that finds nobody
	for p in $CL_PIDS; do
		kill -KILL "$p" 2>/dev/null
	done
	for ns in $CL_NS; do
		for p in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$p" 2>/dev/null
		done
	done
	for ns in $CL_NS; do
		ip netns del "$ns" 2>/dev/null
	done
	[ -n "$CL_DIR" ] && rm -rf "$CL_DIR"
	return 0
}
trap cluster_cleanup EXIT
trap 'exit 1' INT TERM HUP

[ "${EUID:-$(id -u)}" -eq 0 ] || skip "network namespaces need root"
for tool in ip unshare timeout; do
	command -v "$tool" >/dev/null 2>&1 || skip "$tool is not installed (Debian: iproute2, util-linux, coreutils)"
done
command -v mpirun >/dev/null 2>&1 || skip "mpirun is not installed (Debian: openmpi-bin)"
# A launcher chosen in the environment (OMPI_MCA_plm=isolated, as some
# images set) would start every rank on this host, in h1, instead of
# through the agent that puts each in its namespace.
unset OMPI_MCA_plm

CL_DIR=$(mktemp -d "${TMPDIR:-/tmp}/smddp-cluster.XXXXXX") || exit 99
# what smddp-run and its ranks keep in TMPDIR (the flight recorders' dumps
# through mpirun, the private directory of a launcher killed) goes with it
mkdir "$CL_DIR/tmp" && export TMPDIR="$CL_DIR/tmp"

# cl_ns NAME: creates a namespace, recorded for cleanup before it exists
cl_ns() {
	CL_NS="$CL_NS $1"
	ip netns add "$1"
}

cl_probe() {
	local err
	if ! err=$(cl_ns "$CL_ID-probe" 2>&1); then
		skip "'ip netns add' is not permitted here: $err"
	fi
	if ! err=$(ip netns exec "$CL_ID-probe" unshare --uts true 2>&1); then
		skip "cannot enter a namespace with its own hostname: $err"
	fi
	ip netns del "$CL_ID-probe"
	CL_NS=""
}

cluster_up() {
	local h=$1 rate=${2:-} i ns br="$CL_ID-br"
	[ "$h" -ge 1 ] && [ "$h" -le 9 ] || fail "cluster_up: 1 to 9 hosts"
	cl_probe
	cl_ns "$br" || fail "cannot create namespace $br"
	ip -n "$br" link set lo up
	ip -n "$br" link add br0 type bridge || skip "no bridge support in this kernel"
	ip -n "$br" link set br0 up
	for ((i = 1; i <= h; i++)); do
		ns="$CL_ID-h$i"
		cl_ns "$ns" || fail "cannot create namespace $ns"
		ip -n "$ns" link set lo up
		[ -n "${CL_HOST_HOOK:-}" ] && "$CL_HOST_HOOK" "$i" "$ns"
		ip -n "$br" link add "h$i" type veth peer name eth0 netns "$ns" ||
			skip "no veth support in this kernel"
		ip -n "$br" link set "h$i" master br0 up
		ip -n "$ns" addr add "10.77.0.$i/24" dev eth0
		ip -n "$ns" link set eth0 up
		if [ -n "$rate" ]; then
			ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb \
				latency 50ms || fail "tc tbf on h$i"
		fi
	done
	CL_H=$h
	# every host reaches every other before anyone runs
	for ((i = 2; i <= h; i++)); do
		cl_wait_reach 1 "10.77.0.$i" || fail "h1 cannot reach 10.77.0.$i"
	done

	CL_AGENT="$CL_DIR/agent"
	cat >"$CL_AGENT" <<AGENT
#!/bin/sh
# launch agent for mpirun: [OPTIONS] HOST COMMAND... -> COMMAND in that host
while [ \$# -gt 0 ]; do
	case "\$1" in
	-*) shift ;;
	*) break ;;
	esac
done
host=\$1
shift
n=\${host##*.}
case "\$host" in
10.77.0.[1-9]) ;;
*) echo "agent: unknown host \$host" >&2; exit 255 ;;
esac
exec ip netns exec "$CL_ID-h\$n" unshare --uts /bin/sh -c 'hostname "\$0" && exec /bin/sh -c "\$1"' "h\$n" "\$*"
AGENT
	chmod +x "$CL_AGENT"
}

# cl_wait_reach N ADDR: host N can open a TCP connection attempt to ADDR
# (an ARP-resolved refusal counts), within 10 s
cl_wait_reach() {
	local i
	for ((i = 0; i < 100; i++)); do
		if ip netns exec "$CL_ID-h$1" ping -c 1 -W 1 "$2" >/dev/null 2>&1; then
			return 0
		fi
		command -v ping >/dev/null 2>&1 || return 0   # no ping: trust the bridge
		sleep 0.1
	done
	return 1
}

# cl_host_pids: the processes in the hosts' namespaces (h1..h$CL_H)
cl_host_pids() {
	local i
	for ((i = 1; i <= CL_H; i++)); do
		ip netns pids "$CL_ID-h$i" 2>/dev/null
	done
}

# cl_wait_empty TENTHS: whether the hosts are empty of processes within
# TENTHS tenths of a second
cl_wait_empty() {
	local i
	for ((i = 0; i < $1; i++)); do
		[ -z "$(cl_host_pids)" ] && return 0
		sleep 0.1
	done
	[ -z "$(cl_host_pids)" ]
}

# (in the background, waited for: a signal to the test is handled at once)
on_host() {
	local n=$1 pid rc=0
	shift
	ip netns exec "$CL_ID-h$n" unshare --uts /bin/sh -c 'hostname "$0" && exec "$@"' "h$n" "$@" &
	pid=$!
	CL_PIDS="$CL_PIDS $pid"
	wait "$pid" || rc=$?
	return "$rc"
}

cl_mpirun_args() {
	echo "--mca plm_rsh_agent $CL_AGENT --mca plm_rsh_no_tree_spawn 1 --mca btl self,tcp"
}

cl_hosts() {
	local h=$1 n=$2 i out=""
	for ((i = 1; i <= h; i++)); do
		out="$out${out:+,}10.77.0.$i:$n"
	done
	echo "$out"
}
