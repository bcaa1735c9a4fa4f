"""dtorch.nn.Module and the layers against torch.nn: registration rules,
traversal, state_dict / load_state_dict, hooks (order, what their return
values replace, removal, with_kwargs, prepend, always_call), repr, the
layers' forward and backward on weights copied from torch, their default
initialisation in distribution, and modules on DTensors."""
import math
from collections import OrderedDict

import pytest
import torch

import dtorch
import dtorch.nn as dnn

RTOL, ATOL = 1e-6, 1e-6


def close(d, t, rtol=RTOL, atol=ATOL):
    torch.testing.assert_close(d.to_torch() if isinstance(d, dtorch.Tensor) else d, t,
                               rtol=rtol, atol=atol)


def tree(ns, nn):
    """The same module tree in torch or dtorch: parameters from fixed
    values, a buffer, a shared submodule, a None parameter."""
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(ns.tensor([[1.0, 2.0], [3.0, 4.0]]))
            self.register_parameter("nothing", None)
            self.register_buffer("scale", ns.tensor([2.0, 2.0]))
            self.register_buffer("tmp", ns.tensor([0.5]), persistent=False)

        def forward(self, x, shift=0.0):
            return (x @ self.w.t()) * self.scale + shift

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = Block()
            self.b = Block()
            self.shared = self.a
            self.bias = nn.Parameter(ns.tensor([0.25, -0.25]))

        def forward(self, x):
            return self.b(self.a(x)) + self.bias
    return Net()


def test_registration_and_traversal_match_torch():
    t, d = tree(torch, torch.nn), tree(dtorch, dnn)
    for fn in [lambda m: [n for n, _ in m.named_parameters()],
               lambda m: [n for n, _ in m.named_parameters(prefix="p", recurse=False)],
               lambda m: [n for n, _ in m.named_parameters(remove_duplicate=False)],
               lambda m: [n for n, _ in m.named_buffers()],
               lambda m: [n for n, _ in m.named_children()],
               lambda m: [n for n, _ in m.named_modules()],
               lambda m: [n for n, _ in m.named_modules(remove_duplicate=False)],
               lambda m: list(m.state_dict().keys()),
               lambda m: len(list(m.parameters())), lambda m: len(list(m.modules())),
               lambda m: len(list(m.children())), lambda m: len(list(m.buffers()))]:
        assert fn(d) == fn(t)
    assert all(isinstance(p, dnn.Parameter) and p.requires_grad for p in d.parameters())
    assert d.a.nothing is None and "nothing" in d.a._parameters
    assert d.get_submodule("a") is d.a and d.get_parameter("a.w") is d.a.w


def test_setattr_rules_match_torch():
    for ns, nn in [(torch, torch.nn), (dtorch, dnn)]:
        m = tree(ns, nn)
        with pytest.raises(TypeError, match="cannot assign .* as parameter 'bias'"):
            m.bias = ns.tensor([1.0, 2.0])
        m.bias = None  # allowed: the slot stays, empty
        assert "bias" in m._parameters and m.bias is None
        with pytest.raises(TypeError, match="as child module 'a'"):
            m.a = 3
        m.extra = 7  # a plain attribute
        assert m.extra == 7 and "extra" not in m._parameters
        m.a.scale = ns.tensor([1.0, 1.0])  # a tensor into a buffer slot stays a buffer
        assert "scale" in m.a._buffers
        with pytest.raises(TypeError, match="as buffer 'scale'"):
            m.a.scale = 5
        m.extra = nn.Parameter(ns.tensor([1.0]))  # replaces the plain attribute
        assert "extra" in m._parameters and "extra" not in m.__dict__
        with pytest.raises(KeyError, match="attribute 'extra' already exists"):
            m.register_buffer("extra", ns.tensor([1.0]))
        with pytest.raises(KeyError, match="name can"):
            m.register_parameter("x.y", None)
        with pytest.raises(AttributeError, match="has no attribute 'nope'"):
            m.nope
        del m.extra
        assert "extra" not in m._parameters

    class Early(dnn.Module):
        def __init__(self):
            self.w = dnn.Parameter(dtorch.ones(1))
    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()


def test_parameter_is_a_leaf_alias():
    base = dtorch.tensor([1.0, 2.0])
    p = dnn.Parameter(base)
    assert isinstance(p, dtorch.Tensor) and p.requires_grad and not base.requires_grad
    assert dtorch._lib.dt_tensor_shares_storage(p._h, base._h)
    assert not dnn.Parameter(base, requires_grad=False).requires_grad
    assert repr(p).startswith("Parameter containing:")
    q = dnn.Parameter(torch.tensor([3.0]))  # from a torch tensor: copied in
    assert q.tolist() == [3.0]
    nonleaf = dtorch.tensor([1.0], requires_grad=True) * 2
    m = dnn.Module()
    with pytest.raises(TypeError, match="cannot assign 'dtorch._tensor.Tensor' object"):
        m.register_parameter("p", nonleaf)
    with pytest.raises(TypeError, match="data must be a dtorch.Tensor"):
        dnn.Parameter([1.0])


def test_state_dict_aliases_and_load_reports_keys():
    t, d = tree(torch, torch.nn), tree(dtorch, dnn)
    sd = d.state_dict()
    assert isinstance(sd, OrderedDict)
    for k, v in sd.items():
        assert not v.requires_grad
    assert dtorch._lib.dt_tensor_shares_storage(sd["bias"]._h, d.bias._h)
    kept = d.state_dict(keep_vars=True)
    assert kept["bias"] is d.bias
    extra = {k: v.clone() for k, v in t.state_dict().items()}
    extra["zzz"] = torch.zeros(1)
    del extra["a.w"]
    rt = t.load_state_dict(extra, strict=False)
    rd = d.load_state_dict(extra, strict=False)
    assert rd.missing_keys == rt.missing_keys and rd.unexpected_keys == rt.unexpected_keys
    with pytest.raises(RuntimeError) as et:
        t.load_state_dict(extra)
    with pytest.raises(RuntimeError) as ed:
        d.load_state_dict(extra)
    # the head of the message is torch's (the class names are the test's)
    assert str(ed.value).split("\n")[1:] == str(et.value).split("\n")[1:]
    bad = dict(t.state_dict())
    bad["bias"] = torch.zeros(3)
    with pytest.raises(RuntimeError, match=r"size mismatch for bias: copying a param with "
                       r"shape torch.Size\(\[3\]\) from checkpoint, the shape in current "
                       r"model is torch.Size\(\[2\]\)"):
        d.load_state_dict(bad)


def test_load_state_dict_copies_in_place():
    t, d = tree(torch, torch.nn), tree(dtorch, dnn)
    with torch.no_grad():
        for p in t.parameters():
            p.mul_(3.0)
    w = d.a.w
    alias = d.state_dict()["a.w"]
    d.load_state_dict(t.state_dict())
    assert d.a.w is w  # the same object, its value replaced
    close(w, t.a.w.detach())
    close(alias, t.a.w.detach())  # a state_dict entry sees the new value
    x = torch.tensor([[1.0, -1.0], [0.5, 2.0]])
    close(d(dtorch.tensor(x)), t(x).detach())


def _hook_log(ns, nn, with_kwargs):
    m = tree(ns, nn).a
    log = []

    def pre1(mod, args):
        log.append(("pre1", len(args)))
        return args[0] * 2  # a non-tuple is wrapped

    def pre2(mod, args, kwargs):
        log.append(("pre2", sorted(kwargs)))
        return (args[0] + 1,), {"shift": 10.0}

    def post1(mod, args, out):
        log.append("post1")
        return out * 3

    def post2(mod, args, kwargs, out):
        log.append(("post2", sorted(kwargs)))

    hs = [m.register_forward_pre_hook(pre1),
          m.register_forward_pre_hook(pre2, with_kwargs=True),
          m.register_forward_hook(post1),
          m.register_forward_hook(post2, with_kwargs=True),
          m.register_forward_pre_hook(lambda mod, a: log.append("first"), prepend=True)]
    x = ns.tensor([[1.0, 2.0]])
    out = m(x, shift=1.0) if with_kwargs else m(x)
    return m, hs, log, out, x


def test_forward_hooks_match_torch():
    for kw in (False, True):
        tm, th, tlog, tout, tx = _hook_log(torch, torch.nn, kw)
        dm, dh, dlog, dout, dx = _hook_log(dtorch, dnn, kw)
        assert dlog == tlog
        close(dout, tout.detach())
        for h in dh:
            h.remove()
        for h in th:
            h.remove()
        close(dm(dx), tm(tx).detach())
        assert not dm._forward_hooks and not dm._forward_pre_hooks_with_kwargs


def test_hook_errors_and_always_call():
    m = tree(dtorch, dnn).a
    m.register_forward_pre_hook(lambda mod, a, k: "bad", with_kwargs=True)
    with pytest.raises(RuntimeError, match="must return None or a tuple of"):
        m(dtorch.ones(1, 2))
    calls = []

    class Boom(dnn.Module):
        def forward(self, x):
            raise ValueError("boom")
    b = Boom()
    b.register_forward_hook(lambda mod, a, out: calls.append(out), always_call=True)
    b.register_forward_hook(lambda mod, a, out: calls.append("never"))
    with pytest.raises(ValueError, match="boom"):
        b(1)
    assert calls == [None]
    with b.register_forward_hook(lambda mod, a, out: 5):
        pass  # a handle is a context manager that removes the hook
    assert len(b._forward_hooks) == 2


def test_train_eval_apply_repr():
    for ns, nn in [(torch, torch.nn), (dtorch, dnn)]:
        m = tree(ns, nn)
        m.eval()
        assert not m.training and not m.a.training
        m.train()
        assert m.b.training
        with pytest.raises(ValueError, match="training mode is expected to be boolean"):
            m.train("yes")
        seen = []
        m.apply(lambda mod: seen.append(type(mod).__name__))
        assert seen == ["Block", "Block", "Net"]


def test_repr_matches_torch():
    def build(nn):
        return nn.Sequential(OrderedDict([("fc", nn.Linear(4, 8)), ("act", nn.GELU("tanh")),
                                          ("drop", nn.Dropout(0.1)),
                                          ("norm", nn.LayerNorm(8, elementwise_affine=False)),
                                          ("emb", nn.Embedding(10, 3, padding_idx=0)),
                                          ("rms", nn.RMSNorm([8], eps=1e-6)),
                                          ("list", nn.ModuleList([nn.ReLU(), nn.ReLU(),
                                                                  nn.SiLU()])),
                                          ("id", nn.Identity()), ("loss", nn.CrossEntropyLoss())]))
    assert repr(build(dnn)) == repr(build(torch.nn))


def _copy_from_torch(dmod, tmod):
    dmod.load_state_dict(tmod.state_dict())
    return dmod


LAYERS = [lambda nn: nn.Linear(6, 4), lambda nn: nn.Linear(6, 4, bias=False),
          lambda nn: nn.LayerNorm(6), lambda nn: nn.LayerNorm(6, bias=False),
          lambda nn: nn.LayerNorm([3, 6], eps=1e-3), lambda nn: nn.RMSNorm(6),
          lambda nn: nn.RMSNorm([3, 6], eps=1e-5, elementwise_affine=False),
          lambda nn: nn.GELU(), lambda nn: nn.GELU("tanh"), lambda nn: nn.SiLU(),
          lambda nn: nn.ReLU(), lambda nn: nn.Tanh(), lambda nn: nn.Sigmoid(),
          lambda nn: nn.Identity(), lambda nn: nn.Dropout(0.3).eval(),
          lambda nn: nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 2))]


@pytest.mark.parametrize("make", LAYERS)
def test_layers_forward_backward_match_torch(make):
    torch.manual_seed(0)
    tmod = make(torch.nn)
    with torch.no_grad():  # non-trivial affine parameters
        for p in tmod.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    dmod = _copy_from_torch(make(dnn), tmod)
    x = torch.randn(2, 3, 6)
    tx, dx = x.clone().requires_grad_(), dtorch.Tensor(x, requires_grad=True)
    ty, dy = tmod(tx), dmod(dx)
    close(dy, ty.detach(), rtol=1e-5)
    (ty * ty).sum().backward()
    (dy * dy).sum().backward()
    close(dx.grad, tx.grad, rtol=1e-5, atol=1e-5)
    for (n, p), (_, q) in zip(dmod.named_parameters(), tmod.named_parameters()):
        close(p.grad, q.grad, rtol=1e-5, atol=1e-5)


def test_embedding_and_losses_match_torch():
    torch.manual_seed(0)
    temb = torch.nn.Embedding(7, 4, padding_idx=2)
    demb = _copy_from_torch(dnn.Embedding(7, 4, padding_idx=2), temb)
    idx = torch.tensor([[0, 2, 5], [2, 6, 1]])
    ty, dy = temb(idx), demb(dtorch.tensor(idx))
    close(dy, ty.detach())
    ty.pow(2).sum().backward()
    dy.pow(2).sum().backward()
    close(demb.weight.grad, temb.weight.grad)
    assert demb.weight.grad.to_torch()[2].abs().sum() == 0
    logits, target = torch.randn(5, 7), torch.tensor([1, -100, 3, 0, 6])
    w = torch.rand(7) + 0.5
    for tl, dl in [(torch.nn.CrossEntropyLoss(), dnn.CrossEntropyLoss()),
                   (torch.nn.CrossEntropyLoss(label_smoothing=0.2, reduction="sum"),
                    dnn.CrossEntropyLoss(label_smoothing=0.2, reduction="sum")),
                   (torch.nn.CrossEntropyLoss(weight=w, ignore_index=3),
                    dnn.CrossEntropyLoss(weight=w, ignore_index=3))]:
        tgt = target.clamp(min=3) if tl.weight is not None else target
        close(dl(dtorch.tensor(logits), dtorch.tensor(tgt)), tl(logits, tgt))
    close(dnn.MSELoss(reduction="sum")(dtorch.tensor(logits), dtorch.zeros(5, 7)),
          torch.nn.MSELoss(reduction="sum")(logits, torch.zeros(5, 7)))


def test_default_init_distributions():
    """Initialised values follow torch's distributions (the values
    themselves come from dtorch's stream): bounds, means and spreads."""
    dtorch.manual_seed(0)
    lin = dnn.Linear(400, 300)
    w, b = lin.weight.to_torch(), lin.bias.to_torch()
    bound = 1 / math.sqrt(400)  # kaiming_uniform_(a=sqrt(5)) on fan_in 400
    assert w.abs().max() <= bound and w.abs().max() > 0.99 * bound
    assert abs(w.std().item() - bound / math.sqrt(3)) < 0.01 * bound
    assert b.abs().max() <= bound and abs(b.mean().item()) < 0.1 * bound
    emb = dnn.Embedding(500, 200, padding_idx=3).weight.to_torch()
    assert abs(emb.mean().item()) < 0.01 and abs(emb.std().item() - 1) < 0.01
    assert emb[3].abs().sum() == 0
    ln = dnn.LayerNorm(10)
    assert ln.weight.tolist() == [1.0] * 10 and ln.bias.tolist() == [0.0] * 10
    t = dtorch.empty(300, 200)
    for fn, std in [(lambda: dnn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"),
                     math.sqrt(2 / 300)),
                    (lambda: dnn.init.xavier_normal_(t, gain=2.0), 2 * math.sqrt(2 / 500)),
                    (lambda: dnn.init.xavier_uniform_(t), math.sqrt(2 / 500)),
                    (lambda: dnn.init.kaiming_uniform_(t, a=0.1), math.sqrt(2 / 1.01 / 200)),
                    (lambda: dnn.init.normal_(t, 1.0, 0.5), 0.5)]:
        assert fn() is t
        assert abs(t.to_torch().std().item() - std) < 0.02 * std
    dnn.init.trunc_normal_(t, std=1.0, a=-1.0, b=1.5)
    v = t.to_torch()
    ref = torch.nn.init.trunc_normal_(torch.empty(300, 200), std=1.0, a=-1.0, b=1.5)
    assert v.min() >= -1.0 and v.max() <= 1.5
    assert abs(v.mean().item() - ref.mean().item()) < 0.02
    assert abs(v.std().item() - ref.std().item()) < 0.02
    dnn.init.trunc_normal_(t, mean=3.0, std=1.0, a=-0.5, b=0.5)  # a narrow interval
    assert t.to_torch().min() >= -0.5 and t.to_torch().max() <= 0.5
    dnn.init.constant_(t, 0.25)
    assert t.to_torch().unique().tolist() == [0.25]
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        dnn.init.kaiming_uniform_(t, mode="fan_avg")
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        dnn.init.xavier_uniform_(dtorch.empty(3))
    with pytest.raises(ValueError, match="generator=.* is not supported"):
        dnn.init.uniform_(t, generator=torch.Generator())


def test_containers_match_torch():
    for nn in (torch.nn, dnn):
        seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
        seq.append(nn.Linear(3, 1))
        assert len(seq) == 3 and isinstance(seq[-1], nn.Linear)
        assert [type(m).__name__ for m in seq[1:]] == ["ReLU", "Linear"]
        seq.insert(0, nn.Identity())
        del seq[1]
        assert [n for n, _ in seq.named_children()] == ["0", "1", "2"]
        ml = nn.ModuleList([nn.ReLU()])
        ml += [nn.SiLU()]
        ml.extend(nn.ModuleList([nn.Tanh()]))
        assert len(ml) == 3 and isinstance(ml[-1], nn.Tanh)
        md = nn.ModuleDict({"a": nn.ReLU()})
        md["b"] = nn.Linear(1, 1)
        assert list(md.keys()) == ["a", "b"] and "b" in md and len(md) == 2
        assert len(list(md.parameters())) == 2
        with pytest.raises(IndexError, match="out of range"):
            ml[5]
    assert repr(dnn.ModuleList([dnn.ReLU()] * 3)) == repr(torch.nn.ModuleList([torch.nn.ReLU()] * 3))


def test_zero_grad_requires_grad_and_to():
    m = dnn.Linear(3, 2)
    w = m.weight
    m(dtorch.ones(1, 3)).sum().backward()
    assert w.grad is not None
    m.zero_grad()
    assert w.grad is None
    m.requires_grad_(False)
    assert not w.requires_grad and not m(dtorch.ones(1, 3)).requires_grad
    m.requires_grad_(True)
    before = w.to_torch()
    m.to(torch.float64)
    assert m.weight is w and w.dtype == torch.float64 and w.requires_grad
    close(w, before.double())
    assert m(dtorch.ones(1, 3, dtype=torch.float64)).dtype == torch.float64
    with pytest.raises(TypeError, match="only accepts floating point"):
        m.to(torch.int32)
    m.float()
    assert w.dtype == torch.float32



@pytest.mark.parametrize("convert", [lambda m: m.double(), lambda m: m.to(torch.float64),
                                     lambda m: m.half(), lambda m: m.bfloat16()])
def test_dtype_conversions_convert_gradients_as_torch(convert):
    """Module.double() etc. cast each parameter's .grad with it, as torch's
    _apply does (the grad was dropped: a grad of another dtype than its
    parameter's new one could not stay)."""
    torch.manual_seed(0)
    t = torch.nn.Linear(3, 2)
    d = dnn.Linear(3, 2)
    d.load_state_dict(t.state_dict())
    x = torch.randn(4, 3)
    t(x).pow(2).sum().backward()
    d(dtorch.tensor(x)).pow(2).sum().backward()
    convert(t), convert(d)
    for tp, dp in zip(t.parameters(), d.parameters()):
        assert dp.grad is not None and dp.grad.dtype == tp.grad.dtype == tp.dtype == dp.dtype
        tol = 1e-6 if tp.dtype == torch.float64 else 1e-2  # one rounding of near values
        close(dp.grad, tp.grad, rtol=tol, atol=tol)

def test_modules_on_dtensors():
    """Parameters distributed on a mesh (Shard(0) weight: column-parallel
    as a parallelize plan would make it) run forward and backward through
    the ops' placement rules; values and gradients are torch's."""
    mesh = dtorch.init_device_mesh("cpu", (4,))
    torch.manual_seed(0)
    tlin = torch.nn.Linear(6, 8)
    dlin = dnn.Linear(6, 8)
    sd = {"weight": dtorch.Tensor(tlin.weight.detach(), device_mesh=mesh,
                                  placements=[dtorch.Shard(0)]),
          "bias": dtorch.Tensor(tlin.bias.detach(), device_mesh=mesh,
                                placements=[dtorch.Shard(0)])}
    dlin.load_state_dict(sd, assign=True)
    assert dlin.weight.placements == (dtorch.Shard(0),)
    x = torch.randn(4, 6)
    dx = dtorch.Tensor(x, device_mesh=mesh, placements=[dtorch.Replicate()])
    y = dlin(dx)
    assert y.placements == (dtorch.Shard(1),)
    close(y, tlin(x).detach(), rtol=1e-5)
    tlin(x).pow(2).sum().backward()
    y.pow(2).sum().backward()
    close(dlin.weight.grad, tlin.weight.grad, rtol=1e-5, atol=1e-5)
    # load_state_dict from torch tensors lays them out as the parameters are
    with torch.no_grad():
        tlin.weight.mul_(2)
    dlin.load_state_dict(tlin.state_dict())
    assert dlin.weight.placements == (dtorch.Shard(0),)
    close(dlin.weight, tlin.weight.detach())


def test_buffer_as_torch():
    """nn.Buffer returns a plain Tensor marked as a buffer (torch's): the
    module holds that tensor itself, isinstance(t, nn.Buffer) holds for it
    only, persistent=False keeps it out of state_dict, and it is a detached
    alias of its data (writes shared, requires_grad as the data's)."""
    import gc

    def build(nn, lib, data):
        m = nn.Module()
        b = nn.Buffer(data)
        m.mean = b
        m.tmp = nn.Buffer(lib.zeros(2), persistent=False)
        m.plain = lib.ones(1)  # a plain tensor attribute: no buffer
        return m, b

    tm, tb = build(torch.nn, torch, torch.arange(3.0))
    dm, db = build(dtorch.nn, dtorch, dtorch.Tensor(torch.arange(3.0)))
    for m, b, nn, T in ((tm, tb, torch.nn, torch.Tensor), (dm, db, dtorch.nn, dtorch.Tensor)):
        assert type(m.mean) is T and m.mean is b
        assert isinstance(m.mean, nn.Buffer) and isinstance(m.tmp, nn.Buffer)
        assert not isinstance(m.plain, nn.Buffer)
        assert [n for n, _ in m.named_buffers()] == ["mean", "tmp"]
        assert list(m.state_dict()) == ["mean"]
    src = dtorch.Tensor(torch.arange(3.0))
    b = dtorch.nn.Buffer(src)
    src.add_(1.0)
    assert b.tolist() == [1.0, 2.0, 3.0] and not b.requires_grad
    w = dtorch.Tensor(torch.ones(2), requires_grad=True)
    assert dtorch.nn.Buffer(w).requires_grad and dtorch.nn.Buffer(w).grad_fn is None
    # the mark goes with its tensor
    from dtorch.nn.parameter import _BUFFER_MARKS
    n = len(_BUFFER_MARKS)
    del b
    gc.collect()
    assert len(_BUFFER_MARKS) == n - 1
