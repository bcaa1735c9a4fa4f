"""dtorch.nn.functional: torch.nn.functional's names and signatures on
dtorch tensors. Each maps to the library's op where it has one (linear,
embedding, layer_norm, rms_norm, cross_entropy, dropout, softmax, the
activations) and is composed of ops otherwise (nll_loss, weighted
cross_entropy, mse_loss, l1_loss, scaled_dot_product_attention, pad,
one_hot), so autograd and DTensor placements follow the ops' rules (on
DTensors softmax's dim must be Replicate()). An argument value dtorch
does not support raises ValueError naming the function, the argument and
the value.
"""
import math
import warnings

import torch

from .. import _errors, _lib
from .._tensor import Tensor, _wrap
from .parameter import _leaf_alias

_REDUCTIONS = {"mean": 0, "sum": 1, "none": 2}  # dt_reduction


def _unsupported(fn, arg, value, why=""):
    raise ValueError(f"dtorch.nn.functional.{fn}: {arg}={value!r} is not supported"
                     + (f" ({why})" if why else ""))


def _need(fn, **args):
    """Each named argument a dtorch.Tensor (or None): a torch.Tensor given
    by mistake is named, not met as an AttributeError on '_h'."""
    for arg, x in args.items():
        if x is not None and not isinstance(x, Tensor):
            hint = (" (dtorch.Tensor(x) copies a torch.Tensor onto dtorch)"
                    if isinstance(x, torch.Tensor) else "")
            raise TypeError(f"dtorch.nn.functional.{fn}: {arg} must be a dtorch.Tensor, "
                            f"got {type(x).__module__}.{type(x).__name__}{hint}")


def _invalid(fn, what):
    raise _errors.InvalidArgumentError(f"dtorch.nn.functional.{fn}: {what}",
                                       "DT_ERR_INVALID_ARGUMENT")


def _reduction(fn, reduction, size_average=None, reduce=None):
    if size_average is not None or reduce is not None:
        reduction = torch.nn._reduction.legacy_get_string(size_average, reduce, emit_warning=False)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"dtorch.nn.functional.{fn}: reduction={reduction!r} is not one "
                         "of 'none', 'mean', 'sum'")
    return reduction


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


def _detach(t):
    return Tensor._from_handle(_leaf_alias(t, False))


def _constant_like(like, value, dtype=None):
    """A host value (torch tensor) on like's mesh, Replicate, or single-device."""
    mesh = like.device_mesh
    if mesh is None:
        return Tensor(value, dtype=dtype)
    from ..distributed_spec import Replicate
    return Tensor(value, dtype=dtype, device_mesh=mesh, placements=[Replicate()] * mesh.ndim)


# ---- activations
def relu(input, inplace=False):
    if inplace:
        _unsupported("relu", "inplace", inplace, "use the result")
    return input.relu()


def silu(input, inplace=False):
    if inplace:
        _unsupported("silu", "inplace", inplace, "use the result")
    return input.silu()


def gelu(input, approximate="none"):
    if approximate == "none":
        return input.gelu()
    if approximate == "tanh":
        return input.gelu_tanh()
    raise ValueError(f"dtorch.nn.functional.gelu: approximate={approximate!r} is not one "
                     "of 'none', 'tanh'")


def sigmoid(input):
    return input.sigmoid()


def tanh(input):
    return input.tanh()


def leaky_relu(input, negative_slope=0.01, inplace=False):
    if inplace:
        _unsupported("leaky_relu", "inplace", inplace, "use the result")
    from .._ops import where
    return where(input > 0, input, input * negative_slope)


def _softmax_dim(ndim):
    warnings.warn("Implicit dimension choice for softmax has been deprecated. "
                  "Change the call to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """Softmax over dim; dtype casts the input BEFORE it, as torch does
    (a float16 input with dtype=float32 is computed in float32)."""
    if dim is None:
        dim = _softmax_dim(input.dim())
    if dtype is not None:
        input = input.to(dtype)
    return input.softmax(dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim(input.dim())
    if dtype is not None:
        input = input.to(dtype)
    return input.log_softmax(dim)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes elements with probability p (dtorch's Philox stream), the
    kept ones scaled by 1/(1-p); a copy when not training."""
    _need("dropout", input=input)
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if inplace:
        _unsupported("dropout", "inplace", inplace, "use the result")
    return _wrap(_lib.dt_dropout(input._h, float(p), bool(training)))


# ---- linear, embedding, norms
def linear(input, weight, bias=None):
    """input @ weight.T + bias; weight [out, in]."""
    _need("linear", input=input, weight=weight, bias=bias)
    return _wrap(_lib.dt_linear(input._h, weight._h, bias._h if bias is not None else None))


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of weight [num, dim] at input's indices; the row at padding_idx
    gets no gradient (its lookups are detached), as torch's."""
    _need("embedding", input=input, weight=weight)
    if max_norm is not None:
        _unsupported("embedding", "max_norm", max_norm)
    if scale_grad_by_freq:
        _unsupported("embedding", "scale_grad_by_freq", scale_grad_by_freq)
    if sparse:
        _unsupported("embedding", "sparse", sparse, "gradients are dense")
    out = _wrap(_lib.dt_embedding(input._h, weight._h))
    if padding_idx is None:
        return out
    num = weight.shape[0]
    if padding_idx > 0 and padding_idx >= num or padding_idx < 0 and padding_idx < -num:
        raise ValueError(f"dtorch.nn.functional.embedding: padding_idx={padding_idx} must be "
                         f"within num_embeddings ({num})")
    if padding_idx < 0:
        padding_idx += num
    mask = (input == padding_idx).unsqueeze(-1)
    from .._ops import where
    return where(mask, _detach(out), out)


def _flatten_norm(fn, input, normalized_shape):
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if k == 0 or tuple(input.shape[-k:]) != shape:
        raise ValueError(f"dtorch.nn.functional.{fn}: normalized_shape={list(shape)} is not "
                         f"the last dims of the input's shape {list(input.shape)}")
    return shape, k


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Over the last len(normalized_shape) dims (flattened into one for the
    library's op, which normalises the last dim)."""
    _need("layer_norm", input=input, weight=weight, bias=bias)
    shape, k = _flatten_norm("layer_norm", input, normalized_shape)
    if k == 1:
        return _wrap(_lib.dt_layer_norm(input._h, weight._h if weight is not None else None,
                                        bias._h if bias is not None else None, eps))
    x = input.flatten(-k, -1)
    w = weight.reshape(-1) if weight is not None else None
    b = bias.reshape(-1) if bias is not None else None
    out = _wrap(_lib.dt_layer_norm(x._h, w._h if w is not None else None,
                                   b._h if b is not None else None, eps))
    return out.reshape(*input.shape)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) * weight over the last dims; eps None is
    the dtype's machine epsilon, as torch's."""
    _need("rms_norm", input=input, weight=weight)
    shape, k = _flatten_norm("rms_norm", input, normalized_shape)
    if eps is None:
        eps = torch.finfo(input.dtype).eps
    if k == 1:
        return _wrap(_lib.dt_rms_norm(input._h, weight._h if weight is not None else None, eps))
    x = input.flatten(-k, -1)
    w = weight.reshape(-1) if weight is not None else None
    out = _wrap(_lib.dt_rms_norm(x._h, w._h if w is not None else None, eps))
    return out.reshape(*input.shape)


# ---- losses
def _class_last(input):
    """input [N, C, d...] with the class dim moved last ([N, d..., C])."""
    if input.dim() <= 2:
        return input
    return input.permute(0, *range(2, input.dim()), 1)


def one_hot(tensor, num_classes=-1):
    """int64 [..., num_classes]: 1 at each index; num_classes -1 is the
    largest index + 1 (read from the tensor)."""
    _need("one_hot", tensor=tensor)
    if tensor.dtype not in (torch.int64, torch.int32):
        raise TypeError("dtorch.nn.functional.one_hot: tensor must be an index tensor "
                        f"(int64 or int32), got {tensor.dtype}")
    empty = tensor.numel() == 0
    if num_classes == -1:
        if empty:
            _invalid("one_hot", "num_classes=-1 cannot be inferred from an empty tensor")
        num_classes = int(tensor.amax().item()) + 1
    if num_classes < 1:
        raise ValueError(f"dtorch.nn.functional.one_hot: num_classes={num_classes} "
                         "must be positive (or -1)")
    # an index outside [0, num_classes) would make a row of zeros
    if not empty and int(tensor.amin().item()) < 0:
        _invalid("one_hot", f"Class values must be non-negative (got "
                 f"{int(tensor.amin().item())})")
    if not empty and int(tensor.amax().item()) >= num_classes:
        _invalid("one_hot", f"Class values must be smaller than num_classes "
                 f"({int(tensor.amax().item())} >= {num_classes})")
    classes = _constant_like(tensor, torch.arange(num_classes))
    return (tensor.unsqueeze(-1) == classes).long()


def _check_class_targets(fn, input, target, weight, num_classes, ignore_index):
    """torch's checks of class-index targets (a composed loss would turn a
    bad one into a silent number): an index dtype, the input's shape
    without its class dim, one weight per class, and each target in
    [0, C) or ignore_index (read back: the call waits for the target)."""
    if target.dtype not in (torch.int64, torch.int32, torch.uint8):
        _invalid(fn, f"target must be class indices (int64, int32 or uint8), got "
                 f"{target.dtype}")
    shape = list(input.shape)
    expected = shape[:1] + shape[2:] if len(shape) >= 2 else []
    if list(target.shape) != expected:
        _invalid(fn, f"target shape {list(target.shape)} does not match input {shape} "
                 f"(expected {expected}: the input's shape without its class dim)")
    if weight is not None and list(weight.shape) != [num_classes]:
        _invalid(fn, f"weight shape {list(weight.shape)} is not [{num_classes}] "
                 "(one weight per class)")
    t = target.to_torch().long().flatten()
    bad = ((t < 0) | (t >= num_classes)) & (t != ignore_index)
    if bool(bad.any()):
        i = int(bad.nonzero()[0])
        _invalid(fn, f"target {int(t[i])} (position {i}) is out of range for "
                 f"{num_classes} classes (expected [0, {num_classes}) or ignore_index "
                 f"{ignore_index})")


def _index_mask(target, num_classes, ignore_index):
    """(one-hot float mask [.., C], valid float mask [..]) of class targets."""
    classes = _constant_like(target, torch.arange(num_classes, dtype=target.dtype))
    valid = target != ignore_index
    hot = (target.unsqueeze(-1) == classes).float() * valid.unsqueeze(-1).float()
    return hot, valid.float()


def _placed(t):
    """a tensor's placements in their short form ("[R, S(0)]", the
    placements' own str), or "(no mesh)" for a single-device tensor"""
    if getattr(t, "device_mesh", None) is None:
        return "(no mesh)"
    return "[" + ", ".join(str(p) for p in t.placements) + "]"


def _mean_of(fn, num, den, input, target):
    """num / den, the loss's sum over the weights' sum of a reduction='mean':
    where the batch is sharded both sums come out Partial, and their
    quotient needs communication; the error then names fn and its
    arguments' placements (the division alone names Tensor.__truediv__)."""
    try:
        return num / den
    except _errors.PlacementError as e:
        raise _errors.PlacementError(
            f"{fn}: reduction='mean' divides the loss's sum by the sum of the target "
            f"weights, and with input placements {_placed(input)} and target "
            f"{_placed(target)} both sums are {_placed(num)} and {_placed(den)}: the "
            f"division needs communication. Redistribute the target (and the input) to "
            f"Replicate on the mesh dims that shard it, use reduction='sum', or enable "
            f"auto_redistribute ({e})", "DT_ERR_PLACEMENT") from None


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100,
             reduce=None, reduction="mean"):
    """-input[n, target[n]] * weight[target[n]]; mean divides by the sum of
    the weights of the targets that are not ignore_index."""
    _need("nll_loss", input=input, target=target, weight=weight)
    reduction = _reduction("nll_loss", reduction, size_average, reduce)
    if input.dim() < 1:
        raise ValueError("dtorch.nn.functional.nll_loss: input must have a class dim")
    num_classes = input.shape[1] if input.dim() >= 2 else input.shape[0]
    _check_class_targets("nll_loss", input, target, weight, num_classes, ignore_index)
    x = _class_last(input)
    hot, valid = _index_mask(target, num_classes, ignore_index)
    if weight is not None:
        hot = hot * weight
    loss = -(x * hot).sum(-1)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return _mean_of("nll_loss", loss.sum(), hot.sum(), input, target)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """torch's cross_entropy: class-index or class-probability targets,
    ignore_index, label_smoothing in [0, 1], class weights."""
    _need("cross_entropy", input=input, target=target, weight=weight)
    reduction = _reduction("cross_entropy", reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"dtorch.nn.functional.cross_entropy: label_smoothing="
                         f"{label_smoothing!r} must be in [0, 1]")
    if weight is None:
        return _wrap(_lib.dt_cross_entropy_smoothed(input._h, target._h,
                                                    _REDUCTIONS[reduction],
                                                    int(ignore_index), float(label_smoothing)))
    return _weighted_cross_entropy(input, target, weight, ignore_index, reduction,
                                   label_smoothing)


def _weighted_cross_entropy(input, target, weight, ignore_index, reduction, eps):
    """torch's composition (aten cross_entropy_loss) for class weights."""
    num_classes = input.shape[1] if input.dim() >= 2 else input.shape[0]
    logp = _class_last(input.log_softmax(1 if input.dim() >= 2 else 0))
    if target.dtype.is_floating_point:  # class probabilities
        if tuple(target.shape) != tuple(input.shape) or tuple(weight.shape) != (num_classes,):
            _invalid("cross_entropy", f"probability target {list(target.shape)} and "
                     f"weight {list(weight.shape)} must have the input's shape "
                     f"{list(input.shape)} and [{num_classes}]")
        if eps > 0:
            target = target * (1 - eps) + eps / num_classes
        loss = -(logp * _class_last(target) * weight).sum(-1)
        if reduction == "mean":
            return loss.sum() / loss.numel()  # positions, not weights
        return _reduce(loss, reduction)
    _check_class_targets("cross_entropy", input, target, weight, num_classes, ignore_index)
    hot, valid = _index_mask(target, num_classes, ignore_index)
    whot = hot * weight
    nll = -(logp * whot).sum(-1)
    if eps == 0:
        if reduction == "mean":
            return _mean_of("cross_entropy", nll.sum(), whot.sum(), input, target)
        return _reduce(nll, reduction)
    smooth = -(logp * weight).sum(-1) * valid
    if reduction == "mean":
        wsum = whot.sum()
        nll = _mean_of("cross_entropy", nll.sum(), wsum, input, target)
        smooth = _mean_of("cross_entropy", smooth.sum(), wsum, input, target)
    elif reduction == "sum":
        nll, smooth = nll.sum(), smooth.sum()
    return nll * (1 - eps) + smooth * (eps / num_classes)


def _pointwise_loss(fn, diff, input, target, reduction):
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(f"Using a target size ({torch.Size(target.shape)}) that is different to "
                      f"the input size ({torch.Size(input.shape)}). This will likely lead to "
                      "incorrect results due to broadcasting. Please ensure they have the "
                      "same size.", stacklevel=3)
    return _reduce(fn(diff), reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _reduction("mse_loss", reduction, size_average, reduce)
    if weight is not None:
        _unsupported("mse_loss", "weight", "a tensor")
    return _pointwise_loss(lambda d: d * d, input - target, input, target, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _reduction("l1_loss", reduction, size_average, reduce)
    if weight is not None:
        _unsupported("l1_loss", "weight", "a tensor")
    return _pointwise_loss(lambda d: d.abs(), input - target, input, target, reduction)


# ---- attention and padding
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(q @ k^T * scale + mask) @ v, torch's reference composition:
    scale 1/sqrt(E) when None; is_causal masks j > i (top-left aligned);
    a bool attn_mask keeps True, a float one is added; dropout_p applies
    to the weights (dtorch's stream)."""
    _need("scaled_dot_product_attention", query=query, key=key, value=value)
    if enable_gqa:
        _unsupported("scaled_dot_product_attention", "enable_gqa", enable_gqa)
    if is_causal and attn_mask is not None:
        raise ValueError("dtorch.nn.functional.scaled_dot_product_attention: is_causal=True "
                         "and an attn_mask are exclusive")
    L, S = query.shape[-2], key.shape[-2]
    scale_factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale_factor
    if is_causal:
        attn_mask = _constant_like(scores, torch.ones(L, S, dtype=torch.bool).tril(0))
    if attn_mask is not None:
        if isinstance(attn_mask, torch.Tensor):
            attn_mask = _constant_like(scores, attn_mask)
        if attn_mask.dtype == torch.bool:
            keep = ~attn_mask  # held: a temporary's handle would be freed before the call
            scores = _wrap(_lib.dt_masked_fill(scores._h, keep._h, float("-inf")))
        else:
            scores = scores + attn_mask
    weights = scores.softmax(-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, True)
    return weights @ value


def pad(input, pad, mode="constant", value=None):
    """Constant padding: pad = (left_last, right_last, left_prev, ...);
    negative amounts crop. Other modes are not supported."""
    if mode != "constant":
        _unsupported("pad", "mode", mode, "only 'constant'")
    if len(pad) % 2 or len(pad) // 2 > input.dim():
        raise ValueError(f"dtorch.nn.functional.pad: pad={tuple(pad)} must have an even "
                         f"length of at most 2 * {input.dim()}")
    from .._ops import cat, full
    out = input
    for i in range(len(pad) // 2):
        dim = input.dim() - 1 - i
        left, right = pad[2 * i], pad[2 * i + 1]
        if left < 0:
            out = _wrap(_lib.dt_narrow(out._h, dim, -left, out.shape[dim] + left))
        if right < 0:
            out = _wrap(_lib.dt_narrow(out._h, dim, 0, out.shape[dim] + right))
        parts = []
        for n in (left, right):
            if n > 0:
                shape = list(out.shape)
                shape[dim] = n
                mesh = out.device_mesh
                if mesh is not None and any(getattr(p, "dim", None) in (dim, dim - out.dim())
                                            for p in out.placements):
                    _unsupported("pad", "input", "a DTensor sharded on a padded dim")
                parts.append(full(shape, 0.0 if value is None else value, dtype=out.dtype,
                                  device_mesh=mesh,
                                  placements=out.placements if mesh is not None else None))
            else:
                parts.append(None)
        seq = [p for p in (parts[0], out, parts[1]) if p is not None]
        if len(seq) > 1:
            out = cat(seq, dim)
    return out
