#!/usr/bin/env python3
"""tests/run/fakelauncher.py - the other end of smddp-run's per-node launcher channel, scripted.

Plays node 0 or a joining node by the protocol of cmd/run/nodes.c, right
or wrong on purpose, and writes what it received to OUT, one line each,
for tests/run/pernode-auth.sh. Every socket operation has a deadline
(DEADLINE_S): the helper never hangs a test.

  node0 PORT OUT KEY    listen on 127.0.0.1:PORT, challenge the joiner, check its
                        MAC with KEY, answer GO with a MAC keyed by KEY ("-": a GO
                        with a token and no MAC, as to a node without one)
  mute0 PORT OUT        listen, take the JOIN-less connection, say nothing (a v1
                        node 0 waits for a JOIN; this one never sends a HELLO)
  v1join PORT OUT       connect, send a protocol v1 JOIN (token in clear), record
                        the answer
  silent PORT OUT       connect, record the HELLO, then hold the connection and
                        say nothing until node 0 closes it
"""
import hashlib
import hmac
import os
import socket
import sys
import time

DEADLINE_S = 60


def mac(key, label, n0, n1, text):
    m = hmac.new(key.encode(), digestmod=hashlib.sha256)
    m.update(b"smddp-nodes-2 " + label.encode() + b"\0" + n0.encode() + n1.encode() + text.encode())
    return m.hexdigest()


def fields(line):
    out = {}
    for tok in line.split(" ")[1:]:
        k, _, v = tok.partition("=")
        out[k] = v
    return out


class Lines:
    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def get(self):
        """The next line, or None at EOF."""
        while b"\n" not in self.buf:
            d = self.sock.recv(4096)
            if not d:
                return None
            self.buf += d
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode(errors="replace")


def listen(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(4)
    s.settimeout(DEADLINE_S)
    c, _ = s.accept()
    c.settimeout(DEADLINE_S)
    return c


def connect(port):
    until = time.monotonic() + DEADLINE_S
    while True:
        try:
            c = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S)
            c.settimeout(DEADLINE_S)
            return c
        except OSError:
            if time.monotonic() > until:
                raise
            time.sleep(0.1)


def main():
    role, port, out = sys.argv[1], int(sys.argv[2]), open(sys.argv[3], "w", buffering=1)
    if role == "node0":
        key = sys.argv[4]
        c = listen(port)
        r = Lines(c)
        n0 = os.urandom(32).hex()
        c.sendall(("HELLO v=2 nonce=%s\n" % n0).encode())
        join = r.get()
        out.write("%s\n" % join)
        f = fields(join)
        signed = join[: join.rindex(" mac=")]
        out.write("join-mac %s\n" % ("ok" if key != "-" and f.get("mac") == mac(key, "join", n0, f["nonce"], signed) else "bad"))
        go = "GO job=fakejob"
        if key == "-":
            c.sendall((go + " token=stolentoken\n").encode())
        else:
            c.sendall(("%s mac=%s\n" % (go, mac(key, "go", n0, f["nonce"], go))).encode())
        while True:   # EXIT, or the connection closed
            line = r.get()
            if line is None:
                break
            out.write("%s\n" % line)
    elif role == "mute0":
        c = listen(port)
        r = Lines(c)
        while r.get() is not None:
            pass
        out.write("closed\n")
    elif role == "v1join":
        c = connect(port)
        c.sendall(b"JOIN v=1 node=1 nnodes=2 nproc=2 port=%d host=oldhost job=- token=-\n" % (port - 1))
        r = Lines(c)
        while True:
            line = r.get()
            if line is None:
                break
            out.write("%s\n" % line)
    elif role == "silent":
        c = connect(port)
        r = Lines(c)
        out.write("%s\n" % r.get())
        while True:
            line = r.get()
            if line is None:
                break
            out.write("%s\n" % line)
        out.write("closed\n")
    else:
        sys.exit("fakelauncher: unknown role %s" % role)


if __name__ == "__main__":
    main()
