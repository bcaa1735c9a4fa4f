"""dtorch.Tensor's in-place methods (add_, mul_, zero_, fill_, copy_,
normal_, uniform_, clamp_, masked_fill_, ...) and the autograd switches on
a tensor (requires_grad_, detach, .data). docs/inplace.md says how an
in-place change reaches every view of the storage and what autograd
checks.

Every method computes its new value out of place with dtorch's ops (grad
mode off: the value is not part of any graph) and writes it with
dt_copy_, which writes the storage through the tensor's view in stream
order, bumps the storage's version and refuses what PyTorch refuses (a
leaf that requires grad, with grad mode on). In-place ops that PyTorch
would record in the autograd graph (self or an argument requiring grad,
grad mode on) are refused with a clear error: dtorch does not rebase
graphs."""
import ctypes
import numbers

import torch

from . import _errors, _lib, _scalar

# the C functions are declared in _lib.py (in-place writes, grad mode)
_L = _lib


from ._grad_mode import no_grad  # noqa: E402  (the methods compute with grad off)


def _wrap(cls, ptr):
    return cls._from_handle(_errors.handle(ptr))


def _plain():
    """dtorch.Tensor, the class of the tensors ops make (a Parameter's
    results are no Parameters, as in torch)."""
    from ._tensor import Tensor  # (imported late: _tensor imports us)
    return Tensor


def _needs_grad(x):
    return getattr(x, "requires_grad", False) is True


def _guard(self, name, *others):
    """What PyTorch would record in its graph, refused here: dtorch's
    in-place methods do not rebase autograd history."""
    if not _L.dt_grad_enabled():
        return
    if self.requires_grad:
        if self.grad_fn is None:
            raise _errors.InvalidArgumentError(
                f"{name}: a leaf Variable that requires grad is being used "
                f"in an in-place operation; write it under no_grad()",
                "DT_ERR_INVALID_ARGUMENT")
        raise _errors.UnsupportedError(
            f"{name}: self was made by {self.grad_fn} and requires grad: "
            f"dtorch does not record in-place ops in autograd; compute the "
            f"value out of place, or write under no_grad()",
            "DT_ERR_UNSUPPORTED")
    for o in others:
        if _needs_grad(o):
            raise _errors.UnsupportedError(
                f"{name}: an argument requires grad and grad mode is on: "
                f"dtorch does not record in-place ops in autograd; pass "
                f"its detach()", "DT_ERR_UNSUPPORTED")


def _src(self, value, name):
    """value as a dtorch tensor that dt_copy_ can write into self: a
    number as self's shape, device and placements; a torch.Tensor on
    self's mesh and placements (or the current runtime's cpu:0)."""
    from ._tensor import Tensor as cls  # (imported late: _tensor imports us)
    if isinstance(value, cls):  # a Parameter's source may be a plain Tensor
        return value
    if isinstance(value, numbers.Number):
        if not isinstance(value, numbers.Real) and not _scalar._is_bool(value):
            raise TypeError(f"dtorch: {name}: the complex value {value!r} cannot be "
                            f"written into a {self.dtype} tensor")
        if isinstance(value, numbers.Integral) and not self.dtype.is_floating_point:
            # an integer past 2**53 is no double: refused, never rounded
            _scalar.kind_and_value(value, f"{type(self).__name__}.{name}")
        return _wrap(cls, _lib.dt_full_like(self._h, float(value)))
    if isinstance(value, torch.Tensor):
        if self.is_dtensor():
            return cls(value, device_mesh=self.device_mesh,
                       placements=self.placements)
        return cls(value)
    raise TypeError(f"dtorch: {name}: expected a dtorch.Tensor, a "
                    f"torch.Tensor or a number, got {type(value).__name__}")


class InplaceMethods:
    """Mixed into dtorch.Tensor (python/dtorch/_tensor.py)."""
    __slots__ = ()

    # ---- the write every method ends in
    def copy_(self, src, non_blocking=False):
        """Writes src's values (broadcast to self's shape, cast to its
        dtype; a DTensor src redistributed to self's placements) into
        self's storage through self's view; returns self."""
        del non_blocking  # every write is issued without waiting
        _guard(self, "copy_", src)
        s = _src(self, src, "copy_")
        _errors.check(_L.dt_copy_(self._h, s._h))
        return self

    def _write(self, name, compute, *others, cast=False):
        """self.copy_(compute()) with compute run under grad mode off; the
        value's dtype must cast to self's as torch's in-place rule says
        (a float result into an int tensor is refused), unless `cast`
        (fill_: any value is converted)."""
        _guard(self, name, *others)
        with no_grad():
            value = compute()
            if not cast and value.dtype != self.dtype and \
                    not torch.can_cast(value.dtype, self.dtype):
                raise _errors.InvalidArgumentError(
                    f"{type(self).__name__}.{name}: result type {value.dtype} can't be "
                    f"cast to the desired output type {self.dtype} (an in-place op "
                    f"keeps self's dtype; compute out of place)", "DT_ERR_DTYPE")
            _errors.check(_L.dt_copy_(self._h, value._h))
        return self

    def zero_(self):
        return self.fill_(0)

    def fill_(self, value):
        if isinstance(value, InplaceMethods):
            if value.dim() != 0:
                raise _errors.InvalidArgumentError(
                    f"{type(self).__name__}.fill_: fill_ only supports 0-dimension value "
                    f"tensor but got tensor with {value.dim()} dimensions",
                    "DT_ERR_SHAPE")
            return self._write("fill_", lambda: value, value, cast=True)
        if not isinstance(value, numbers.Number):
            raise TypeError(f"dtorch: fill_: value must be a number or a "
                            f"0-d tensor, got {type(value).__name__}")
        return self._write("fill_", lambda: _src(self, value, "fill_"), cast=True)

    def add_(self, other, alpha=1):
        return self._write("add_", lambda: self + other * alpha
                           if alpha != 1 else self + other, other)

    def sub_(self, other, alpha=1):
        return self._write("sub_", lambda: self - other * alpha
                           if alpha != 1 else self - other, other)

    def mul_(self, other):
        return self._write("mul_", lambda: self * other, other)

    def div_(self, other):
        return self._write("div_", lambda: self / other, other)

    def clamp_(self, min=None, max=None):
        return self._write("clamp_", lambda: self.clamp(min, max))

    def masked_fill_(self, mask, value):
        return self._write("masked_fill_", lambda: _wrap(
            _plain(), _lib.dt_masked_fill(self._h, mask._h, float(value))), mask)

    def addcmul_(self, tensor1, tensor2, value=1):
        return self._write("addcmul_", lambda: self + tensor1 * tensor2 * value
                           if value != 1 else self + tensor1 * tensor2,
                           tensor1, tensor2)

    def addcdiv_(self, tensor1, tensor2, value=1):
        return self._write("addcdiv_", lambda: self + tensor1 / tensor2 * value
                           if value != 1 else self + tensor1 / tensor2,
                           tensor1, tensor2)

    def lerp_(self, end, weight):
        return self._write("lerp_", lambda: self + (end - self) * weight,
                           end, weight)

    def sqrt_(self):
        return self._write("sqrt_", self.sqrt)

    def exp_(self):
        return self._write("exp_", self.exp)

    def _draw(self, name, factory, generator):
        if generator is not None:
            raise NotImplementedError(
                f"dtorch: {name}: generator= is not supported; dtorch draws "
                f"from its counter-based stream (dtorch.manual_seed)")
        o = _lib.TensorOptions()
        o.dtype = _lib.dt_tensor_dtype(self._h)
        mesh = self.device_mesh
        if mesh is not None:
            from .distributed_spec import _placements_array
            o.mesh = mesh._h
            pl = _placements_array(self.placements, mesh.ndim)
            o.placements = pl
        shape = _lib.shape_of(self.shape)
        return _wrap(_plain(), factory(shape, ctypes.byref(o)))

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        """Fills self with samples of N(mean, std^2) from dtorch's stream
        (not torch's: same distribution, other values)."""
        return self._write("normal_", lambda: self._draw(
            "normal_", _lib.dt_randn, generator) * float(std) + float(mean))

    def uniform_(self, a=0.0, b=1.0, *, generator=None):
        """Fills self with samples of U[a, b) from dtorch's stream."""
        return self._write("uniform_", lambda: self._draw(
            "uniform_", _lib.dt_rand, generator) * float(b - a) + float(a))

    # ---- Python's augmented assignment: in place, as PyTorch's
    def _augmented(self, name, other, out_of_place):
        if _L.dt_grad_enabled() and self.requires_grad \
                and self.grad_fn is not None:
            # x += y inside a forward: the graph needs the new node, which
            # an out-of-place result carries (views of x keep the old value)
            return out_of_place()
        return getattr(self, name)(other)

    def __iadd__(self, other):
        return self._augmented("add_", other, lambda: self + other)

    def __isub__(self, other):
        return self._augmented("sub_", other, lambda: self - other)

    def __imul__(self, other):
        return self._augmented("mul_", other, lambda: self * other)

    def __itruediv__(self, other):
        return self._augmented("div_", other, lambda: self / other)

    def __setitem__(self, idx, value):
        """self[idx] = value: copy_ into the view self[idx] (ints, slices
        and None); a DTensor's views are copies, so dt_copy_ refuses them."""
        self[idx].copy_(value)

    # ---- autograd switches
    def requires_grad_(self, requires_grad=True):
        _errors.check(_L.dt_tensor_set_requires_grad(self._h, bool(requires_grad)))
        return self

    def detach(self):
        """A new tensor on self's storage that requires no grad (a plain
        Tensor, a Parameter's too, as torch's)."""
        return _wrap(_plain(), _L.dt_detach(self._h))

    @property
    def grad_fn(self):
        """The name of the op that made self ("mul"), None for a leaf."""
        n = _L.dt_tensor_grad_fn(self._h)
        return n.decode() if n else None

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def data(self):
        """A detached alias of self: writes through it change self."""
        return self.detach()

    @data.setter
    def data(self, value):
        """self takes value's storage (p.data = t): keeps its own
        requires_grad and, where shapes allow, its gradient."""
        if not isinstance(value, InplaceMethods):
            raise TypeError(f"dtorch: .data: expected a dtorch.Tensor, got "
                            f"{type(value).__name__}")
        if self.grad_fn is not None:
            raise _errors.InvalidArgumentError(
                ".data: only a leaf's data can be replaced", "DT_ERR_INVALID_ARGUMENT")
        h = _errors.handle(_L.dt_detach(value._h))
        try:
            if self.requires_grad:
                _errors.check(_L.dt_tensor_set_requires_grad(h, True))
            g = _lib.dt_grad(self._h)
            if g:
                if _L.dt_set_grad(h, g) != 0:
                    _lib.dt_clear_error()  # another shape: the grad goes
                _lib.dt_tensor_release(g)
        except BaseException:
            _lib.dt_tensor_release(h)
            raise
        old, self._h = self._h, h
        _lib.dt_tensor_release(old)

    def _set_grad(self, g):
        """.grad = g (None clears), for the setter in _tensor.py."""
        if g is not None and not isinstance(g, InplaceMethods):
            raise TypeError(f"dtorch: .grad: expected a dtorch.Tensor or "
                            f"None, got {type(g).__name__}")
        _errors.check(_L.dt_set_grad(self._h, None if g is None else g._h))

    @property
    def _version(self):
        """The storage's version: +1 per in-place write through any view."""
        return _L.dt_tensor_version(self._h)
