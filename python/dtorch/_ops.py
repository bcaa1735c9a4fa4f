"""The functional API: factories with positional sizes and device_mesh= /
placements=, and the ops as functions (dtorch.add(a, b), dtorch.matmul)."""
import ctypes
import numbers

import torch

from . import _errors, _lib
from . import _tensor as _tensor_mod
from ._tensor import Tensor, _binary, _dims_arg, _Options, _sizes, _wrap


def _factory(name):
    fn = getattr(_lib, "dt_" + name)

    def factory(*size, dtype=None, device=None, device_mesh=None,
                placements=None, requires_grad=False):
        o = _Options(dtype, device, device_mesh, placements, requires_grad)
        shape = _lib.shape_of(_sizes(size))
        return Tensor._from_handle(o.call(lambda opts: fn(shape, opts)))
    _errors.named(factory, name)
    factory.__doc__ = (f"dtorch.{name}(*size, dtype=None, device=None, "
                       "device_mesh=None, placements=None, requires_grad=False); "
                       "device and device_mesh are exclusive")
    return factory


empty = _factory("empty")
zeros = _factory("zeros")
ones = _factory("ones")
rand = _factory("rand")
randn = _factory("randn")


def randint(*args, dtype=None, device=None, device_mesh=None, placements=None,
            requires_grad=False):
    """dtorch.randint([low=0,] high, size, ...): integers uniform in [low,
    high), int64 unless dtype says; drawn from dtorch's stream as
    floor(u * (high - low)) + low with u float64 uniform in [0, 1) (exact
    below 2**53; the top is clamped so rounding never yields high)."""
    if len(args) == 2:
        (high, size), low = args, 0
    elif len(args) == 3:
        low, high, size = args
    else:
        raise TypeError(f"randint: takes (high, size) or (low, high, size), got "
                        f"{len(args)} positional arguments")
    for name, v in (("low", low), ("high", high)):
        if not isinstance(v, numbers.Integral):
            raise TypeError(f"randint: {name} must be an int, got {type(v).__name__} {v!r}")
    if high <= low:
        raise ValueError(f"randint: low={low} must be less than high={high}")
    if high - low > 2**53:
        raise ValueError(f"randint: high - low = {high - low} is more than 2**53, "
                         "the range a float64 draw covers exactly")
    if requires_grad:
        raise RuntimeError("randint: only floating tensors can require gradients")
    u = rand(*(_sizes((size,) if isinstance(size, int) else (tuple(size),))),
             dtype=torch.float64, device=device, device_mesh=device_mesh,
             placements=placements)
    n = high - low
    v = ((u * float(n)) // 1.0).clamp(max=float(n - 1)) + float(low)
    return v.to(dtype if dtype is not None else torch.int64)


def full(size, fill_value, *, dtype=None, device=None, device_mesh=None,
         placements=None, requires_grad=False):
    if dtype is None and isinstance(fill_value, bool):
        dtype = torch.bool
    elif dtype is None and isinstance(fill_value, numbers.Integral):
        dtype = torch.int64
    o = _Options(dtype, device, device_mesh, placements, requires_grad)
    shape = _lib.shape_of(_sizes((size,) if isinstance(size, int) else (tuple(size),)))
    return Tensor._from_handle(o.call(lambda opts: _lib.dt_full(shape, float(fill_value), opts)))


def arange(start, end=None, step=1, *, dtype=None, device=None, device_mesh=None,
           placements=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    if dtype is None:
        ints = all(isinstance(v, numbers.Integral) for v in (start, end, step))
        dtype = torch.int64 if ints else torch.float32
    o = _Options(dtype, device, device_mesh, placements, requires_grad)
    return Tensor._from_handle(o.call(
        lambda opts: _lib.dt_arange(float(start), float(end), float(step), opts)))


def tensor(data, *, dtype=None, device=None, device_mesh=None, placements=None,
           requires_grad=False):
    """dtorch.tensor(data, ...): torch.tensor(data, dtype=dtype)'s value."""
    t = data.detach().clone() if isinstance(data, torch.Tensor) else torch.tensor(data, dtype=dtype)
    return Tensor(t, dtype=dtype, device=device, device_mesh=device_mesh,
                  placements=placements, requires_grad=requires_grad)


def zeros_like(t):
    return _wrap(_lib.dt_zeros_like(t._h))


def ones_like(t):
    return _wrap(_lib.dt_ones_like(t._h))


def full_like(t, fill_value):
    return _wrap(_lib.dt_full_like(t._h, float(fill_value)))


def manual_seed(seed):
    """Seeds dtorch's Philox stream (and resets its offset)."""
    _lib.dt_manual_seed(int(seed) & (2**64 - 1))


# ---- ops as functions
def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def div(a, b):
    return a / b


def pow(a, b):
    return a ** b


def matmul(a, b):
    return _binary("matmul", a, b)


def maximum(a, b):
    return _binary("maximum", a, b)


def minimum(a, b):
    return _binary("minimum", a, b)


def where(cond, a, b):
    return _wrap(_lib.dt_where(cond._h, a._h, b._h))


def transpose(a, dim0, dim1):
    return a.transpose(dim0, dim1)


def permute(a, dims):
    return a.permute(*dims)


def reshape(a, shape):
    return a.reshape(*shape)


def softmax(a, dim):
    return a.softmax(dim)


def log_softmax(a, dim):
    return a.log_softmax(dim)


def clamp(a, min=None, max=None):
    return a.clamp(min, max)


def var(a, dim=None, unbiased=True, keepdim=False):
    dims, n = _dims_arg(dim)
    return _wrap(_lib.dt_var(a._h, dims, n, unbiased, keepdim))


def _seq(tensors, fn):
    """(the list of tensors, their handles, the count): the caller holds
    the list until the C call returns (a generator's tensors have no
    other holder; their handles would dangle)."""
    tensors = list(tensors)
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"dtorch.{fn}: tensors[{i}] must be a dtorch.Tensor, got "
                            f"{type(t).__module__}.{type(t).__name__}")
    arr = (ctypes.c_void_p * max(1, len(tensors)))(*[t._h for t in tensors])
    return tensors, arr, len(tensors)


def cat(tensors, dim=0):
    held, arr, n = _seq(tensors, "cat")
    return _wrap(_lib.dt_cat(arr, n, dim))


def stack(tensors, dim=0):
    held, arr, n = _seq(tensors, "stack")
    return _wrap(_lib.dt_stack(arr, n, dim))


def _function(name):
    def fn(a, *args, **kwargs):
        return getattr(a, name)(*args, **kwargs)
    _errors.named(fn, name)
    return fn


for _n in _lib.UNARY + _lib.REDUCE:
    if _n not in ("zeros_like", "ones_like", "contiguous"):
        globals()[_n] = _function(_n)


_REDUCTIONS = {"mean": 0, "sum": 1, "none": 2}


def cross_entropy(input, target, *, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    """torch.nn.functional.cross_entropy's value: logits [N, C, ...] or
    [C]; target class indices (ignore_index skipped) or class
    probabilities (dt_cross_entropy, dt_cross_entropy_smoothed)."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"cross_entropy: reduction {reduction!r} is not one of "
                         f"{list(_REDUCTIONS)}")
    r = _REDUCTIONS[reduction]
    if label_smoothing == 0.0:
        return _wrap(_lib.dt_cross_entropy(input._h, target._h, r, int(ignore_index)))
    return _wrap(_lib.dt_cross_entropy_smoothed(input._h, target._h, r, int(ignore_index),
                                                float(label_smoothing)))


def embedding(input, weight):
    """Rows of weight [num, dim] at the int indices input: [..., dim]
    (torch.nn.functional.embedding's argument order)."""
    return _wrap(_lib.dt_embedding(input._h, weight._h))


def index_select(input, dim, index):
    return input.index_select(dim, index)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """torch.rms_norm over the last dim (normalized_shape must be it);
    eps None: torch.finfo(input.dtype).eps, as torch."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if shape != tuple(input.shape[-1:]):
        raise ValueError(f"rms_norm: normalized_shape {list(shape)} must be the last dim "
                         f"of the input ({list(input.shape[-1:])}); dtorch normalises one dim")
    e = torch.finfo(input.dtype).eps if eps is None else float(eps)
    return _wrap(_lib.dt_rms_norm(input._h, weight._h if weight is not None else None, e))


def dtype_name(dtype):
    """dtorch's name of a dtype ("float32"; dt_dtype_name)."""
    return _lib.dt_dtype_name(_tensor_mod.dt_dtype(dtype)).decode()


def dtype_size(dtype):
    """Bytes per element (dt_dtype_size)."""
    return _lib.dt_dtype_size(_tensor_mod.dt_dtype(dtype))


def status_name(status):
    """"DT_ERR_SHAPE" for a dt_status value ("?" outside the enum)."""
    return _lib.dt_status_name(int(status)).decode()


def live_storage_bytes():
    """Storage bytes alive in this process (a leak check)."""
    return _lib.dt_live_storage_bytes()


def blas_set_threads(n):
    """OpenBLAS's thread count (dtorch's rank threads call it with 1: they
    are the parallelism)."""
    _lib.dt_blas_set_threads(int(n))


def live_tensors():
    """dtorch tensor handles alive in this process (a leak check)."""
    return _lib.dt_live_tensors()


def synchronize():
    """Waits for every op issued to the default runtime."""
    _errors.check(_lib.dt_runtime_synchronize(_lib.dt_runtime_default()))


def version():
    """The loaded library's version ("1.0.0")."""
    return _lib.dt_version().decode()


# what `from ._ops import *` gives the package: the factories and ops
__all__ = [n for n, v in list(globals().items())
           if callable(v) and not n.startswith("_") and getattr(v, "__module__", "") == __name__]
