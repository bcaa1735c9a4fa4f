"""dtorch.Tensor: a handle on a dtorch tensor (single-device or a DTensor
on a DeviceMesh) with PyTorch's operators, methods and dtypes."""
import ctypes
import numbers

import torch

from . import _errors, _lib, _scalar
from ._inplace import InplaceMethods
from ._methods import TensorMethods
from .distributed_spec import DeviceMesh, Placement, Replicate, _device, \
    _from_c, _placements_array

# dt_dtype order <-> torch dtypes: the library's names are torch's
DTYPES = [getattr(torch, n) for n in _lib.DTYPE_NAMES]
_DT = {d: i for i, d in enumerate(DTYPES)}
_MODES = {n[len("DT_DEFAULT_"):].lower(): _lib.E[n]
          for n in _lib.ENUMS["dt_default_placement"]}


def dt_dtype(dtype):
    if dtype is None:
        return 0
    try:
        return _DT[dtype]
    except KeyError:
        raise TypeError(f"dtorch: dtype {dtype} is not one of "
                        f"{[str(d) for d in DTYPES]}") from None


def _sizes(size):
    """zeros(4, 8), zeros((4, 8)), zeros([4, 8]), zeros(torch.Size(...))"""
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, numbers.Integral):
            raise TypeError(f"dtorch: size must be ints, got {size!r}")
    return tuple(int(s) for s in size)


class _Options:
    """dt_tensor_options with the Python objects it points into kept alive."""

    def __init__(self, dtype=None, device=None, device_mesh=None,
                 placements=None, requires_grad=False):
        self.c = _lib.TensorOptions()
        self.c.dtype = dt_dtype(dtype)
        self.c.requires_grad = bool(requires_grad)
        self.mesh = device_mesh
        if device_mesh is not None:
            if not isinstance(device_mesh, DeviceMesh):
                raise TypeError(f"device_mesh: {device_mesh!r} is not a DeviceMesh")
            self.c.mesh = device_mesh._h
            if placements is not None:
                self.pl = _placements_array(placements, device_mesh.ndim)
                self.c.placements = self.pl
        elif placements is not None:
            raise ValueError("placements given without a device_mesh")
        self.device = None if device is None else str(device)
        if self.device is not None:
            self.c.device = self.device.encode()

    def call(self, fn):
        """fn(options pointer); a "cuda" device is emulated as
        distributed_spec says."""
        ref = ctypes.byref(self.c)
        if self.device is None or not self.device.startswith("cuda"):
            return _errors.handle(fn(ref))

        def with_device(d):
            self.c.device = d
            return fn(ref)
        return _device(self.device, with_device)


def _spmd_site():
    from ._spmd import site_in_spmd
    site_in_spmd()


def _wrap(ptr):
    return Tensor._from_handle(_errors.handle(ptr))


def _picklable(t):
    """A DTensor's mesh lives in this process only: pickle would drop its
    layout; dtorch.save records it."""
    if t.is_dtensor():
        raise TypeError(f"pickle: a DTensor ({type(t).__name__} on a mesh of shape "
                        f"{tuple(t.device_mesh.shape)}) cannot be pickled; dtorch.save "
                        "writes it with its layout (dtorch.load(..., device_mesh=) lays "
                        "it out again)")


def _rebuild(data, requires_grad):
    return Tensor(data, requires_grad=requires_grad)


def _scalar_ok(x):
    return isinstance(x, numbers.Real) and not isinstance(x, Tensor)


def _as_tensor(x, like):
    if isinstance(x, Tensor):
        return x
    if _scalar_ok(x):
        return _wrap(_lib.dt_full_like(like._h, float(x)))
    if isinstance(x, torch.Tensor):
        return Tensor(x)
    return NotImplemented


def _binary(name, a, b):
    b = _as_tensor(b, a)
    if b is NotImplemented:
        return NotImplemented
    return _wrap(getattr(_lib, "dt_" + name)(a._h, b._h))


def _bool_sub(name, a, kind):
    """PyTorch refuses a subtraction with a bool tensor or a bool scalar."""
    return name == "sub" and (a.dtype == torch.bool or kind == _scalar.BOOL)


def _scalar_op(name, a, o):
    """a <name> scalar o, the dtype decided by o's kind as in PyTorch
    (int32 + 1 is int32, int32 + 1.0 float32, bool + True bool)."""
    kind, v = _scalar.kind_and_value(o, f"dtorch: {name}")
    want = _scalar.result_dtype(a.dtype, o)
    if _bool_sub(name, a, kind):
        want = a.dtype  # the C call refuses it, as PyTorch does
    if want != _scalar.kind_dtype(a.dtype, kind):
        # a 0-d tensor of a higher category (int32 + tensor(1.5, float64)):
        # PyTorch computes in its dtype
        a = a.to(want)
    return _wrap(_scalar.typed(name)(a._h, v, kind))


def _as_scalar(a, o):
    """Whether o meets a as a scalar: a Python number, or a 0-d torch
    tensor meeting a DTensor (a single-device tensor meets a 0-d one as
    the tensor op, PyTorch's own 0-d rule; a DTensor cannot meet a
    single-device tensor, so there the 0-d tensor is a scalar of its
    dtype's kind, computed in PyTorch's result dtype)."""
    if isinstance(o, torch.Tensor):
        return o.ndim == 0 and a.device_mesh is not None and _scalar.is_scalar(o)
    return _scalar.is_scalar(o)


def _scalar_pair(a, o, true_div=False):
    """a and the scalar o as two tensors of PyTorch's common dtype (for
    the comparisons and the reflected ops, which have no scalar form in C):
    int32 < 1.5 compares in float32, an int scalar meets an int32 / uint8
    tensor converted as PyTorch converts it."""
    kind, v = _scalar.kind_and_value(o, "dtorch")
    want = _scalar.result_dtype(a.dtype, o)
    if true_div and not want.is_floating_point:
        want = torch.float32  # 2**31 / int32 divides in float, unwrapped
    if want != a.dtype:
        a = a.to(want)
    if kind != _scalar.FLOAT and not want.is_floating_point:
        v = _scalar.wrap_int(v, want)
    return a, _wrap(_lib.dt_full_like(a._h, v))


def _rop(name, a, o):
    """o <name> a for a scalar or tensor o (the reflected operators)."""
    if _as_scalar(a, o):
        if _bool_sub(name, a, _scalar.kind_and_value(o)[0]):
            return _scalar_op(name, a, o)  # fails as PyTorch's does
        a, b = _scalar_pair(a, o, true_div=name == "div")
        return _wrap(getattr(_lib, "dt_" + name)(b._h, a._h))
    b = _as_tensor(o, a)
    if b is NotImplemented:
        return NotImplemented
    return _wrap(getattr(_lib, "dt_" + name)(b._h, a._h))


def _op(name, a, o):
    """a <name> o: the scalar form for a scalar o, else the tensor op."""
    if _as_scalar(a, o):
        return _scalar_op(name, a, o)
    return _binary(name, a, o)


def _cmp(name, a, o):
    """a <name> o -> bool, a scalar o compared in PyTorch's common dtype."""
    if _as_scalar(a, o):
        a, b = _scalar_pair(a, o)
        return _wrap(getattr(_lib, "dt_" + name)(a._h, b._h))
    return _binary(name, a, o)


def _dims_arg(dim):
    if dim is None:
        return None, 0
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return _lib.int_array(dims, (_errors.api_frame(2)[0] or "dtorch") + ": dim"), len(dims)


def _load_c():
    """dtorch._C (the C Tensor base type), or None for the ctypes binding:
    DTORCH_BINDING=ctypes asks for ctypes, =c for the extension (an
    ImportError if it was not built), unset: the extension if built."""
    import os
    want = os.environ.get("DTORCH_BINDING", "")
    if want not in ("", "c", "ctypes"):
        raise ImportError(f"dtorch: DTORCH_BINDING={want!r} is not 'c' or 'ctypes'")
    if want == "ctypes":
        return None
    import importlib.util
    try:
        if importlib.util.find_spec(__package__ + "._C") is None:
            raise ImportError("the package has no dtorch._C: it was installed "
                              "without a C compiler or Python's headers")
        from . import _C
    except ImportError as e:
        if want == "c":
            raise ImportError(
                f"dtorch: DTORCH_BINDING=c but the C extension dtorch._C is not "
                f"built ({e}); reinstall with a C compiler and Python's headers "
                f"(pip install ./python), or unset DTORCH_BINDING for ctypes") from e
        return None
    return _C


_C = _load_c()
_lib.BINDING = "c" if _C else "ctypes"


class Tensor(*((_C.TensorBase,) if _C else ()), InplaceMethods, TensorMethods):
    """dtorch.Tensor(data, *, dtype=None, device=None, device_mesh=None,
    placements=None, requires_grad=False): data is a torch.Tensor (or
    anything torch.as_tensor takes); with device_mesh it becomes a DTensor
    holding data as its global value, laid out by placements (all
    Replicate() when not given)."""

    # the extension's base holds _h in C (and releases it in tp_dealloc)
    __slots__ = ("__weakref__",) if _C else ("_h", "__weakref__")
    __hash__ = object.__hash__

    def __init__(self, data, *, dtype=None, device=None, device_mesh=None,
                 placements=None, requires_grad=False):
        t = data if isinstance(data, torch.Tensor) else torch.as_tensor(data)
        t = t.detach()
        if dtype is not None:
            t = t.to(dtype)
        t = t.to("cpu").contiguous()
        o = _Options(t.dtype, device, device_mesh, placements, requires_grad)
        shape = _lib.shape_of(t.shape)
        # dt_from_host copies the data before it returns
        h = o.call(lambda opts: _lib.dt_from_host(
            ctypes.c_void_p(t.data_ptr()), shape, opts))
        # a second __init__ replaces the handle: the old one is released
        # (a failed call above leaves the object as it was)
        old, self._h = getattr(self, "_h", None), h
        if old:
            _lib.dt_tensor_release(old)

    @classmethod
    def _from_handle(cls, h):
        # Tensor's __new__, not a subclass's: Parameter.__new__ makes a
        # handle of its own, which h would replace (and leak)
        obj = Tensor.__new__(cls)
        obj._h = h
        return obj

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h and _lib is not None and _lib.dt_tensor_release is not None:
            _lib.dt_tensor_release(h)

    # ---- copies, as torch's; each owns a handle of its own (copying the
    # handle itself would release it twice)
    def __copy__(self):
        """copy.copy: a new leaf on self's storage (writes through one
        are seen by the other), requiring grad as self does."""
        c = self.detach()
        return c.requires_grad_(True) if self.requires_grad else c

    def __deepcopy__(self, memo):
        """copy.deepcopy: a new leaf holding a copy of self's values (its
        dtype, mesh and placements), its requires_grad and a deep copy of
        its grad; a non-leaf is refused, as torch refuses it."""
        if id(self) in memo:
            return memo[id(self)]
        if self.grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) "
                               "support the deepcopy protocol at the moment")
        from ._grad_mode import no_grad
        from ._ops import clone
        with no_grad():
            new = clone(self)
        if self.requires_grad:
            new.requires_grad_(True)
        g = self.grad
        if g is not None:
            new.grad = g.__deepcopy__(memo)
        memo[id(self)] = new
        return new

    def __reduce_ex__(self, proto):
        """pickle: the values (to_torch) and requires_grad."""
        _picklable(self)
        return (_rebuild, (self.to_torch(), self.requires_grad))

    # ---- metadata
    @property
    def shape(self):
        return torch.Size(_lib.dims_of(_lib.dt_tensor_shape(self._h)))

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    @property
    def ndim(self):
        return _lib.dt_tensor_ndim(self._h)

    def dim(self):
        return self.ndim

    def numel(self):
        return _lib.dt_tensor_numel(self._h)

    @property
    def dtype(self):
        return DTYPES[_lib.dt_tensor_dtype(self._h)]

    @property
    def device_mesh(self):
        """The DeviceMesh of a DTensor; None for a single-device tensor."""
        m = _lib.dt_tensor_mesh(self._h)
        return DeviceMesh._wrap(m) if m else None

    @property
    def placements(self):
        m = self.device_mesh
        if m is None:
            return None
        return tuple(_from_c(_lib.dt_tensor_placement(self._h, i)) for i in range(m.ndim))

    def is_dtensor(self):
        return bool(_lib.dt_tensor_mesh(self._h))

    @property
    def requires_grad(self):
        return _lib.dt_tensor_requires_grad(self._h)

    def __len__(self):
        s = self.shape
        if not s:
            raise TypeError("len() of a 0-d tensor")
        return s[0]

    # ---- values
    def to_torch(self):
        """The full (global) value as a new torch.Tensor on the CPU (a
        Partial DTensor is reduced); waits for the ops it comes from."""
        out = torch.empty(tuple(self.shape), dtype=self.dtype)
        if _lib.dt_tensor_mesh(self._h):
            _spmd_site()
        _errors.check(_lib.dt_to_host(self._h, ctypes.c_void_p(out.data_ptr()),
                                      out.numel() * out.element_size()))
        return out

    def to_torch_async(self):
        """A TensorFuture of to_torch()'s value; returns at once."""
        from ._future import TensorFuture
        out = torch.empty(tuple(self.shape), dtype=self.dtype)
        f = _errors.handle(_lib.dt_to_host_async(
            self._h, ctypes.c_void_p(out.data_ptr()), out.numel() * out.element_size()))
        return TensorFuture(f, out, self)

    def to_local(self, rank=None, *, grad_placements=None):
        """The shard runtime rank `rank` holds, as a new torch.Tensor;
        rank None: the current rank's (dtorch.distributed.get_rank()).
        Inside an SPMD function (each rank holds its own shards), as
        torch's: this rank's shard as a dtorch.Tensor sharing its storage,
        differentiable (the gradient flows back as the shard of a DTensor
        with these placements; grad_placements may only repeat them)."""
        if rank is None and _lib.dt_spmd_rank() >= 0:
            if grad_placements is not None and \
                    tuple(grad_placements) != tuple(self.placements or ()):
                raise NotImplementedError(
                    f"to_local: grad_placements {list(grad_placements)}: the "
                    f"gradient takes the tensor's own {list(self.placements)}")
            return _wrap(_lib.dt_dtensor_to_local(self._h))
        if rank is None:
            from .distributed import _world
            rank = _world.current_rank()
        shape = _lib.dims_of(_lib.dt_tensor_local_shape(self._h, rank))
        out = torch.empty(shape, dtype=self.dtype)
        _errors.check(_lib.dt_local_to_host(self._h, rank, ctypes.c_void_p(out.data_ptr()),
                                            out.numel() * out.element_size()))
        return out

    def full_tensor(self, *, grad_placements=None):
        """A DTensor's global value as a new torch.Tensor (to_torch()).
        Inside an SPMD function, as torch's: a collective (every rank of
        the mesh calls it) giving this rank a dtorch.Tensor of the whole
        value, differentiable."""
        if not self.is_dtensor():
            raise TypeError("full_tensor: a single-device tensor is no DTensor "
                            "(use to_torch())")
        if _lib.dt_spmd_rank() >= 0:
            full = self.redistribute(self.device_mesh, [Replicate()] * self.device_mesh.ndim)
            return full.to_local(grad_placements=grad_placements)
        return self.to_torch()

    def item(self):
        return self.to_torch().item()

    def tolist(self):
        return self.to_torch().tolist()

    def numpy(self):
        """A read-only numpy view of a single-device tensor's memory (no
        copy); a DTensor's full value, copied."""
        import numpy
        if self.is_dtensor():
            return self.to_torch().numpy()
        return numpy.asarray(self)

    def __array__(self, dtype=None, copy=None):
        a = self.to_torch().numpy()
        return a if dtype is None else a.astype(dtype)

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        return bool(self.item())

    # zero-copy views (_interop.py)
    @property
    def __array_interface__(self):
        from ._interop import array_interface
        return array_interface(self)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        from ._interop import dlpack
        return dlpack(self, copy)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU: dtorch's ranks are host memory

    # ---- placements
    def redistribute(self, device_mesh=None, placements=None, *, async_op=False):
        """To placements (all Replicate() when None) on device_mesh (this
        tensor's mesh when None); runs the collectives that needs. They
        are always issued asynchronously (async_op is torch's flag)."""
        mesh = device_mesh or self.device_mesh
        if mesh is None:
            raise ValueError("redistribute: a single-device tensor needs a device_mesh")
        pl = [Replicate()] * mesh.ndim if placements is None else placements
        arr = _placements_array(pl, mesh.ndim)
        _spmd_site()
        return _wrap(_lib.dt_redistribute(self._h, device_mesh._h if device_mesh else None, arr))

    def view_shards(self, shape, placements):
        """This DTensor as global `shape` with `placements` over its own
        shards (dt_view_shards: no data moves; valid when every rank's
        shard is the same elements in the same order under both layouts,
        else an error naming the rank). Shares this tensor's storage:
        later in-place writes into it show through; the view itself
        refuses them. Not differentiable."""
        if self.device_mesh is None:
            raise ValueError("view_shards: a single-device tensor has no shards")
        arr = _placements_array(list(placements), self.device_mesh.ndim)
        _spmd_site()
        return _wrap(_lib.dt_view_shards(self._h, _lib.shape_of(shape, "view_shards: shape"), arr))

    def redistribute_like(self, other):
        _spmd_site()
        return _wrap(_lib.dt_redistribute_like(self._h, other._h))

    def redistribute_by_dict(self, device_mesh=None, placements_dict=None,
                             default_placement_mode="raise_error"):
        """placements by mesh dim name; the dims not named follow
        default_placement_mode: "raise_error", "replicate" or "keep"."""
        if default_placement_mode not in _MODES:
            raise ValueError(f"redistribute_by_dict: default_placement_mode "
                             f"{default_placement_mode!r} is not one of {list(_MODES)}")
        items = list((placements_dict or {}).items())
        names = (ctypes.c_char_p * max(1, len(items)))(*[k.encode() for k, _ in items])
        for _, p in items:
            if not isinstance(p, Placement):
                raise TypeError(f"redistribute_by_dict: {p!r} is not a placement")
        pl = (_lib.Placement * max(1, len(items)))(*[p._c() for _, p in items])
        _spmd_site()
        return _wrap(_lib.dt_redistribute_by_dict(
            self._h, device_mesh._h if device_mesh else None, names, pl, len(items),
            _MODES[default_placement_mode]))

    # ---- operators (a Python scalar's kind decides the dtype: _scalar.py)
    def __add__(self, o):
        return _op("add", self, o)

    __radd__ = __add__

    def __sub__(self, o):
        return _op("sub", self, o)

    def __rsub__(self, o):
        return _rop("sub", self, o)

    def __mul__(self, o):
        return _op("mul", self, o)

    __rmul__ = __mul__

    def __truediv__(self, o):
        return _op("div", self, o)

    def __rtruediv__(self, o):
        return _rop("div", self, o)

    def __floordiv__(self, o):
        return _op("floor_divide", self, o)

    def __rfloordiv__(self, o):
        return _rop("floor_divide", self, o)

    def __mod__(self, o):
        return _op("remainder", self, o)

    def __rmod__(self, o):
        return _rop("remainder", self, o)

    def __pow__(self, o):
        return _op("pow", self, o)

    def __rpow__(self, o):
        return _rop("pow", self, o)

    def __matmul__(self, o):
        return _binary("matmul", self, o)

    def __rmatmul__(self, o):
        return _binary("matmul", _as_tensor(o, self), self)

    def __neg__(self):
        return _wrap(_lib.dt_neg(self._h))

    def __pos__(self):
        return self

    def __abs__(self):
        return _wrap(_lib.dt_abs(self._h))

    def __invert__(self):
        return _wrap(_lib.dt_logical_not(self._h))

    def __and__(self, o):
        return _binary("logical_and", self, o)

    def __or__(self, o):
        return _binary("logical_or", self, o)

    def __eq__(self, o):
        return _cmp("eq", self, o)

    def __ne__(self, o):
        return _cmp("ne", self, o)

    def __lt__(self, o):
        return _cmp("lt", self, o)

    def __le__(self, o):
        return _cmp("le", self, o)

    def __gt__(self, o):
        return _cmp("gt", self, o)

    def __ge__(self, o):
        return _cmp("ge", self, o)

    # ---- methods (PyTorch's names)
    def matmul(self, o):
        return _binary("matmul", self, o)

    def add(self, o):
        return self + o

    def sub(self, o):
        return self - o

    def mul(self, o):
        return self * o

    def div(self, o):
        return self / o

    def pow(self, o):
        return self ** o

    def softmax(self, dim):
        return _wrap(_lib.dt_softmax(self._h, dim))

    def log_softmax(self, dim):
        return _wrap(_lib.dt_log_softmax(self._h, dim))

    def clamp(self, min=None, max=None):
        """The bounds promote with their kinds as in PyTorch (int32 with
        min=1.0 is float32); a missing bound is no bound."""
        if min is None and max is None:
            raise ValueError("clamp: at least one of min and max must not be None")
        if self.device_mesh is None and any(isinstance(b, torch.Tensor)
                                            for b in (min, max)):
            # tensor bounds: PyTorch's clamp is max then min with them, in
            # the 0-d tensors' result dtype (bool with min=tensor(True) works)
            out = self if min is None else _binary("maximum", self, min)
            return out if max is None else _binary("minimum", out, max)
        klo, lo = _scalar.kind_and_value(min if min is not None else max, "clamp")
        khi, hi = _scalar.kind_and_value(max if max is not None else min, "clamp")
        # a missing bound is +-inf of the other's kind: it changes no dtype
        lo = float("-inf") if min is None else lo
        hi = float("inf") if max is None else hi
        a = self
        want = self.dtype
        for b in (min, max):
            if b is not None:
                want = _scalar.result_dtype(want, b)
        if isinstance(min, torch.Tensor) or isinstance(max, torch.Tensor):
            # a 0-d tensor bound of a higher category: PyTorch clamps in its
            # dtype (int32 with min=tensor(1.5, float64) is float64)
            if want != self.dtype and want.is_floating_point:
                a = self.to(want)
        return _wrap(_scalar.dt_clamp_typed(a._h, lo, klo, hi, khi))

    def transpose(self, dim0, dim1):
        return _wrap(_lib.dt_transpose(self._h, dim0, dim1))

    def t(self):
        return self.transpose(0, 1)

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    def permute(self, *dims):
        dims = _sizes(dims)
        return _wrap(_lib.dt_permute(self._h, _lib.int_array(dims, "Tensor.permute: dims"),
                                     len(dims)))

    def view(self, *shape):
        return _wrap(_lib.dt_view(self._h, _lib.shape_of(_sizes(shape))))

    def reshape(self, *shape):
        return _wrap(_lib.dt_reshape(self._h, _lib.shape_of(_sizes(shape))))

    def expand(self, *shape):
        return _wrap(_lib.dt_expand(self._h, _lib.shape_of(_sizes(shape))))

    def squeeze(self, dim=None):
        if dim is None:
            return _wrap(_lib.dt_squeeze_all(self._h))
        return _wrap(_lib.dt_squeeze(self._h, dim))

    def unsqueeze(self, dim):
        return _wrap(_lib.dt_unsqueeze(self._h, dim))

    def flatten(self, start_dim=0, end_dim=-1):
        return _wrap(_lib.dt_flatten(self._h, start_dim, end_dim))

    def to(self, dtype):
        if not isinstance(dtype, torch.dtype):
            raise TypeError("dtorch.Tensor.to: a dtype (devices: redistribute)")
        return _wrap(_lib.dt_cast(self._h, dt_dtype(dtype)))

    def float(self):
        return self.to(torch.float32)

    def double(self):
        return self.to(torch.float64)

    def half(self):
        return self.to(torch.float16)

    def bfloat16(self):
        return self.to(torch.bfloat16)

    def int(self):
        return self.to(torch.int32)

    def long(self):
        return self.to(torch.int64)

    def bool(self):
        return self.to(torch.bool)

    def var(self, dim=None, unbiased=True, keepdim=False):
        from . import _ops
        return _ops.var(self, dim, unbiased=unbiased, keepdim=keepdim)

    @property
    def grad(self):
        g = _lib.dt_grad(self._h)
        return Tensor._from_handle(g) if g else None

    @grad.setter
    def grad(self, g):
        self._set_grad(g)  # _inplace.py: dt_set_grad


def _add_unary(name):
    def method(self):
        return _wrap(getattr(_lib, "dt_" + name)(self._h))
    _errors.named(method, name, f"Tensor.{name}")
    setattr(Tensor, name, method)


# a method TensorMethods defines (with torch's extra arguments) is kept
for _n in _lib.UNARY:
    if _n not in ("zeros_like", "ones_like") and _n not in vars(TensorMethods):
        _add_unary(_n)
Tensor.sigmoid.__doc__ = "1 / (1 + exp(-x))"


def _add_reduce(name):
    def method(self, dim=None, keepdim=False):
        dims, n = _dims_arg(dim)
        return _wrap(getattr(_lib, "dt_" + name)(self._h, dims, n, keepdim))
    _errors.named(method, name, f"Tensor.{name}")
    setattr(Tensor, name, method)


for _n in _lib.REDUCE:
    if _n not in vars(TensorMethods):
        _add_reduce(_n)


# the operators the C base type answers itself (the fast forms) fall back
# to these Python ones for the rest; the Python ones leave the class so
# the C slots are the ones Python calls, and the C base releases handles
_C_OPS = {"add": ("__add__", "__radd__"), "sub": ("__sub__", "__rsub__"),
          "mul": ("__mul__", "__rmul__"), "truediv": ("__truediv__", "__rtruediv__"),
          "floordiv": ("__floordiv__", "__rfloordiv__"), "mod": ("__mod__", "__rmod__"),
          "pow": ("__pow__", "__rpow__"), "matmul": ("__matmul__", "__rmatmul__")}
if _C:
    _fwd = {k: vars(Tensor)[f] for k, (f, _) in _C_OPS.items()}
    _rev = {k: vars(Tensor)[r] for k, (_, r) in _C_OPS.items()}
    _addrs = {n: ctypes.cast(getattr(_lib.lib, n), ctypes.c_void_p).value for n in (
        ["dt_tensor_release", "dt_tensor_dtype", "dt_neg", "dt_abs",
         "dt_floor_divide", "dt_remainder", "dt_matmul"] +
        [f"dt_{n}" for n in _lib.SCALAR] + [f"dt_{n}_scalar_typed" for n in _lib.SCALAR])}
    _C.init(_addrs, Tensor, _fwd, _rev, _errors.raise_last,
            sum(1 << i for i, d in enumerate(DTYPES) if d.is_floating_point),
            _scalar.INT, _scalar.FLOAT)
    for _f in [n for pair in _C_OPS.values() for n in pair] + ["__neg__", "__abs__",
                                                                "__del__"]:
        delattr(Tensor, _f)

    def _from_handle(cls, h, _new=_C.from_handle):
        if cls is Tensor:
            return _new(h)
        obj = Tensor.__new__(cls)
        obj._h = h
        return obj
    Tensor._from_handle = classmethod(_from_handle)
