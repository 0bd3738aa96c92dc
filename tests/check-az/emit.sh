#!/bin/bash
# tests/check-az/emit.sh - --emit: every field of the record, storage from mounts files, failures as records
. "$top_srcdir/tests/check-az/lib.sh"
start_emu

# check FILE 'PYTHON EXPRESSION on d' EXPECTED
check() {
	local got
	got=$(json_get "$1" "$2") || fail "$2: cannot evaluate on $(cat "$1")"
	[ "$got" = "$3" ] || fail "$2: '$got', not '$3' in $(cat "$1")"
}

export AWS_EC2_METADATA_SERVICE_ENDPOINT="$EMU_URL/az1-host1"
az --emit --mounts "$FIX/mounts-mixed"
expect_rc 0 "--emit az1-host1"
[ "$(wc -l <"$T/out")" -eq 1 ] || fail "--emit: not one line: $(cat "$T/out")"
[ ! -s "$T/err" ] || fail "--emit: stderr: $(cat "$T/err")"
R="$T/out"
check "$R" 'd["schema"]' smddp-check-az/1
check "$R" 'd["hostname"]' "$(hostname)"
check "$R" 'd["instance_id"]' i-0aaaaaaaaaaaaaa01
check "$R" 'd["instance_type"]' p4d.24xlarge
check "$R" 'd["region"]' us-east-1
check "$R" 'd["availability_zone"]' us-east-1a
check "$R" 'd["availability_zone_id"]' use1-az4
check "$R" 'd["placement_group"]' train-pg
check "$R" 'type(d["partition_number"]).__name__, d["partition_number"]' "('int', 1)"
check "$R" 'd["local_ipv4"]' 10.0.1.11
check "$R" 'd["imds"]' v2
check "$R" '[(i["mac"], i["device_number"], i["subnet_id"], i["subnet_ipv4_cidr_block"], i["vpc_id"]) for i in d["interfaces"]]' \
	"[('0e:00:00:00:01:01', 0, 'subnet-0a1a1a1a1a1a1a1a1', '10.0.1.0/24', 'vpc-0123456789abcdef0'), ('0e:00:00:00:01:02', 1, 'subnet-0a1a1a1a1a1a1a1a1', '10.0.1.0/24', 'vpc-0123456789abcdef0')]"

# storage: lustre failover NIDs, a bind mount counted once, an FSx name that
# does not resolve (.invalid), EFS with the kernel's addr=, an efs-utils TLS
# tunnel, IPv6 NFS, an escaped mount point, a name that does not resolve
check "$R" 'len(d["storage"])' 6
check "$R" '[(s["type"], s["mountpoint"]) for s in d["storage"]]' \
	"[('lustre', '/scratch'), ('lustre', '/fsx data'), ('nfs', '/efs'), ('nfs', '/efs-tls'), ('nfs', '/data'), ('nfs', '/home')]"
check "$R" 'd["storage"][0]["ips"], d["storage"][0]["dns_name"]' "(['10.0.1.5', '10.0.1.6', '10.0.2.5'], None)"
check "$R" 'd["storage"][1]["ips"], d["storage"][1]["unresolved"], d["storage"][1]["dns_name"]' \
	"([], ['fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com.invalid'], 'fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com.invalid')"
check "$R" 'd["storage"][1]["source"]' 'fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com.invalid@tcp:/qrstuvwx'
check "$R" 'd["storage"][2]["ips"], d["storage"][2]["unresolved"], d["storage"][2]["dns_name"]' \
	"(['10.0.1.9'], [], 'us-east-1a.fs-0abc1234.efs.us-east-1.amazonaws.com.invalid')"
check "$R" 'd["storage"][3]["ips"]' "['127.0.0.1']"
check "$R" 'd["storage"][4]["ips"], d["storage"][4]["servers"]' "(['fd00::5'], ['fd00::5'])"
check "$R" 'd["storage"][5]["ips"], d["storage"][5]["unresolved"], d["storage"][5]["dns_name"]' "([], ['nas.invalid'], None)"

# --no-resolve: names stay names (no lookup), IP literals still count
az --emit --no-resolve --mounts "$FIX/mounts-mixed"
expect_rc 0 "--emit --no-resolve"
check "$R" 'd["storage"][0]["ips"]' "['10.0.1.5', '10.0.1.6', '10.0.2.5']"
check "$R" 'd["storage"][5]["unresolved"]' "['nas.invalid']"

# a host of an old IMDS: no AZ ID, no placement/region (region from the AZ
# name), no placement group
AWS_EC2_METADATA_SERVICE_ENDPOINT="$EMU_URL/noazid" az --emit --mounts "$FIX/mounts-fsx-in"
expect_rc 0 "--emit noazid"
check "$R" 'd["availability_zone_id"], d["region"], d["placement_group"], d["partition_number"]' \
	"(None, 'us-east-1', None, None)"
check "$R" 'd["storage"][0]["source"], d["storage"][0]["ips"]' "('10.0.1.5@tcp:/abcdefgh', ['10.0.1.5'])"
AWS_EC2_METADATA_SERVICE_ENDPOINT="$EMU_URL/az2-host4" az --emit --mounts /dev/null
expect_rc 0 "--emit az2-host4"
check "$R" 'd["availability_zone_id"], d["placement_group"], d["partition_number"], d["storage"]' \
	"('use1-az6', None, None, [])"

# failures still print one record, with "error", and exit 1
az --emit --mounts "$T/no-such-mounts"
expect_rc 1 "--emit with a missing mounts file"
check "$R" 'd["schema"], "instance_id" in d, "no-such-mounts" in d["error"]' "('smddp-check-az/1', False, True)"
grep -q 'no-such-mounts' "$T/err" || fail "missing mounts: stderr: $(cat "$T/err")"
AWS_EC2_METADATA_SERVICE_ENDPOINT="$EMU_URL/disabled" az --emit --mounts "$FIX/mounts-fsx-in"
expect_rc 1 "--emit on a host with IMDS turned off"
check "$R" '"turned off" in d["error"]' True
grep -q '403 Forbidden.*turned off.*--http-endpoint enabled' "$T/err" || fail "disabled: stderr: $(cat "$T/err")"
# the default /proc/mounts is read when --mounts is not given
az --emit
expect_rc 0 "--emit with /proc/mounts"
check "$R" 'type(d["storage"]).__name__' list

# alone (neither --emit nor --compare): this host judged by itself
az --mounts "$FIX/mounts-fsx-in"
expect_rc 0 "single-host check"
grep -q '^storage: lustre 10.0.1.5@tcp:/abcdefgh: proven: 10.0.1.5 is in subnet-0a1a1a1a1a1a1a1a1 10.0.1.0/24 (use1-az4)$' "$T/out" \
	|| fail "single-host check: $(cat "$T/out")"
grep -q '^verdict: same AZ (AZ ID use1-az4)$' "$T/out" || fail "single-host check: $(cat "$T/out")"
az --json --mounts "$FIX/mounts-efs-west"
expect_rc 3 "single-host check, EFS in another region"
check "$R" 'd["verdict"], d["storage"][0]["status"], d["storage"][0]["region"]' "('mismatch', 'mismatch', 'us-west-2')"
AWS_EC2_METADATA_SERVICE_ENDPOINT="$EMU_URL/disabled" az --mounts "$FIX/mounts-fsx-in"
expect_rc 1 "single-host check with IMDS turned off"
[ ! -s "$T/out" ] || fail "single-host failure: stdout: $(cat "$T/out")"
# with --json, the verdict all the same: the error record, undecided (1)
AWS_EC2_METADATA_SERVICE_ENDPOINT="$EMU_URL/disabled" az --json --mounts "$FIX/mounts-fsx-in"
expect_rc 1 "single-host --json with IMDS turned off"
check "$R" 'd["verdict"], d["exit_status"], len(d["hosts"])' "('undecided', 1, 1)"
check "$R" '"turned off" in d["hosts"][0]["error"]' True
check "$R" 'any("turned off" in u for u in d["undecided"])' True
grep -q '403 Forbidden.*turned off' "$T/err" || fail "single-host --json failure: stderr: $(cat "$T/err")"
exit 0
