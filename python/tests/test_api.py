"""The rest of the Python API against torch on the same values:
factories (positional and tuple sizes, dtypes, full/arange), operators
with scalars on both sides, reductions, views and indexing, errors that
carry dtorch's message, and no leaked handles."""
import gc
import os

import pytest
import torch

import dtorch


def test_version_and_library():
    assert dtorch.version() == dtorch.__version__
    assert os.path.exists(dtorch._lib.path) or dtorch._lib.path.startswith("libdtorch")


def test_factories():
    assert tuple(dtorch.zeros(2, 3).shape) == (2, 3)
    assert tuple(dtorch.ones((2, 3)).shape) == (2, 3)
    assert tuple(dtorch.empty([4]).shape) == (4,)
    assert dtorch.zeros(2, dtype=torch.int32).dtype is torch.int32
    torch.testing.assert_close(dtorch.ones(2, 3).to_torch(), torch.ones(2, 3))
    f = dtorch.full((2, 2), 7)
    assert f.dtype is torch.int64 and f.tolist() == [[7, 7], [7, 7]]
    assert dtorch.full((2,), 1.5).tolist() == [1.5, 1.5]
    assert dtorch.arange(5).tolist() == torch.arange(5).tolist()
    assert dtorch.arange(5).dtype is torch.int64
    torch.testing.assert_close(dtorch.arange(0, 1, 0.25).to_torch(), torch.arange(0, 1, 0.25))
    assert dtorch.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    r = dtorch.rand(1000).to_torch()
    assert 0 <= float(r.min()) and float(r.max()) < 1
    dtorch.manual_seed(3)
    a = dtorch.randn(10).tolist()
    dtorch.manual_seed(3)
    assert dtorch.randn(10).tolist() == a


def test_operators_against_torch():
    x = torch.randn(3, 4)
    y = torch.rand(3, 4) + 0.5
    a, b = dtorch.Tensor(x), dtorch.Tensor(y)
    cases = [
        (a + b, x + y), (a - b, x - y), (a * b, x * y), (a / b, x / y),
        (a + 2.0, x + 2.0), (2.0 + a, 2.0 + x), (a - 1.5, x - 1.5),
        (1.5 - a, 1.5 - x), (a * 3, x * 3), (3 * a, 3 * x), (a / 4, x / 4),
        (4 / b, 4 / y), (b ** 2, y ** 2), (-a, -x), (abs(a), abs(x)),
        (a @ b.t(), x @ y.T), (a.exp(), x.exp()), (b.log(), y.log()),
        (a.tanh(), x.tanh()), (a.sigmoid(), x.sigmoid()),
        (dtorch.maximum(a, b), torch.maximum(x, y)),
        (a.softmax(-1), x.softmax(-1)), (a.clamp(-0.5, 0.5), x.clamp(-0.5, 0.5)),
    ]
    for got, want in cases:
        torch.testing.assert_close(got.to_torch(), want)
    assert ((a < b).to_torch() == (x < y)).all()
    assert ((a == a).to_torch()).all()


def test_reductions_and_views():
    x = torch.randn(2, 3, 4)
    a = dtorch.Tensor(x)
    torch.testing.assert_close(a.sum().to_torch(), x.sum())
    torch.testing.assert_close(a.sum(dim=1).to_torch(), x.sum(dim=1))
    torch.testing.assert_close(a.mean(dim=(0, 2), keepdim=True).to_torch(),
                               x.mean(dim=(0, 2), keepdim=True))
    torch.testing.assert_close(a.amax(-1).to_torch(), x.amax(-1))
    assert a.argmax().item() == int(x.argmax())
    torch.testing.assert_close(a.var(dim=1).to_torch(), x.var(dim=1))
    torch.testing.assert_close(a.permute(2, 0, 1).to_torch(), x.permute(2, 0, 1))
    torch.testing.assert_close(a.reshape(6, 4).to_torch(), x.reshape(6, 4))
    torch.testing.assert_close(a.view(-1).to_torch(), x.view(-1))
    torch.testing.assert_close(a[1].to_torch(), x[1])
    torch.testing.assert_close(a[:, 1:3].to_torch(), x[:, 1:3])
    torch.testing.assert_close(a[0, :, ::2].to_torch(), x[0, :, ::2])
    torch.testing.assert_close(a[None].to_torch(), x[None])
    torch.testing.assert_close(dtorch.cat([a, a], 1).to_torch(), torch.cat([x, x], 1))
    torch.testing.assert_close(dtorch.stack([a, a]).to_torch(), torch.stack([x, x]))
    assert a.to(torch.float64).dtype is torch.float64
    assert len(a) == 2 and a.numel() == 24 and a.dim() == 3


def test_errors_carry_dtorchs_message():
    a, b = dtorch.ones(2, 3), dtorch.ones(4, 5)
    with pytest.raises(dtorch.InvalidArgumentError) as e:
        dtorch.matmul(a, b)
    assert "dt_matmul" in str(e.value) and "3" in str(e.value) and "4" in str(e.value)
    assert isinstance(e.value, ValueError) and e.value.status == "DT_ERR_SHAPE"
    with pytest.raises(dtorch.DTorchError, match="dt_view"):
        a.view(5)
    with pytest.raises(dtorch.DTorchError, match="negative|-1"):
        dtorch.zeros(-1, 2)
    with pytest.raises(TypeError):
        dtorch.zeros(2, dtype=torch.complex64)
    # the error does not stick: the next call works
    assert dtorch.ones(1).item() == 1.0


def test_no_leaked_handles():
    gc.collect()
    base = dtorch.live_tensors()
    for _ in range(20):
        a = dtorch.randn(8, 8)
        c = (a + a * 2.0).relu().sum()
        c.to_torch_async().get()
        try:
            dtorch.matmul(a, dtorch.ones(3))
        except dtorch.DTorchError:
            pass
    del a, c
    gc.collect()
    assert dtorch.live_tensors() == base


def test_init_twice_releases_the_old_handle():
    """Tensor.__init__ called again replaces the tensor: the old handle is
    released (it leaked), and a call that fails leaves the object as it was."""
    gc.collect()
    base = dtorch.live_tensors()
    t = dtorch.Tensor(torch.ones(3))
    for k in range(5):
        t.__init__(torch.full((2,), float(k)))
    dtorch.synchronize()  # the copies' records hold their handles until they ran
    assert dtorch.live_tensors() == base + 1
    assert t.tolist() == [4.0, 4.0]
    with pytest.raises(ValueError):
        t.__init__(torch.ones(2), placements=[dtorch.Replicate()])  # no mesh
    dtorch.synchronize()
    assert t.tolist() == [4.0, 4.0] and dtorch.live_tensors() == base + 1
    del t
    gc.collect()
    dtorch.synchronize()
    assert dtorch.live_tensors() == base


def test_backward_and_grad():
    x = torch.randn(3, 4)
    a = dtorch.Tensor(x, requires_grad=True)
    assert a.requires_grad and a.grad is None
    loss = (a * a).sum()
    loss.backward()
    torch.testing.assert_close(a.grad.to_torch(), 2 * x)


def test_every_factory_takes_a_mesh_and_a_device():
    import warnings
    from dtorch.distributed_spec import init_device_mesh, Shard, Replicate
    warnings.simplefilter("ignore")
    mesh = init_device_mesh("cuda", 2, mesh_dim_names=["dp"])
    kw = dict(device_mesh=mesh, placements=[Shard(0)])
    assert dtorch.arange(8, **kw).to_local(1).tolist() == [4, 5, 6, 7]
    assert dtorch.full((4,), 2.5, **kw).to_local(0).tolist() == [2.5, 2.5]
    assert dtorch.tensor([1, 2, 3, 4], **kw).to_local(1).tolist() == [3, 4]
    for f in (dtorch.zeros, dtorch.ones, dtorch.empty, dtorch.rand, dtorch.randn):
        t = f(4, 3, **kw)
        assert tuple(t.shape) == (4, 3) and list(t.placements) == [Shard(0)]
        assert tuple(t.to_local(0).shape) == (2, 3)
    r = dtorch.ones(2, device_mesh=mesh)  # placements default: all Replicate()
    assert list(r.placements) == [Replicate()]
    # a device is one rank of the runtime; "cuda:1" is emulated on rank 1
    t = dtorch.ones(3, device="cpu:1")
    assert t.device_mesh is None and t.to_torch().tolist() == [1, 1, 1]
    assert dtorch.zeros(2, device="cuda:1").tolist() == [0, 0]
    with pytest.raises(dtorch.DTorchError, match="cpu:99|99"):
        dtorch.ones(2, device="cpu:99")
