"""dtorch.Tensor's methods beyond the operators in _tensor.py: the
reductions, splits, indexing and conversions PyTorch users reach for,
each as torch.Tensor's. _tensor.py attaches the generated unary and
reduce methods only where this mixin has none of that name (sum, mean,
argmax, argmin here take torch's extra arguments)."""
import ctypes
import math
import numbers

import torch

from . import _errors, _lib


def _T():
    from ._tensor import Tensor
    return Tensor


def _wrap(h):
    from ._tensor import _wrap as w
    return w(h)


def _dims(dim):
    from ._tensor import _dims_arg
    return _dims_arg(dim)


def _pieces(fn, what):
    """Calls fn(out, max_out) twice (count, then the pieces): a tuple."""
    n = fn(None, 0)
    if n < 0:
        raise _errors.last()
    out = (ctypes.c_void_p * max(1, n))()
    if fn(out, n) < 0:
        raise _errors.last()
    T = _T()
    return tuple(T._from_handle(out[i]) for i in range(n))


class TensorMethods:
    """Mixed into dtorch.Tensor (python/dtorch/_tensor.py)."""
    __slots__ = ()

    # ---- reductions (torch's signatures)
    def sum(self, dim=None, keepdim=False, *, dtype=None):
        """torch.Tensor.sum: dtype casts the input first."""
        x = self if dtype is None else self.to(dtype)
        dims, n = _dims(dim)
        return _wrap(_lib.dt_sum(x._h, dims, n, keepdim))

    def mean(self, dim=None, keepdim=False, *, dtype=None):
        x = self if dtype is None else self.to(dtype)
        dims, n = _dims(dim)
        return _wrap(_lib.dt_mean(x._h, dims, n, keepdim))

    def _extreme(self, name, dim, keepdim, other):
        if isinstance(dim, _T()) or isinstance(dim, torch.Tensor):
            other, dim = dim, None
        if other is not None:
            from ._tensor import _binary
            return _binary("maximum" if name == "max" else "minimum", self, other)
        if dim is None:
            if keepdim:
                raise TypeError(f"{name}(): keepdim needs a dim")
            if self.numel() == 0:
                raise IndexError(f"{name}(): Expected reduction dim to be specified "
                                 "for input.numel() == 0. Specify the reduction dim "
                                 "with the 'dim' argument.")
            return _wrap(getattr(_lib, "dt_a" + name)(self._h, None, 0, False))
        if not isinstance(dim, numbers.Integral):
            raise TypeError(f"{name}(): dim must be an int, got {dim!r}")
        dims = _lib.int_array([dim], (_errors.api_frame(1)[0] or "dtorch") + ": dim")
        values = _wrap(getattr(_lib, "dt_a" + name)(self._h, dims, 1, keepdim))
        indices = _wrap(getattr(_lib, "dt_arg" + name)(self._h, dims, 1, keepdim))
        return getattr(torch.return_types, name)((values, indices))

    def max(self, dim=None, keepdim=False, *, other=None):
        """max(): the largest element (0-d); max(dim, keepdim=False): a
        torch.return_types.max (values, indices), indices of the first
        maximum; max(other): elementwise maximum."""
        return self._extreme("max", dim, keepdim, other)

    def min(self, dim=None, keepdim=False, *, other=None):
        return self._extreme("min", dim, keepdim, other)

    def argmax(self, dim=None, keepdim=False):
        """int64 index of the first maximum (dim None: into the flattened
        tensor)."""
        dims, n = _dims(dim)
        return _wrap(_lib.dt_argmax(self._h, dims, n, keepdim))

    def argmin(self, dim=None, keepdim=False):
        dims, n = _dims(dim)
        return _wrap(_lib.dt_argmin(self._h, dims, n, keepdim))

    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        """torch.Tensor.norm: p "fro" / 2, 1, inf, -inf, 0 or any real p,
        over dim (None: all) — the vector norm of the elements."""
        x = self if dtype is None else self.to(dtype)
        if not x.dtype.is_floating_point:
            raise NotImplementedError(f"linalg.vector_norm: Expected a floating point or "
                                      f"complex tensor as input. Got {x.dtype}")
        dims, n = _dims(dim)
        a = x.abs()
        if p in ("fro", 2, 2.0):
            return (a * a).sum(dim, keepdim).sqrt()
        if not isinstance(p, numbers.Real):
            raise ValueError(f"norm(): p {p!r} is not a number or 'fro'")
        if p == math.inf:
            return _wrap(_lib.dt_amax(a._h, dims, n, keepdim))
        if p == -math.inf:
            return _wrap(_lib.dt_amin(a._h, dims, n, keepdim))
        if p == 0:
            return (a != 0.0).to(x.dtype).sum(dim, keepdim)
        if p == 1:
            return _wrap(_lib.dt_sum(a._h, dims, n, keepdim))
        s = (a ** float(p)).sum(dim, keepdim)
        return s ** (1.0 / float(p))

    # ---- splitting
    def chunk(self, chunks, dim=0):
        """torch.chunk: pieces of ceil(size / chunks) along dim (views)."""
        if not isinstance(chunks, numbers.Integral) or chunks < 1:
            raise ValueError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
        return _pieces(lambda out, k: _lib.dt_chunk(self._h, int(chunks), int(dim), out, k),
                       "chunk")

    def split(self, split_size_or_sections, dim=0):
        """torch.split: pieces of split_size along dim (the last may be
        smaller), or of the sizes listed (which must sum to the size)."""
        if isinstance(split_size_or_sections, numbers.Integral):
            s = int(split_size_or_sections)
            return _pieces(lambda out, k: _lib.dt_split(self._h, s, int(dim), out, k), "split")
        sizes = [int(s) for s in split_size_or_sections]
        size = self.size(dim)
        if sum(sizes) != size or any(s < 0 for s in sizes):
            raise ValueError(f"split_with_sizes expects split_sizes to sum exactly to {size} "
                             f"(input tensor's size at dimension {dim}), but got "
                             f"split_sizes={sizes}")
        out, start = [], 0
        for s in sizes:
            out.append(self.narrow(dim, start, s))
            start += s
        return tuple(out)

    def unbind(self, dim=0):
        """The slices along dim, that dim removed (views)."""
        return tuple(_wrap(_lib.dt_select(self._h, int(dim), i)) for i in range(self.size(dim)))

    def narrow(self, dim, start, length):
        return _wrap(_lib.dt_narrow(self._h, int(dim), int(start), int(length)))

    def index_select(self, dim, index):
        """The entries of self along dim at index (a 1-D integer tensor)."""
        # a temporary's handle must outlive the call: hold the object
        idx = _as_index(index, self)
        return _wrap(_lib.dt_index_select(self._h, int(dim), idx._h))

    def masked_fill(self, mask, value):
        """Self with value where mask (bool, broadcast to self) is True."""
        if isinstance(value, (_T(), torch.Tensor)):
            if value.dim() != 0:
                raise ValueError(f"masked_fill only supports a 0-dimensional value "
                                 f"tensor, but got tensor with {value.dim()} dimension(s).")
            value = value.item()
        if not isinstance(mask, _T()):
            mask = _T()(torch.as_tensor(mask))
        return _wrap(_lib.dt_masked_fill(self._h, mask._h, float(value)))

    def __iter__(self):
        if self.dim() == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (_wrap(_lib.dt_select(self._h, 0, i)) for i in range(self.size(0)))

    # ---- indexing
    def __getitem__(self, idx):
        """Ints, slices (step >= 1), None, Ellipsis, and one integer index
        tensor (or list) or a boolean mask per subscript, as torch's."""
        from ._index import getitem
        return getitem(self, idx)

    # ---- device, copies to the host
    @property
    def device(self):
        """torch.device("cpu") for a single-device tensor (dtorch's ranks
        are host memory); a DTensor: its mesh's device type, "cuda:0" for a
        "cuda" mesh (torch reports the local shard's device)."""
        m = self.device_mesh
        if m is None or not str(m.device_type).startswith("cuda"):
            return torch.device("cpu")
        return torch.device("cuda", 0)

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    def cpu(self):
        """self: the values already live in host memory."""
        return self

    # ---- layout
    def is_contiguous(self):
        return bool(_lib.dt_tensor_is_contiguous(self._h))

    def stride(self, dim=None):
        """Strides in elements. A DTensor's are its global layout's: dtorch
        computes each DTensor view per shard into contiguous shards, so
        d.t() reports contiguous strides where torch's DTensor reports the
        transposed ones (and is_contiguous() is True)."""
        st = _lib.dims_of(_lib.dt_tensor_strides(self._h))
        return st if dim is None else st[dim]

    def storage_offset(self):
        return _lib.dt_tensor_storage_offset(self._h)

    def data_ptr(self):
        """The address of the first element of a single-device tensor (it
        waits for the tensor's ops); DTensors have one buffer per rank."""
        if self.is_dtensor():
            raise _errors.UnsupportedError(
                "data_ptr: a DTensor has one shard per rank and no single buffer; "
                "use to_local(rank)", "DT_ERR_UNSUPPORTED")
        p = ctypes.c_void_p()
        _errors.check(_lib.dt_tensor_local_data(self._h, ctypes.byref(p)))
        return p.value or 0

    def shares_storage(self, other):
        """True when both read the same storage (views of one base)."""
        return bool(_lib.dt_tensor_shares_storage(self._h, other._h))

    def view_as(self, other):
        return self.view(*other.shape)

    def reshape_as(self, other):
        return self.reshape(*other.shape)

    def expand_as(self, other):
        return self.expand(*other.shape)

    def repeat(self, *sizes):
        """torch's repeat: the tensor tiled sizes[i] times along dim i
        (leading sizes add dims): viewed as [1, s0, 1, s1, ...], expanded
        to [r0, s0, r1, s1, ...], reshaped to [r0*s0, r1*s1, ...]."""
        if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
            sizes = tuple(sizes[0])
        if len(sizes) < self.dim():
            raise RuntimeError(f"Tensor.repeat: the number of repeat dims ({len(sizes)}) "
                               f"can not be smaller than the tensor's dims ({self.dim()})")
        for i, r in enumerate(sizes):
            if not isinstance(r, int) or isinstance(r, bool) or r < 0:
                raise RuntimeError(f"Tensor.repeat: sizes[{i}] = {r!r} is not a "
                                   "non-negative int")
        shape = (1,) * (len(sizes) - self.dim()) + tuple(self.shape)
        pairs = [v for s in shape for v in (1, s)]
        tiled = [v for r, s in zip(sizes, shape) for v in (r, s)]
        out = [r * s for r, s in zip(sizes, shape)]
        return self.reshape(*pairs).expand(*tiled).reshape(*out)

    def type_as(self, other):
        return self.to(other.dtype)

    # ---- metadata
    def element_size(self):
        return _lib.dt_dtype_size(_lib.dt_tensor_dtype(self._h))

    def nelement(self):
        return self.numel()

    def is_floating_point(self):
        return self.dtype.is_floating_point

    # ---- new tensors like self
    def _like(self, dtype):
        # torch's DTensor new_* rule: the same mesh, every dim Replicate
        from .distributed_spec import Replicate
        m = self.device_mesh
        kw = {"dtype": self.dtype if dtype is None else dtype}
        if m is not None:
            kw.update(device_mesh=m, placements=[Replicate()] * m.ndim)
        return kw

    def new_zeros(self, *size, dtype=None, requires_grad=False):
        from ._ops import zeros
        return zeros(*size, **self._like(dtype), requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, requires_grad=False):
        from ._ops import ones
        return ones(*size, **self._like(dtype), requires_grad=requires_grad)

    def new_empty(self, *size, dtype=None, requires_grad=False):
        from ._ops import empty
        return empty(*size, **self._like(dtype), requires_grad=requires_grad)

    def new_full(self, size, fill_value, *, dtype=None, requires_grad=False):
        from ._ops import full
        return full(size, fill_value, **self._like(dtype), requires_grad=requires_grad)

    def new_tensor(self, data, *, dtype=None, requires_grad=False):
        kw = self._like(dtype)
        t = data.detach() if isinstance(data, torch.Tensor) else torch.as_tensor(data)
        return _T()(t.to(kw.pop("dtype")), **kw, requires_grad=requires_grad)

    # ---- comparisons of whole tensors
    def equal(self, other):
        """True when both have the same shape and equal elements."""
        if tuple(self.shape) != tuple(other.shape):
            return False
        return not bool((self != other).sum().item())

    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        """|self - other| <= atol + rtol * |other| everywhere (broadcast),
        infinities equal to themselves; NaNs equal with equal_nan."""
        if not isinstance(other, _T()):
            other = _T()(torch.as_tensor(other))
        a, b = self, other
        if not a.dtype.is_floating_point:
            a = a.to(b.dtype if b.dtype.is_floating_point else torch.float32)
        if not b.dtype.is_floating_point:
            b = b.to(a.dtype)
        # infinities are close only to themselves (a == b); x - x is 0
        # exactly for the finite ones
        finite = ((a - a) == 0.0) & ((b - b) == 0.0)
        near = (a - b).abs() <= (b.abs() * float(rtol) + float(atol))
        close = (a == b) | (finite & near)
        if equal_nan:
            close = close | ((a != a) & (b != b))
        return not bool(close.logical_not().sum().item())

    # ---- autograd
    def backward(self, gradient=None, retain_graph=False):
        """d self / d leaves into each leaf's grad (dt_backward_ex)."""
        from ._autograd import backward
        backward(self, gradient, retain_graph)

    @property
    def grad_fn(self):
        """The name of the op that made self ("matmul"), None for a leaf
        (dtorch has no Node objects; torch shows e.g. <MmBackward0>)."""
        from ._autograd import grad_fn_name
        return grad_fn_name(self)

    @property
    def is_leaf(self):
        return self.grad_fn is None

    def requires_grad_(self, requires_grad=True):
        from ._autograd import set_requires_grad
        return set_requires_grad(self, requires_grad)

    # ---- repr
    def __repr__(self):
        from ._index import tensor_repr
        return tensor_repr(self)


def _as_index(index, like):
    """index as an integer dtorch.Tensor: a DTensor's index is replicated
    on its mesh."""
    T = _T()
    if isinstance(index, T) and (index.is_dtensor() or not like.is_dtensor()):
        return index
    t = index.to_torch() if isinstance(index, T) else \
        index if isinstance(index, torch.Tensor) else torch.as_tensor(index)
    if t.dtype.is_floating_point or t.dtype == torch.bool:
        raise IndexError(f"tensors used as indices must be long, int, byte or bool "
                         f"tensors, got {t.dtype}")
    m = like.device_mesh
    if m is None:
        return T(t.to(torch.int64))
    from .distributed_spec import Replicate
    return T(t.to(torch.int64), device_mesh=m, placements=[Replicate()] * m.ndim)
