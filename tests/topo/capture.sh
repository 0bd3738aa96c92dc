#!/bin/bash
# tests/topo/capture.sh - copies the few /sys and /proc files smddp-topo reads into DIR,
# as a sysroot fixture for smddp-topo --sysroot DIR (symlinks become link files).
#
#   tests/topo/capture.sh DIR      (then check DIR: no serial numbers, MAC addresses...)
set -eu
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
out=$1
src=${CAPTURE_FROM:-}   # another root to capture from (for testing this script)

copy() { # copy FILE (a path under /) if readable
	[ -f "$src/$1" ] && [ -r "$src/$1" ] || return 0
	mkdir -p "$out/$(dirname "$1")"
	cat "$src/$1" >"$out/$1" 2>/dev/null || rm -f "$out/$1"
}

# link PATH: recreate the symlink PATH as the kernel has it, as a link file
# ("!<symlink>TARGET": sysfs links form cycles, which tar -h and other
# copiers follow forever), and make its target a directory; prints the
# target's path under /.
link() {
	local t r
	t=$(readlink "$src/$1") || return 1
	mkdir -p "$out/$(dirname "$1")"
	printf '!<symlink>%s\n' "$t" >"$out/$1"
	r=$(realpath "$src/$1") || return 1
	r=${r#"$src"}
	mkdir -p "$out/$r"
	echo "$r"
}

# the PCI devices above a resolved device path, and their files
pci_up() {
	local p=$1
	while [ "$p" != / ] && [ -n "$p" ]; do
		case ${p##*/} in
		[0-9a-f][0-9a-f][0-9a-f][0-9a-f]:[0-9a-f][0-9a-f]:[0-9a-f][0-9a-f].[0-9a-f])
			for f in class vendor device numa_node local_cpulist; do copy "$p/$f"; done ;;
		esac
		p=${p%/*}
	done
}

copy /proc/sys/kernel/hostname
if [ -r "$src/proc/meminfo" ]; then
	mkdir -p "$out/proc"
	grep '^MemTotal:' "$src/proc/meminfo" >"$out/proc/meminfo" || true
fi
# /proc/cpuinfo: only the model names
if [ -r "$src/proc/cpuinfo" ]; then
	mkdir -p "$out/proc"
	grep '^model name' "$src/proc/cpuinfo" >"$out/proc/cpuinfo" || true
fi
copy /sys/devices/system/cpu/online
copy /sys/devices/system/cpu/present
for c in "$src"/sys/devices/system/cpu/cpu[0-9]*; do
	c=${c#"$src"}
	copy "$c/topology/physical_package_id"
	copy "$c/topology/core_id"
done
for n in "$src"/sys/devices/system/node/node[0-9]*; do
	[ -d "$n" ] || continue
	n=${n#"$src"}
	copy "$n/cpulist"
	if [ -r "$src/$n/meminfo" ]; then
		grep 'MemTotal:' "$src/$n/meminfo" >"$out/$n/meminfo" || true
	fi
done
for d in "$src"/sys/bus/pci/devices/*; do
	[ -e "$d" ] || continue
	r=$(link "${d#"$src"}") || continue
	pci_up "$r"
done
for d in "$src"/sys/class/net/* "$src"/sys/class/infiniband/*; do
	[ -e "$d" ] || continue
	d=${d#"$src"}
	r=$(link "$d") || continue
	[ -L "$src/$r/device" ] || continue
	dev=$(link "$r/device") || continue
	copy "$r/speed"
	copy "$r/ports/1/rate"
	pci_up "$dev"
done
# git keeps no empty directory (virtual/net/lo): mark them
find "$out" -type d -empty -exec touch {}/.keep \;
