#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks `rrds ... --json` output on standard input: every line one JSON
object with a "type", the first the "meta" record of COMMAND run against
IMPLEMENTATION, and at least one record of each TYPE (TYPE=N: exactly N).
Prints the count of each type; exits 1 with the reason otherwise.

    rrds ping --json -c 2 127.0.0.1 | json_lines.py ping rrds ping_start pong=2
"""
import collections
import json
import sys


def fail(why):
    print(f"json_lines: {why}")
    sys.exit(1)


def main():
    if len(sys.argv) < 3:
        fail("usage: json_lines.py COMMAND IMPLEMENTATION [TYPE[=N]...]")
    command, implementation, wanted = sys.argv[1], sys.argv[2], sys.argv[3:]
    records = []
    for number, line in enumerate(sys.stdin, 1):
        try:
            record = json.loads(line)
        except ValueError as err:
            fail(f"line {number} is not JSON ({err}): {line!r}")
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            fail(f"line {number} is not an object with a type: {line!r}")
        records.append(record)
    if not records:
        fail("no output")
    meta = records[0]
    if meta["type"] != "meta":
        fail(f"the first record is {meta['type']!r}, not meta")
    for key, want in (("command", command), ("implementation", implementation)):
        if meta.get(key) != want:
            fail(f"meta {key} is {meta.get(key)!r}, not {want!r}")
    for key in ("argv", "version", "kernel", "start_unix_s"):
        if not meta.get(key):
            fail(f"meta has no {key}")
    counts = collections.Counter(r["type"] for r in records[1:])
    print(" ".join(f"{t}={n}" for t, n in sorted(counts.items())))
    for want in wanted:
        kind, _, n = want.partition("=")
        if n:
            if counts[kind] != int(n):
                fail(f"{counts[kind]} {kind} records, not {n}")
        elif not counts[kind]:
            fail(f"no {kind} record")


main()
