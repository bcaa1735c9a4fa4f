#!/usr/bin/env python3
"""Validates a dtorch trace file (docs/trace.md) with the json module:
a traceEvents array; X events with numeric ts/dur; every rank and issuer
track named; each flow id started once and finished once; the known
program of tests/test_trace.c (matmul on 4 ranks, add on rank 0 only)
unless --generic is given (any program: the structural checks only).
usage: check_trace.py FILE [--generic]"""
import collections
import json
import sys

d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
assert isinstance(ev, list) and ev, "no traceEvents"
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
         if e["ph"] == "M" and e["name"] == "thread_name"}
flows = collections.defaultdict(list)
for e in ev:
    if e["ph"] == "X":
        assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0, e
        assert (e["pid"], e["tid"]) in names, ("unnamed track", e)
    if e["ph"] in "sf":
        flows[e["id"]].append(e["ph"])
for i, phs in flows.items():
    assert sorted(phs) == ["f", "s"], (i, phs)
x = [e for e in ev if e["ph"] == "X" and e["cat"] != "publish"]
if "--generic" not in sys.argv[2:]:
    mm = sorted(e["tid"] for e in x if e["name"] == "matmul")
    assert mm == [0, 1, 2, 3], mm
    assert [e["tid"] for e in x if e["name"] == "add"] == [0]
assert any(e["cat"] == "publish" and names[(e["pid"], e["tid"])].startswith("issuer")
           for e in ev if e["ph"] == "X")
assert all(e["args"]["bytes"] > 0 for e in x if e["cat"] == "collective")
print("trace ok: %d events, %d flows" % (len(ev), len(flows)))
