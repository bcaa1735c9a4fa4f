#!/usr/bin/env python3
"""Loads a dtorch trace file in Perfetto's trace processor (the `perfetto`
package from PyPI drives the trace_processor_shell binary) and checks what
the processor made of it: every rank and issuer track became a thread with
its name, every complete event a slice on its track, every flow arrow a
row of the flow table; for the known program of tests/test_trace.c (unless
--generic) matmul on ranks 0-3 and add on rank 0 only.

The binary: $DTORCH_TRACE_PROCESSOR, trace_processor_shell (or
trace_processor) on PATH, else perfetto's own cached or downloaded
prebuilt. Without one (no network to its download host) the check is
skipped: exit 77 with the reason.
usage: check_trace_perfetto.py FILE [--generic]"""
import collections
import json
import os
import shutil
import sys


def skip(why):
    print("perfetto trace check: skipped: " + why)
    sys.exit(77)


def shell_path():
    p = os.environ.get("DTORCH_TRACE_PROCESSOR")
    if p:
        return p
    for name in ("trace_processor_shell", "trace_processor"):
        if shutil.which(name):
            return shutil.which(name)
    try:
        from perfetto.prebuilts.manifests.trace_processor_shell import \
            TRACE_PROCESSOR_SHELL_MANIFEST
        from perfetto.prebuilts.perfetto_prebuilts import get_perfetto_prebuilt
        return get_perfetto_prebuilt(TRACE_PROCESSOR_SHELL_MANIFEST)
    except Exception as e:  # no network to the prebuilts' host
        skip("no trace_processor_shell binary (%s: %s); set "
             "DTORCH_TRACE_PROCESSOR to one" % (type(e).__name__, e))


def expected(path):
    """what the JSON holds: slices per (track name, event name), flows"""
    ev = json.load(open(path))["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
             if e["ph"] == "M" and e["name"] == "thread_name"}
    slices = collections.Counter((names[(e["pid"], e["tid"])], e["name"])
                                 for e in ev if e["ph"] == "X")
    flows = len({e["id"] for e in ev if e["ph"] == "s"})
    return slices, flows


def main():
    try:
        from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig
    except ImportError:
        skip("the perfetto package is not installed (pip install perfetto)")
    path = sys.argv[1]
    want, want_flows = expected(path)
    tp = TraceProcessor(trace=path, config=TraceProcessorConfig(bin_path=shell_path()))
    try:
        got = collections.Counter()
        for r in tp.query("select t.name as track, s.name as name, count(*) as n "
                          "from slice s join thread_track tt on s.track_id = tt.id "
                          "join thread t using(utid) group by 1, 2"):
            got[(r.track, r.name)] = r.n
        flows = next(iter(tp.query("select count(*) as n from flow"))).n
    finally:
        tp.close()
    missing = {k: v for k, v in want.items() if got.get(k) != v}
    assert not missing, ("slices the processor lost or moved", missing, got)
    assert sum(got.values()) == sum(want.values()), (got, want)
    assert flows == want_flows, ("flows", flows, want_flows)
    if "--generic" not in sys.argv[2:]:
        assert sorted(k[0] for k in got if k[1] == "matmul") == \
            ["rank 0", "rank 1", "rank 2", "rank 3"], got
        assert [k[0] for k in got if k[1] == "add"] == ["rank 0"], got
    print("perfetto trace ok: %d slices on %d tracks, %d flows" %
          (sum(got.values()), len({k[0] for k in got}), flows))


main()
