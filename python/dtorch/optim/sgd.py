"""optim.SGD: torch's single-tensor SGD (momentum, dampening, nesterov,
L2 weight_decay, maximize), each parameter written in place."""
from .. import _ops
from ._sharded import Step
from .optimizer import Optimizer, _check


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        _check(lr >= 0.0, f"Invalid learning rate: {lr}")
        _check(momentum >= 0.0, f"Invalid momentum value: {momentum}")
        _check(weight_decay >= 0.0, f"Invalid weight_decay value: {weight_decay}")
        _check(not differentiable, f"SGD: differentiable={differentiable!r} is not supported")
        _check(not fused, f"SGD: fused={fused!r} is not supported (each parameter is "
                          "updated in one pass per term)")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def _step_group(self, group):
        lr, momentum = group["lr"], group["momentum"]
        dampening, wd = group["dampening"], group["weight_decay"]
        for param in group["params"]:
            s = Step(param)  # sharded over the dp replicas where it applies
            grad, p = s.grad, s.param
            if grad is None:
                continue
            if group["maximize"]:
                grad = -grad
            if wd != 0:
                grad = grad + p * wd
            if momentum != 0:
                state = self.state[param]
                buf = s.align(state.get("momentum_buffer"))
                if buf is None:
                    buf = _ops.clone(grad)
                else:
                    buf = buf * momentum + (grad if dampening == 0 else grad * (1 - dampening))
                state["momentum_buffer"] = buf
                grad = grad + buf * momentum if group["nesterov"] else buf
            s.write(p - grad * lr)
