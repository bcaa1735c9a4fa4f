"""Autograd switches and helpers (dtorch/autograd.h): grad mode (per
thread, as PyTorch's torch.is_grad_enabled / set_grad_enabled / no_grad /
enable_grad), backward with a seed and retain_graph, dropping a leaf's
gradient, the graph's live nodes, and clip_grad_norm_."""
import ctypes

from . import _errors, _lib


# the grad modes are dtorch._grad_mode's (exported as dtorch.no_grad, ...)
from ._grad_mode import is_grad_enabled, set_grad_enabled, no_grad, \
    enable_grad  # noqa: E402,F401


def backward(tensor, gradient=None, retain_graph=False):
    """d tensor / d leaves, accumulated into each leaf's grad
    (dt_backward_ex): gradient is the seed (tensor's shape and dtype;
    None: ones, for a one-element tensor); retain_graph keeps the saved
    tensors for another backward."""
    from ._tensor import Tensor
    if not isinstance(tensor, Tensor):
        raise TypeError(f"backward: tensor must be a dtorch.Tensor, got {type(tensor).__name__}")
    o = _lib.BackwardOptions()
    if gradient is not None:
        if not isinstance(gradient, Tensor):
            raise TypeError(f"backward: gradient must be a dtorch.Tensor, got "
                            f"{type(gradient).__name__}")
        o.grad = gradient._h
    o.retain_graph = bool(retain_graph)
    from ._spmd import site_in_spmd
    site_in_spmd()
    _errors.check(_lib.dt_backward_ex(tensor._h, ctypes.byref(o)))


def zero_grad(*tensors):
    """Drops each tensor's accumulated gradient (dt_zero_grad): the next
    backward starts from none (PyTorch: t.grad = None)."""
    for t in tensors:
        _lib.dt_zero_grad(t._h)


def set_requires_grad(tensor, requires_grad=True):
    """A leaf's requires_grad (dt_tensor_set_requires_grad); a tensor made
    by an op cannot change it."""
    _errors.check(_lib.dt_tensor_set_requires_grad(tensor._h, bool(requires_grad)))
    return tensor


def grad_fn_name(tensor):
    """The op that made tensor ("matmul", "redistribute", ...), None for a
    leaf (dt_tensor_grad_fn)."""
    _lib.dt_clear_error()
    name = _lib.dt_tensor_grad_fn(tensor._h)
    if name is None and _lib.dt_last_status() != 0:
        raise _errors.last()
    return None if name is None else name.decode()


def autograd_live_nodes():
    """Graph nodes alive in the process (a leak check)."""
    return _lib.dt_autograd_live_nodes()


def _handles(params, what):
    from ._tensor import Tensor
    params = list(params)
    for i, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise TypeError(f"{what}: parameter {i} is {type(p).__name__}, not a dtorch.Tensor")
    return params, (ctypes.c_void_p * max(1, len(params)))(*[p._h for p in params])


def clip_grad_norm_(parameters, max_norm):
    """Scales the gradients so that their global 2-norm (every shard of
    every parameter) is at most max_norm, as
    torch.nn.utils.clip_grad_norm_; returns the norm before clipping (a
    0-d float32 dtorch.Tensor, as torch's)."""
    from ._ops import tensor
    from ._tensor import Tensor
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    params, arr = _handles(parameters, "clip_grad_norm_")
    total = ctypes.c_double()
    _errors.check(_lib.dt_clip_grad_norm(arr, len(params), float(max_norm),
                                         ctypes.byref(total)))
    return tensor(total.value)


# ---- the backward kernels (aten's *_backward ops) for custom formulas
def _w(h):
    from ._tensor import _wrap
    return _wrap(h)


def gelu_backward(grad, x):
    """grad * d/dx gelu(x) for the exact gelu (dt_gelu_backward)."""
    return _w(_lib.dt_gelu_backward(grad._h, x._h))


def slice_scatter(src, shape, dim, start=0, end=None, step=1):
    """Zeros of `shape` (src's dtype) with out[..., start:end:step, ...] =
    src along dim: torch.slice_scatter onto zeros (dt_slice_scatter)."""
    end = shape[dim] if end is None else end
    return _w(_lib.dt_slice_scatter(src._h, _lib.shape_of(shape), int(dim), int(start),
                                    int(end), int(step)))


def index_select_backward(grad, dim, index, size):
    """Zeros with `size` at dim, then index_add_(dim, index, grad)
    (dt_index_select_backward)."""
    return _w(_lib.dt_index_select_backward(grad._h, int(dim), index._h, int(size)))


def cross_entropy_backward(grad, input, target, reduction="mean", ignore_index=-100,
                           label_smoothing=0.0):
    """d cross_entropy / d input (dt_cross_entropy_backward)."""
    from ._ops import _REDUCTIONS
    return _w(_lib.dt_cross_entropy_backward(grad._h, input._h, target._h,
                                             _REDUCTIONS[reduction], int(ignore_index),
                                             float(label_smoothing)))
