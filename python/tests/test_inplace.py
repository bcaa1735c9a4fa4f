"""In-place methods against torch on the same values: each method, writes
through views reaching the base, p.data.copy_, the .grad setter, the
autograd errors PyTorch raises in the same situations (a leaf written with
grad mode on, a saved tensor changed before backward), version counters
and DTensor copy_ on a mesh of 4."""
import pytest
import torch

import dtorch
from dtorch._inplace import no_grad
from dtorch.distributed_spec import init_device_mesh, Shard, Replicate


def pair(t, **kw):
    return t.clone(), dtorch.Tensor(t, **kw)


def same(d, t, rtol=1e-6, atol=1e-6):
    got = d if isinstance(d, torch.Tensor) else d.to_torch()
    torch.testing.assert_close(got, t, rtol=rtol, atol=atol)


@pytest.fixture
def base():
    torch.manual_seed(0)
    return torch.randn(4, 6)


@pytest.mark.parametrize("name,args", [
    ("add_", (1.5,)), ("sub_", (0.25,)), ("mul_", (-2.0,)), ("div_", (4.0,)),
    ("clamp_", (-0.5, 0.5)), ("fill_", (3.0,)), ("zero_", ()),
])
def test_scalar_methods(base, name, args):
    t, d = pair(base)
    rt = getattr(t, name)(*args)
    rd = getattr(d, name)(*args)
    assert rd is d and rt is t
    same(d, t)


def test_tensor_methods(base):
    torch.manual_seed(1)
    o, m, n = torch.randn(4, 6), torch.rand(6) + 0.5, torch.randn(4, 1)
    do, dm, dn = dtorch.Tensor(o), dtorch.Tensor(m), dtorch.Tensor(n)
    for fn in [lambda x, a, b, c: x.add_(a, alpha=-0.1),
               lambda x, a, b, c: x.sub_(b, alpha=2),
               lambda x, a, b, c: x.mul_(b),
               lambda x, a, b, c: x.div_(c),
               lambda x, a, b, c: x.addcmul_(a, b, value=0.5),
               lambda x, a, b, c: x.addcdiv_(a, b, value=-2),
               lambda x, a, b, c: x.lerp_(a, 0.3),
               lambda x, a, b, c: x.copy_(c)]:
        t, d = pair(base)
        fn(t, o, m, n)
        fn(d, do, dm, dn)
        same(d, t)
    t, d = pair(base.abs() + 0.1)
    t.sqrt_()
    d.sqrt_()
    same(d, t)
    t.exp_()
    d.exp_()
    same(d, t)
    mask = base > 0
    t, d = pair(base)
    t.masked_fill_(mask, -9.0)
    d.masked_fill_(dtorch.Tensor(mask), -9.0)
    same(d, t)


def test_random_fills(base):
    t, d = pair(torch.zeros(200, 100))
    d.normal_(2.0, 0.5)
    v = d.to_torch()
    assert abs(v.mean().item() - 2.0) < 0.02 and abs(v.std().item() - 0.5) < 0.02
    d.uniform_(-3.0, -1.0)
    v = d.to_torch()
    assert v.min().item() >= -3.0 and v.max().item() < -1.0
    assert abs(v.mean().item() + 2.0) < 0.02
    with pytest.raises(NotImplementedError, match="normal_: generator="):
        d.normal_(generator=torch.Generator())


def test_views_write_through(base):
    t, d = pair(base)
    t[:, 0].zero_()
    d[:, 0].zero_()
    t[1].fill_(5.0)
    d[1].fill_(5.0)
    t[2:4, 1:5:2].mul_(10.0)
    d[2:4, 1:5:2].mul_(10.0)
    t.t()[3].add_(1.0)
    d.t()[3].add_(1.0)
    same(d, t)
    t[0] = 0.5
    d[0] = 0.5
    t[:, 2] = torch.arange(4.0)
    d[:, 2] = torch.arange(4.0)
    t[3, 1:3] = dtorch.Tensor(torch.tensor([7.0, 8.0])).to_torch()
    d[3, 1:3] = dtorch.Tensor(torch.tensor([7.0, 8.0]))
    same(d, t)
    # += on a plain tensor writes in place: an alias sees it
    alias_t, alias_d = t[0], d[0]
    t += 1
    d += 1
    same(d, t)
    same(alias_d, alias_t)


def test_data_grad_and_version(base):
    t, d = pair(base, requires_grad=True)
    t.requires_grad_(True)
    src = torch.full((4, 6), 2.0)
    t.data.copy_(src)
    d.data.copy_(src)
    same(d, t.detach())
    assert d.requires_grad and d.is_leaf
    det = d.detach()
    assert not det.requires_grad and det._version == d._version
    v0 = d._version
    d.data.mul_(2)
    assert d._version == v0 + 1
    # .data = t replaces the value, keeping requires_grad
    d.data = dtorch.zeros(4, 6)
    assert d.requires_grad and d.to_torch().abs().sum().item() == 0
    # .grad setter
    g = torch.randn(4, 6)
    t.grad = g.clone()
    d.grad = dtorch.Tensor(g)
    same(d.grad, t.grad)
    t.grad = None
    d.grad = None
    assert d.grad is None and t.grad is None
    with pytest.raises(dtorch.DTorchError, match=r"Tensor.grad: grad of shape \[3\]"):
        d.grad = dtorch.zeros(3)
    with pytest.raises(TypeError, match=".grad: expected a dtorch.Tensor"):
        d.grad = 3


def test_autograd_errors(base):
    t, d = pair(base, requires_grad=True)
    t.requires_grad_(True)
    msg = "a leaf Variable that requires grad is being used in an in-place operation"
    with pytest.raises(RuntimeError, match=msg):
        t.add_(1)
    with pytest.raises(dtorch.DTorchError, match=msg):
        d.add_(1)
    with pytest.raises(dtorch.DTorchError, match="copy_: " + msg):
        d.copy_(dtorch.zeros(4, 6))
    # under no_grad it is allowed (optimisers, init)
    with torch.no_grad():
        t.add_(1)
    with no_grad():
        d.add_(1)
    same(d, t.detach())
    # a saved tensor written before backward: both fail
    xt, xd = pair(torch.randn(4, 6))
    lt = (xt * t).sum()
    ld = (xd * d).sum()
    xt.add_(1)
    xd.add_(1)
    msg = "one of the variables needed for gradient computation has been modified by an inplace operation"
    with pytest.raises(RuntimeError, match=msg):
        lt.backward()
    with pytest.raises(dtorch.DTorchError, match=msg + r".*input 0 of mul.*at version 1; expected version 0"):
        ld.backward()
    # add saves no tensor: the same write leaves backward right in both
    lt = (xt + t).sum()
    ld = (xd + d).sum()
    xt.mul_(3)
    xd.mul_(3)
    lt.backward()
    ld.backward()
    same(d.grad, t.grad)
    # in-place on a non-leaf in a graph: not recorded by dtorch
    h = d * 2
    with pytest.raises(NotImplementedError, match="mul_: self was made by mul_scalar"):
        h.mul_(2)
    # but x += y in a forward gives the out-of-place result (the graph holds)
    ht = t * 2
    ht += t
    h += d
    ht.sum().backward()
    h.sum().backward()
    same(d.grad, t.grad)


def test_errors():
    d = dtorch.zeros(2, 3)
    with pytest.raises(dtorch.DTorchError, match=r"Tensor.copy_: src of shape \[4\] cannot be broadcast to dst's shape \[2, 3\]"):
        d.copy_(dtorch.zeros(4))
    e = dtorch.zeros(3).expand(2, 3)
    with pytest.raises(dtorch.DTorchError, match="more than one element of the written-to tensor"):
        e.add_(1.0)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        torch.zeros(3).expand(2, 3).add_(1.0)
    with pytest.raises(TypeError, match="copy_: expected a dtorch.Tensor"):
        d.copy_("x")



_INT = torch.tensor([4, 9])
_REFUSED = [  # torch refuses each: the value would not fit self's dtype
    lambda t: t.add_(1.5), lambda t: t.sub_(0.5), lambda t: t.mul_(0.5),
    lambda t: t.div_(2), lambda t: t.sqrt_(), lambda t: t.exp_(),
    lambda t: t.clamp_(0.5, 5.5), lambda t: t.__iadd__(1.5),
    lambda t: t.add_(t.float() if isinstance(t, torch.Tensor) else t.float()),
    lambda t: t.addcdiv_(t, t),
]


@pytest.mark.parametrize("i", range(len(_REFUSED)))
def test_a_result_that_does_not_fit_self_is_refused_as_torch(i):
    """torch's in-place rule: the op's result type must cast to self's
    dtype without a change of kind (a float result into an int64 tensor
    is refused, not truncated)."""
    f = _REFUSED[i]
    with pytest.raises(RuntimeError):  # "can't be cast ..." (addcdiv: its own words)
        f(_INT.clone())
    d = dtorch.Tensor(_INT)
    with pytest.raises(RuntimeError, match=r"Tensor\.\w+_: result type torch.float32 "
                                           "can't be cast to the desired output type torch.int64"):
        f(d)
    assert d.tolist() == [4, 9]  # left as it was
    b = dtorch.Tensor(torch.tensor([True, False]))
    with pytest.raises(RuntimeError, match="torch.int64 can't be cast.*torch.bool"):
        b.add_(1)
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.tensor([True, False]).add_(1)


def test_what_casts_into_self_as_torch():
    """What torch writes into an integer tensor (a cast of kind it allows:
    fill_, masked_fill_, copy_, an int result), written here the same."""
    for f in (lambda t: t.fill_(2.7), lambda t: t.add_(3), lambda t: t.mul_(2),
              lambda t: t.copy_(t.float() + 0.5 if isinstance(t, torch.Tensor)
                                else t.float() + 0.5),
              lambda t: t.masked_fill_(t > 5, 2.5), lambda t: t.clamp_(5, 8)):
        t, d = _INT.clone(), dtorch.Tensor(_INT)
        with torch.no_grad():
            f(t)
        f(d)
        assert d.tolist() == t.tolist() and d.dtype == t.dtype
    t = torch.zeros(1, dtype=torch.int64).fill_(2**60 + 1)
    d = dtorch.Tensor(torch.zeros(1, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"fill_: the integer scalar 1152921504606846977 is "
                                         "not exactly a double"):
        d.fill_(2**60 + 1)  # refused, not rounded: pass a tensor
    d.fill_(dtorch.Tensor(torch.tensor(2**60 + 1)))
    assert d.tolist() == t.tolist()
    with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor"):
        torch.zeros(2).fill_(torch.ones(2))
    with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor"):
        dtorch.zeros(2).fill_(dtorch.ones(2))
    with pytest.raises(TypeError, match="fill_: .*complex"):
        dtorch.zeros(2).fill_(1j)

def test_dtensor_copy():
    mesh = init_device_mesh("cpu", (4,))
    torch.manual_seed(3)
    full = torch.randn(8, 4)
    for pd in (Shard(0), Shard(1), Replicate()):
        for ps in (Shard(0), Replicate()):
            d = dtorch.zeros(8, 4, device_mesh=mesh, placements=[pd])
            s = dtorch.Tensor(full, device_mesh=mesh, placements=[ps])
            d.copy_(s)
            same(d, full)
            assert list(d.placements) == [pd]
            for r in range(4):
                want = (full.chunk(4, pd.dim)[r] if isinstance(pd, Shard) else full)
                same(d.to_local(r), want)
    # a torch tensor and a number into a DTensor
    d.copy_(full * 2)
    same(d, full * 2)
    d.fill_(1.5)
    same(d, torch.full((8, 4), 1.5))
    d.add_(dtorch.Tensor(full, device_mesh=mesh, placements=[Replicate()]))
    same(d, full + 1.5)
    # a DTensor's views are copies: writing one is refused
    with pytest.raises(NotImplementedError, match="view of a DTensor"):
        d[:, 1] = 0.0
