"""clip_grad_norm_ and clip_grad_value_ (torch.nn.utils.clip_grad).

clip_grad_norm_ follows torch's steps: the norm of each gradient, the
norm of those norms, then every gradient multiplied IN PLACE by
min(max_norm / (total + 1e-6), 1). On DTensors a gradient whose
placements differ from its parameter's (a Partial(sum) gradient of a
Replicate weight: data parallelism) is measured after its reduction to
the parameter's placements, so the norm is the global one, and that
reduced gradient, scaled, becomes the parameter's .grad (a Partial
tensor holds no per-rank value to scale in place).
"""
import math

from ... import _ops
from ..._grad_mode import no_grad
from ..._tensor import Tensor
from ...distributed_spec import Replicate


def _params(parameters):
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def _replicated(t):
    """t (a 0-d value) made Replicate on its mesh (a single-device t as is)."""
    mesh = t.device_mesh
    if mesh is None or all(p.is_replicate() for p in t.placements):
        return t
    return t.redistribute(mesh, [Replicate()] * mesh.ndim)


def _reduced_grad(p, g):
    mesh = g.device_mesh
    if mesh is None or p.device_mesh is None or tuple(g.placements) == tuple(p.placements):
        return g
    return g.redistribute(p.device_mesh, list(p.placements))


def _power_sum(g, norm_type):
    """sum(|g|^p) (or max |g| for inf) as a 0-d value, Replicate."""
    if norm_type == math.inf:
        return _replicated(g.abs().amax())
    if norm_type == -math.inf:
        return _replicated(g.abs().amin())
    if norm_type == 2.0:
        return _replicated((g * g).sum())
    if norm_type == 1.0:
        return _replicated(g.abs().sum())
    return _replicated((g.abs() ** norm_type).sum())


def _combine(parts, norm_type):
    """The total norm from the per-gradient power sums: one dtorch value
    when they share a mesh (or all are single-device), else via floats."""
    reduce_max = norm_type == math.inf
    reduce_min = norm_type == -math.inf
    same = all(_same_place(parts[0], q) for q in parts[1:])
    if same:
        total = parts[0]
        for q in parts[1:]:
            total = (_ops.maximum(total, q) if reduce_max else
                     _ops.minimum(total, q) if reduce_min else total + q)
    else:
        vals = [q.item() for q in parts]
        total = _ops.tensor(max(vals) if reduce_max else min(vals) if reduce_min
                            else math.fsum(vals), dtype=parts[0].dtype)
    if reduce_max or reduce_min:
        return total
    return total.sqrt() if norm_type == 2.0 else total ** (1.0 / norm_type)


def _same_place(a, b):
    ma, mb = a.device_mesh, b.device_mesh
    return (ma is None and mb is None) or (ma is not None and mb is not None and ma == mb)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Scales the gradients of parameters so their total norm_type-norm is
    at most max_norm; returns the total norm before clipping (a 0-d
    tensor). foreach is accepted and ignored (each gradient is one pass)."""
    params = _params(parameters)
    norm_type = float(norm_type)
    max_norm = float(max_norm)
    pairs = [(p, p.grad) for p in params]
    pairs = [(p, g) for p, g in pairs if g is not None]
    if not pairs:
        return _ops.tensor(0.0)
    with no_grad():
        reduced = [_reduced_grad(p, g) for p, g in pairs]
        parts = [_power_sum(r, norm_type) for r in reduced]
        total = _combine(parts, norm_type)
        if error_if_nonfinite:
            t = total.item()
            if math.isnan(t) or math.isinf(t):
                raise RuntimeError(
                    f"The total norm of order {norm_type} for gradients from `parameters` "
                    "is non-finite, so it cannot be clipped. To disable this error and "
                    "scale the gradients by the non-finite norm anyway, set "
                    "`error_if_nonfinite=False`")
        coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for (p, g), r in zip(pairs, reduced):
            c = coef if _same_place(coef, g) else coef.item()
            if r is g:
                g.mul_(c)
            else:
                p.grad = r * c  # a Partial gradient holds no value to write in place
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                   foreach=None):
    """The deprecated name of clip_grad_norm_."""
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient to [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    with no_grad():
        for p in _params(parameters):
            g = p.grad
            if g is not None:
                g.clamp_(-clip_value, clip_value)
