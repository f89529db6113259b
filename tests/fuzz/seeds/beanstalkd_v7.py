#!/usr/bin/env python3
"""Writes the hand-made seeds of fuzz_beanstalkd_v7 (docs/fuzzing.md).

  tests/fuzz/seeds/beanstalkd_v7.py -o DIR

Seeds: the real beanstalkd 1.12 binlog files of tests/fixtures/beanstalkd-v7
(each alone, a preallocated one with its zero tail cut to 100 bytes so
that it stays below 4 KiB, and the four files of `rotated` joined by "NEXTFILE" as one input),
plus small files built here for every case the reader distinguishes: each
job state, later records winning, deletion, a short record about an unknown
job, the zero tail, an all-zero file, and each kind of damage. The input
format is fuzz_beanstalkd_v7.c's: binlog files separated by "NEXTFILE".
"""
import argparse
import os
import struct

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "beanstalkd-v7")
SEP = b"NEXTFILE"
NS = 10**9
HEADER = struct.pack("<i", 7)


def jobrec(jid, state=1, pri=1024, delay=0, ttr=60 * NS, size=3, created=1700000000 * NS,
           deadline=0, ct=(0, 0, 0, 0, 0)):
    return struct.pack("<QI4xqqi4xqq5IB3x", jid, pri, delay, ttr, size, created, deadline, *ct,
                       state)


def full(tube, jid, body=b"x", **kw):
    kw.setdefault("size", len(body) + 2)
    return struct.pack("<i", len(tube)) + tube + jobrec(jid, **kw) + body + b"\r\n"


def short(jid, **kw):
    return struct.pack("<i", 0) + jobrec(jid, **kw)


def trimmed(path):
    """A fixture file as it is, or, when it is 4 KiB or more (preallocated),
    with its zero tail cut to 100 zeros."""
    with open(path, "rb") as f:
        data = f.read()
    return data if len(data) < 3000 else data.rstrip(b"\0") + b"\0" * 100


def handmade():
    one = full(b"default", 1)
    return {
        "states": HEADER + b"".join(full(b"t", i, state=i) for i in range(1, 5)),
        "later-wins": HEADER + one + short(1, state=4, pri=5, delay=9 * NS, deadline=2 * NS,
                                           ct=(1, 0, 1, 0, 0)) + short(1, state=3),
        "delete": HEADER + one + full(b"a", 2) + short(1, state=0) + full(b"a", 3, state=0),
        "unknown-short": HEADER + short(9, state=3) + short(9, state=0) + one,
        "zero-tail": HEADER + one + b"\0" * 84 + b"ignored" + SEP + HEADER + full(b"b", 2),
        "torn-full": HEADER + one + struct.pack("<i", 7) + b"\0" * 200,
        "all-zero": b"\0" * 300 + SEP + HEADER + one,
        "two-files": HEADER + one + full(b"x", 2) + SEP + HEADER + short(1, state=3)
        + short(2, state=0),
        "migrated": HEADER + one + short(1, state=3)
        + full(b"default", 1, state=3, ct=(0, 0, 0, 1, 0)),
        "bad-version": struct.pack("<i", 5) + one,
        "bad-namelen": HEADER + one + struct.pack("<i", 201),
        "bad-name": HEADER + one + full(b"-bad", 2),
        "bad-state": HEADER + one + short(1, state=5),
        "bad-size": HEADER + one + full(b"a", 2, size=1),
        "bad-crlf": HEADER + one + full(b"a", 2)[:-2] + b"\0\0",
        "bad-ttr": HEADER + one + full(b"a", 2, ttr=-1),
        "bad-short-size": HEADER + one + short(1, size=4, state=3),
        "truncated-body": HEADER + one + full(b"a", 2, body=b"hello")[:-3],
        "truncated-short": HEADER + one + short(1, state=3)[:40],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", required=True, help="output directory")
    out = ap.parse_args().o
    os.makedirs(out, exist_ok=True)
    seeds = {f"v7-{k}": v for k, v in handmade().items()}
    for fixture in sorted(os.listdir(FIXTURES)):
        d = os.path.join(FIXTURES, fixture)
        if not os.path.isdir(d):
            continue
        files = sorted((n for n in os.listdir(d) if n.startswith("binlog.")),
                       key=lambda n: int(n.split(".")[1]))
        for n in files:
            seeds[f"fixture-{fixture}-{n}"] = trimmed(os.path.join(d, n))
        if len(files) > 1:
            seeds[f"fixture-{fixture}-all"] = SEP.join(trimmed(os.path.join(d, n)) for n in files)
    for name, data in seeds.items():
        assert len(data) < 4096, name
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
