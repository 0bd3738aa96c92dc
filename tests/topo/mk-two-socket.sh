#!/bin/bash
# tests/topo/mk-two-socket.sh - builds the hand-made fixture sysroot/two-socket:
# 2 sockets x 4 cores x 2 threads, 2 NUMA nodes of 64 GiB; on NUMA node 0 a PCIe
# switch with GPU0 (A100) and a ConnectX NIC (eth0, RDMA mlx5_0); on node 1 a
# switch with GPU1 and an EFA device (no netdev), and an ENA NIC (eth1) right on
# the host bridge; lo is virtual.  Run from tests/topo; the tree is committed.
set -eu
R=sysroot/two-socket
rm -rf "$R"
w() { mkdir -p "$(dirname "$R/$1")"; printf '%s\n' "$2" >"$R/$1"; }
# lnk TARGET PATH: a link file, smddp-topo's stand-in for a symlink (see capture.sh)
lnk() { w "$2" "!<symlink>$1"; }
mkdir -p "$R/sys/bus/pci/devices" "$R/sys/class/net" "$R/sys/class/infiniband"

w proc/sys/kernel/hostname two-socket
w proc/meminfo "MemTotal:       134217728 kB"
: >"$R/proc/cpuinfo"
for c in $(seq 0 15); do
	echo "model name	: Example CPU @ 2.00GHz" >>"$R/proc/cpuinfo"
	pkg=$(( (c / 4) % 2 )); core=$(( c % 4 ))
	w sys/devices/system/cpu/cpu$c/topology/physical_package_id $pkg
	w sys/devices/system/cpu/cpu$c/topology/core_id $core
done
w sys/devices/system/cpu/online 0-15
w sys/devices/system/node/node0/cpulist 0-3,8-11
w sys/devices/system/node/node0/meminfo "Node 0 MemTotal:       67108864 kB"
w sys/devices/system/node/node1/cpulist 4-7,12-15
w sys/devices/system/node/node1/meminfo "Node 1 MemTotal:       67108864 kB"

# pcidev PATH-UNDER-/sys/devices CLASS VENDOR DEVICE NUMA CPUS
pcidev() {
	local p=sys/devices/$1 bdf=${1##*/}
	w $p/class $2; w $p/vendor $3; w $p/device $4; w $p/numa_node $5; w $p/local_cpulist $6
	lnk ../../../devices/$1 sys/bus/pci/devices/$bdf
}
n0=0-3,8-11 n1=4-7,12-15
pcidev pci0000:00/0000:00:01.0 0x060400 0x8086 0x347a 0 $n0
pcidev pci0000:00/0000:00:01.0/0000:01:00.0 0x060400 0x1000 0xc010 0 $n0
pcidev pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0 0x060400 0x1000 0xc010 0 $n0
pcidev pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0 0x060400 0x1000 0xc010 0 $n0
pcidev pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0 0x030200 0x10de 0x20b0 0 $n0
pcidev pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.1 0x040300 0x10de 0x22a3 0 $n0
pcidev pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0 0x020000 0x15b3 0x101d 0 $n0
pcidev pci0000:80/0000:80:01.0 0x060400 0x8086 0x347a 1 $n1
pcidev pci0000:80/0000:80:01.0/0000:81:00.0 0x060400 0x1000 0xc010 1 $n1
pcidev pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:00.0 0x060400 0x1000 0xc010 1 $n1
pcidev pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:01.0 0x060400 0x1000 0xc010 1 $n1
pcidev pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:00.0/0000:83:00.0 0x030200 0x10de 0x20b0 1 $n1
pcidev pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:01.0/0000:84:00.0 0x020000 0x1d0f 0xefa1 1 $n1
pcidev pci0000:80/0000:80:05.0 0x020000 0x1d0f 0xec20 1 $n1

# netdev NAME PCI-PATH SPEED
netdev() {
	local d=sys/devices/$2/net/$1
	w $d/speed $3
	lnk ../../../$(basename "$2") $d/device
	lnk ../../devices/$2/net/$1 sys/class/net/$1
}
netdev eth0 pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0 100000
netdev eth1 pci0000:80/0000:80:05.0 25000
mkdir -p "$R/sys/devices/virtual/net/lo"
touch "$R/sys/devices/virtual/net/lo/.keep"
lnk ../../devices/virtual/net/lo sys/class/net/lo

# rdma NAME PCI-PATH RATE
rdma() {
	local d=sys/devices/$2/infiniband/$1
	w $d/ports/1/rate "$3"
	lnk ../../../$(basename "$2") $d/device
	lnk ../../devices/$2/infiniband/$1 sys/class/infiniband/$1
}
rdma mlx5_0 pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0 "100 Gb/sec (4X EDR)"
rdma rdmap132s0 pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:01.0/0000:84:00.0 "100 Gb/sec (4X EDR)"
