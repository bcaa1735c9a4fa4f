"""The ctypes mirrors of the C structs have the C header's 1.x layouts
(the sizes written out from include/dtorch/dtorch.h, as tests/test_abi.c
pins them, and every struct's size and offsets from the C compiler
reading include/dtorch), the enums the package mirrors have the header's
values (parsed from it), and the library agrees: it zeroes an output
struct's reserved words and refuses options whose reserved words are not
zero."""
import ctypes
import pathlib
import re
import shutil
import subprocess

import pytest
import torch

import dtorch
from dtorch import _lib

LP64 = ctypes.sizeof(ctypes.c_void_p) == 8


@pytest.mark.skipif(not LP64, reason="the sizes are LP64's")
def test_sizes_match_the_header():
    assert ctypes.sizeof(_lib.Shape) == 72
    assert ctypes.sizeof(_lib.Placement) == 12
    assert ctypes.sizeof(_lib.TensorOptions) == 104
    assert _lib.TensorOptions.reserved.offset == 40
    assert ctypes.sizeof(_lib.MemoryStats) == 64
    assert _lib.MemoryStats.reserved.offset == 24


def test_memory_stats_reserved_zeroed():
    st = _lib.MemoryStats()
    for i in range(len(st.reserved)):
        st.reserved[i] = 0xA5A5
    rt = _lib.dt_runtime_default()
    assert _lib.dt_runtime_memory(rt, 0, ctypes.byref(st)) == 0
    assert list(st.reserved) == [0] * len(st.reserved)


def test_nonzero_reserved_refused():
    o = _lib.TensorOptions()
    o.reserved[2] = 1
    h = _lib.dt_full(_lib.Shape(1, (ctypes.c_int64 * 8)(3)), 1.0,
                     ctypes.byref(o))
    assert not h
    assert b"options.reserved[2]" in _lib.dt_last_error()
    o.reserved[2] = 0
    h = _lib.dt_full(_lib.Shape(1, (ctypes.c_int64 * 8)(3)), 1.0,
                     ctypes.byref(o))
    assert h
    _lib.dt_tensor_release(h)
    assert tuple(dtorch.zeros(3).shape) == (3,)


# (size, {field: offset}) of each struct mirrored in dtorch._lib, from the
# C header (LP64; the static asserts and tests/test_abi.c pin the sizes)
LAYOUTS = {
    "RuntimeOptions": (232, {"device": 0, "num_ranks": 8, "auto_redistribute": 12,
                             "device_memory": 16, "ring_capacity": 24, "spin_us": 28,
                             "collective_timeout_ms": 32, "pin_ranks": 40,
                             "chaos_seed": 48, "dry_run": 56, "dry_link_gbps": 64,
                             "dry_link_latency_us": 72, "dry_mem_gbps": 80,
                             "dry_tflops": 88, "rank_devices": 96, "launcher": 104,
                             "reserved": 112}),
    "CommCounts": (128, {"bytes": 48, "reserved": 56}),
    "CacheStats": (64, {"evictions": 24, "reserved": 32}),
    "LoadOptions": (104, {"device": 16, "direct": 24, "queue_depth": 28,
                          "merge_gap": 32, "reserved": 40}),
    "SafetensorsEntry": (144, {"dtype": 16, "shape": 24, "offset": 96, "nbytes": 104,
                               "reserved": 112}),
    "SafetensorsInfo": (72, {"tensors": 8, "n_metadata": 16, "metadata_keys": 24,
                             "metadata_values": 32, "reserved": 40}),
    "BackwardOptions": (48, {"retain_graph": 8, "reserved": 16}),
    "SgdOptions": (64, {"nesterov": 24, "reserved": 32}),
    "AdamwOptions": (72, {"weight_decay": 32, "reserved": 40}),
    "ShadowReport": (1120, {"max_diff": 16, "failed": 24, "message": 25,
                            "reserved": 1056}),
    "VisualizeOptions": (40, {"max_width": 4, "reserved": 8}),
    "DryRunStats": (136, {"peak_rank": 40, "comm_s": 48, "step_s": 64, "reserved": 72}),
    "Fault": (56, {"rank": 4, "after": 8, "stall_ms": 16, "reserved": 24}),
    "SpmdCtx": (56, {"world_size": 4, "rt": 8, "arg": 16, "reserved": 24}),
    "Group": (64, {"mesh_dim": 8, "ranks": 16, "nranks": 24, "reserved": 32}),
}


@pytest.mark.skipif(not LP64, reason="the sizes are LP64's")
@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_more_struct_layouts_match_the_header(name):
    size, offsets = LAYOUTS[name]
    cls = getattr(_lib, name)
    assert ctypes.sizeof(cls) == size
    for field, off in offsets.items():
        assert getattr(cls, field).offset == off, field


def test_runtime_options_launcher_reaches_the_library():
    # the field sits where the C struct has it: the library reads it
    o = _lib.RuntimeOptions()
    o.num_ranks = 2
    o.launcher = b"bogus"
    assert not _lib.dt_runtime_create(ctypes.byref(o))
    assert b'options.launcher "bogus"' in _lib.dt_last_error()
    _lib.dt_clear_error()
    o.launcher = None
    o.reserved[0] = 1
    assert not _lib.dt_runtime_create(ctypes.byref(o))
    assert b"reserved[0]" in _lib.dt_last_error()
    _lib.dt_clear_error()


# ---- against include/dtorch itself: the header's enums parsed, every
# mirrored struct's size and field offsets from the C compiler
INCLUDE = pathlib.Path(__file__).resolve().parents[2] / "include" / "dtorch"
HEADERS = ["dtorch.h", "autograd.h", "debug.h", "sim.h", "spmd.h"]


def _header_text():
    text = "\n".join((INCLUDE / h).read_text() for h in HEADERS)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def header_enums():
    """{enum name: [(constant, value), ...]} of every typedef enum."""
    out = {}
    for name, body in re.findall(r"typedef\s+enum\s+(\w+)\s*\{(.*?)\}", _header_text(), re.S):
        items, nxt = [], 0
        for part in body.split(","):
            part = part.strip()
            if not part:
                continue
            if "=" in part:
                k, v = (x.strip() for x in part.split("=", 1))
                nxt = int(v, 0)
            else:
                k = part
            items.append((k, nxt))
            nxt += 1
        out[name] = items
    return out


needs_headers = pytest.mark.skipif(not INCLUDE.is_dir(), reason="no include/dtorch here")


@needs_headers
def test_enums_match_the_header():
    enums = header_enums()
    # read from the library at import: checked against the header here
    assert _lib.STATUS_NAMES == [k for k, _ in enums["dt_status"]]
    assert [v for _, v in enums["dt_status"]] == list(range(len(_lib.STATUS_NAMES)))
    dtypes = [(k, v) for k, v in enums["dt_dtype"] if k != "DT_DTYPE_COUNT"]
    assert _lib.DTYPE_NAMES == [k[3:].lower() for k, _ in dtypes]
    assert [v for _, v in dtypes] == list(range(len(dtypes)))
    assert dtorch._tensor.DTYPES == [getattr(torch, n) for n in _lib.DTYPE_NAMES]
    # the enums the package passes by value: every constant, its value
    for enum, names in _lib.ENUMS.items():
        assert [k for k, _ in enums[enum]] == list(names), enum
        for k, v in enums[enum]:
            assert _lib.E[k] == v, k
    assert dict(enums["dt_fault_kind"]) == _lib.FAULT_KINDS


def test_modules_use_the_enum_table():
    from dtorch import _redistribute_mode, _runtime, _scalar, distributed_spec
    assert (_scalar.AUTO, _scalar.INT, _scalar.FLOAT, _scalar.BOOL) == tuple(
        _lib.E[n] for n in _lib.ENUMS["dt_scalar_kind"])
    assert (_redistribute_mode.DEFAULT, _redistribute_mode.AUTO,
            _redistribute_mode.EXPLICIT) == tuple(
        _lib.E[n] for n in _lib.ENUMS["dt_redistribute_mode"])
    assert _runtime.FAULTS["rank_fail"] == _lib.E["DT_FAULT_RANK_FAIL"]
    assert distributed_spec.Shard(1)._c().kind == _lib.E["DT_PLACEMENT_SHARD"]
    assert distributed_spec.Partial("max")._c().reduce == _lib.E["DT_REDUCE_MAX"]
    assert dtorch._tensor._MODES == {"raise_error": 0, "replicate": 1, "keep": 2}


def _c_name(cls_name):
    return "dt_" + re.sub(r"(?<!^)([A-Z])", r"_\1", cls_name).lower()


MIRRORED = [n for n, v in vars(_lib).items()
            if isinstance(v, type) and issubclass(v, ctypes.Structure) and v is not ctypes.Structure]


@needs_headers
def test_every_header_struct_is_mirrored():
    bodies = set(re.findall(r"typedef\s+struct\s+(\w+)\s*\{", _header_text()))
    assert bodies == {_c_name(n) for n in MIRRORED}


@needs_headers
@pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler")
def test_every_struct_layout_matches_the_compiler(tmp_path):
    lines = ["#include <stddef.h>", "#include <stdio.h>"] + \
        [f'#include "dtorch/{h}"' for h in HEADERS] + ["int main(void) {"]
    want = {}
    for n in MIRRORED:
        cls, c = getattr(_lib, n), _c_name(n)
        lines.append(f'  printf("{n} size %zu\\n", sizeof({c}));')
        want[f"{n} size"] = ctypes.sizeof(cls)
        for f, *_ in cls._fields_:
            lines.append(f'  printf("{n}.{f} %zu\\n", offsetof({c}, {f}));')
            want[f"{n}.{f}"] = getattr(cls, f).offset
    lines += ["  return 0;", "}"]
    src = tmp_path / "layouts.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layouts"
    subprocess.run(["cc", "-std=c11", "-I", str(INCLUDE.parent), str(src), "-o", str(exe)],
                   check=True)
    got = dict(line.rsplit(" ", 1) for line in
               subprocess.run([str(exe)], check=True, capture_output=True,
                              text=True).stdout.splitlines())
    assert {k: int(v) for k, v in got.items()} == want
