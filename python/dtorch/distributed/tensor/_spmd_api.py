"""DTensor.from_local, distribute_tensor and the parameters of
parallelize_module as a rank answers them inside an SPMD function
(python -m dtorch.run): each rank holds only its own shards, as under
torchrun (_api.py's controller forms hold every rank's).

- from_local(local, mesh, placements): local is this rank's shard
  (dt_dtensor_from_local; differentiable, placements are claims kept as
  given, Partial included).
- distribute_tensor(tensor, mesh, placements, src_data_rank=0): tensor is
  this rank's copy of the global value; rank src_data_rank's copy is
  broadcast over the mesh first (None: each rank's own is used, as
  torch's), then this rank keeps its box. As torch's, the result is a
  new leaf (requires_grad as the input's).
"""
import numbers

import torch

from ... import _errors, _lib, _spmd
from ..._tensor import Tensor


def active():
    """Whether the calling thread runs an SPMD function."""
    return _lib.dt_spmd_rank() >= 0


def _local(t, fn):
    """t as a dtorch.Tensor on this rank (a torch.Tensor is copied in)."""
    if isinstance(t, Tensor):
        if t.is_dtensor():
            raise TypeError(f"{fn}: the tensor is already a DTensor")
        return t
    if isinstance(t, torch.Tensor):
        return Tensor(t.detach())
    raise TypeError(f"{fn}: {type(t).__name__} is not a torch.Tensor or a "
                    f"dtorch.Tensor")


def _replicate_from_first(t, mesh, placements):
    """run_check: along each mesh dim whose placement is Replicate, every
    member takes the value of the member at coordinate 0 (torch
    broadcasts the Replicate locals from there)."""
    for d, p in enumerate(placements):
        if p.is_replicate():
            ranks = mesh.get_group(d).ranks
            _spmd.user_call_site()
            t = _spmd.broadcast(t, ranks[0], list(ranks))
    return t


def from_local(local_tensor, mesh, placements, run_check, shape, stride, fn):
    from ._api import _placements
    if isinstance(local_tensor, (list, tuple)):
        raise TypeError(f"{fn}: inside an SPMD function each rank passes its own "
                        f"local tensor, not a list of them")
    t = _local(local_tensor, fn)
    pl = _placements(placements, mesh, t.ndim, fn)
    if run_check:
        t = _replicate_from_first(t, mesh, pl)
    if stride is not None and shape is None:
        raise ValueError(f"{fn}: stride given without shape")
    if stride is not None:
        want = torch.empty(tuple(shape)).stride()
        if tuple(stride) != want:
            raise ValueError(f"{fn}: stride {tuple(stride)}: dtorch's DTensors are "
                             f"contiguous, stride {want}")
    return _spmd.dtensor_from_local(t, mesh, list(pl), shape)


def distribute_tensor(tensor, mesh, placements, src_data_rank, fn):
    from ._api import _placements
    if src_data_rank is not None and not (
            isinstance(src_data_rank, numbers.Integral) and
            0 <= src_data_rank < mesh.size()):
        raise ValueError(f"{fn}: src_data_rank {src_data_rank!r} is not a rank of "
                         f"the {mesh.size()}-rank mesh (or None)")
    if isinstance(tensor, Tensor) and tensor.is_dtensor():
        pl = _placements(placements, mesh, tensor.ndim, fn)
        if tensor.device_mesh == mesh and tuple(tensor.placements) == pl:
            return tensor
        raise ValueError(f"{fn}: the tensor is already a DTensor on "
                         f"{tensor.device_mesh!r} with {list(tensor.placements)}; "
                         f"use redistribute to move it to {list(pl)}")
    t = _local(tensor, fn)
    wants_grad = bool(getattr(tensor, "requires_grad", False))
    pl = _placements(placements, mesh, t.ndim, fn)
    t = t.detach()
    if src_data_rank is not None:
        root = int(mesh.mesh.flatten()[src_data_rank])
        _spmd.user_call_site()
        t = _spmd.broadcast(t, root, mesh)
    out = t.redistribute(mesh, list(pl))
    if wants_grad:
        out = out.detach()
        _errors.check(_lib.dt_tensor_set_requires_grad(out._h, True))
    return out

