"""optim.Adam and optim.AdamW: torch's single-tensor Adam (L2
weight_decay, or decoupled in AdamW), amsgrad, maximize, on the library's
fused kernels: dt_adam_moment for each moment and dt_adamw_apply for the
update, one pass each, then the in-place write of the parameter.

torch's update  p (1 - lr wd) - lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)
is applied as   decay p - (lr sqrt(bc2) / bc1) m / (sqrt(v) + eps sqrt(bc2)),
the same value (the C AdamW's rewrite), so the kernel needs no bias
correction of its own."""
import math

import torch

from .. import _lib, _ops
from .._tensor import _wrap
from ._sharded import Step
from .optimizer import Optimizer, _check


def _moment(buf, x, beta, squared):
    return _wrap(_lib.dt_adam_moment(buf._h, x._h, float(beta), bool(squared)))


def _apply(p, m, v, step, eps, decay):
    return _wrap(_lib.dt_adamw_apply(p._h, m._h, v._h, float(step), float(eps), float(decay)))


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        name = type(self).__name__
        _check(0.0 <= lr, f"Invalid learning rate: {lr}")
        _check(0.0 <= eps, f"Invalid epsilon value: {eps}")
        _check(0.0 <= betas[0] < 1.0, f"Invalid beta parameter at index 0: {betas[0]}")
        _check(0.0 <= betas[1] < 1.0, f"Invalid beta parameter at index 1: {betas[1]}")
        _check(0.0 <= weight_decay, f"Invalid weight_decay value: {weight_decay}")
        for flag, value in (("capturable", capturable), ("differentiable", differentiable),
                            ("fused", fused)):
            _check(not value, f"{name}: {flag}={value!r} is not supported (the step is the "
                              "library's fused kernels already)")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _step_group(self, group):
        beta1, beta2 = group["betas"]
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        decoupled = group["decoupled_weight_decay"]
        for param in group["params"]:
            s = Step(param)  # sharded over the dp replicas where it applies
            grad, p = s.grad, s.param
            if grad is None:
                continue
            if group["maximize"]:
                grad = -grad
            state = self.state[param]
            if len(state) == 0:
                state["step"] = torch.tensor(0.0)
                state["exp_avg"] = _ops.zeros_like(p)
                state["exp_avg_sq"] = _ops.zeros_like(p)
                if group["amsgrad"]:
                    state["max_exp_avg_sq"] = _ops.zeros_like(p)
            for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
                if key in state:
                    state[key] = s.align(state[key])
            state["step"] += 1
            step = state["step"].item()
            if wd != 0 and not decoupled:
                grad = grad + p * wd
            m = state["exp_avg"] = _moment(state["exp_avg"], grad, beta1, False)
            v = state["exp_avg_sq"] = _moment(state["exp_avg_sq"], grad, beta2, True)
            if group["amsgrad"]:
                v = state["max_exp_avg_sq"] = _ops.maximum(state["max_exp_avg_sq"], v)
            bc1 = 1 - beta1 ** step
            sbc2 = math.sqrt(1 - beta2 ** step)
            decay = 1 - lr * wd if decoupled else 1.0
            s.write(_apply(p, m, v, lr * sbc2 / bc1, eps * sbc2, decay))


class AdamW(Adam):
    """Adam with decoupled weight decay (p *= 1 - lr * weight_decay before
    the update); weight_decay 0.01 by default, as torch's."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
