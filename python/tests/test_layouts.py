"""The ctypes mirrors of the C structs have the C header's 1.x layouts
(the sizes written out from include/dtorch/dtorch.h, as tests/test_abi.c
pins them), and the library agrees: it zeroes an output struct's reserved
words and refuses options whose reserved words are not zero."""
import ctypes

import pytest

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
