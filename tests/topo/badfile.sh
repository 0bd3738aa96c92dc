#!/bin/bash
# tests/topo/badfile.sh - a bad topology file is one clear line and exit 1
. "$top_srcdir/tests/topo/lib.sh"

# bad NAME PATTERN CONTENT: --topo on a file with CONTENT fails with PATTERN
bad() {
	printf '%s\n' "$3" >"$T/$1.json"
	topo --topo "$T/$1.json"
	runtime_error "$1" "$T/$1.json: $2"
}
bad notjson 'line 3: not valid JSON' '{"schema": 1,
  "gpus": [],
  "nics": [,]}'
bad array 'expected a JSON object' '[1, 2]'
bad noschema 'no "schema": 1' '{"gpus": []}'
bad schema2 '"schema": 2 is not supported (this libsmddp reads schema 1)' '{"schema": 2}'
bad schemastr '"schema": "1" is not supported' '{"schema": "1"}'
bad unknown 'gpus\[0\]: "numa": unknown key' '{"schema": 1, "gpus": [{"numa": 0}]}'
bad topunknown '"gpu": unknown key' '{"schema": 1, "gpu": []}'
bad type 'gpus\[1\].numa_node: expected a whole number or null, found "1"' \
	'{"schema": 1, "gpus": [{}, {"numa_node": "1"}]}'
bad negative 'cpu.cores: expected a whole number or null, found -2' '{"schema": 1, "cpu": {"cores": -2}}'
bad noname 'nics\[0\].name: expected a string' '{"schema": 1, "nics": [{}]}'
bad efa 'nics\[0\].efa: expected true or false' '{"schema": 1, "nics": [{"name": "a", "efa": 1}]}'
bad rows 'gpu_links: expected an array of 1 rows' '{"schema": 1, "gpus": [{}], "gpu_links": []}'
bad rel 'gpu_links\[0\]\[1\]: expected NV<links>, PIX, PXB, PHB, NODE or SYS, found "NV"' \
	'{"schema": 1, "gpus": [{}, {}], "gpu_links": [["X", "NV"], ["NV4", "X"]]}'
bad self 'gpu_links\[1\]\[1\]: expected "X"' \
	'{"schema": 1, "gpus": [{}, {}], "gpu_links": [["X", "PIX"], ["PIX", "SYS"]]}'
bad cols 'gpu_nic\[0\]: expected an array of 1 relations' \
	'{"schema": 1, "gpus": [{}], "nics": [{"name": "a"}], "gpu_nic": [[]]}'
: >"$T/empty.json"
topo --topo "$T/empty.json"
runtime_error empty 'empty.json: empty file'
topo --topo "$T/nosuch.json"
runtime_error nosuch 'nosuch.json: No such file or directory'
topo --topo "$T"
runtime_error directory "$T"

# through SMDDP_TOPO_FILE, the variable is named
rc=0
SMDDP_TOPO_FILE="$T/schema2.json" timeout 60 "$TOPO" >"$T/out" 2>"$T/err" </dev/null || rc=$?
runtime_error SMDDP_TOPO_FILE "SMDDP_TOPO_FILE: $T/schema2.json: \"schema\": 2"

# a sysroot that is not there
topo --sysroot "$T/nowhere"
runtime_error sysroot "sysroot $T/nowhere: No such file or directory"
mkdir "$T/empty"
topo --sysroot "$T/empty"
runtime_error "empty sysroot" "sysroot $T/empty: neither sys/ nor proc/ under it"
exit 0
