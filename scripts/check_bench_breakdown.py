#!/usr/bin/env python3
"""Checks the JSON lines of `dtorch bench demo --only M --breakdown`
(bench/bench_demo.c, bench/bench_breakdown.h) against what must hold:

- every line kind is there with its keys: train_step, a
  train_step_collective per (kind, group), a train_step_rank per rank of
  the distributed copy, a train_step_breakdown per copy;
- every category is >= 0 and each rank's categories (other included) add
  up to its wall time; the CPU categories to its CPU time;
- the summary's min/mean/max agree with the rank lines;
- ratio = ms / single_ms, floor_ms = single_ms + plain_ms (the collective
  lines' sum), over_floor = ms / floor_ms;
- for the MLP (mse loss, one layer, strict mode), the collective bytes
  equal a count made here from the model's shapes (tools/demo_model.c's
  Megatron layout), not from the code under test: the TP all-reduce of
  the row-parallel output and the DP all-reduce of every gradient.

usage: check_bench_breakdown.py FILE --model mlp|transformer --dp N --tp N
       --hidden N --batch N --reps N [--seq N --heads N]"""
import argparse
import json
import math
import sys

ap = argparse.ArgumentParser()
ap.add_argument("file")
ap.add_argument("--model", required=True)
for k in ("dp", "tp", "hidden", "batch", "reps"):
    ap.add_argument("--" + k, type=int, required=True)
for k in ("seq", "heads"):  # the transformer's: the bytes are checked for the MLP only
    ap.add_argument("--" + k, type=int)
a = ap.parse_args()
ranks = a.dp * a.tp

lines = [json.loads(l) for l in open(a.file) if l.strip()]
by = {}
for d in lines:
    by.setdefault(d["bench"], []).append(d)


def fail(msg):
    print("check_bench_breakdown: " + msg, file=sys.stderr)
    sys.exit(1)


def close(x, y, rel, absol, what):
    if not abs(x - y) <= max(absol, rel * max(abs(x), abs(y))):
        fail("%s: %r vs %r" % (what, x, y))


def need(d, keys, what):
    for k in keys:
        if k not in d:
            fail("%s: no key %r in %s" % (what, k, json.dumps(d)))


# ---- the line kinds
for kind, n in (("train_step", 1), ("train_step_breakdown", 2)):
    if len(by.get(kind, [])) != n:
        fail("%d %s lines, expected %d" % (len(by.get(kind, [])), kind, n))
if len(by.get("train_step_rank", [])) != ranks:
    fail("%d rank lines, expected %d" % (len(by.get("train_step_rank", [])), ranks))
colls = by.get("train_step_collective", [])
if not colls:
    fail("no train_step_collective line")

# ---- train_step: ratio, floor, over_floor (3 decimals printed)
ts = by["train_step"][0]
need(ts, ("ms", "single_ms", "ratio", "plain_ms", "floor_ms", "over_floor",
          "comm_bytes", "coll_bytes", "max_rel_diff", "dp", "tp", "ranks", "cpu_ms",
          "single_cpu_ms", "cpu_ratio"), "train_step")
if (ts["dp"], ts["tp"], ts["ranks"]) != (a.dp, a.tp, ranks):
    fail("train_step mesh %r" % ((ts["dp"], ts["tp"], ts["ranks"]),))
close(ts["ratio"], ts["ms"] / ts["single_ms"], 5e-3, 2e-3, "ratio")
close(ts["floor_ms"], ts["single_ms"] + ts["plain_ms"], 0, 2e-3, "floor_ms")
close(ts["over_floor"], ts["ms"] / ts["floor_ms"], 5e-3, 2e-3, "over_floor")
close(ts["plain_ms"], sum(c["plain_ms"] or 0 for c in colls), 0,
      1e-3 + 1e-4 * len(colls), "plain_ms vs the collective lines")
if ts["cpu_ms"] is not None:
    close(ts["cpu_ratio"], ts["cpu_ms"] / ts["single_cpu_ms"], 5e-3, 2e-3, "cpu_ratio")
    if ts["cpu_ms"] <= 0 or ts["single_cpu_ms"] <= 0:
        fail("no CPU time: %r, %r" % (ts["cpu_ms"], ts["single_cpu_ms"]))
if not ts["max_rel_diff"] <= 1e-4:
    fail("losses differ by %g" % ts["max_rel_diff"])
if ts["plain_ms"] <= 0 or ts["floor_ms"] < ts["single_ms"]:
    fail("floor %r below the single step %r" % (ts["floor_ms"], ts["single_ms"]))

# ---- the collectives
for c in colls:
    need(c, ("kind", "group", "calls", "bytes", "nccl_bytes", "plain_ms"), "collective")
coll_bytes = sum(c["bytes"] for c in colls)
if ts["coll_bytes"] != coll_bytes or ts["comm_bytes"] != coll_bytes:
    fail("bytes: lines %d, coll_bytes %d, dt_comm_count %d" %
         (coll_bytes, ts["coll_bytes"], ts["comm_bytes"]))
if a.model == "mlp":
    h, b, f = a.hidden, a.batch, 4  # float32
    # TP: y = h·W2ᵀ [batch, hidden] is Partial(sum) on tp, [batch/dp, hidden]
    # on each rank, one all-reduce per tp group (dp groups)
    tp_bytes = b * h * f * a.tp if a.tp > 1 else 0
    # DP: the gradients of w1 [4h, h] and b1 [4h] (S(0) on tp), w2 [h, 4h]
    # (S(1) on tp) and b2 [h] (replicated on tp), one all-reduce per
    # parameter per dp group (tp groups), every rank feeding its shard
    shard = (4 * h * h + 4 * h + h * 4 * h) // a.tp + h
    dp_bytes = shard * f * ranks if a.dp > 1 else 0
    want = {}
    if tp_bytes:
        want[("all_reduce", a.tp)] = (a.dp * 1, tp_bytes)
    if dp_bytes:
        key = ("all_reduce", a.dp)
        calls, byt = want.get(key, (0, 0))
        want[key] = (calls + a.tp * 4, byt + dp_bytes)
    got = {(c["kind"], c["group"]): (c["calls"], c["bytes"]) for c in colls}
    if got != {k: (float(v[0]), v[1]) for k, v in want.items()}:
        fail("collectives %r, expected from the shapes %r" % (got, want))
    for c in colls:  # each call's S: what one member fed in (all_reduce)
        if c["nccl_bytes"] * c["group"] != c["bytes"]:
            fail("nccl_bytes %d x group %d != bytes %d" %
                 (c["nccl_bytes"], c["group"], c["bytes"]))

# ---- the ranks: non-negative categories adding up to the wall time
rows = sorted(by["train_step_rank"], key=lambda d: d["rank"])
if [d["rank"] for d in rows] != list(range(ranks)):
    fail("rank lines %r" % [d["rank"] for d in rows])
for d in rows:
    need(d, ("wall_ms", "cpu_ms", "runq_ms", "ms", "cpu", "unaccounted_ms"), "rank")
    ms = d["ms"]
    for k in ("other", "compute.matmul", "compute.optimizer", "memory.alloc",
              "collective.all_reduce", "rendezvous.all_reduce", "redistribute"):
        if k not in ms:
            fail("rank %d: no category %r" % (d["rank"], k))
    for k, v in ms.items():
        if v < -1e-3:
            fail("rank %d: %s = %r < 0" % (d["rank"], k, v))
    # the categories are exclusive times; other the time in no slice at all
    # (measured apart): their sum is the wall time
    close(sum(ms.values()), d["wall_ms"], 1e-3, 1e-3 * len(ms), "rank %d sum" % d["rank"])
    if abs(d["unaccounted_ms"]) > 1e-3 * max(1.0, d["wall_ms"]):
        fail("rank %d: unaccounted %r" % (d["rank"], d["unaccounted_ms"]))
    if ms["compute.matmul"] <= 0 or ms["compute.optimizer"] <= 0:
        fail("rank %d: no matmul or optimizer time: %r" % (d["rank"], ms))
    if d["cpu_ms"] is not None:
        cpu = d["cpu"]
        for k, v in cpu.items():
            if v < -1e-2 and k != "other":
                fail("rank %d: cpu %s = %r < 0" % (d["rank"], k, v))
            if v > ms[k] + 0.05 + 0.05 * ms[k] and k != "other":
                fail("rank %d: cpu %s = %r above its wall %r" % (d["rank"], k, v, ms[k]))
        close(sum(cpu.values()), d["cpu_ms"], 1e-3, 1e-3 * len(cpu), "rank %d cpu" % d["rank"])
        if d["cpu_ms"] > d["wall_ms"] * 1.01 + 0.05:
            fail("rank %d: cpu %r above the wall %r" % (d["rank"], d["cpu_ms"], d["wall_ms"]))

# ---- the summaries
for s in by["train_step_breakdown"]:
    need(s, ("copy", "ranks", "steps", "wall_ms", "untraced_ms", "issuer", "ms",
             "top", "top_cpu", "ranks_cpu_ms", "dropped_events"), "breakdown")
    if s["ranks"] != ranks or s["steps"] != max(a.reps, 3) or s["dropped_events"]:
        fail("summary %s: ranks %d steps %d dropped %d" %
             (s["copy"], s["ranks"], s["steps"], s["dropped_events"]))
    need(s["issuer"], ("issue_ms", "sync_ms", "publish_ms", "publishes", "cpu_ms"), "issuer")
    close(s["issuer"]["issue_ms"] + s["issuer"]["sync_ms"], s["wall_ms"], 1e-3, 2e-3,
          "issue + sync")
    if s["copy"] == "distributed":
        close(s["wall_ms"], rows[0]["wall_ms"], 0, 2e-4, "summary wall")
        for k, st in s["ms"].items():
            vals = [d["ms"][k] for d in rows]
            close(st["min"], min(vals), 0, 2e-4, "min " + k)
            close(st["max"], max(vals), 0, 2e-4, "max " + k)
            close(st["mean"], sum(vals) / len(vals), 0, 2e-4, "mean " + k)
    elif s["ms"].get("compute.matmul", {}).get("max", 0) <= 0:
        fail("single copy: no matmul time: %r" % s["ms"])
    tops = [t["mean_ms"] for t in s["top"]]
    if tops != sorted(tops, reverse=True) or not tops:
        fail("top not sorted: %r" % s["top"])
print("bench demo --breakdown ok: %d lines, %d ranks, %d collective kinds, "
      "ratio %.3f, over_floor %.3f" % (len(lines), ranks, len(colls),
                                       ts["ratio"], ts["over_floor"]))
