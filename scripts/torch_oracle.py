#!/usr/bin/env python3
"""Developer-side oracle: dtorch's ops against PyTorch on random inputs.

Not a CI dependency. Needs PyTorch and NumPy from PyPI and a built
libdtorch.so:

    pip install torch numpy
    python3 scripts/torch_oracle.py [--lib build/libdtorch.so] [--cases N]
                                    [--seed S] [--show K]

For each case it draws an op, dtypes (0-d operands included), broadcasting
shapes and values (specials included: 0, -0, +-inf, NaN, dtype extremes),
runs the op through dtorch's C API (ctypes) and through torch, and compares
the result dtype, shape and values (bit for bit for integers and bool;
floats equal, or both NaN, with the sign of zero). It prints one line per
op with the cases run and the mismatches, then up to --show mismatching
cases, and exits 1 if any differ. Errors count as agreement when both
sides refuse the case.
"""
import argparse
import ctypes
import random
import sys

import numpy as np
import torch

MAX_DIMS = 8
DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"]
TORCH = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int32": torch.int32, "int64": torch.int64,
    "uint8": torch.uint8, "bool": torch.bool,
}
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "floor_divide",
          "remainder", "eq", "ne", "lt", "le", "gt", "ge"]
SCALAR = ["add", "sub", "mul", "div", "pow", "floor_divide", "remainder"]
UNARY = ["neg", "abs", "exp", "log", "sqrt", "sin", "tanh", "sigmoid", "relu"]
REDUCE = ["sum", "mean", "amax", "amin", "prod", "argmax", "argmin"]
SOFTMAX = ["softmax", "log_softmax"]


class Shape(ctypes.Structure):
    _fields_ = [("ndim", ctypes.c_int), ("dims", ctypes.c_int64 * MAX_DIMS)]


class Options(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("mesh", ctypes.c_void_p),
                ("placements", ctypes.c_void_p), ("device", ctypes.c_char_p),
                ("requires_grad", ctypes.c_bool)]


def load(path):
    lib = ctypes.CDLL(path)
    p = ctypes.c_void_p
    lib.dt_from_host.restype = p
    lib.dt_from_host.argtypes = [p, Shape, ctypes.POINTER(Options)]
    lib.dt_to_host.argtypes = [p, p, ctypes.c_size_t]
    lib.dt_tensor_dtype.argtypes = [p]
    lib.dt_tensor_shape.restype = Shape
    lib.dt_tensor_shape.argtypes = [p]
    lib.dt_tensor_release.argtypes = [p]
    lib.dt_last_error.restype = ctypes.c_char_p
    for op in BINARY:
        f = getattr(lib, "dt_" + op)
        f.restype, f.argtypes = p, [p, p]
    for op in SCALAR:
        f = getattr(lib, "dt_%s_scalar" % op)
        f.restype, f.argtypes = p, [p, ctypes.c_double]
    for op in UNARY:
        f = getattr(lib, "dt_" + op)
        f.restype, f.argtypes = p, [p]
    for op in REDUCE:
        f = getattr(lib, "dt_" + op)
        f.restype = p
        f.argtypes = [p, ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_bool]
    for op in SOFTMAX:
        f = getattr(lib, "dt_" + op)
        f.restype, f.argtypes = p, [p, ctypes.c_int]
    return lib


def specials(dtype):
    if dtype == "bool":
        return [0, 1]
    if dtype in ("uint8",):
        return [0, 1, 2, 127, 128, 255]
    if dtype in ("int32", "int64"):
        info = torch.iinfo(TORCH[dtype])
        return [0, 1, -1, 2, -2, 7, -7, info.max, info.min]
    info = torch.finfo(TORCH[dtype])
    return [0.0, -0.0, 1.0, -1.0, 0.5, 2049.0, 3.0, float("inf"), float("-inf"),
            float("nan"), info.max, -info.max, info.tiny, 1e-45]


def draw_values(rng, dtype, n):
    sp = specials(dtype)
    out = []
    for _ in range(n):
        if rng.random() < 0.3:
            out.append(rng.choice(sp))
        elif dtype == "bool":
            out.append(rng.random() < 0.5)
        elif dtype == "uint8":
            out.append(rng.randrange(0, 256))
        elif dtype in ("int32", "int64"):
            out.append(rng.randrange(-1000, 1000))
        else:
            out.append(rng.uniform(-100, 100))
    return out


def torch_tensor(vals, shape, dtype):
    t = torch.tensor(vals, dtype=torch.float64) if dtype not in ("int64", "int32", "uint8", "bool") \
        else torch.tensor([int(v) & 0xFF if dtype == "uint8" else int(v) for v in vals],
                          dtype=torch.int64)
    return t.to(TORCH[dtype]).reshape(shape)


def to_dtorch(lib, t, keep):
    dtype = str(t.dtype).replace("torch.", "")
    raw = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"\0"
    buf = ctypes.create_string_buffer(raw, len(raw))
    keep.append(buf)
    sh = Shape(t.dim(), (ctypes.c_int64 * MAX_DIMS)(*list(t.shape)))
    opts = Options(DTYPES.index(dtype), None, None, None, False)
    h = lib.dt_from_host(buf, sh, ctypes.byref(opts))
    if not h:
        raise RuntimeError(lib.dt_last_error().decode())
    return h


def from_dtorch(lib, h):
    dtype = DTYPES[lib.dt_tensor_dtype(h)]
    sh = lib.dt_tensor_shape(h)
    shape = [sh.dims[i] for i in range(sh.ndim)]
    n = int(np.prod(shape)) if shape else 1
    es = torch.tensor([], dtype=TORCH[dtype]).element_size()
    buf = ctypes.create_string_buffer(max(n * es, 1))
    if lib.dt_to_host(h, buf, n * es) != 0:
        raise RuntimeError(lib.dt_last_error().decode())
    data = torch.frombuffer(bytearray(buf.raw[:n * es]), dtype=torch.uint8) if n else torch.empty(0, dtype=torch.uint8)
    return data.view(TORCH[dtype]).reshape(shape)


def same(a, b):
    if a.dtype != b.dtype or list(a.shape) != list(b.shape):
        return False
    if a.dtype.is_floating_point:
        x, y = a.double(), b.double()
        both_nan = torch.isnan(x) & torch.isnan(y)
        eq = (x == y) & (torch.signbit(x) == torch.signbit(y))
        return bool((both_nan | eq).all())
    return bool((a == b).all())


def shapes(rng):
    nd = rng.choice([0, 1, 1, 2, 2, 3])
    s = [rng.choice([1, 2, 3]) for _ in range(nd)]
    t = list(s)
    for i in range(nd):
        if rng.random() < 0.3:
            t[i] = 1
    if rng.random() < 0.2:
        t = []  # 0-d operand
    return s, t


def run_case(lib, rng, kind):
    keep = keep_refs = []
    if kind == "binary":
        op = rng.choice(BINARY)
        da, db = rng.choice(DTYPES), rng.choice(DTYPES)
        sa, sb = shapes(rng)
        if rng.random() < 0.5:
            sa, sb = sb, sa
        a = torch_tensor(draw_values(rng, da, int(np.prod(sa)) if sa else 1), sa, da)
        b = torch_tensor(draw_values(rng, db, int(np.prod(sb)) if sb else 1), sb, db)
        desc = "%s(%s%s, %s%s) a=%s b=%s" % (op, da, sa, db, sb, a.flatten().tolist()[:6], b.flatten().tolist()[:6])
        tf = lambda: getattr(torch, op)(a, b)
        df = lambda: getattr(lib, "dt_" + op)(to_dtorch(lib, a, keep), to_dtorch(lib, b, keep))
    elif kind == "scalar":
        op = rng.choice(SCALAR)
        da = rng.choice(DTYPES)
        sa, _ = shapes(rng)
        a = torch_tensor(draw_values(rng, da, int(np.prod(sa)) if sa else 1), sa, da)
        s = rng.choice([2, 3, -2, 0.5, 2049, 257, 1e-45, 300, 0, 1.0004])
        desc = "%s_scalar(%s%s, %r) a=%s" % (op, da, sa, s, a.flatten().tolist()[:12])
        tf = lambda: getattr(torch, op)(a, s)
        df = lambda: getattr(lib, "dt_%s_scalar" % op)(to_dtorch(lib, a, keep), float(s))
    elif kind == "reduce":
        op = rng.choice(REDUCE)
        da = rng.choice(DTYPES)
        sa = [rng.choice([1, 2, 3, 5]) for _ in range(rng.choice([1, 2, 3]))]
        a = torch_tensor(draw_values(rng, da, int(np.prod(sa))), sa, da)
        nd = rng.choice([0, 1]) if op.startswith("arg") else rng.choice([0, 1, 2])
        dims = sorted(rng.sample(range(len(sa)), min(nd, len(sa))))
        keep = rng.random() < 0.5
        desc = "%s(%s%s, dims=%s, keep=%s) a=%s" % (op, da, sa, dims, keep, a.flatten().tolist()[:8])
        def tf():
            if op.startswith("arg"):
                return getattr(torch, op)(a, dim=dims[0] if dims else None, keepdim=keep if dims else False)
            if op == "prod":
                if not dims:
                    return torch.prod(a)
                r = a
                for d in reversed(dims):
                    r = torch.prod(r, dim=d, keepdim=keep)
                return r
            return getattr(torch, op)(a, dim=dims if dims else None, keepdim=keep) if dims else getattr(torch, op)(a)
        arr = (ctypes.c_int * max(len(dims), 1))(*dims) if dims else None
        df = lambda: getattr(lib, "dt_" + op)(to_dtorch(lib, a, keep_refs), arr, len(dims), keep if dims else False)
    elif kind == "softmax":
        op = rng.choice(SOFTMAX)
        da = rng.choice(["float32", "float64", "float16", "bfloat16"])
        sa = [rng.choice([1, 2, 3, 7]) for _ in range(rng.choice([1, 2]))]
        a = torch_tensor(draw_values(rng, da, int(np.prod(sa))), sa, da)
        dim = rng.randrange(-len(sa), len(sa))
        desc = "%s(%s%s, dim=%d) a=%s" % (op, da, sa, dim, a.flatten().tolist()[:8])
        tf = lambda: getattr(torch, op)(a, dim)
        df = lambda: getattr(lib, "dt_" + op)(to_dtorch(lib, a, keep_refs), dim)
    else:
        op = rng.choice(UNARY)
        da = rng.choice(DTYPES)
        sa, _ = shapes(rng)
        a = torch_tensor(draw_values(rng, da, int(np.prod(sa)) if sa else 1), sa, da)
        desc = "%s(%s%s)" % (op, da, sa)
        tf = lambda: getattr(torch, op)(a)
        df = lambda: getattr(lib, "dt_" + op)(to_dtorch(lib, a, keep))
    try:
        want = tf()
    except Exception as e:  # torch refuses
        want = e
    try:
        h = df()
        got = from_dtorch(lib, h) if h else RuntimeError(lib.dt_last_error().decode())
        if h:
            lib.dt_tensor_release(h)
    except Exception as e:
        got = e
    if isinstance(want, Exception) or isinstance(got, Exception):
        ok = isinstance(want, Exception) and isinstance(got, Exception)
    else:
        ok = same(got, want)
    return op, ok, desc, want, got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="build/libdtorch.so")
    ap.add_argument("--cases", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=10)
    ap.add_argument("--only", default=None, help="show only mismatches of this op")
    args = ap.parse_args()
    lib = load(args.lib)
    rng = random.Random(args.seed)
    stats, bad = {}, []
    for i in range(args.cases):
        kind = rng.choice(["binary", "binary", "scalar", "unary", "reduce", "softmax"])
        op, ok, desc, want, got = run_case(lib, rng, kind)
        n, m = stats.get(op, (0, 0))
        stats[op] = (n + 1, m + (not ok))
        if not ok and (not args.only or op == args.only):
            bad.append((desc, want, got))
    for op in sorted(stats):
        n, m = stats[op]
        print("%-14s %5d cases %4d differ" % (op, n, m))
    torch.set_printoptions(precision=10)
    for desc, want, got in bad[:args.show]:
        print("DIFF", desc, "\n  torch :", want, "\n  dtorch:", got)
    total = sum(m for _, m in stats.values())
    print("%d of %d cases differ" % (total, args.cases))
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
