"""Zero-copy views of single-device tensors: numpy through
__array_interface__ (read-only, the same address every time, strides of
views), DLPack to torch and numpy; the view keeps the memory alive after
the dtorch.Tensor is gone; DTensors copy (numpy) or refuse (DLPack)."""
import gc

import numpy as np
import pytest
import torch

import dtorch
from dtorch.distributed_spec import init_device_mesh, Shard


def addr(a):
    return a.__array_interface__["data"][0]


def test_numpy_view_is_zero_copy_and_read_only():
    src = torch.arange(12, dtype=torch.float32).reshape(3, 4) * 0.5
    t = dtorch.Tensor(src)
    a, b = np.asarray(t), t.numpy()
    assert addr(a) == addr(b) == t.__array_interface__["data"][0]
    assert not a.flags.writeable
    np.testing.assert_array_equal(a, src.numpy())
    with pytest.raises(ValueError):
        a[0, 0] = 1


def test_numpy_view_of_views_and_dtypes():
    src = torch.arange(12, dtype=torch.int64).reshape(3, 4)
    t = dtorch.Tensor(src)
    tt = t.transpose(0, 1)
    row = t[1]
    np.testing.assert_array_equal(np.asarray(tt), src.T.numpy())
    np.testing.assert_array_equal(np.asarray(row), src[1].numpy())
    assert addr(np.asarray(row)) == addr(np.asarray(t)) + 4 * 8
    assert np.asarray(tt).strides == (8, 32)
    for dt in (torch.float64, torch.float16, torch.int32, torch.uint8, torch.bool):
        s = (torch.arange(6) % 3).to(dt)
        np.testing.assert_array_equal(np.asarray(dtorch.Tensor(s)), s.numpy())


def test_view_outlives_the_tensor():
    base = dtorch.live_tensors()
    t = dtorch.full((1000,), 3.25)
    a = np.asarray(t)
    del t
    gc.collect()
    assert dtorch.live_tensors() == base + 1  # the view holds it
    assert float(a.sum()) == 3250.0
    del a
    gc.collect()
    assert dtorch.live_tensors() == base


def test_dlpack_to_torch_and_numpy():
    src = torch.randn(5, 7)
    t = dtorch.Tensor(src) * 2.0
    assert t.__dlpack_device__() == (1, 0)
    tv = torch.from_dlpack(t)
    nv = np.from_dlpack(t)
    torch.testing.assert_close(tv, src * 2.0, rtol=0, atol=0)
    np.testing.assert_array_equal(nv, (src * 2.0).numpy())
    assert tv.data_ptr() == addr(np.asarray(t)) == addr(nv)
    tt = torch.from_dlpack(t.transpose(0, 1))
    assert tt.stride() == (1, 7)
    torch.testing.assert_close(tt, (src * 2.0).T, rtol=0, atol=0)
    b = torch.from_dlpack(dtorch.Tensor(torch.tensor([1.5, 2.5], dtype=torch.bfloat16)))
    assert b.dtype is torch.bfloat16 and b.tolist() == [1.5, 2.5]


def test_dlpack_capsule_lifetime():
    base = dtorch.live_tensors()
    t = dtorch.ones(64)
    v = torch.from_dlpack(t)
    cap = dtorch.full((3,), 1.0).__dlpack__()  # never consumed
    del t, cap
    gc.collect()
    assert dtorch.live_tensors() == base + 1
    assert float(v.sum()) == 64.0
    del v
    gc.collect()
    assert dtorch.live_tensors() == base


def test_dtensor_numpy_copies_dlpack_refuses():
    import warnings
    warnings.simplefilter("ignore")
    mesh = init_device_mesh("cuda", 2, mesh_dim_names=["dp"])
    src = torch.arange(8, dtype=torch.float32)
    d = dtorch.Tensor(src, device_mesh=mesh, placements=[Shard(0)])
    np.testing.assert_array_equal(np.asarray(d), src.numpy())
    np.testing.assert_array_equal(d.numpy(), src.numpy())
    with pytest.raises(dtorch.UnsupportedError, match="DTensor"):
        torch.from_dlpack(d)
