"""The data-parallel step sharded over the replicas (ZeRO stage 1), as the
C optimisers take it (api/optim.c): a DTensor parameter Replicate on a
mesh dim where its gradient is Partial(sum|avg) (data parallelism) is
updated one shard per replica. The gradient is reduce-scattered over that
dim instead of all-reduced, each replica updates its 1/n of the parameter
with its 1/n of the state, and the new shards are all-gathered back into
the parameter (in place). The same bytes move as for an all-reduce, the
optimiser's work and state per rank are 1/n, and the values are bitwise
the replicated step's (a reduce-scatter's element is the root of the
all-reduce's pairwise tree; the update is elementwise). The shard dim is
the largest tensor dim no mesh dim shards (so a replica's shard is a
narrowing of the rank's local shard); where that narrowing is strided and
one mesh dim shards the parameter along dim 0 evenly, the step runs on
the view of the shards as [n, numel / n] (Tensor.view_shards: each rank's
shard one row, its replica's shard a contiguous piece); without one, or for a replica's
shard under 8 KiB (DTORCH_SHARDED_OPTIMIZER: 0 off, 1 always, or the
bytes), the replicated step. The state buffers keep
the sharded layout (a loaded state, laid out like its parameter, moves to
it at the next step; full_tensor() reads either); state_dict() gives a
flat step's entries laid out like their parameter (param_layout)."""
import os

from ..distributed_spec import Partial, Replicate, Shard
from ..nn.parameter import _copy_into
from .optimizer import _grad_like


_MIN_BYTES = 8192  # api/optim.c's ZERO_MIN_BYTES


def _min_bytes():
    """The smallest replica's shard worth the sharded step (C's rule):
    DTORCH_SHARDED_OPTIMIZER 0 off, 1 always, else bytes; 8 KiB unset."""
    e = os.environ.get("DTORCH_SHARDED_OPTIMIZER", "")
    try:
        v = float(e) if e else _MIN_BYTES
    except ValueError:
        return _MIN_BYTES
    if v < 0:
        return _MIN_BYTES
    return float("inf") if v == 0 else 0 if v == 1 else v


def _zero_q(mesh, shape, pls, gls, es):
    """(q, k): the sharded placements for a parameter of shape with
    placements pls whose gradient has gls, and the shard dim; None when
    the step stays replicated (C's zero_q)."""
    used = {pl.dim for pl in pls if isinstance(pl, Shard)}
    free = [d for d in range(len(shape)) if d not in used]
    k = max(free, key=lambda d: (shape[d], -d)) if free else None
    q, any_dp = [], False
    shard_bytes = float(es)
    for n in shape:
        shard_bytes *= n
    for md, x in enumerate(pls):
        if isinstance(x, Shard):
            shard_bytes /= mesh.size(md)
    for md, (x, y) in enumerate(zip(pls, gls)):
        if isinstance(x, Replicate) and isinstance(y, Partial) and y.reduce_op in ("sum", "avg"):
            if k is None or shape[k] < mesh.size(md):
                return None
            q.append(Shard(k))
            shard_bytes /= mesh.size(md)
            any_dp = True
        else:  # other dims keep the parameter's placement (the gradient moves to it)
            q.append(x)
    return (q, k) if any_dp and shard_bytes >= _min_bytes() else None


def _flat_mesh_dim(p):
    """The one mesh dim that shards p, if it shards dim 0 evenly; else None."""
    dims = [md for md, pl in enumerate(p.placements) if isinstance(pl, Shard)]
    if len(dims) != 1 or p.placements[dims[0]].dim != 0 or p.dim() < 2:
        return None
    return dims[0] if p.shape[0] % p.device_mesh.size(dims[0]) == 0 else None


def _layout(p, g):
    """(q, flat shape or None) for p given its gradient g, or None: as C's
    zero_layout, the step runs on the view [n, numel / n] of the shards
    (Tensor.view_shards) when its narrowing along k would be strided."""
    mesh = p.device_mesh
    if mesh is None or g.device_mesh is None:
        return None
    pls, gls, es = list(p.placements), list(g.placements), p.element_size()
    got = _zero_q(mesh, tuple(p.shape), pls, gls, es)
    if got is None:
        return None
    q, k = got
    md = _flat_mesh_dim(p)
    if k == 0 or md is None:
        return q, None
    n = mesh.size(md)
    flat = (n, p.numel() // n)
    got = _zero_q(mesh, flat, pls, gls, es)
    return (got[0], flat) if got else (q, None)


def param_layout(value, param):
    """A state entry of a flat sharded step laid out like its parameter
    (a state_dict's entry; other entries as they are)."""
    if getattr(value, "device_mesh", None) is None or param.device_mesh is None \
            or tuple(value.shape) == tuple(param.shape):
        return value
    base = list(param.placements)
    return value.redistribute(param.device_mesh, base).view_shards(tuple(param.shape), base)


class Step:
    """One parameter's step: .grad and .param in the layout the update runs
    in (sharded when it applies), .align(buf) for a state buffer, and
    .write(new) to put the new value into the parameter in place."""

    def __init__(self, p):
        self.p, self.q, self.flat = p, None, None
        g = p.grad
        if g is not None and p.device_mesh is not None and g.device_mesh is not None:
            got = _layout(p, g)
            if got is not None:
                self.q, self.flat = got
        if self.q is None:
            self.grad, self.param = _grad_like(p), p
        else:
            mesh = p.device_mesh
            if self.flat is not None:
                g = g.view_shards(self.flat, list(g.placements))
                p = p.view_shards(self.flat, list(p.placements))
            self.grad = g.redistribute(mesh, self.q)
            self.param = p.redistribute(mesh, self.q)

    def align(self, buf):
        """buf laid out as the update's operands (a buffer of the other
        layout: a loaded state, or a step that took the other path); a
        buffer of the other shape moves through the parameter's
        placements, valid on both shapes."""
        if buf is None or self.grad is None or self.grad.device_mesh is None:
            return buf
        if getattr(buf, "device_mesh", None) is None:
            return buf
        mesh = self.grad.device_mesh
        if tuple(buf.shape) != tuple(self.grad.shape):
            base = list(self.p.placements)
            buf = buf.redistribute(mesh, base).view_shards(tuple(self.grad.shape), base)
        if list(buf.placements) != list(self.grad.placements):
            return buf.redistribute(mesh, list(self.grad.placements))
        return buf

    def write(self, new):
        if self.q is not None:
            new = new.redistribute(self.p.device_mesh, list(self.p.placements))
            if self.flat is not None:
                new = new.view_shards(tuple(self.p.shape), list(self.p.placements))
        _copy_into(self.p, new)
