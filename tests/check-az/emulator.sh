#!/bin/bash
# tests/check-az/emulator.sh - the IMDS emulator itself keeps IMDSv2's rules, which the other tests rely on
. "$top_srcdir/tests/check-az/lib.sh"
start_emu

# One Python client does all the requests and prints "NAME STATUS" lines.
python3 - "$EMU_URL" >"$T/got" 2>&1 <<'PY' || fail "client: $(cat "$T/got")"
import sys, time, urllib.request, urllib.error
base = sys.argv[1]
def req(name, method, path, headers=None):
    r = urllib.request.Request(base + path, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(r, timeout=20) as resp:
            body = resp.read().decode()
            print(name, resp.status)
            return body, resp.headers
    except urllib.error.HTTPError as e:
        print(name, e.code)
        return None, e.headers
TTL = "X-aws-ec2-metadata-token-ttl-seconds"
TOK = "X-aws-ec2-metadata-token"
h = "/az1-host1/latest"
req("ttl-missing", "PUT", h + "/api/token")
req("ttl-0", "PUT", h + "/api/token", {TTL: "0"})
req("ttl-21601", "PUT", h + "/api/token", {TTL: "21601"})
req("ttl-abc", "PUT", h + "/api/token", {TTL: "abc"})
req("forwarded", "PUT", h + "/api/token", {TTL: "60", "X-Forwarded-For": "10.0.0.1"})
tok, hd = req("ttl-21600", "PUT", h + "/api/token", {TTL: "21600"})
print("ttl-echo", hd.get(TTL))
body, _ = req("get-token", "GET", h + "/meta-data/placement/availability-zone-id", {TOK: tok})
print("body", body)
req("get-bad-token", "GET", h + "/meta-data/instance-id", {TOK: "forged"})
req("get-v1", "GET", h + "/meta-data/instance-id")
req("get-missing", "GET", h + "/meta-data/no/such/thing", {TOK: tok})
body, _ = req("list", "GET", h + "/meta-data/network/interfaces/macs/", {TOK: tok})
print("macs", " ".join(body.split()))
short, _ = req("ttl-1", "PUT", h + "/api/token", {TTL: "1"})
time.sleep(1.3)
req("expired", "GET", h + "/meta-data/instance-id", {TOK: short})
req("v2only-no-token", "GET", "/az1-host1~mode=v2-only/latest/meta-data/instance-id")
req("v1only-put", "PUT", "/v1only/latest/api/token", {TTL: "60"})
req("v1only-get", "GET", "/v1only/latest/meta-data/instance-id")
req("disabled-put", "PUT", "/disabled/latest/api/token", {TTL: "60"})
req("disabled-get", "GET", "/disabled/latest/meta-data/instance-id")
req("unknown-host", "GET", "/no-such-host/latest/meta-data/instance-id")
req("bad-setting", "GET", "/az1-host1~bogus=1/latest/meta-data/instance-id")
req("fail-first-1", "GET", "/az1-host1~fail_first=1/latest/meta-data/instance-id")
req("fail-first-2", "GET", "/az1-host1~fail_first=1/latest/meta-data/instance-id")
t2, _ = req("expire-put", "PUT", "/az1-host1~expire_tokens_at_get=2/latest/api/token", {TTL: "60"})
req("expire-get1", "GET", "/az1-host1~expire_tokens_at_get=2/latest/meta-data/instance-id", {TOK: t2})
req("expire-get2", "GET", "/az1-host1~expire_tokens_at_get=2/latest/meta-data/instance-id", {TOK: t2})
_, hd = req("s3-known", "HEAD", "/s3/logs-usw2")
print("s3-region", hd.get("x-amz-bucket-region"))
req("s3-unknown", "HEAD", "/s3/no-such-bucket")
PY

expect='ttl-missing 400
ttl-0 400
ttl-21601 400
ttl-abc 400
forwarded 403
ttl-21600 200
ttl-echo 21600
get-token 200
body use1-az4
get-bad-token 401
get-v1 200
get-missing 404
list 200
macs 0e:00:00:00:01:01/ 0e:00:00:00:01:02/
ttl-1 200
expired 401
v2only-no-token 401
v1only-put 404
v1only-get 200
disabled-put 403
disabled-get 403
unknown-host 404
bad-setting 400
fail-first-1 503
fail-first-2 200
expire-put 200
expire-get1 200
expire-get2 401
s3-known 200
s3-region us-west-2
s3-unknown 404'
[ "$(cat "$T/got")" = "$expect" ] || fail "emulator answers differ: $(diff <(echo "$expect") "$T/got")"

# it logs every request, and it ends when asked to (by pid)
[ "$(wc -l <"$EMU_LOG")" -eq 27 ] || fail "emulator log: $(cat "$EMU_LOG")"
grep -q '^PUT /az1-host1/latest/api/token 400$' "$EMU_LOG" || fail "log: $(cat "$EMU_LOG")"
exit 0
