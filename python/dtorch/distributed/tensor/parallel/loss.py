"""loss_parallel (torch.distributed.tensor.parallel.loss): cross_entropy
on logits sharded along the class dim, computed without gathering them.

dtorch's cross_entropy op needs the class dim whole on every rank (its
sharding rule shards positions only), so gathering sharded logits would
cost an all_gather of the whole logits. Inside loss_parallel(),
dtorch.nn.functional.cross_entropy on a DTensor whose class dim is
Shard()ed computes, as torch's loss_parallel does,

    loss_i = logsumexp_c(x_ic) - x_i,target_i

from per-shard pieces: the row max (all_reduce max), the sum of exp
(all_reduce sum) and the target's logit, picked by a one-hot mask made
on each rank's class block (all_reduce sum): three all_reduces of one
value per position, never the logits. The gradient stays sharded like
the logits. label_smoothing is supported (one more all_reduce of the
row sums); class weights are not (ValueError).

The context replaces the module attribute dtorch.nn.functional.
cross_entropy while it is open (calls through F.cross_entropy see it; a
name imported from the module before the block does not).
"""
import contextlib
import threading

import torch

from .... import _ops
from ... import _capi
from ....distributed_spec import Replicate, Shard
from .._api import DTensor, distribute_tensor

__all__ = ["loss_parallel"]

_lock = threading.Lock()
_depth = [0]
_orig = [None]


@contextlib.contextmanager
def loss_parallel():
    """with loss_parallel(): loss = F.cross_entropy(logits, target);
    loss.backward()"""
    from ....nn import functional as F
    with _lock:
        if _depth[0] == 0:
            _orig[0] = F.cross_entropy
            F.cross_entropy = _cross_entropy
        _depth[0] += 1
    try:
        yield
    finally:
        with _lock:
            _depth[0] -= 1
            if _depth[0] == 0:
                F.cross_entropy = _orig[0]


def _class_shard_dim(x):
    """The mesh dim on which x's class dim (1, or 0 for 1-d logits) is
    Shard()ed, or None."""
    cdim = 1 if x.ndim >= 2 else 0
    for d, p in enumerate(x.placements):
        if p.is_shard() and p.dim == cdim:
            return d
    return None


def _cross_entropy(input, target, weight=None, size_average=None,
                   ignore_index=-100, reduce=None, reduction="mean",
                   label_smoothing=0.0):
    if not isinstance(input, DTensor) or _class_shard_dim(input) is None:
        return _orig[0](input, target, weight=weight, size_average=size_average,
                        ignore_index=ignore_index, reduce=reduce,
                        reduction=reduction, label_smoothing=label_smoothing)
    fn = "loss_parallel cross_entropy"
    if weight is not None:
        raise ValueError(f"{fn}: class weights are not supported on class-sharded "
                         f"logits")
    if size_average is not None or reduce is not None:
        raise ValueError(f"{fn}: size_average / reduce are deprecated; use reduction")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{fn}: reduction={reduction!r} is not 'mean', 'sum' or 'none'")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{fn}: label_smoothing={label_smoothing!r} must be in [0, 1]")
    if target.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"{fn}: class-index targets only (int64 / int32), got "
                         f"{target.dtype}")
    return _sharded_ce(input, _target_on(input, target, fn), ignore_index,
                       reduction, label_smoothing)


def _target_on(x, target, fn):
    """target as a DTensor on x's mesh: a plain one is the global targets
    (Replicate()); its position dims must match x's."""
    cdim = 1 if x.ndim >= 2 else 0
    want = tuple(s for i, s in enumerate(x.shape) if i != cdim)
    if tuple(target.shape) != want:
        raise ValueError(f"{fn}: target shape {tuple(target.shape)} does not match "
                         f"logits {tuple(x.shape)} (expected {want})")
    if not isinstance(target, DTensor):
        # integer targets carry no gradient: a host copy into every rank
        host = target.to_torch() if hasattr(target, "to_torch") else target
        target = distribute_tensor(host, x.device_mesh,
                                   [Replicate()] * x.device_mesh.ndim)
    return target


def _reduce_to(t, dim_index, mesh):
    """t with mesh dim `dim_index` made Replicate() (an all_reduce of its
    Partial)."""
    pl = list(t.placements)
    pl[dim_index] = Replicate()
    return t.redistribute(mesh, pl)


def _sharded_ce(x, target, ignore_index, reduction, smoothing):
    mesh = x.device_mesh
    md = _class_shard_dim(x)
    cdim = 1 if x.ndim >= 2 else 0
    ncls = x.shape[cdim]
    # the row max only steadies exp: no gradient flows through it
    was = _capi.dt_set_grad_enabled(False)
    try:
        m = _reduce_to(x.amax(cdim, keepdim=True), md, mesh)
    finally:
        _capi.dt_set_grad_enabled(was)
    z = x - m
    lse = _reduce_to(z.exp().sum(cdim), md, mesh).log()
    # one-hot of the targets on each rank's class block
    pl = [Replicate()] * mesh.ndim
    pl[md] = Shard(0)
    classes = _ops.arange(ncls, device_mesh=mesh, placements=pl)
    if cdim == 1:
        classes = classes.unsqueeze(0)
        for _ in range(x.ndim - 2):
            classes = classes.unsqueeze(-1)
    onehot = (target.unsqueeze(cdim) == classes).to(x.dtype)
    picked = _reduce_to((z * onehot).sum(cdim), md, mesh)
    loss = lse - picked
    if smoothing:
        mean_z = _reduce_to(z.sum(cdim), md, mesh) / float(ncls)
        loss = loss * (1.0 - smoothing) + (lse - mean_z) * smoothing
    keep = (target != ignore_index).to(x.dtype)
    loss = loss * keep
    if reduction == "none":
        return loss
    total = loss.sum()
    if reduction == "sum":
        return total
    return total / keep.sum()
