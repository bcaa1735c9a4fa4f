"""dtorch.Tensor's torch-style methods (python/dtorch/_methods.py,
_index.py), each compared with real torch on the same values: on host
tensors and on DTensors over a mesh of 4 (Shard(0) and Replicate), in a
runtime with auto_redistribute (as torch's DTensor redistributes for the
ops that need it)."""
import math

import numpy as np
import pytest
import torch

import dtorch
from dtorch import Replicate, Shard

A = torch.tensor([[0.5, -2.0, 3.0, 3.0, -1.5, 0.25],
                  [4.0, 1.0, -3.5, 2.0, 0.0, -0.75],
                  [-1.0, 6.0, 2.5, -6.0, 1.25, 1.0],
                  [2.0, 2.0, -0.5, 5.0, -4.0, 3.5]])


@pytest.fixture(scope="module")
def mesh():
    with dtorch.Runtime(4, auto_redistribute=True):
        yield dtorch.init_device_mesh("cpu", (4,))


@pytest.fixture(params=["host", "shard0", "replicate"])
def make(request, mesh):
    """make(torch tensor) -> the dtorch.Tensor of that value, of the kind."""
    kind = request.param

    def mk(t):
        if kind == "host":
            return dtorch.Tensor(t)
        return dtorch.Tensor(t, device_mesh=mesh,
                             placements=[Shard(0) if kind == "shard0" and t.dim() else Replicate()])
    mk.kind = kind
    return mk


def same(got, want):
    """got (a dtorch.Tensor) has want's shape, dtype and values."""
    assert isinstance(got, dtorch.Tensor), type(got)
    g = got.to_torch()
    assert g.dtype == want.dtype and g.shape == want.shape, (g, want)
    torch.testing.assert_close(g, want, rtol=1e-6, atol=1e-6, equal_nan=True)


# ---- reductions
def test_max_min_return_types(make):
    t = make(A)
    same(t.max(), A.max())
    same(t.min(), A.min())
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            for name in ("max", "min"):
                got = getattr(t, name)(dim, keepdim=keepdim)
                want = getattr(A, name)(dim, keepdim=keepdim)
                assert type(got) is type(want)  # torch.return_types.max / .min
                same(got.values, want.values)
                same(got.indices, want.indices)  # ties: the first index, as torch
                v, i = got
                same(v, want[0])
                same(i, want[1])
    B = A.flip(0).contiguous()
    same(t.max(make(B)), A.max(B))
    same(t.min(other=make(B)), A.min(B))


def test_argmax_argmin(make):
    t = make(A)
    same(t.argmax(), A.argmax())
    same(t.argmin(), A.argmin())
    same(t.argmax(dim=1), A.argmax(dim=1))
    same(t.argmin(0, keepdim=True), A.argmin(0, keepdim=True))


def test_sum_mean_dtype_and_norms(make):
    t = make(A)
    same(t.sum(dtype=torch.float64), A.sum(dtype=torch.float64))
    same(t.sum(1, keepdim=True), A.sum(1, keepdim=True))
    same(t.mean(dim=0, dtype=torch.float64), A.mean(dim=0, dtype=torch.float64))
    same(t.mean((0, 1)), A.mean((0, 1)))
    ints = torch.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9], [1, 1, 1]])
    same(make(ints).sum(), ints.sum())
    same(make(ints).sum(dtype=torch.float32), ints.sum(dtype=torch.float32))
    for p in ("fro", 2, 1, math.inf, -math.inf, 0, 3, 0.5):
        same(t.norm(p), A.norm(p))
        same(t.norm(p, dim=1), A.norm(p, dim=1))
    same(t.norm(dim=0, keepdim=True), A.norm(dim=0, keepdim=True))
    with pytest.raises(NotImplementedError, match="floating point"):
        make(ints).norm()


def test_unary_and_casts(make):
    P = A.abs() + 0.5
    t, p = make(A), make(P)
    same(t.abs(), A.abs())
    same(abs(t), abs(A))
    same(p.sqrt(), P.sqrt())
    same(p.log(), P.log())
    same(t.exp(), A.exp())
    for name in ("float", "double", "half", "bfloat16", "int", "long", "bool"):
        same(getattr(t, name)(), getattr(A, name)())
    same(t.type_as(make(torch.zeros(1, dtype=torch.int32))), A.type_as(torch.zeros(1, dtype=torch.int32)))
    same(t.clone(), A.clone())


# ---- splitting
def test_chunk_split_unbind(make):
    t = make(A)
    for args in [(2,), (4, 1), (5, 1), (3, -1), (1, 0)]:
        got, want = t.chunk(*args), A.chunk(*args)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
    for args in [(1,), (3,), (4, 1), (2, 1), ([1, 3],), ([2, 0, 4], 1), ([6], -1)]:
        got, want = t.split(*args), A.split(*args)
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
    for dim in (0, 1):
        got, want = t.unbind(dim), A.unbind(dim)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
    same(t.narrow(1, 2, 3), A.narrow(1, 2, 3))
    with pytest.raises(ValueError, match=r"split_with_sizes expects split_sizes to sum "
                                         r"exactly to 6 .*split_sizes=\[1, 1\]"):
        t.split([1, 1], 1)
    with pytest.raises(ValueError, match="chunk expects `chunks` to be greater than 0, got: 0"):
        t.chunk(0)


def test_masked_fill(make):
    t = make(A)
    mask = A > 1.0
    same(t.masked_fill(make(mask), -9.0), A.masked_fill(mask, -9.0))
    row = torch.tensor([True, False, True, False, False, True])  # broadcast
    same(t.masked_fill(make(row), 7), A.masked_fill(row, 7))
    same(t.masked_fill(make(mask), torch.tensor(2.5)), A.masked_fill(mask, torch.tensor(2.5)))
    with pytest.raises(ValueError, match="0-dimensional value tensor"):
        t.masked_fill(make(mask), torch.tensor([1.0, 2.0]))


# ---- iteration, conversions, device
def test_iteration_stops(make):
    t = make(A)
    rows = list(t)
    assert len(rows) == 4
    for g, w in zip(rows, A):
        same(g, w)
    assert [len(list(r)) for r in t] == [6] * 4
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(make(A.sum()))


def test_conversions_and_device(make, mesh):
    t = make(A)
    assert t.tolist() == A.tolist()
    assert make(A[1, 2]).item() == A[1, 2].item()
    np.testing.assert_array_equal(t.numpy(), A.numpy())
    assert t.cpu() is t
    assert t.device == torch.device("cpu") and not t.is_cuda
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        t.item()


def test_dtensor_device_of_a_cuda_mesh():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # emulated on CPU ranks without a GPU
        m = dtorch.init_device_mesh("cuda", (2,))
    d = dtorch.Tensor(A, device_mesh=m, placements=[Shard(0)])
    # torch's DTensor reports its local shard's device: cuda:<rank's GPU>
    assert d.device == torch.device("cuda", 0) and d.is_cuda


def test_metadata(make):
    t = make(A)
    assert t.size() == A.size() and t.size(1) == A.size(1) and t.size(-1) == 6
    assert t.numel() == A.numel() == t.nelement()
    assert t.element_size() == A.element_size() == 4
    assert make(A.double()).element_size() == 8
    assert make(torch.tensor([1, 2])).element_size() == 8
    assert t.is_floating_point() and not make(torch.tensor([1])).is_floating_point()


# ---- indexing
def _indices():
    return [0, -1, 3, (1, 2), (-1, -6), slice(1, 3), (slice(None), slice(1, 3)),
            (Ellipsis, None), (None, Ellipsis, 0), (slice(1, None), slice(None, None, 2)),
            (slice(-3, -1), 4), (Ellipsis, slice(2, 5, 2)), (slice(10, 20),),
            [0, 2], (slice(None), [5, 0, -1]), torch.tensor([[0, 1], [3, 3]]),
            (1, torch.tensor([2, 2, 0])), (slice(None), torch.tensor([[1], [-2]])),
            A > 1.0, (A[:, 0] > 0,), (1, A[1] > 0.5), torch.zeros(4, 6, dtype=torch.bool)]


@pytest.mark.parametrize("idx", _indices(), ids=lambda i: repr(i)[:40])
def test_getitem_as_torch(make, idx):
    same(make(A)[idx], A[idx])


def test_getitem_with_dtorch_index_tensors(make):
    t = make(A)
    same(t[t > 1.0], A[A > 1.0])
    same(t[make(torch.tensor([3, 0]))], A[torch.tensor([3, 0])])
    same(t.index_select(1, torch.tensor([4, 1])), A.index_select(1, torch.tensor([4, 1])))


def test_getitem_errors_as_torch(make):
    t = make(A)
    with pytest.raises(ValueError, match="step must be greater than zero"):
        t[::-1]
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 4"):
        t[5]
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 1 with size 6"):
        t[:, 7]
    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 1 with size 6"):
        t[:, [0, 9]]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
        t[0, 0, 0]
    with pytest.raises(IndexError, match="an index can only have a single ellipsis"):
        t[..., ...]
    with pytest.raises(IndexError, match="tensors used as indices must be long"):
        t[torch.tensor([0.0])]
    with pytest.raises(IndexError, match=r"The shape of the mask \[3\] at index 0 does not "
                                         r"match the shape of the indexed tensor \[4, 6\]"):
        t[torch.tensor([True, False, True])]
    for i in (A[0] > 0, [0], A > 0):  # too many dims: both raise IndexError
        with pytest.raises(IndexError):
            A[0, 0, i]
        with pytest.raises(IndexError):
            t[0, 0, i]


# ---- layout
def test_views_and_layout_host():
    t = dtorch.Tensor(A)
    for f in [lambda x: x, lambda x: x.t(), lambda x: x[1:, ::2], lambda x: x[2],
              lambda x: x[:, 3:], lambda x: x.view(2, 12), lambda x: x.reshape(6, 4)]:
        g, w = f(t), f(A)
        same(g, w)
        assert g.stride() == w.stride() and g.stride(-1) == w.stride(-1)
        assert g.storage_offset() == w.storage_offset()
        assert g.is_contiguous() == w.is_contiguous()
    # data_ptr: the first element's address, as torch (offset by the view)
    base = t.data_ptr()
    assert base == t.numpy().ctypes.data
    assert t[1, 2].data_ptr() - base == (A[1, 2].data_ptr() - A.data_ptr())
    assert t[1:].shares_storage(t) and not t.clone().shares_storage(t)
    same(t.t().contiguous(), A.t().contiguous())
    assert t.t().contiguous().is_contiguous()


def test_views_as_other(make):
    t, o = make(A), make(torch.zeros(3, 8))
    same(t.view_as(o), A.view_as(torch.zeros(3, 8)))
    same(t.reshape_as(o), A.reshape_as(torch.zeros(3, 8)))
    row = make(A[0:1])
    same(row.expand_as(t), A[0:1].expand_as(A))
    same(t.view(-1, 3), A.view(-1, 3))
    if t.is_dtensor():  # one contiguous layout per shard: the global one
        assert t.stride() == A.stride() and t.is_contiguous()
        with pytest.raises(dtorch.UnsupportedError, match="data_ptr: a DTensor"):
            t.data_ptr()


# ---- new tensors
def test_new_factories(make):
    t = make(A)
    for got, want in [(t.new_zeros(2, 3), A.new_zeros(2, 3)), (t.new_ones((3,)), A.new_ones((3,))),
                      (t.new_full((2, 2), 7), A.new_full((2, 2), 7)),
                      (t.new_full((2,), 1.5, dtype=torch.float64), A.new_full((2,), 1.5, dtype=torch.float64)),
                      (t.new_tensor([1, 2, 3]), A.new_tensor([1, 2, 3])),
                      (t.new_zeros(2, dtype=torch.int32), A.new_zeros(2, dtype=torch.int32))]:
        same(got, want)
        if t.is_dtensor():  # torch's DTensor new_* rule: the mesh, all Replicate
            assert got.device_mesh == t.device_mesh and got.placements == (Replicate(),)
        else:
            assert not got.is_dtensor()
    e = t.new_empty(3, 2)
    assert e.shape == (3, 2) and e.dtype == torch.float32
    assert t.new_ones(2, requires_grad=True).requires_grad


# ---- whole-tensor comparisons
def test_equal_allclose(make):
    t = make(A)
    assert t.equal(make(A.clone())) and A.equal(A.clone())
    B = A.clone()
    B[2, 3] += 1
    assert t.equal(make(B)) == A.equal(B) is False
    assert t.equal(make(A[:2])) == A.equal(A[:2]) is False
    for other, kw in [(A + 1e-9, {}), (A + 1e-3, {}), (A + 1e-3, {"atol": 1e-2}),
                      (A * (1 + 1e-6), {"rtol": 1e-5, "atol": 0})]:
        assert t.allclose(make(other), **kw) == A.allclose(other, **kw)
    X = torch.tensor([[1.0, float("nan"), float("inf"), -float("inf")]] * 4)
    for kw in ({}, {"equal_nan": True}):
        assert make(X).allclose(make(X.clone()), **kw) == X.allclose(X.clone(), **kw)
    Y = X.clone()
    Y[0, 2] = -float("inf")
    assert make(X).allclose(make(Y), equal_nan=True) == X.allclose(Y, equal_nan=True)


# ---- repr
def test_repr_host_as_torch():
    for v in [A, A[0], A.sum(), torch.tensor([1, 2], dtype=torch.int32),
              torch.tensor([3, 4]), torch.tensor([True, False]), A.double()[0],
              torch.tensor([1.5], dtype=torch.float16), torch.zeros(0),
              torch.zeros(2, 0), torch.arange(2000.0)]:
        assert repr(dtorch.Tensor(v)) == repr(v)
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    assert repr(dtorch.Tensor(w.detach(), requires_grad=True)) == repr(w)


def test_repr_dtensor(mesh):
    d = dtorch.Tensor(A, device_mesh=mesh, placements=[Shard(1)])
    assert repr(d) == (f"DTensor(full_tensor={A!r}, device_mesh={mesh!r}, "
                       f"placements=(Shard(dim=1),))")


# ---- autograd
def test_backward_grad_fn_is_leaf(make):
    w = make(A).requires_grad_()
    assert w.is_leaf and w.grad_fn is None and w.requires_grad
    y = (w * w).sum()
    assert not y.is_leaf and y.grad_fn == "sum"
    y.backward(retain_graph=True)
    y.backward()  # retained: the second backward accumulates
    wt = A.clone().requires_grad_()
    (wt * wt).sum().backward()
    same(w.grad, 2 * wt.grad)
    v = make(A).requires_grad_()
    z = v * 3.0
    seed = torch.full(A.shape, 0.5)
    z.backward(make(seed))
    same(v.grad, torch.full(A.shape, 1.5))


@pytest.mark.parametrize("shape,sizes", [((2, 3), (2, 1)), ((2, 3), (1, 3)),
                                         ((3,), (2, 2)), ((2, 1, 2), (1, 3, 1, 2)),
                                         ((2, 2), (0, 2)), ((4,), (3,))])
def test_repeat_matches_torch(shape, sizes):
    src = torch.arange(float(torch.Size(shape).numel())).reshape(shape)
    got = dtorch.tensor(src).repeat(*sizes)
    want = src.repeat(*sizes)
    assert tuple(got.shape) == tuple(want.shape)
    assert torch.equal(torch.from_numpy(got.numpy()), want)
    assert torch.equal(torch.from_numpy(dtorch.tensor(src).repeat(list(sizes)).numpy()), want)


def test_repeat_of_a_dtensor_matches_torch():
    from dtorch.distributed_spec import DeviceMesh, Replicate, Shard
    n = dtorch._lib.dt_runtime_num_ranks(dtorch._lib.dt_runtime_default())
    mesh = DeviceMesh("cpu", list(range(min(n, 2))))
    src = torch.randn(4, 3)
    d = dtorch.Tensor(src, device_mesh=mesh, placements=[Shard(0)])
    got = d.repeat(2, 2).full_tensor()
    assert torch.equal(torch.from_numpy(got.numpy()), src.repeat(2, 2))


def test_repeat_rejects_bad_sizes():
    x = dtorch.zeros(2, 3)
    with pytest.raises(RuntimeError, match="can not be smaller"):
        x.repeat(2)
    with pytest.raises(RuntimeError, match=r"sizes\[1\] = -1"):
        x.repeat(2, -1)


def test_randint_range_dtype_and_spread():
    dtorch.manual_seed(7)
    v = torch.from_numpy(dtorch.randint(-3, 5, (20000,)).numpy())
    assert v.dtype == torch.int64 and v.min().item() == -3 and v.max().item() == 4
    counts = torch.bincount(v + 3, minlength=8).double()
    # each of the 8 values: 2500 expected, sd ~46; 6 sd apart fails
    assert (counts - 2500).abs().max().item() < 6 * (20000 * (1 / 8) * (7 / 8)) ** 0.5
    w = dtorch.randint(10, (3, 4), dtype=torch.int32)
    assert w.dtype == torch.int32 and tuple(w.shape) == (3, 4)
    a = torch.from_numpy(w.numpy())
    assert a.min().item() >= 0 and a.max().item() <= 9
    assert torch.from_numpy(dtorch.randint(2**40, 2**40 + 1, (5,)).numpy()).eq(2**40).all()


def test_randint_errors_name_the_arguments():
    with pytest.raises(ValueError, match="low=5 must be less than high=5"):
        dtorch.randint(5, 5, (2,))
    with pytest.raises(TypeError, match="high must be an int"):
        dtorch.randint(0, 2.5, (2,))
    with pytest.raises(TypeError, match="takes"):
        dtorch.randint(3)
