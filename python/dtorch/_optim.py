"""dtorch's optimisers (dt_sgd_create, dt_adamw_create) with
torch.optim's constructors. The C optimiser keeps an array of parameter
slots and puts each step's new value (a fresh leaf) in its slot; here the
slots belong to the optimiser and, after each step, every parameter
object passed in is pointed at its new value, so ``p`` reads the update
as it does in PyTorch (views taken before the step keep the old value:
dtorch tensors are values)."""
import ctypes

from . import _errors, _lib
from ._autograd import _handles


class _Optimizer:
    _what = "optimizer"

    def _make(self, params, create, opts):
        self._opt = None
        self.params, arr = _handles(params, self._what)
        if not self.params:
            raise ValueError(f"{self._what}: got an empty parameter list")
        # the slots own a reference each (the C optimiser releases the old
        # one when it puts a new value in)
        self._slots = (ctypes.c_void_p * len(self.params))(
            *[_lib.dt_tensor_retain(p._h) for p in self.params])
        self._opt = create(self._slots, len(self.params), ctypes.byref(opts))
        if not self._opt:
            err = _errors.last()
            self._release_slots()
            raise err

    def step(self):
        """One update (dt_optimizer_step); each parameter then holds its
        new value."""
        _errors.check(_lib.dt_optimizer_step(self._opt))
        for p, h in zip(self.params, self._slots):
            if h != p._h:
                old, p._h = p._h, _lib.dt_tensor_retain(h)
                _lib.dt_tensor_release(old)

    def zero_grad(self, set_to_none=True):
        """Drops every parameter's gradient (dt_optimizer_zero_grad)."""
        _lib.dt_optimizer_zero_grad(self._opt)

    @property
    def steps(self):
        """Steps taken (dt_optimizer_steps)."""
        return _lib.dt_optimizer_steps(self._opt)

    def _release_slots(self):
        for i in range(len(self._slots)):
            h, self._slots[i] = self._slots[i], None
            if h:
                _lib.dt_tensor_release(h)

    def __del__(self):
        opt, self._opt = getattr(self, "_opt", None), None
        if _lib is None or _lib.dt_optimizer_free is None:
            return
        if opt:
            _lib.dt_optimizer_free(opt)
        if getattr(self, "_slots", None) is not None:
            self._release_slots()


class SGD(_Optimizer):
    """SGD(params, lr, momentum=0, weight_decay=0, nesterov=False), as
    torch.optim.SGD."""
    _what = "SGD"

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0, nesterov=False):
        o = _lib.SgdOptions()
        o.lr, o.momentum, o.weight_decay = float(lr), float(momentum), float(weight_decay)
        o.nesterov = bool(nesterov)
        self._make(params, _lib.dt_sgd_create, o)


class AdamW(_Optimizer):
    """AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
    weight_decay=0.01), as torch.optim.AdamW (decoupled weight decay)."""
    _what = "AdamW"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        o = _lib.AdamwOptions()
        o.lr, o.eps, o.weight_decay = float(lr), float(eps), float(weight_decay)
        o.beta1, o.beta2 = (float(b) for b in betas)
        self._make(params, _lib.dt_adamw_create, o)


def adam_moment(buf, x, beta, squared=False):
    """beta * buf + (1 - beta) * (x * x if squared else x), one pass
    (dt_adam_moment: the fused kernel under AdamW's step)."""
    from ._tensor import _wrap
    return _wrap(_lib.dt_adam_moment(buf._h, x._h, float(beta), bool(squared)))


def adamw_apply(p, m, v, step, eps, decay):
    """decay * p - step * m / (sqrt(v) + eps), one pass (dt_adamw_apply)."""
    from ._tensor import _wrap
    return _wrap(_lib.dt_adamw_apply(p._h, m._h, v._h, float(step), float(eps), float(decay)))
