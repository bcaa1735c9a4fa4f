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
