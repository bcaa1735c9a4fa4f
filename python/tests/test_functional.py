"""dtorch.nn.functional against torch.nn.functional: the same inputs into
both, forward values and input/weight gradients to float32 rounding, the
argument variants (reduction, ignore_index, label_smoothing, class
weights, padding_idx, approximate, dtype=), DTensor inputs, and the
errors for unsupported values."""
import pytest
import torch
import torch.nn.functional as TF

import dtorch
import dtorch.nn.functional as F

RTOL, ATOL = 1e-5, 1e-6


def close(d, t, rtol=RTOL, atol=ATOL):
    torch.testing.assert_close(d.to_torch(), t.detach(), rtol=rtol, atol=atol)


def both(*ts, grad=None):
    """torch leaves and their dtorch copies (float ones require grad)."""
    grad = [t.is_floating_point() for t in ts] if grad is None else grad
    tt = [t.clone().requires_grad_(g) for t, g in zip(ts, grad)]
    dd = [dtorch.Tensor(t, requires_grad=g) for t, g in zip(ts, grad)]
    return tt, dd


def check(tfn, dfn, *inputs, grad=None, rtol=RTOL, atol=ATOL):
    """Forward and (for a scalar or reduced output) backward of each."""
    tt, dd = both(*inputs, grad=grad)
    to, do = tfn(*tt), dfn(*dd)
    close(do, to, rtol, atol)
    if to.requires_grad:
        (to * torch.linspace(0.5, 1.5, to.numel()).reshape(to.shape)).sum().backward()
        w = dtorch.Tensor(torch.linspace(0.5, 1.5, to.numel()).reshape(to.shape))
        (do * w).sum().backward()
        for t, d in zip(tt, dd):
            if t.requires_grad:
                assert d.grad is not None
                close(d.grad, t.grad, rtol, atol)
    return to, do


torch.manual_seed(0)
X = torch.randn(4, 6)
W = torch.randn(5, 6)
B = torch.randn(5)


def test_activations():
    for name in ["relu", "silu", "sigmoid", "tanh"]:
        check(getattr(TF, name), getattr(F, name), X)
    check(TF.gelu, F.gelu, X)
    check(lambda x: TF.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh"), X)
    check(lambda x: TF.leaky_relu(x, 0.2), lambda x: F.leaky_relu(x, 0.2), X)
    with pytest.raises(ValueError, match="gelu: approximate='erf' is not one of"):
        F.gelu(dtorch.Tensor(X), approximate="erf")
    with pytest.raises(ValueError, match="relu: inplace=True is not supported"):
        F.relu(dtorch.Tensor(X), inplace=True)


def test_softmax_dtype_casts_first():
    for dim in (0, 1, -1):
        check(lambda x: TF.softmax(x, dim), lambda x: F.softmax(x, dim), X)
        check(lambda x: TF.log_softmax(x, dim), lambda x: F.log_softmax(x, dim), X)
    h = (X * 3).half()
    t = TF.softmax(h, -1, dtype=torch.float32)
    d = F.softmax(dtorch.Tensor(h), -1, dtype=torch.float32)
    assert d.dtype == torch.float32
    close(d, t)  # computed in float32: a float16 softmax would be ~1e-3 off
    close(F.log_softmax(dtorch.Tensor(h), 1, dtype=torch.float64),
          TF.log_softmax(h, 1, dtype=torch.float64))
    with pytest.warns(UserWarning, match="Implicit dimension choice"):
        F.softmax(dtorch.Tensor(X))


def test_linear_and_norms():
    check(TF.linear, F.linear, X, W, B)
    check(TF.linear, F.linear, X, W)
    x3 = torch.randn(2, 3, 6)
    check(lambda x, w, b: TF.layer_norm(x, (6,), w, b), lambda x, w, b: F.layer_norm(x, (6,), w, b),
          x3, torch.randn(6), torch.randn(6))
    check(lambda x: TF.layer_norm(x, [6], eps=1e-3), lambda x: F.layer_norm(x, [6], eps=1e-3), x3)
    check(lambda x, w: TF.layer_norm(x, (3, 6), w), lambda x, w: F.layer_norm(x, (3, 6), w),
          x3, torch.randn(3, 6))
    check(lambda x, w: TF.rms_norm(x, (6,), w), lambda x, w: F.rms_norm(x, (6,), w),
          x3, torch.randn(6))
    check(lambda x, w: TF.rms_norm(x, (3, 6), w, 1e-5), lambda x, w: F.rms_norm(x, (3, 6), w, 1e-5),
          x3, torch.randn(3, 6))
    with pytest.raises(ValueError, match=r"layer_norm: normalized_shape=\[5\] is not the last"):
        F.layer_norm(dtorch.Tensor(x3), (5,))


def test_embedding_padding_idx_gets_no_gradient():
    idx = torch.tensor([[0, 2, 1], [2, 2, 3]])
    weight = torch.randn(4, 3)
    for pad in (None, 2, -2):
        check(lambda i, w: TF.embedding(i, w, padding_idx=pad),
              lambda i, w: F.embedding(i, w, padding_idx=pad), idx, weight)
    with pytest.raises(ValueError, match="embedding: max_norm=1.0 is not supported"):
        F.embedding(dtorch.Tensor(idx), dtorch.Tensor(weight), max_norm=1.0)
    with pytest.raises(ValueError, match="padding_idx=9 must be within num_embeddings"):
        F.embedding(dtorch.Tensor(idx), dtorch.Tensor(weight), padding_idx=9)


LOGITS = torch.randn(6, 5)
TARGET = torch.tensor([1, 0, 4, -100, 2, 1])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_variants(reduction, smoothing, weighted):
    weight = torch.rand(5) + 0.5 if weighted else None
    kw = dict(reduction=reduction, label_smoothing=smoothing)

    def tfn(x, t):
        return TF.cross_entropy(x, t, weight=weight, **kw)

    def dfn(x, t):
        return F.cross_entropy(x, t, weight=None if weight is None else dtorch.Tensor(weight), **kw)
    check(tfn, dfn, LOGITS, TARGET)
    # ignore_index on a real class, and [N, C, d] inputs
    check(lambda x, t: TF.cross_entropy(x, t, weight=weight, ignore_index=1, **kw),
          lambda x, t: F.cross_entropy(x, t, weight=None if weight is None else
                                       dtorch.Tensor(weight), ignore_index=1, **kw),
          torch.randn(2, 5, 3), torch.tensor([[1, 0, 4], [3, 1, 2]]))
    # class probabilities
    probs = torch.softmax(torch.randn(6, 5), -1)
    check(tfn, dfn, LOGITS, probs, grad=[True, False])


def test_nll_mse_l1():
    logp = torch.log_softmax(torch.randn(6, 5), -1)
    for reduction in ("mean", "sum", "none"):
        check(lambda x, t: TF.nll_loss(x, t, reduction=reduction),
              lambda x, t: F.nll_loss(x, t, reduction=reduction), logp, TARGET)
        w = torch.rand(5) + 0.1
        check(lambda x, t: TF.nll_loss(x, t, weight=w, reduction=reduction),
              lambda x, t: F.nll_loss(x, t, weight=dtorch.Tensor(w), reduction=reduction),
              logp, TARGET)
        check(lambda a, b: TF.mse_loss(a, b, reduction=reduction),
              lambda a, b: F.mse_loss(a, b, reduction=reduction), X, X.flip(0))
        check(lambda a, b: TF.l1_loss(a, b, reduction=reduction),
              lambda a, b: F.l1_loss(a, b, reduction=reduction), X, X.flip(0))
    with pytest.raises(ValueError, match="mse_loss: reduction='avg' is not one of"):
        F.mse_loss(dtorch.Tensor(X), dtorch.Tensor(X), reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing=1.5 must be in"):
        F.cross_entropy(dtorch.Tensor(LOGITS), dtorch.Tensor(TARGET), label_smoothing=1.5)


def test_one_hot_pad_dropout():
    idx = torch.tensor([[0, 3], [2, 1]])
    assert F.one_hot(dtorch.Tensor(idx)).tolist() == TF.one_hot(idx).tolist()
    assert F.one_hot(dtorch.Tensor(idx), 6).tolist() == TF.one_hot(idx, 6).tolist()
    x = torch.randn(2, 3, 4)
    for p in [(1, 2), (0, 1, 2, 0), (-1, 2, 1, -1), (1, 1, 1, 1, 1, 1)]:
        check(lambda a: TF.pad(a, p, value=0.5), lambda a: F.pad(a, p, value=0.5), x)
    with pytest.raises(ValueError, match="pad: mode='reflect' is not supported"):
        F.pad(dtorch.Tensor(x), (1, 1), mode="reflect")
    d = dtorch.ones(1000)
    dtorch.manual_seed(5)
    y = F.dropout(d, 0.25).to_torch()
    kept = y != 0
    assert 0.65 < float(kept.float().mean()) < 0.85
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / 0.75))
    close(F.dropout(d, 0.25, training=False), torch.ones(1000))
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        F.dropout(d, 1.5)


@pytest.mark.parametrize("causal", [False, True])
def test_scaled_dot_product_attention(causal):
    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 6, 4), torch.randn(2, 3, 6, 4)
    check(lambda a, b, c: TF.scaled_dot_product_attention(a, b, c, is_causal=causal),
          lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=causal), q, k, v)
    mask = torch.rand(5, 6) > 0.3
    mask[:, 0] = True
    check(lambda a, b, c: TF.scaled_dot_product_attention(a, b, c, attn_mask=mask, scale=0.3),
          lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=dtorch.Tensor(mask),
                                                         scale=0.3), q, k, v)
    bias = torch.randn(5, 6)
    check(lambda a, b, c: TF.scaled_dot_product_attention(a, b, c, attn_mask=bias),
          lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=dtorch.Tensor(bias)),
          q, k, v)


def test_on_dtensors():
    mesh = dtorch.init_device_mesh("cpu", (4,))
    x = torch.randn(8, 6)
    dx = dtorch.Tensor(x, device_mesh=mesh, placements=[dtorch.Shard(0)])
    dw = dtorch.Tensor(W, device_mesh=mesh, placements=[dtorch.Replicate()])
    y = F.gelu(F.linear(dx, dw))
    assert y.placements == (dtorch.Shard(0),)
    close(y, TF.gelu(TF.linear(x, W)))
    target = torch.randint(0, 5, (8,))
    # the library's rule: class targets Replicate beside Shard(0) logits
    dt = dtorch.Tensor(target, device_mesh=mesh, placements=[dtorch.Replicate()])
    close(F.cross_entropy(F.linear(dx, dw), dt, label_smoothing=0.1),
          TF.cross_entropy(TF.linear(x, W), target, label_smoothing=0.1))
    close(F.one_hot(dt, 5), TF.one_hot(target, 5))


# each bad input torch refuses, refused here too (composed losses used to
# give a silent number: a one-hot of an out-of-range class is all zeros)
_X = torch.randn(3, 5)
_BAD = [
    ("nll_loss", dict(target=torch.tensor([1, 7, 0])), "target 7 \\(position 1\\).*5 classes"),
    ("nll_loss", dict(target=torch.tensor([1, -3, 0])), "target -3 \\(position 1\\)"),
    ("nll_loss", dict(target=torch.tensor([1.0, 2.0, 0.0])), "target.*int64.*float32"),
    ("nll_loss", dict(target=torch.tensor([1, 2])), "target shape \\[2\\].*expected \\[3\\]"),
    ("nll_loss", dict(target=torch.tensor([1, 2, 0]), weight=torch.ones(4)),
     "weight shape \\[4\\].*\\[5\\]"),
    ("cross_entropy", dict(target=torch.tensor([1, 7, 0]), weight=torch.ones(5)),
     "target 7 \\(position 1\\)"),
    ("cross_entropy", dict(target=torch.tensor([[1, 0, 0]]), weight=torch.ones(5)),
     "target shape \\[1, 3\\]"),
    ("cross_entropy", dict(target=torch.tensor([1, 2, 0]), weight=torch.ones(5, 1)),
     "weight shape \\[5, 1\\]"),
]


@pytest.mark.parametrize("fn,kw,match", _BAD)
def test_loss_targets_torch_refuses_are_refused(fn, kw, match):
    targs = {k: v for k, v in kw.items()}
    with pytest.raises((RuntimeError, ValueError, IndexError)):
        getattr(TF, fn)(_X.log_softmax(1), **targs)
    dargs = {k: dtorch.Tensor(v) for k, v in kw.items()}
    with pytest.raises(ValueError, match=f"{fn}: .*{match}"):
        getattr(F, fn)(dtorch.Tensor(_X.log_softmax(1)), **dargs)


def test_ignored_targets_pass_the_range_check():
    t = torch.tensor([1, -100, 4])
    w = torch.rand(5)
    for fn in ("nll_loss", "cross_entropy"):
        close(getattr(F, fn)(dtorch.Tensor(_X), dtorch.Tensor(t), weight=dtorch.Tensor(w)),
              getattr(TF, fn)(_X, t, weight=w))
        close(getattr(F, fn)(dtorch.Tensor(_X), dtorch.Tensor(torch.tensor([1, 9, 4])),
                             weight=dtorch.Tensor(w), ignore_index=9),
              getattr(TF, fn)(_X, torch.tensor([1, 9, 4]), weight=w, ignore_index=9))


@pytest.mark.parametrize("values,n,match", [([0, -1], -1, "non-negative"),
                                             ([0, 5], 3, "smaller than num_classes")])
def test_one_hot_refuses_classes_out_of_range_as_torch(values, n, match):
    with pytest.raises(RuntimeError, match=match):
        TF.one_hot(torch.tensor(values), n)
    with pytest.raises(ValueError, match=f"one_hot: .*{match}"):
        F.one_hot(dtorch.Tensor(torch.tensor(values)), n)


@pytest.mark.parametrize("fn,call", [
    ("linear", lambda x: F.linear(x, dtorch.ones(2, 3))),
    ("linear", lambda x: dtorch.nn.Linear(3, 2)(x)),
    ("dropout", lambda x: F.dropout(x, 0.5)),
    ("embedding", lambda x: F.embedding(x.long(), dtorch.ones(4, 2))),
    ("layer_norm", lambda x: F.layer_norm(x, (3,))),
    ("rms_norm", lambda x: F.rms_norm(x, (3,))),
    ("cross_entropy", lambda x: F.cross_entropy(x.reshape(1, 3), dtorch.tensor([1]))),
    ("nll_loss", lambda x: F.nll_loss(x.reshape(1, 3), dtorch.tensor([1]))),
    ("one_hot", lambda x: F.one_hot(x.long(), 3)),
    ("scaled_dot_product_attention",
     lambda x: F.scaled_dot_product_attention(x.reshape(1, 3), dtorch.ones(1, 3), dtorch.ones(1, 3))),
    ("cat", lambda x: dtorch.cat([dtorch.ones(3), x])),
    ("stack", lambda x: dtorch.stack([x, dtorch.ones(3)])),
])
def test_a_torch_tensor_where_a_dtorch_one_belongs_is_named(fn, call):
    """A torch.Tensor (the port's usual slip) or another object given to a
    function that needs a dtorch.Tensor: a TypeError naming the function
    and the argument, not an AttributeError about '_h'."""
    for bad, what in ((torch.ones(3), "torch.Tensor"), ([1.0, 2.0, 3.0], "list")):
        if not isinstance(bad, torch.Tensor) and fn not in ("cat", "stack", "linear"):
            continue
        with pytest.raises(TypeError, match=f"{fn}: .* must be a dtorch.Tensor, got .*{what}"):
            call(bad)


@pytest.mark.parametrize("case", ["nll_loss", "nll_loss_weighted", "cross_entropy_weighted",
                                  "cross_entropy_weighted_smoothed"])
def test_mean_loss_sharded_target(case):
    """A Replicate input with a Shard(0) target: reduction='mean' divides two
    Partial(sum) sums, which needs communication. Without auto-redistribution
    the error names the loss and its arguments' placements (not the
    Tensor.__truediv__ it is composed of); with it, torch's value."""
    from dtorch.distributed.tensor import Replicate, Shard, distribute_tensor
    g = torch.Generator().manual_seed(5)
    x0, t0, w0 = torch.randn(4, 5, generator=g), torch.tensor([1, 0, 3, 2]), torch.rand(5, generator=g)
    mesh = dtorch.init_device_mesh("cpu", (2,))
    x = distribute_tensor(x0, mesh, [Replicate()])
    t = distribute_tensor(t0, mesh, [Shard(0)])
    w = distribute_tensor(w0, mesh, [Replicate()])
    name = case.split("_weighted")[0]
    fns = {"nll_loss": (lambda: F.nll_loss(F.log_softmax(x, 1), t),
                        lambda: TF.nll_loss(TF.log_softmax(x0, 1), t0)),
           "nll_loss_weighted": (lambda: F.nll_loss(F.log_softmax(x, 1), t, weight=w),
                                 lambda: TF.nll_loss(TF.log_softmax(x0, 1), t0, weight=w0)),
           "cross_entropy_weighted": (lambda: F.cross_entropy(x, t, weight=w),
                                      lambda: TF.cross_entropy(x0, t0, weight=w0)),
           "cross_entropy_weighted_smoothed": (
               lambda: F.cross_entropy(x, t, weight=w, label_smoothing=0.1),
               lambda: TF.cross_entropy(x0, t0, weight=w0, label_smoothing=0.1))}
    ours, theirs = fns[case]
    with pytest.raises(dtorch.PlacementError,
                       match=rf"^{name}: reduction='mean'.*input placements \[R\] and "
                             r"target \[S\(0\)\].*auto_redistribute"):
        ours()
    with dtorch.auto_redistribute():
        got = ours().full_tensor()
    torch.testing.assert_close(torch.from_numpy(got.numpy()), theirs(), rtol=1e-6, atol=1e-7)
