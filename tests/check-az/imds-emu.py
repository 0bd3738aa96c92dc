#!/usr/bin/env python3
"""tests/check-az/imds-emu.py - a loopback EC2 instance metadata service (IMDSv1/v2) and S3 HEAD stand-in.

One emulator serves many hosts: the first path segment names a fixture file
(FIXTURES/NAME.json), so http://127.0.0.1:PORT/az1-host1 is the endpoint of
host az1-host1. Settings of the fixture's "imds" object can be overridden in
that segment: /az1-host1~mode=v2-only~put_delay_s=3. Each distinct segment
has its own tokens and counters.

Fixture: {"imds": {settings}, "meta-data": {"placement/availability-zone": "..."}}
Settings:
  mode                  v2 (default: tokens optional), v2-only (GET without
                        token: 401), v1-only (PUT: token_put_status), disabled
                        (403 to everything), foreign (foreign_status to
                        everything, as a web server or proxy at that address
                        would: "Server: nginx", not IMDS's "Server: EC2ws")
  foreign_status        the status of every answer in foreign mode (403)
  token_put_status      status of the token PUT in v1-only mode (404)
  put_delay_s, get_delay_s   answer that much later (timeouts)
  expire_tokens_at_get  at the Nth GET that carries a token, every token
                        issued so far expires (401 once, renewal works)
  refuse_tokens         every token is refused (401)
  fail_first            the first N requests get 503

Token semantics as IMDS: PUT /latest/api/token needs
X-aws-ec2-metadata-token-ttl-seconds in 1..21600 (else 400) and no
X-Forwarded-For (else 403); a GET with an unknown or expired
X-aws-ec2-metadata-token gets 401; a missing path 404. Directory paths
("meta-data/network/interfaces/macs/") list their children.

S3: HEAD /s3/BUCKET answers x-amz-bucket-region from FIXTURES/buckets.json
({"bucket": "region"}); an unknown bucket is 404 without the header.

Listens on 127.0.0.1 (or ::1 with --bind ::1) on a free port that it
writes to --port-file once it accepts connections; logs "METHOD PATH STATUS"
lines to --log; exits by itself after --lifetime seconds.
"""
import argparse
import json
import os
import secrets
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULTS = {
    "mode": "v2",
    "token_put_status": 404,
    "foreign_status": 403,
    "put_delay_s": 0.0,
    "get_delay_s": 0.0,
    "expire_tokens_at_get": 0,
    "refuse_tokens": False,
    "fail_first": 0,
}


class Host:
    """State of one endpoint prefix: its fixture, settings, tokens, counters."""

    def __init__(self, meta, settings):
        self.meta = meta
        self.s = settings
        self.tokens = {}   # token -> expiry (monotonic)
        self.token_gets = 0
        self.requests = 0
        self.lock = threading.Lock()


class Emulator:
    def __init__(self, fixtures, log):
        self.fixtures = fixtures
        self.hosts = {}
        self.lock = threading.Lock()
        self.log_file = open(log, "a", buffering=1) if log else None
        path = os.path.join(fixtures, "buckets.json")
        self.buckets = {}
        if os.path.exists(path):
            with open(path) as f:
                self.buckets = json.load(f)

    def log(self, line):
        if self.log_file:
            with self.lock:
                self.log_file.write(line + "\n")

    def host(self, segment):
        with self.lock:
            if segment in self.hosts:
                return self.hosts[segment]
            parts = segment.split("~")
            name = parts[0]
            if not name or "/" in name or name.startswith("."):
                return None
            path = os.path.join(self.fixtures, name + ".json")
            if not os.path.exists(path):
                return None
            with open(path) as f:
                fx = json.load(f)
            settings = dict(DEFAULTS)
            settings.update(fx.get("imds", {}))
            for kv in parts[1:]:
                k, _, v = kv.partition("=")
                if k not in DEFAULTS:
                    raise ValueError("unknown setting " + k)
                d = DEFAULTS[k]
                settings[k] = (v.lower() in ("1", "true") if isinstance(d, bool)
                               else type(d)(v))
            h = Host(fx.get("meta-data", {}), settings)
            self.hosts[segment] = h
            return h


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_header = "EC2ws"    # as EC2's metadata service signs its answers

    def log_message(self, fmt, *args):
        pass

    def version_string(self):
        return self.server_header

    def reply(self, status, body=b"", headers=None):
        self.server.emu.log("%s %s %d" % (self.command, self.path, status))
        try:
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
        except OSError:
            pass   # the client gave up (a timeout test): nothing to do

    def route(self):
        path = urllib.parse.urlsplit(self.path).path
        seg, _, rest = path.lstrip("/").partition("/")
        return seg, "/" + rest

    def s3(self, bucket):
        region = self.server.emu.buckets.get(bucket)
        if region is None:
            return self.reply(404)
        return self.reply(200, headers={"x-amz-bucket-region": region})

    def do_HEAD(self):
        seg, rest = self.route()
        if seg == "s3":
            return self.s3(rest.strip("/"))
        return self.reply(405)

    def common(self):
        """The host and its settings, or None after answering."""
        seg, rest = self.route()
        try:
            h = self.server.emu.host(seg)
        except ValueError:
            self.reply(400)
            return None, None
        if h is None:
            self.reply(404)
            return None, None
        with h.lock:
            h.requests += 1
            n = h.requests
        if n <= h.s["fail_first"]:
            self.reply(503)
            return None, None
        if h.s["mode"] == "disabled":
            self.reply(403)
            return None, None
        if h.s["mode"] == "foreign":
            self.server_header = "nginx"
            self.reply(h.s["foreign_status"], b"<html><body>Forbidden</body></html>")
            return None, None
        return h, rest

    def do_PUT(self):
        h, rest = self.common()
        if h is None:
            return
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        if rest != "/latest/api/token":
            return self.reply(405 if rest.startswith("/latest/") else 404)
        if h.s["put_delay_s"]:
            time.sleep(h.s["put_delay_s"])
        if h.s["mode"] == "v1-only":
            return self.reply(h.s["token_put_status"])
        if self.headers.get("X-Forwarded-For"):
            return self.reply(403)
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        try:
            ttl = int(ttl)
        except (TypeError, ValueError):
            return self.reply(400)
        if not 1 <= ttl <= 21600:
            return self.reply(400)
        token = "emu-" + secrets.token_urlsafe(24)
        with h.lock:
            h.tokens[token] = time.monotonic() + ttl
        return self.reply(200, token.encode(),
                          {"X-aws-ec2-metadata-token-ttl-seconds": str(ttl)})

    def do_GET(self):
        h, rest = self.common()
        if h is None:
            return
        if h.s["get_delay_s"]:
            time.sleep(h.s["get_delay_s"])
        token = self.headers.get("X-aws-ec2-metadata-token")
        if h.s["mode"] == "v1-only":
            token = None
        elif token is not None:
            with h.lock:
                h.token_gets += 1
                if h.token_gets == h.s["expire_tokens_at_get"]:
                    h.tokens.clear()
                expiry = h.tokens.get(token)
                ok = expiry is not None and expiry > time.monotonic()
            if not ok or h.s["refuse_tokens"]:
                return self.reply(401)
        elif h.s["mode"] == "v2-only":
            return self.reply(401)
        if not rest.startswith("/latest/meta-data"):
            return self.reply(404)
        key = rest[len("/latest/meta-data"):].lstrip("/")
        if key and not key.endswith("/") and key in h.meta:
            return self.reply(200, str(h.meta[key]).encode())
        # a directory: its children, subdirectories with a trailing '/'
        prefix = key if not key or key.endswith("/") else key + "/"
        children = []
        for k in h.meta:
            if k.startswith(prefix):
                child = k[len(prefix):]
                name = child.split("/")[0] + ("/" if "/" in child else "")
                if name not in children:
                    children.append(name)
        if not children:
            return self.reply(404)
        return self.reply(200, "\n".join(children).encode())


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False


class Server6(Server):
    address_family = socket.AF_INET6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log")
    ap.add_argument("--bind", default="127.0.0.1", choices=["127.0.0.1", "::1"])
    ap.add_argument("--lifetime", type=float, default=300)
    a = ap.parse_args()

    cls = Server6 if a.bind == "::1" else Server
    srv = cls((a.bind, 0), Handler)   # port 0: the kernel picks a free one
    srv.emu = Emulator(a.fixtures, a.log)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, a.port_file)
    # a bounded life: a test that forgets us cannot leave us behind for long
    timer = threading.Timer(a.lifetime, srv.shutdown)
    timer.daemon = True
    timer.start()
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
