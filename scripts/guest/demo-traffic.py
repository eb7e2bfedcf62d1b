#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Real RDS traffic for `make demo`: a receiver in one network namespace, a
sender in another, over whatever transport the addresses select.

    demo-traffic.py serve ADDR PORT [READY]  (run inside the receiver's namespace;
                                              creates file READY once bound)
    demo-traffic.py run ADDR PEER PORT       (run inside the sender's namespace)

`run` measures one-way throughput (8 KiB messages, every byte checked by the
receiver) and request/response latency (64 B), and prints one line each.
"""
import socket
import statistics
import struct
import sys
import time

COUNT = 2000
SIZE = 8192
ROUND_TRIPS = 200


def pattern(seq, size):
    return (struct.pack("!I", seq) * (size // 4 + 1))[:size]


def rds_socket(addr, port):
    s = socket.socket(socket.AF_RDS, socket.SOCK_SEQPACKET, 0)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    s.bind((addr, port))
    return s


def serve(addr, port, ready=None):
    s = rds_socket(addr, port)
    s.settimeout(60)
    if ready:
        # Bound (and so listening): the sender may start.
        open(ready, "w").close()
    while True:
        data, peer = s.recvfrom(1 << 20)
        if data == b"bulk":
            bad = 0
            for seq in range(COUNT):
                msg, _ = s.recvfrom(1 << 20)
                bad += msg != pattern(seq, SIZE)
            s.sendto(struct.pack("!I", bad), peer)
        elif data == b"echo":
            for _ in range(ROUND_TRIPS):
                msg, who = s.recvfrom(1 << 20)
                s.sendto(msg, who)
        elif data == b"quit":
            return


def run(addr, peer, port):
    s = rds_socket(addr, 0)
    s.settimeout(60)
    dest = (peer, port)
    s.sendto(b"bulk", dest)
    start = time.monotonic()
    for seq in range(COUNT):
        s.sendto(pattern(seq, SIZE), dest)
    reply, _ = s.recvfrom(16)
    secs = time.monotonic() - start
    bad = struct.unpack("!I", reply)[0]
    mb = COUNT * SIZE / secs / 1e6
    print(f"  throughput: {COUNT} x {SIZE} B in {secs:.2f} s = {mb:.2f} MB/s, "
          f"{COUNT / secs:.0f} msg/s, {bad} corrupt")
    s.sendto(b"echo", dest)
    rtts = []
    for i in range(ROUND_TRIPS):
        t = time.monotonic()
        s.sendto(pattern(i, 64), dest)
        back, _ = s.recvfrom(1 << 20)
        rtts.append((time.monotonic() - t) * 1e6)
        if back != pattern(i, 64):
            bad += 1
    rtts.sort()
    p99 = rtts[min(len(rtts) - 1, int(len(rtts) * 0.99))]
    print(f"  latency: {ROUND_TRIPS} round trips of 64 B: p50 {statistics.median(rtts):.0f} us, "
          f"mean {statistics.mean(rtts):.0f} us, p99 {p99:.0f} us")
    s.sendto(b"quit", dest)
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None)
    else:
        sys.exit(run(sys.argv[2], sys.argv[3], int(sys.argv[4])))
