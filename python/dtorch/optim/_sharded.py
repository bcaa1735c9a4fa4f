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
narrowing of the rank's local shard); without one, or for a replica's
shard under 32 KiB (DTORCH_SHARDED_OPTIMIZER: 0 off, 1 always, or the
bytes), the replicated step. The state buffers keep
the sharded layout (a loaded state, laid out like its parameter, moves to
it at the next step; full_tensor() reads either)."""
import os

from ..distributed_spec import Partial, Replicate, Shard
from ..nn.parameter import _copy_into
from .optimizer import _grad_like


_MIN_BYTES = 32768  # api/optim.c's ZERO_MIN_BYTES


def _min_bytes():
    """The smallest replica's shard worth the sharded step (C's rule):
    DTORCH_SHARDED_OPTIMIZER 0 off, 1 always, else bytes; 32 KiB unset."""
    e = os.environ.get("DTORCH_SHARDED_OPTIMIZER", "")
    try:
        v = float(e) if e else _MIN_BYTES
    except ValueError:
        return _MIN_BYTES
    if v < 0:
        return _MIN_BYTES
    return float("inf") if v == 0 else 0 if v == 1 else v


def _layout(p, g):
    """The sharded placements for p given its gradient g, or None."""
    mesh = p.device_mesh
    if mesh is None or g.device_mesh is None:
        return None
    pls, gls = list(p.placements), list(g.placements)
    used = {pl.dim for pl in pls if isinstance(pl, Shard)}
    free = [d for d in range(p.dim()) if d not in used]
    k = max(free, key=lambda d: (p.shape[d], -d)) if free else None
    q, any_dp = [], False
    shard_bytes = float(p.element_size() * p.numel())
    for md, x in enumerate(pls):
        if isinstance(x, Shard):
            shard_bytes /= mesh.size(md)
    for md, (x, y) in enumerate(zip(pls, gls)):
        if isinstance(x, Replicate) and isinstance(y, Partial) and y.reduce_op in ("sum", "avg"):
            if k is None or p.shape[k] < mesh.size(md):
                return None
            q.append(Shard(k))
            shard_bytes /= mesh.size(md)
            any_dp = True
        else:  # other dims keep the parameter's placement (the gradient moves to it)
            q.append(x)
    return q if any_dp and shard_bytes >= _min_bytes() else None


class Step:
    """One parameter's step: .grad and .param in the layout the update runs
    in (sharded when it applies), .align(buf) for a state buffer, and
    .write(new) to put the new value into the parameter in place."""

    def __init__(self, p):
        self.p, self.q = p, None
        g = p.grad
        if g is not None and p.device_mesh is not None and g.device_mesh is not None:
            self.q = _layout(p, g)
        if self.q is None:
            self.grad, self.param = _grad_like(p), p
        else:
            mesh = p.device_mesh
            self.grad = g.redistribute(mesh, self.q)
            self.param = p.redistribute(mesh, self.q)

    def align(self, buf):
        """buf laid out as the update's operands (a buffer of the other
        layout: a loaded state, or a step that took the other path)."""
        if buf is None or self.grad is None or self.grad.device_mesh is None:
            return buf
        if getattr(buf, "device_mesh", None) is None:
            return buf
        if list(buf.placements) != list(self.grad.placements):
            return buf.redistribute(self.grad.device_mesh, list(self.grad.placements))
        return buf

    def write(self, new):
        if self.q is not None:
            new = new.redistribute(self.p.device_mesh, list(self.p.placements))
        _copy_into(self.p, new)
