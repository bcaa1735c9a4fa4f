"""nn.Parameter: a dtorch.Tensor subclass that Module registers as a
parameter, and nn.Buffer, the marker that registers a buffer.

Parameter(data) is a new leaf that shares data's storage (an in-place
write to one is seen by the other, as torch's Parameter(t) shares t's
memory) and requires grad unless requires_grad=False; data itself is left
as it was. A DTensor stays a DTensor with its mesh and placements.
"""
import weakref

import torch

from .. import _errors, _inplace, _lib  # noqa: F401  (_inplace declares dt_detach)
from .._tensor import Tensor, _picklable


def _leaf_alias(data, requires_grad):
    """A new leaf handle on data's storage (dt_detach), requiring grad or
    not; data itself is unchanged."""
    h = _errors.handle(_lib.lib.dt_detach(data._h))
    if requires_grad:
        st = _lib.dt_tensor_set_requires_grad(h, True)
        if st != 0:
            _lib.dt_tensor_release(h)
            _errors.check(st)
    return h


def _copy_into(dst, src):
    """dst.copy_(src) through a plain-Tensor alias of dst's storage: the
    in-place methods take a src of dst's own class (a Parameter's copy_
    would refuse a plain Tensor)."""
    if type(dst) is not Tensor:
        Tensor._from_handle(_leaf_alias(dst, False)).copy_(src)
    else:
        dst.copy_(src)
    return dst


def _as_dtorch(data, where):
    if isinstance(data, Tensor):
        return data
    if isinstance(data, torch.Tensor):
        return Tensor(data)
    raise TypeError(f"{where}: data must be a dtorch.Tensor or a torch.Tensor, "
                    f"got {type(data).__name__}")


class Parameter(Tensor):
    """Parameter(data=None, requires_grad=True): data (an empty tensor when
    None) as a module parameter."""

    def __new__(cls, data=None, requires_grad=True):
        from .._ops import empty
        data = empty(0) if data is None else _as_dtorch(data, "nn.Parameter")
        obj = Tensor.__new__(cls)
        obj._h = None
        obj._h = _leaf_alias(data, bool(requires_grad))
        return obj

    def __init__(self, data=None, requires_grad=True):
        pass  # __new__ made the handle; Tensor.__init__ would copy data

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __copy__(self):
        # torch's copy.copy: a Parameter on the same storage
        return Parameter(self, self.requires_grad)

    def __reduce_ex__(self, proto):
        _picklable(self)
        return (Parameter, (self.to_torch(), self.requires_grad))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        from .._ops import clone
        with_grad = self.requires_grad
        was = _lib.dt_set_grad_enabled(False)
        try:
            copy = clone(self)
        finally:
            _lib.dt_set_grad_enabled(was)
        result = Parameter(copy, with_grad)
        memo[id(self)] = result
        return result


# the tensors nn.Buffer made: id -> (a weak reference to it, persistent).
# A dtorch.Tensor has no __dict__ to carry torch's `_is_buffer` and
# `persistent` attributes, so the mark lives here; an entry goes with its
# tensor (the reference's callback).
_BUFFER_MARKS = {}


def _mark_buffer(t, persistent):
    key = id(t)

    def gone(ref, key=key):
        if _BUFFER_MARKS.get(key, (None,))[0] is ref:
            del _BUFFER_MARKS[key]
    _BUFFER_MARKS[key] = (weakref.ref(t, gone), bool(persistent))


def buffer_persistent(t):
    """persistent= of the nn.Buffer that made t, or None if none did"""
    e = _BUFFER_MARKS.get(id(t))
    return e[1] if e is not None and e[0]() is t else None


class _BufferMeta(type):
    # isinstance(t, nn.Buffer) for the plain tensors nn.Buffer returns, as
    # torch's _BufferMeta answers from their `_is_buffer` mark
    def __instancecheck__(cls, obj):
        return buffer_persistent(obj) is not None or super().__instancecheck__(obj)


class Buffer(Tensor, metaclass=_BufferMeta):
    """Buffer(data, *, persistent=True): a plain dtorch.Tensor, detached
    from data (the same storage: writes show in both; requires_grad as
    data's), marked so that assigning it to a Module attribute registers it
    as a buffer, persistent or not, and isinstance(t, nn.Buffer) holds — as
    torch.nn.Buffer returns a marked plain Tensor, and the module holds
    that tensor itself."""

    def __new__(cls, data=None, *, persistent=True):
        from .._ops import empty
        data = empty(0) if data is None else _as_dtorch(data, "nn.Buffer")
        t = Tensor._from_handle(_leaf_alias(data, data.requires_grad))
        _mark_buffer(t, persistent)
        return t
