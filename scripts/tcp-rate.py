#!/usr/bin/env python3
"""tcp-rate.py MY-IP PEER-IP BYTES - the link's payload rate, both ways at once.

Run on two hosts at the same time (each names itself and the other): each
listens on MY-IP:18515, connects to PEER-IP:18515, and sends BYTES while it
receives BYTES.  Prints the payload rate of one direction in MB/s (10^6
bytes per second): the most any library can get through that link with TCP
while the other direction is busy too, as a ring allreduce keeps it.  Gives
up after 120 s.
"""
import socket
import sys
import threading
import time

PORT = 18515


def main():
    me, peer, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((me, PORT))
    ls.listen(1)
    ls.settimeout(120)
    got = [0]

    def receive():
        c, _ = ls.accept()
        c.settimeout(120)
        buf = bytearray(1 << 20)
        view = memoryview(buf)
        while got[0] < total:
            n = c.recv_into(view)
            if not n:
                break
            got[0] += n
        c.close()

    t = threading.Thread(target=receive)
    t.start()
    s = None
    deadline = time.time() + 30
    while s is None:
        try:
            s = socket.create_connection((peer, PORT), timeout=120)
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)
    # Both sides start sending when both are connected: a byte each way.
    time.sleep(0.2)
    block = b"\0" * (1 << 20)
    t0 = time.perf_counter()
    left = total
    while left > 0:
        left -= s.send(block[: min(left, len(block))])
    t.join(130)
    t1 = time.perf_counter()
    s.close()
    if got[0] < total:
        sys.exit("tcp-rate: received %d of %d bytes" % (got[0], total))
    print("%.1f" % (total / (t1 - t0) / 1e6))


if __name__ == "__main__":
    main()
