#!/bin/bash
# tests/check-az/compare.sh - --compare: every verdict (same AZ, cross-AZ, other VPC, storage proven/unproven/other region, names only, failed hosts)
. "$top_srcdir/tests/check-az/lib.sh"
start_emu

# records NAME:MOUNTS...: one file of JSON lines, $T/rec.<N>, path in REC
n=0
records() {
	local spec
	n=$((n + 1))
	REC="$T/rec.$n"
	: >"$T/records"
	for spec in "$@"; do
		emit_host "${spec%%:*}" --mounts "$FIX/${spec#*:}"
	done
	mv "$T/records" "$REC"
}
# judge FILE... with --json too: the exit status must be the same both ways
judge() {
	az --compare --json "$@"
	JRC=$RC
	cp "$T/out" "$T/json"
	az --compare "$@"
	[ "$RC" -eq "$JRC" ] || fail "--json exit $JRC, report exit $RC"
}
has() {
	grep -q -- "$1" "$T/out" || fail "report lacks '$1': $(cat "$T/out")"
}
jcheck() {
	local got
	got=$(json_get "$T/json" "$1") || fail "$1: cannot evaluate on $(cat "$T/json")"
	[ "$got" = "$2" ] || fail "$1: '$got', not '$2' in $(cat "$T/json")"
}

# ---- a same-AZ cluster of 3 hosts, FSx for Lustre inside a subnet: proven, exit 0
records az1-host1:mounts-fsx-in az1-host2:mounts-fsx-in az1-host3:mounts-fsx-in
SAME=$REC
judge "$SAME"
expect_rc 0 "same AZ"
has '^hosts: 3$'
has '^subnet: subnet-0a1a1a1a1a1a1a1a1 10.0.1.0/24 in use1-az4, 2 host(s)$'
has '^subnet: subnet-0a2a2a2a2a2a2a2a2 10.0.2.0/24 in use1-az4, 1 host(s)$'
has '^storage: lustre 10.0.1.5@tcp:/abcdefgh: proven: 10.0.1.5 is in subnet-0a1a1a1a1a1a1a1a1'
has '^verdict: same AZ (AZ ID use1-az4)$'
grep -q 'MISMATCH\|UNDECIDED\|warning' "$T/out" && fail "same AZ: $(cat "$T/out")"
[ ! -s "$T/err" ] || fail "same AZ: stderr: $(cat "$T/err")"
jcheck 'd["verdict"], d["exit_status"], d["basis"]' "('same-az', 0, 'availability_zone_id')"
jcheck 'd["availability_zone_ids"], d["vpcs"], d["regions"]' "(['use1-az4'], ['vpc-0123456789abcdef0'], ['us-east-1'])"
jcheck 'len(d["hosts"]), len(d["subnets"]), len(d["storage"])' "(3, 2, 1)"
jcheck 'd["storage"][0]["status"], d["storage"][0]["zone"], len(d["storage"][0]["hosts"])' "('proven', 'use1-az4', 3)"
jcheck 'd["mismatches"], d["undecided"], d["warnings"]' "([], [], [])"

# the same records from a pipe ('-' and no FILE), one file per host, a JSON array
cat "$SAME" | timeout 60 "$AZ" --compare - >"$T/out" 2>"$T/err" || fail "--compare -: exit $?"
has '^verdict: same AZ'
cat "$SAME" | timeout 60 "$AZ" --compare >"$T/out" 2>"$T/err" || fail "--compare from stdin: exit $?"
has '^verdict: same AZ'
split -l 1 "$SAME" "$T/one."
judge "$T"/one.*
expect_rc 0 "one file per host"
has '^hosts: 3$'
python3 -c 'import json,sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1])], indent=2))' "$SAME" >"$T/array"
judge "$T/array"
expect_rc 0 "a JSON array"
has '^hosts: 3$'
# '-' twice reads standard input once
cat "$SAME" | timeout 60 "$AZ" --compare - - >"$T/out" 2>"$T/err" || fail "- -: exit $?"
has '^hosts: 3$'

# ---- FSx outside every subnet: unproven, which is not wrong: exit 0
records az1-host1:mounts-fsx-out az1-host2:mounts-fsx-out az1-host3:mounts-fsx-out
judge "$REC"
expect_rc 0 "FSx outside the subnets"
has '^storage: lustre 10.0.9.5@tcp:/ijklmnop: unproven: no server IP is in a subnet of the hosts'
has '^verdict: same AZ (AZ ID use1-az4)$'
jcheck 'd["verdict"], d["storage"][0]["status"], d["storage"][0]["zone"]' "('same-az', 'unproven', None)"

# ---- a cross-AZ cluster: exit 3, each AZ ID named with its hosts
records az1-host1:mounts-fsx-in az1-host2:mounts-fsx-in az2-host4:mounts-fsx-in
CROSS=$REC
judge "$CROSS"
expect_rc 3 "cross-AZ"
has '^MISMATCH: AZ ID use1-az4: .*i-0aaaaaaaaaaaaaa01.*i-0aaaaaaaaaaaaaa02'
has '^MISMATCH: AZ ID use1-az6: .*i-0bbbbbbbbbbbbbb04'
# the FSx is proven in use1-az4 (host1's subnet), and host4 mounts it from use1-az6
has '^MISMATCH: storage 10.0.1.5@tcp:/abcdefgh: .*mounted from .*i-0bbbbbbbbbbbbbb04.* in use1-az6'
has '^verdict: MISMATCH$'
jcheck 'd["verdict"], d["exit_status"], sorted(d["availability_zone_ids"])' "('mismatch', 3, ['use1-az4', 'use1-az6'])"
jcheck 'd["storage"][0]["status"]' mismatch

# ---- a host in another VPC (same AZ): exit 3
records az1-host1:mounts-fsx-out az1-host2:mounts-fsx-out vpc2-host5:mounts-fsx-out
judge "$REC"
expect_rc 3 "another VPC"
has '^MISMATCH: VPC vpc-0fedcba9876543210: .*i-0ccccccccccccc05'
has '^MISMATCH: VPC vpc-0123456789abcdef0: '
grep -q 'MISMATCH: AZ' "$T/out" && fail "another VPC: AZ flagged: $(cat "$T/out")"
jcheck 'd["verdict"], d["availability_zone_ids"], len(d["vpcs"])' "('mismatch', ['use1-az4'], 2)"

# ---- FSx inside the subnet of a host in another AZ than the one mounting it
records az1-host1:mounts-fsx-out az2-host4:mounts-fsx-in
judge "$REC"
expect_rc 3 "FSx proven in another AZ"
jcheck '[(s["source"], s["status"]) for s in d["storage"]]' "[('10.0.9.5@tcp:/ijklmnop', 'unproven'), ('10.0.1.5@tcp:/abcdefgh', 'mismatch')]"

# ---- storage of every kind on one host: lustre failover proven, EFS addr= proven,
# an unresolved FSx name (region known from it), a local TLS tunnel: exit 0
records az1-host1:mounts-mixed az1-host2:mounts-fsx-in
judge "$REC"
expect_rc 0 "mixed storage"
jcheck '[(s["type"], s["status"]) for s in d["storage"]]' \
	"[('lustre', 'proven'), ('lustre', 'unproven'), ('nfs', 'proven'), ('nfs', 'unproven'), ('nfs', 'unproven'), ('nfs', 'unproven'), ('lustre', 'proven')]"
jcheck 'd["storage"][1]["region"], d["storage"][1]["dns_name"]' "('us-east-1', 'fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com.invalid')"
jcheck 'd["storage"][2]["region"], d["storage"][2]["subnet_id"]' "('us-east-1', 'subnet-0a1a1a1a1a1a1a1a1')"
has '^storage: nfs fs-0abc1234.efs.us-east-1.amazonaws.com.invalid:/: unproven: mounted through a local tunnel'
has 'storage: lustre fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com.invalid@tcp:/qrstuvwx: unproven: no server IP (a name that did not resolve)'

# ---- EFS in another region than the hosts: exit 3
records az1-host1:mounts-fsx-in az1-host2:mounts-efs-west
judge "$REC"
expect_rc 3 "EFS in another region"
has '^MISMATCH: storage fs-0def5678.efs.us-west-2.amazonaws.com.invalid:/: fs-0def5678.efs.us-west-2.amazonaws.com.invalid is in region us-west-2, .* in us-east-1$'
jcheck '[(s["status"], s["region"]) for s in d["storage"]]' "[('proven', None), ('mismatch', 'us-west-2')]"

# ---- names only, when a record lacks the AZ ID: compared with a warning
records az1-host1:mounts-fsx-in noazid:mounts-fsx-in
judge "$REC"
expect_rc 0 "AZ names only"
grep -q 'warning: 1 of 2 records lack the AZ ID: comparing AZ names, which map to different physical zones in different AWS accounts' "$T/err" \
	|| fail "names only: stderr: $(cat "$T/err")"
has '^warning: 1 of 2 records lack the AZ ID'
has '^verdict: same AZ (AZ name us-east-1a)$'
jcheck 'd["basis"], d["verdict"], len(d["warnings"])' "('availability_zone', 'same-az', 1)"
# different names, no IDs: a mismatch by names
python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l); d.pop("availability_zone_id", None)
    if d["instance_id"].endswith("04"): d["availability_zone"] = "us-east-1b"
    print(json.dumps(d))' "$CROSS" >"$T/names"
judge "$T/names"
expect_rc 3 "AZ names differ"
has '^MISMATCH: AZ us-east-1b: '
jcheck 'd["basis"]' availability_zone
# one AZ ID under two names: two accounts, same zone: exit 0 with a warning
python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if d["instance_id"].endswith("03"): d["availability_zone"] = "us-east-1c"
    print(json.dumps(d))' "$SAME" >"$T/accounts"
judge "$T/accounts"
expect_rc 0 "one AZ ID, two names"
has '^warning: one AZ ID but 2 AZ names'
has '^verdict: same AZ (AZ ID use1-az4)$'
# one AZ name, two AZ IDs: different zones whatever the names say
python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if d["instance_id"].endswith("04"): d["availability_zone"] = "us-east-1a"
    print(json.dumps(d))' "$CROSS" >"$T/samename"
judge "$T/samename"
expect_rc 3 "one AZ name, two AZ IDs"

# ---- a host whose query failed: undecided (1); with a mismatch elsewhere: 3
AWS_EC2_METADATA_SERVICE_ENDPOINT="$EMU_URL/disabled" az --emit --mounts "$FIX/mounts-fsx-in"
expect_rc 1 "--emit on a disabled host"
cp "$T/out" "$T/failed"
cat "$SAME" "$T/failed" >"$T/some-failed"
judge "$T/some-failed"
expect_rc 1 "a host failed"
has '^UNDECIDED: .*turned off'
has '^  .*: query failed: '
has '^verdict: UNDECIDED$'
jcheck 'd["verdict"], d["exit_status"], len(d["hosts"])' "('undecided', 1, 4)"
cat "$CROSS" "$T/failed" >"$T/failed-cross"
judge "$T/failed-cross"
expect_rc 3 "a host failed, two AZs among the others"
judge "$T/failed"
expect_rc 1 "only failed hosts"
has '^UNDECIDED: no host.s placement is known$'

# ---- records that cannot be judged: exit 1
echo '{"schema": "smddp-check-az/9", "instance_id": "i-1"}' >"$T/future"
judge "$SAME" "$T/future"
expect_rc 1 "another schema"
has 'UNDECIDED: .*another schema'
echo '{"schema": "smddp-check-az/1", "hostname": "h"}' >"$T/noid"
judge "$T/noid"
expect_rc 1 "no instance_id"
has 'UNDECIDED: h: a record without instance_id'
echo '[1, "x"]' >"$T/scalars"
judge "$T/scalars"
expect_rc 1 "not objects"
python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l); d.pop("availability_zone_id"); d.pop("availability_zone"); print(json.dumps(d))' "$SAME" >"$T/nozone"
judge "$T/nozone"
expect_rc 1 "no zone at all"
has '^UNDECIDED: 3 of 3 records have neither AZ ID nor AZ name$'

# the same host twice: a warning, no verdict change
head -n 1 "$SAME" >"$T/dup"
judge "$SAME" "$T/dup"
expect_rc 0 "a host twice"
has '^warning: i-0aaaaaaaaaaaaaa01 appears twice$'

# ---- storage whose "ips" is not a list: judged as none, and nothing leaks
python3 -c '
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    for st in d.get("storage", []):
        st["ips"] = "10.0.1.5"
    print(json.dumps(d))' "$SAME" >"$T/ips-string" || fail "cannot rewrite the records"
az --compare "$T/ips-string"
[ "$RC" -le 3 ] || fail "\"ips\" not a list: exit status $RC: $(cat "$T/err")"
if command -v valgrind >/dev/null; then
	RC=0
	timeout 120 valgrind -q --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=9 \
		"$AZ" --compare --json "$T/ips-string" >"$T/out" 2>"$T/err" || RC=$?
	[ "$RC" -ne 9 ] || fail "\"ips\" not a list: valgrind finds a leak: $(cat "$T/err")"
fi
exit 0
