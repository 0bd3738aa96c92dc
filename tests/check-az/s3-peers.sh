#!/bin/bash
# tests/check-az/s3-peers.sh - --s3 (bucket region by an unsigned HEAD) and --peers (connect RTT, a hint only)
. "$top_srcdir/tests/check-az/lib.sh"
start_emu
port=${EMU_URL##*:}

: >"$T/records"
for h in az1-host1 az1-host2 az1-host3; do
	emit_host "$h" --mounts "$FIX/mounts-fsx-in"
done
cp "$T/records" "$T/same"
: >"$T/records"
for h in az1-host1 az2-host4; do
	emit_host "$h" --mounts /dev/null
done
cp "$T/records" "$T/cross"
S3="--s3-endpoint=$EMU_URL/s3"

# ---- S3: same region 0, another region 3, a bucket without answer 1
az --compare "$S3" --s3 train-data-use1 "$T/same"
expect_rc 0 "bucket in the hosts' region"
grep -q '^s3: train-data-use1: same-region: ' "$T/out" || fail "same region: $(cat "$T/out")"
grep -q '^verdict: same AZ' "$T/out" || fail "same region: $(cat "$T/out")"
grep -q "^HEAD /s3/train-data-use1 200$" "$EMU_LOG" || fail "no HEAD: $(cat "$EMU_LOG")"
az --compare --json "$S3" --s3 train-data-use1 --s3 logs-usw2 "$T/same"
expect_rc 3 "bucket in another region"
[ "$(json_get "$T/out" '[(b["bucket"], b["region"], b["status"]) for b in d["s3"]]')" = \
	"[('train-data-use1', 'us-east-1', 'same-region'), ('logs-usw2', 'us-west-2', 'mismatch')]" ] \
	|| fail "s3 json: $(cat "$T/out")"
[ "$(json_get "$T/out" 'd["mismatches"]')" = "['S3 bucket logs-usw2 is in us-west-2, the hosts in us-east-1']" ] \
	|| fail "s3 mismatch: $(cat "$T/out")"
az --compare "$S3" --s3 no-such-bucket "$T/same"
expect_rc 1 "a bucket without x-amz-bucket-region"
grep -q '^UNDECIDED: S3 bucket no-such-bucket: HEAD .*/s3/no-such-bucket: HTTP 404 without x-amz-bucket-region (no such bucket)$' "$T/out" \
	|| fail "no such bucket: $(cat "$T/out")"
# an S3 endpoint that does not answer
az --compare --s3-endpoint http://127.0.0.1:1 --s3 train-data-use1 "$T/same"
expect_rc 1 "S3 unreachable"
grep -q '^UNDECIDED: S3 bucket train-data-use1: HEAD http://127.0.0.1:1/train-data-use1: ' "$T/out" \
	|| fail "S3 unreachable: $(cat "$T/out")"
# the endpoint from the environment; the option wins over it
SMDDP_CHECK_AZ_S3_ENDPOINT="$EMU_URL/s3" az --compare --s3 logs-usw2 "$T/same"
expect_rc 3 "SMDDP_CHECK_AZ_S3_ENDPOINT"
SMDDP_CHECK_AZ_S3_ENDPOINT=http://127.0.0.1:1 az --compare "$S3" --s3 train-data-use1 "$T/same"
expect_rc 0 "--s3-endpoint over SMDDP_CHECK_AZ_S3_ENDPOINT"
# alone: this host's region against the bucket's
AWS_EC2_METADATA_SERVICE_ENDPOINT="$EMU_URL/az1-host2" az --mounts "$FIX/mounts-fsx-in" "$S3" --s3 logs-usw2
expect_rc 3 "single host, bucket elsewhere"
AWS_EC2_METADATA_SERVICE_ENDPOINT="$EMU_URL/az1-host2" az --mounts "$FIX/mounts-fsx-in" "$S3" --s3 train-data-use1
expect_rc 0 "single host, bucket in its region"

# ---- peers: round trips to ports this test opened; never a verdict
az --compare --json --peers "127.0.0.1:$port,[::1]:1" --peers 127.0.0.1:1 "$T/same"
expect_rc 0 "peers with a same-AZ cluster"
[ "$(json_get "$T/out" '[(p["peer"], type(p["connect_rtt_us"]).__name__, p["error"] is None) for p in d["peers"]]')" = \
	"[('127.0.0.1:$port', 'int', True), ('[::1]:1', 'NoneType', False), ('127.0.0.1:1', 'NoneType', False)]" ] \
	|| fail "peers json: $(cat "$T/out")"
[ "$(json_get "$T/out" '0 <= d["peers"][0]["connect_rtt_us"] < 10000000')" = True ] || fail "rtt: $(cat "$T/out")"
az --compare --peers "127.0.0.1:$port" "$T/cross"
expect_rc 3 "a fast peer does not hide two AZs"
grep -q "^peer: 127.0.0.1:$port: connect [0-9]* us (a hint only" "$T/out" || fail "peer line: $(cat "$T/out")"
az --compare --peers "127.0.0.1:99999,127.0.0.1:x,nohost.invalid:22" "$T/same"
expect_rc 0 "bad peers are reported, not judged"
grep -q "^peer: 127.0.0.1:99999: '127.0.0.1:99999': the port must be 1 to 65535$" "$T/out" || fail "bad port: $(cat "$T/out")"
grep -q "^peer: nohost.invalid:22: nohost.invalid: " "$T/out" || fail "bad host: $(cat "$T/out")"
exit 0
