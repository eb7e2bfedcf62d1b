#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Python's standard socket module speaks RDS to the loaded PF_RDS (rrds or rds)."""
import socket
import sys


def main():
    rx = socket.socket(socket.AF_RDS, socket.SOCK_SEQPACKET, 0)
    tx = socket.socket(socket.AF_RDS, socket.SOCK_SEQPACKET, 0)
    rx.bind(("127.0.0.1", 0))
    tx.bind(("127.0.0.1", 0))
    dest = rx.getsockname()
    payloads = [b"", b"x", bytes(range(256)) * 64]
    for p in payloads:
        assert tx.sendto(p, dest) == len(p), "short send"
    for p in payloads:
        data, source = rx.recvfrom(1 << 20)
        assert data == p, f"payload of {len(p)} bytes differs"
        assert source == tx.getsockname(), f"source {source} != {tx.getsockname()}"
    rx.setblocking(False)
    try:
        rx.recv(16)
        raise AssertionError("empty queue did not raise")
    except BlockingIOError:
        pass
    tx.close()
    rx.close()
    print("af_rds.py: ok")


if __name__ == "__main__":
    sys.exit(main())
