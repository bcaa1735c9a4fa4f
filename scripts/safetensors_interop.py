#!/usr/bin/env python3
"""The Python side of the safetensors interop test (tests/interop_safetensors.c).

  safetensors_interop.py write DIR   files by safetensors.numpy.save_file,
                                     np_<dtype>.safetensors, and the raw
                                     little-endian bytes they hold, np_<dtype>.bin
  safetensors_interop.py check DIR   loads dtorch's dt_<dtype>.safetensors with
                                     safetensors.numpy.load_file and compares
                                     them with dt_<dtype>.bin

Each file holds "t" [6, 10], "s" [] and "e" [0, 3]; the .bin files are
their bytes in that order. numpy has no bfloat16: bfloat16 files are
written and read through their bit patterns (uint16) with safetensors'
own serialize / deserialize.
"""
import os
import sys

import numpy as np
import safetensors
import safetensors.numpy as stnp

KINDS = ["float32", "float64", "float16", "bfloat16", "int32", "int64",
         "uint8", "bool"]
SHAPES = {"t": (6, 10), "s": (), "e": (0, 3)}


def values(kind, seed, shape):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if kind == "bool":
        v = rng.integers(0, 2, n).astype(np.bool_)
    elif kind == "uint8":
        v = rng.integers(0, 256, n).astype(np.uint8)
    elif kind in ("int32", "int64"):
        v = rng.integers(-2**31, 2**31, n).astype(kind)
    elif kind == "bfloat16":
        v = rng.integers(0, 65536, n).astype(np.uint16)  # any bit pattern
    else:
        v = (rng.standard_normal(n) * 100).astype(kind)
    return v.reshape(shape)


def le_bytes(a):
    return np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()


def save_bf16(path, tensors):
    keep = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    if hasattr(stnp, "TensorSpec"):  # safetensors >= 0.8
        specs = {k: stnp.TensorSpec(dtype="bfloat16", shape=v.shape,
                                    data_ptr=v.ctypes.data, data_len=v.nbytes)
                 for k, v in keep.items()}
    else:
        specs = {k: {"dtype": "bfloat16", "shape": list(v.shape),
                     "data": le_bytes(v)} for k, v in keep.items()}
    safetensors.serialize_file(specs, path)


def write(d):
    for k, kind in enumerate(KINDS):
        t = {name: values(kind, 10 * k + i, shape)
             for i, (name, shape) in enumerate(SHAPES.items())}
        path = os.path.join(d, f"np_{kind}.safetensors")
        if kind == "bfloat16":
            save_bf16(path, t)
        else:
            stnp.save_file(t, path)
        with open(os.path.join(d, f"np_{kind}.bin"), "wb") as f:
            for name in SHAPES:
                f.write(le_bytes(t[name]))
    print(f"interop: wrote {len(KINDS)} files with safetensors "
          f"{safetensors.__version__}")


def expected(d, kind, np_kind):
    raw = open(os.path.join(d, f"dt_{kind}.bin"), "rb").read()
    out, at = {}, 0
    for name, shape in SHAPES.items():
        n = int(np.prod(shape)) * np.dtype(np_kind).itemsize
        out[name] = np.frombuffer(raw[at:at + n],
                                  dtype=np.dtype(np_kind).newbyteorder("<")
                                  ).reshape(shape)
        at += n
    return out


def check(d):
    bad = []
    for kind in KINDS:
        path = os.path.join(d, f"dt_{kind}.safetensors")
        if kind == "bfloat16":
            want = expected(d, kind, "uint16")
            got = dict(safetensors.deserialize(open(path, "rb").read()))
            for name, shape in SHAPES.items():
                g = got[name]
                if g["dtype"] not in ("BF16", "bfloat16") or \
                        tuple(g["shape"]) != shape or \
                        bytes(g["data"]) != le_bytes(want[name]):
                    bad.append(f"{kind} {name}: {g['dtype']} {g['shape']}")
            continue
        want = expected(d, kind, kind)
        got = stnp.load_file(path)
        for name, shape in SHAPES.items():
            g = got[name]
            if g.dtype != np.dtype(kind) or g.shape != shape or \
                    not np.array_equal(g, want[name]):
                bad.append(f"{kind} {name}: {g.dtype} {g.shape}")
    if bad:
        print("interop: dtorch files differ:", *bad, sep="\n  ")
        return 1
    print(f"interop: {len(KINDS)} dtorch files load in safetensors.numpy "
          "with equal values")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        sys.exit(__doc__)
    sys.exit(write(sys.argv[2]) if sys.argv[1] == "write" else check(sys.argv[2]))
