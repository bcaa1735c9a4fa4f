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
