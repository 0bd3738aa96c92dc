#!/bin/bash
# tests/check-az/imds-env.sh - the AWS_* variables, IMDSv1 fallback, 401 renewal, retries, timeouts and the hop-limit hint
. "$top_srcdir/tests/check-az/lib.sh"
start_emu

M="$FIX/mounts-fsx-in"
# emit_at SEGMENT [ARGS...]: --emit against the emulator's host SEGMENT
emit_at() {
	local seg=$1
	shift
	AWS_EC2_METADATA_SERVICE_ENDPOINT="$EMU_URL/$seg" az --emit --mounts "$M" "$@"
}
imds_of() {
	json_get "$T/out" 'd.get("imds")'
}
# log_count 'LINE REGEX': emulator log lines matching
log_count() {
	grep -c -- "$1" "$EMU_LOG" || true
}

# ---- AWS_EC2_METADATA_DISABLED: nothing is asked, exit 1, a clear message
for v in true TRUE True; do
	AWS_EC2_METADATA_DISABLED=$v emit_at az1-host1
	expect_rc 1 "AWS_EC2_METADATA_DISABLED=$v"
	grep -q "disabled by AWS_EC2_METADATA_DISABLED=$v" "$T/err" || fail "disabled: $(cat "$T/err")"
	AWS_EC2_METADATA_DISABLED=$v AWS_EC2_METADATA_SERVICE_ENDPOINT="$EMU_URL/az1-host1" az --mounts "$M"
	expect_rc 1 "AWS_EC2_METADATA_DISABLED=$v, single-host check"
done
[ ! -s "$EMU_LOG" ] || fail "AWS_EC2_METADATA_DISABLED: IMDS was asked: $(cat "$EMU_LOG")"
AWS_EC2_METADATA_DISABLED=false emit_at az1-host1
expect_rc 0 "AWS_EC2_METADATA_DISABLED=false"
[ "$(imds_of)" = v2 ] || fail "not IMDSv2: $(cat "$T/out")"
[ "$(log_count '^PUT /az1-host1/latest/api/token 200$')" -eq 1 ] || fail "one token: $(cat "$EMU_LOG")"
[ "$(log_count '^GET /az1-host1/.* 401$')" -eq 0 ] || fail "401s: $(cat "$EMU_LOG")"

# ---- IMDSv1 fallback on 403/404/405 of the token PUT, unless V1 is disabled
emit_at v1only
expect_rc 0 "IMDSv1-only host"
[ "$(imds_of)" = v1 ] || fail "v1only: $(cat "$T/out")"
[ "$(json_get "$T/out" 'd["instance_id"]')" = i-0eeeeeeeeeeeee07 ] || fail "v1only: $(cat "$T/out")"
for st in 403 405; do
	emit_at "az1-host1~mode=v1-only~token_put_status=$st"
	expect_rc 0 "token PUT $st"
	[ "$(imds_of)" = v1 ] || fail "token PUT $st: $(cat "$T/out")"
done
: >"$EMU_LOG"
AWS_EC2_METADATA_V1_DISABLED=true emit_at v1only
expect_rc 1 "IMDSv1-only host, AWS_EC2_METADATA_V1_DISABLED=true"
grep -q 'HTTP 404 to PUT /latest/api/token.*AWS_EC2_METADATA_V1_DISABLED=true forbids' "$T/err" \
	|| fail "V1_DISABLED: $(cat "$T/err")"
[ "$(json_get "$T/out" '"error" in d')" = True ] || fail "V1_DISABLED: no error record: $(cat "$T/out")"
[ "$(log_count '^GET ')" -eq 0 ] || fail "V1_DISABLED: GETs without a token: $(cat "$EMU_LOG")"
# other status codes of the PUT are not a reason to fall back
emit_at "az1-host1~mode=v1-only~token_put_status=400"
expect_rc 1 "token PUT 400"
grep -q 'HTTP 400 to PUT /latest/api/token' "$T/err" || fail "PUT 400: $(cat "$T/err")"

# ---- IMDS turned off (403 to everything): exit 1 with the fix
emit_at disabled
expect_rc 1 "IMDS turned off"
grep -q '403 Forbidden.*turned off for this instance' "$T/err" || fail "turned off: $(cat "$T/err")"

# ---- 403 or 404 from something that is not IMDS (no "Server: EC2ws"): not
# "turned off", nor "has no availability zone", but nobody here
for st in 403 404; do
	emit_at "az1-host1~mode=foreign~foreign_status=$st"
	expect_rc 1 "not IMDS, $st"
	grep -q "answered HTTP $st to GET /latest/meta-data/.*but not as EC2's metadata service answers (Server: nginx, not EC2ws): no instance metadata service here (not EC2, or IMDS off)" "$T/err" ||
		fail "not IMDS, $st: $(cat "$T/err")"
	grep -q 'turned off for this instance\|has no' "$T/err" && fail "not IMDS, $st: asserts too much: $(cat "$T/err")"
	[ "$(json_get "$T/out" '"no instance metadata service here" in d["error"]')" = True ] ||
		fail "not IMDS, $st: error record: $(cat "$T/out")"
done

# ---- v2-only hosts work with tokens
emit_at "az1-host1~mode=v2-only"
expect_rc 0 "IMDSv2-only host"
[ "$(imds_of)" = v2 ] || fail "v2-only: $(cat "$T/out")"

# ---- 401 renews the token once
: >"$EMU_LOG"
emit_at "az1-host1~expire_tokens_at_get=3"
expect_rc 0 "expired token"
[ "$(log_count '^PUT .*api/token 200$')" -eq 2 ] || fail "renewal: $(cat "$EMU_LOG")"
[ "$(log_count '^GET .* 401$')" -eq 1 ] || fail "renewal: $(cat "$EMU_LOG")"
[ "$(json_get "$T/out" 'd["region"]')" = us-east-1 ] || fail "renewal: $(cat "$T/out")"
: >"$EMU_LOG"
emit_at "az1-host1~refuse_tokens=true"
expect_rc 1 "tokens always refused"
[ "$(log_count '^PUT .*api/token 200$')" -eq 2 ] || fail "refused tokens: not one renewal: $(cat "$EMU_LOG")"
[ "$(log_count '^GET .* 401$')" -eq 2 ] || fail "refused tokens: $(cat "$EMU_LOG")"
grep -q 'refused a fresh IMDSv2 token' "$T/err" || fail "refused tokens: $(cat "$T/err")"
# a v2-only IMDS whose token PUT fails cannot be read with IMDSv1
emit_at "az1-host1~mode=v2-only~put_delay_s=2" 
expect_rc 1 "v2-only, token timed out"
grep -q 'requires IMDSv2' "$T/err" || fail "v2-only, no token: $(cat "$T/err")"

# ---- a token PUT that gets no answer: the container hop-limit explanation
emit_at "az1-host1~put_delay_s=3"
expect_rc 0 "token PUT timed out, IMDSv1 fallback"
[ "$(imds_of)" = v1 ] || fail "PUT timeout: $(cat "$T/out")"
grep -q 'timed out after 1 s, falling back to IMDSv1.*container.*HttpPutResponseHopLimit, 1 by default.*hop-limit 2' "$T/err" \
	|| fail "PUT timeout: no hop-limit hint: $(cat "$T/err")"
AWS_EC2_METADATA_V1_DISABLED=true emit_at "az1-host1~put_delay_s=3"
expect_rc 1 "token PUT timed out, V1 disabled"
grep -q 'timed out after 1 s and AWS_EC2_METADATA_V1_DISABLED=true.*HttpPutResponseHopLimit' "$T/err" \
	|| fail "PUT timeout, V1 disabled: $(cat "$T/err")"
# AWS_METADATA_SERVICE_TIMEOUT: seconds, fractions allowed
AWS_METADATA_SERVICE_TIMEOUT=0.3 emit_at "az1-host1~put_delay_s=1"
expect_rc 0 "timeout 0.3 s"
[ "$(imds_of)" = v1 ] || fail "timeout 0.3: $(cat "$T/out")"
grep -q 'timed out after 0.3 s' "$T/err" || fail "timeout 0.3: $(cat "$T/err")"
AWS_METADATA_SERVICE_TIMEOUT=10 emit_at "az1-host1~put_delay_s=1.5"
expect_rc 0 "timeout 10 s, answer after 1.5 s"
[ "$(imds_of)" = v2 ] || fail "timeout 10: $(cat "$T/out")"
[ ! -s "$T/err" ] || fail "timeout 10: $(cat "$T/err")"
# a GET that times out is a failure (the SDKs do not fall back there)
emit_at "az1-host1~get_delay_s=2"
expect_rc 1 "GET timed out"
grep -q 'did not answer within 1 s' "$T/err" || fail "GET timeout: $(cat "$T/err")"

# ---- AWS_METADATA_SERVICE_NUM_ATTEMPTS: 503s are retried that many times in all
emit_at "az1-host1~fail_first=2"
expect_rc 1 "503, one attempt"
grep -q 'HTTP 503 to PUT /latest/api/token' "$T/err" || fail "503: $(cat "$T/err")"
AWS_METADATA_SERVICE_NUM_ATTEMPTS=3 emit_at "az1-host1~fail_first=2~get_delay_s=0"
expect_rc 0 "503 twice, three attempts"
[ "$(imds_of)" = v2 ] || fail "attempts: $(cat "$T/out")"
AWS_METADATA_SERVICE_NUM_ATTEMPTS=2 emit_at "az1-host1~fail_first=2~put_delay_s=0"
expect_rc 1 "503 twice, two attempts"

# ---- endpoint: trailing slash, unreachable, proxies ignored, IPv6 mode
emit_at "az1-host1/"
expect_rc 0 "endpoint with a trailing slash"
AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:1 az --emit --mounts "$M"
expect_rc 1 "unreachable endpoint"
grep -q 'cannot reach http://127.0.0.1:1' "$T/err" || fail "unreachable: $(cat "$T/err")"
http_proxy=http://127.0.0.1:1 HTTP_PROXY=http://127.0.0.1:1 all_proxy=http://127.0.0.1:1 emit_at az1-host1
expect_rc 0 "a proxy in the environment"
# -v logs each request
emit_at az1-host1 -v
expect_rc 0 "--verbose"
grep -q "^smddp-check-az: PUT $EMU_URL/az1-host1/latest/api/token: HTTP 200$" "$T/err" || fail "-v: $(cat "$T/err")"
grep -q "^smddp-check-az: GET $EMU_URL/az1-host1/latest/meta-data/placement/availability-zone-id: HTTP 200$" "$T/err" \
	|| fail "-v: $(cat "$T/err")"

# bad values: exit 1, naming the variable
badenv() {
	env "$@" AWS_EC2_METADATA_SERVICE_ENDPOINT="${EP:-$EMU_URL/az1-host1}" "$AZ" --emit --mounts "$M" >"$T/out" 2>"$T/err"
	RC=$?
	expect_rc 1 "$*"
	grep -q "${1%%=*}" "$T/err" || fail "$*: $(cat "$T/err")"
}
badenv AWS_METADATA_SERVICE_TIMEOUT=abc
badenv AWS_METADATA_SERVICE_TIMEOUT=0
badenv AWS_METADATA_SERVICE_TIMEOUT=-1
badenv AWS_METADATA_SERVICE_NUM_ATTEMPTS=0
badenv AWS_METADATA_SERVICE_NUM_ATTEMPTS=1.5
badenv AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv5
EP=ftp://127.0.0.1/ badenv AWS_EC2_METADATA_SERVICE_ENDPOINT=ftp://127.0.0.1/

# IPv6: the mode is accepted, and an IPv6 endpoint works where ::1 exists
AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=ipv6 emit_at az1-host1
expect_rc 0 "ENDPOINT_MODE=IPv6 with an explicit endpoint"
if python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
	v4=$EMU_URL
	start_emu ::1
	AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv6 emit_at az1-host3
	expect_rc 0 "IPv6 endpoint $EMU_URL"
	[ "$(json_get "$T/out" 'd["instance_id"]')" = i-0aaaaaaaaaaaaaa03 ] || fail "IPv6: $(cat "$T/out")"
	EMU_URL=$v4
else
	echo "no IPv6 loopback here: the IPv6 endpoint part is skipped"
fi
exit 0
