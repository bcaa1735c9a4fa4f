#!/usr/bin/env python3
"""Developer-side oracle: dtorch's sharding decisions against PyTorch DTensor.

Not a CI dependency. Needs PyTorch from PyPI and a built tree:

    pip install torch
    python3 scripts/dtensor_oracle.py [--lib build/libdtorch.so]
                                      [--cli build/dtorch]

PyTorch runs with its fake process group (world 4, rank 0: collectives move
no data, so only decisions are compared, never values). For each op and
each combination of input placements on a 1-D mesh of 4 (R, S(0), S(1),
P(sum)) it records what PyTorch did (its output placements; whether it
communicated, from CommDebugMode) and what dtorch's strict mode did
(accepted with output placements, or refused with DT_ERR_PLACEMENT), and
prints a line per op:
  same       both ran without communication, same output placements
  differ     both ran without communication, other output placements
  refused    PyTorch communicated, dtorch refused (strict mode: expected)
  cheaper    PyTorch communicated, dtorch found a communication-free way
  missing    PyTorch ran without communication, dtorch refused: a strategy
             dtorch lacks (exit status 1 when any)
then the cached 4x4 DTensor add on a 2x4 mesh: PyTorch's time per op in
this process against `dtorch bench dispatch --only dtensor_add_hit` run
next (the target: PyTorch costs 6.3x its plain add, dtorch at most 2x).
"""
import argparse
import ctypes
import itertools
import json
import subprocess
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.debug import CommDebugMode
from torch.testing._internal.distributed.fake_pg import FakeStore

MAX_DIMS = 8
WORLD = 4
SHAPE = (8, 12)
KIND_R, KIND_S, KIND_P = 0, 1, 2


class Shape(ctypes.Structure):
    _fields_ = [("ndim", ctypes.c_int), ("dims", ctypes.c_int64 * MAX_DIMS)]


class Placement(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("dim", ctypes.c_int), ("reduce", ctypes.c_int)]


class Options(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("mesh", ctypes.c_void_p),
                ("placements", ctypes.c_void_p), ("device", ctypes.c_char_p),
                ("requires_grad", ctypes.c_bool)]


class RuntimeOptions(ctypes.Structure):
    _fields_ = [("device", ctypes.c_char_p), ("num_ranks", ctypes.c_int),
                ("auto_redistribute", ctypes.c_bool), ("device_memory", ctypes.c_int64),
                ("ring_capacity", ctypes.c_int), ("spin_us", ctypes.c_int),
                ("collective_timeout_ms", ctypes.c_int64), ("pin_ranks", ctypes.c_int)]


def shape(dims):
    s = Shape()
    s.ndim = len(dims)
    for i, d in enumerate(dims):
        s.dims[i] = d
    return s


def load(path):
    lib = ctypes.CDLL(path)
    p = ctypes.c_void_p
    lib.dt_runtime_create.restype = p
    lib.dt_runtime_create.argtypes = [ctypes.POINTER(RuntimeOptions)]
    lib.dt_mesh_init.restype = p
    lib.dt_mesh_init.argtypes = [p, ctypes.c_char_p, Shape, p]
    lib.dt_full.restype = p
    lib.dt_full.argtypes = [Shape, ctypes.c_double, ctypes.POINTER(Options)]
    lib.dt_tensor_placement.restype = Placement
    lib.dt_tensor_placement.argtypes = [p, ctypes.c_int]
    lib.dt_tensor_release.argtypes = [p]
    lib.dt_last_status.restype = ctypes.c_int
    lib.dt_last_error.restype = ctypes.c_char_p
    for name in ["add", "mul", "matmul"]:
        f = getattr(lib, "dt_" + name)
        f.restype, f.argtypes = p, [p, p]
    for name in ["relu", "exp"]:
        f = getattr(lib, "dt_" + name)
        f.restype, f.argtypes = p, [p]
    lib.dt_transpose.restype, lib.dt_transpose.argtypes = p, [p, ctypes.c_int, ctypes.c_int]
    for name in ["softmax"]:
        f = getattr(lib, "dt_" + name)
        f.restype, f.argtypes = p, [p, ctypes.c_int]
    for name in ["sum", "mean", "amax"]:
        f = getattr(lib, "dt_" + name)
        f.restype = p
        f.argtypes = [p, ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_bool]
    return lib


def dims(*d):
    return (ctypes.c_int * len(d))(*d), len(d)


# op name -> (number of inputs, input shapes, torch fn, dtorch fn)
def ops(lib):
    def red(name, d):
        arr, n = dims(d)
        return lambda x: getattr(lib, "dt_" + name)(x[0], arr, n, False)
    return {
        "add": (2, [SHAPE, SHAPE], lambda x: x[0] + x[1], lambda x: lib.dt_add(x[0], x[1])),
        "mul": (2, [SHAPE, SHAPE], lambda x: x[0] * x[1], lambda x: lib.dt_mul(x[0], x[1])),
        "relu": (1, [SHAPE], lambda x: torch.relu(x[0]), lambda x: lib.dt_relu(x[0])),
        "exp": (1, [SHAPE], lambda x: torch.exp(x[0]), lambda x: lib.dt_exp(x[0])),
        "sum(dim 0)": (1, [SHAPE], lambda x: x[0].sum(0), red("sum", 0)),
        "sum(dim 1)": (1, [SHAPE], lambda x: x[0].sum(1), red("sum", 1)),
        "mean(dim 0)": (1, [SHAPE], lambda x: x[0].mean(0), red("mean", 0)),
        "amax(dim 1)": (1, [SHAPE], lambda x: x[0].amax(1), red("amax", 1)),
        "softmax(dim 1)": (1, [SHAPE], lambda x: torch.softmax(x[0], 1),
                           lambda x: lib.dt_softmax(x[0], 1)),
        "transpose": (1, [SHAPE], lambda x: x[0].transpose(0, 1),
                      lambda x: lib.dt_transpose(x[0], 0, 1)),
        "matmul": (2, [SHAPE, SHAPE[::-1]], lambda x: x[0] @ x[1],
                   lambda x: lib.dt_matmul(x[0], x[1])),
    }


PLACEMENTS = ["R", "S0", "S1", "P"]


def torch_placement(name):
    return {"R": Replicate(), "S0": Shard(0), "S1": Shard(1), "P": Partial()}[name]


def dt_placement(name):
    if name == "R":
        return Placement(KIND_R, 0, 0)
    if name == "P":
        return Placement(KIND_P, 0, 0)
    return Placement(KIND_S, int(name[1]), 0)


def describe_torch(pl):
    out = []
    for p in pl:
        if isinstance(p, Shard):
            out.append("S%d" % p.dim)
        elif isinstance(p, Partial):
            out.append("P" if p.reduce_op == "sum" else "P(%s)" % p.reduce_op)
        else:
            out.append("R")
    return ",".join(out)


def describe_dt(pl):
    if pl.kind == KIND_S:
        return "S%d" % pl.dim
    if pl.kind == KIND_P:
        return "P" if pl.reduce == 0 else "P(%s)" % ["sum", "avg", "max", "min", "prod"][pl.reduce]
    return "R"


def torch_input(mesh, name, shp):
    if name == "P":  # each rank's term; with the fake group only rank 0's exists
        return DTensor.from_local(torch.ones(shp) / WORLD, mesh, [Partial()], run_check=False)
    return distribute_tensor(torch.ones(shp), mesh, [torch_placement(name)])


def run_torch(mesh, n, shapes, fn, combo):
    xs = [torch_input(mesh, combo[i], shapes[i]) for i in range(n)]
    with CommDebugMode() as comm:
        try:
            y = fn(xs)
        except Exception as e:  # noqa: BLE001 - report, not stop
            return None, False, str(e).splitlines()[0][:80]
    return describe_torch(y.placements), comm.get_total_counts() > 0, None


def run_dtorch(lib, mesh, n, shapes, fn, combo):
    xs = []
    for i in range(n):
        pl = (Placement * 1)(dt_placement(combo[i]))
        o = Options(0, mesh, ctypes.cast(pl, ctypes.c_void_p), None, False)
        xs.append(lib.dt_full(shape(shapes[i]), 1.0, ctypes.byref(o)))
    y = fn(xs)
    status = lib.dt_last_status()
    out = describe_dt(lib.dt_tensor_placement(y, 0)) if y else None
    for x in xs:
        lib.dt_tensor_release(x)
    lib.dt_tensor_release(y)
    return out, status


def compare(lib, dt_mesh, tmesh):
    missing = 0
    for name, (n, shapes, tfn, dfn) in ops(lib).items():
        tally = {"same": 0, "differ": 0, "refused": 0, "cheaper": 0, "missing": 0}
        notes = []
        for combo in itertools.product(PLACEMENTS, repeat=n):
            tout, tcomm, terr = run_torch(tmesh, n, shapes, tfn, combo)
            dout, dstatus = run_dtorch(lib, dt_mesh, n, shapes, dfn, combo)
            if terr is not None:
                continue
            if dout is not None and not tcomm:
                kind = "same" if dout == tout else "differ"
            elif dout is None and tcomm:
                kind = "refused"
            elif dout is not None and tcomm:
                kind = "cheaper"
            else:
                kind = "missing"
            tally[kind] += 1
            if kind in ("differ", "cheaper", "missing") and len(notes) < 4:
                notes.append("%s %s: torch %s%s, dtorch %s" % (
                    kind, "/".join(combo), tout, " (after comm)" if tcomm else "",
                    dout if dout else "refused"))
        missing += tally["missing"]
        print("%-15s %s" % (name, " ".join("%s %d" % kv for kv in tally.items())))
        for line in notes:
            print("                  " + line)
    return missing


def anchor(cli):
    mesh = init_device_mesh("cpu", (2, 4))
    a = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0), Replicate()])
    b = distribute_tensor(torch.ones(4, 4), mesh, [Shard(0), Replicate()])
    x = torch.ones(4, 4)
    best_d = best_p = 1e9
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(2000):
            a + b
        best_d = min(best_d, (time.perf_counter() - t0) / 2000)
        t0 = time.perf_counter()
        for _ in range(2000):
            x + x
        best_p = min(best_p, (time.perf_counter() - t0) / 2000)
    out = subprocess.run([cli, "bench", "dispatch", "--only", "dtensor_add_hit"],
                         capture_output=True, text=True, check=True).stdout
    ours = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    ours8 = next(r for r in ours if r["ranks"] == 8)
    print("cached 4x4 DTensor add on a 2x4 mesh: PyTorch %.2f us (%.1fx its plain "
          "add, %.2f us); dtorch %.2f us (%.2fx its single-device add): "
          "PyTorch / dtorch = %.0fx" % (best_d * 1e6, best_d / best_p, best_p * 1e6,
                                       ours8["ns"] / 1e3, ours8["ratio"],
                                       best_d * 1e9 / ours8["ns"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", default="build/libdtorch.so")
    ap.add_argument("--cli", default="build/dtorch")
    args = ap.parse_args()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    lib = load(args.lib)
    rt = lib.dt_runtime_create(ctypes.byref(RuntimeOptions(None, WORLD, False, 0, 0, 0, 0, 0)))
    dt_mesh = lib.dt_mesh_init(rt, b"cpu", shape([WORLD]), None)
    tmesh = init_device_mesh("cpu", (WORLD,), mesh_dim_names=("tp",))
    missing = compare(lib, dt_mesh, tmesh)
    anchor(args.cli)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
