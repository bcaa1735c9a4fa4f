"""DTensor, distribute_tensor, distribute_module and from_local for one
controller (torch.distributed.tensor._api's names).

A dtorch DTensor is a dtorch.Tensor with a device mesh: its value is
global and the controller holds every rank's shard. ``DTensor`` is the
name isinstance checks against (true exactly for tensors with a mesh).
"""
import numbers

import torch

from ... import _ops
from ..._tensor import Tensor
from . import _spmd_api
from ...distributed_spec import DeviceMesh, Placement, Replicate, \
    Shard, current_mesh


class _DTensorMeta(type):
    """isinstance(x, DTensor): x is a dtorch.Tensor on a mesh."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.is_dtensor()


class DTensor(metaclass=_DTensorMeta):
    """The type of dtorch's distributed tensors: isinstance(x, DTensor) is
    true exactly for a dtorch.Tensor with a device mesh (type(x) stays
    dtorch.Tensor). Make one with distribute_tensor, DTensor.from_local,
    the factories of this module, or a redistribute of a single-device
    tensor; DTensor(...) itself is refused, as torch's constructor is
    private."""

    def __new__(cls, *args, **kwargs):
        raise TypeError("DTensor(...): make a DTensor with distribute_tensor, "
                        "DTensor.from_local or dtorch.distributed.tensor's "
                        "factories")

    @staticmethod
    def from_local(local_tensor, device_mesh=None, placements=None, *,
                   run_check=False, shape=None, stride=None):
        return from_local(local_tensor, device_mesh, placements,
                          run_check=run_check, shape=shape, stride=stride)


def _mesh_or_current(device_mesh, fn):
    if device_mesh is None:
        mesh = current_mesh()
        if mesh is None:
            raise ValueError(f"{fn}: no device_mesh given and no `with mesh:` "
                             f"block is open")
        return mesh
    if not isinstance(device_mesh, DeviceMesh):
        raise TypeError(f"{fn}: device_mesh {device_mesh!r} is not a DeviceMesh")
    return device_mesh


def _placements(placements, mesh, ndim, fn):
    """placements as a tuple with Shard dims made non-negative (torch
    normalises Shard(-1) the same way); None: all Replicate()."""
    if placements is None:
        return (Replicate(),) * mesh.ndim
    if isinstance(placements, Placement):
        placements = (placements,)
    placements = tuple(placements)
    if len(placements) != mesh.ndim:
        raise ValueError(f"{fn}: {len(placements)} placements {list(placements)} "
                         f"for a {mesh.ndim}-d mesh")
    out = []
    for p in placements:
        if not isinstance(p, Placement):
            raise TypeError(f"{fn}: placement {p!r} is not a Shard, Replicate or "
                            f"Partial")
        if p.is_shard():
            if not -ndim <= p.dim < ndim:
                raise ValueError(f"{fn}: {p!r} is out of range for a {ndim}-d "
                                 f"tensor")
            p = Shard(p.dim % ndim)
        out.append(p)
    return tuple(out)


def _as_dtorch(t, fn):
    if isinstance(t, Tensor):
        return t
    if isinstance(t, torch.Tensor):
        return Tensor(t)
    raise TypeError(f"{fn}: {type(t).__name__} is not a torch.Tensor or a "
                    f"dtorch.Tensor")


def distribute_tensor(tensor, device_mesh=None, placements=None, *,
                      src_data_rank=0):
    """The global value `tensor` (a torch.Tensor or a single-device
    dtorch.Tensor) laid out on device_mesh (the open `with mesh:` one when
    None) by placements (all Replicate() when None). From a dtorch.Tensor
    the result is differentiable (a redistribute); a torch.Tensor's
    value is copied into each rank's box. src_data_rank: torch
    takes the value from that rank; the controller has one value, so it is
    only checked (an int rank of the mesh, or None)."""
    fn = "distribute_tensor"
    mesh = _mesh_or_current(device_mesh, fn)
    if _spmd_api.active():
        return _spmd_api.distribute_tensor(tensor, mesh, placements, src_data_rank, fn)
    if src_data_rank is not None and not (
            isinstance(src_data_rank, numbers.Integral) and
            0 <= src_data_rank < mesh.size()):
        raise ValueError(f"{fn}: src_data_rank {src_data_rank!r} is not a rank of "
                         f"the {mesh.size()}-rank mesh (or None)")
    if isinstance(tensor, torch.Tensor):
        pl = _placements(placements, mesh, tensor.ndim, fn)
        return Tensor(tensor, device_mesh=mesh, placements=list(pl))
    t = _as_dtorch(tensor, fn)
    pl = _placements(placements, mesh, t.ndim, fn)
    if t.is_dtensor():
        if t.device_mesh == mesh and tuple(t.placements) == pl:
            return t
        raise ValueError(f"{fn}: the tensor is already a DTensor on "
                         f"{t.device_mesh!r} with {list(t.placements)}; use "
                         f"redistribute to move it to {list(pl)}")
    return t.redistribute(mesh, list(pl))


# ---- from_local: per-rank locals into one global value
def _combine(blocks, placement, run_check):
    """The value of one mesh dim's members (blocks, in coordinate order;
    all torch.Tensors or all dtorch.Tensors) under placement: Shard
    concatenates, Replicate is any one of them (equal when run_check),
    Partial reduces."""
    lib = torch if isinstance(blocks[0], torch.Tensor) else _ops
    if placement.is_shard():
        return lib.cat(blocks, placement.dim)
    if placement.is_replicate():
        if run_check:
            host = [b if lib is torch else b.to_torch() for b in blocks]
            for i, b in enumerate(host[1:], 1):
                if not torch.equal(host[0], b):
                    raise ValueError(f"from_local: run_check: the Replicate "
                                     f"locals differ (member 0 and member {i})")
        return blocks[0]
    op = placement.reduce_op
    stacked = lib.stack(blocks, 0)
    if lib is torch:
        if op in ("sum", "avg"):
            return stacked.sum(0) if op == "sum" else stacked.mean(0)
        return {"max": stacked.amax, "min": stacked.amin, "product": stacked.prod}[op](0)
    if op in ("sum", "avg"):
        out = stacked.sum(0)
        return out / len(blocks) if op == "avg" else out
    return {"max": stacked.amax, "min": stacked.amin, "product": stacked.prod}[op](0)


def _global_value(locals_, shape, placements, run_check):
    """Combine an array (mesh shape, row-major) of locals from the last
    mesh dim to the first: an inner mesh dim subdivides an outer one's
    shard, as torch nests them."""
    blocks = list(locals_)
    for d in reversed(range(len(shape))):
        k = shape[d]
        blocks = [_combine(blocks[i:i + k], placements[d], run_check)
                  for i in range(0, len(blocks), k)]
    return blocks[0]


def from_local(local_tensor, device_mesh=None, placements=None, *,
               run_check=False, shape=None, stride=None):
    """A DTensor from per-rank locals. Inside an SPMD function (python -m
    dtorch.run) local_tensor is the calling rank's own shard, as in torch
    (_spmd_api.py). The controller holds every rank, so
    local_tensor is either one tensor, meaning every rank of the mesh holds
    that same local (as SPMD code running once per rank passes its own),
    or a list with one local per rank of the mesh in mesh order (row-major
    over the mesh coordinates, i.e. device_mesh.mesh.flatten()).
    Locals are torch.Tensors or single-device dtorch.Tensors; from
    dtorch.Tensors the result is differentiable (torch.Tensors are copied
    into the ranks' boxes, no collective). Shard locals are
    concatenated, Replicate ones must be equal (run_check=True checks;
    else the first is taken), Partial ones are reduced now (the DTensor
    holds the same pending value, split dtorch's way). shape / stride,
    when given, must be the result's (dtorch shards as torch.chunk does:
    uneven locals other than that split are refused)."""
    fn = "DTensor.from_local"
    mesh = _mesh_or_current(device_mesh, fn)
    if _spmd_api.active():
        return _spmd_api.from_local(local_tensor, mesh, placements, run_check,
                                    shape, stride, fn)
    n = mesh.size()
    if isinstance(local_tensor, (list, tuple)):
        if len(local_tensor) != n:
            raise ValueError(f"{fn}: {len(local_tensor)} locals for a mesh of {n} "
                             f"ranks (one per rank, in mesh order)")
        locals_ = list(local_tensor)
    else:
        locals_ = [local_tensor] * n
    locals_ = _same_kind(locals_, fn)
    ndims = {t.ndim for t in locals_}
    if len(ndims) != 1:
        raise ValueError(f"{fn}: the locals have different ranks {sorted(ndims)}")
    pl = _placements(placements, mesh, ndims.pop(), fn)
    value = _global_value(locals_, mesh.shape, pl, run_check)
    if shape is not None and tuple(shape) != tuple(value.shape):
        raise ValueError(f"{fn}: shape {tuple(shape)} is not the locals' global "
                         f"shape {tuple(value.shape)}")
    if stride is not None:
        want = torch.empty(tuple(value.shape)).stride()
        if tuple(stride) != want:
            raise ValueError(f"{fn}: stride {tuple(stride)}: dtorch's DTensors are "
                             f"contiguous, stride {want}")
    if isinstance(value, torch.Tensor):
        # host values: every rank gets its box as data, no collective (as
        # torch's from_local needs none)
        out = Tensor(value, device_mesh=mesh, placements=list(pl))
    else:
        out = value.redistribute(mesh, list(pl))
    if isinstance(local_tensor, (list, tuple)):
        _check_split(out, locals_, mesh, fn)
    return out


def _same_kind(locals_, fn):
    """All torch.Tensors (combined on the host), or else all single-device
    dtorch.Tensors (combined by dtorch ops: differentiable)."""
    for t in locals_:
        if isinstance(t, DTensor):
            raise TypeError(f"{fn}: a local is already a DTensor")
        if not isinstance(t, (Tensor, torch.Tensor)):
            raise TypeError(f"{fn}: a local is a {type(t).__name__}, not a "
                            f"torch.Tensor or a dtorch.Tensor")
    if all(isinstance(t, torch.Tensor) for t in locals_):
        return [t.detach() for t in locals_]
    return [_as_dtorch(t, fn) for t in locals_]


def _check_split(out, locals_, mesh, fn):
    for r, t in zip(mesh.mesh.flatten().tolist(), locals_):
        have = tuple(out.to_local(r).shape)
        if have != tuple(t.shape):
            raise ValueError(f"{fn}: rank {r}'s local has shape {tuple(t.shape)} "
                             f"but dtorch's split of the global "
                             f"{tuple(out.shape)} gives it {have}")


def distribute_module(module, device_mesh=None, partition_fn=None,
                      input_fn=None, output_fn=None):
    """torch's distribute_module: partition_fn(name, submodule, mesh) for
    every submodule (it replaces parameters with DTensors); without one,
    every parameter and buffer becomes Replicate() on the mesh.
    input_fn(module, inputs, mesh) runs as a forward pre-hook (its result,
    when not None, replaces the inputs) and output_fn(module, outputs,
    mesh) as a forward hook."""
    fn = "distribute_module"
    mesh = _mesh_or_current(device_mesh, fn)
    if getattr(module, "_distribute_module_applied", False):
        raise RuntimeError(f"{fn}: distribute_module should only be called once "
                           f"on a module, but it has already been called on this "
                           f"module!")
    for name, f in (("partition_fn", partition_fn), ("input_fn", input_fn),
                    ("output_fn", output_fn)):
        if f is not None and not callable(f):
            raise TypeError(f"{fn}: {name} {f!r} is not callable")
    if partition_fn is None:
        for name, sub in module.named_modules():
            replicate_module_params(sub, mesh)
    else:
        for name, sub in module.named_modules():
            partition_fn(name, sub, mesh)
            replicate_module_params(sub, mesh)
    if input_fn is not None:
        module.register_forward_pre_hook(lambda mod, inputs: input_fn(mod, inputs, mesh))
    if output_fn is not None:
        module.register_forward_hook(
            lambda mod, inputs, outputs: output_fn(mod, outputs, mesh))
    module._distribute_module_applied = True
    return module


def distribute_param(module, name, mesh, placements, src_data_rank=0):
    """Replaces parameter `name` of module (its own, not a child's) with a
    leaf DTensor of the same value laid out by placements, keeping
    requires_grad (torch's nn.Parameter(distribute_tensor(p.data, ...))).
    Inside an SPMD function the value is rank src_data_rank's (None: each
    rank's own), as torch's parallelize_module takes it."""
    from ... import nn
    p = module._parameters[name]
    if p is None or isinstance(p, DTensor):
        return
    if _spmd_api.active():
        d = distribute_tensor(p.detach() if isinstance(p, Tensor) else p, mesh,
                              placements, src_data_rank=src_data_rank)
    else:
        value = p.to_torch() if isinstance(p, Tensor) else torch.as_tensor(p).detach()
        d = Tensor(value, device_mesh=mesh, placements=list(_placements(
            placements, mesh, value.ndim, "distribute_param")))
    module.register_parameter(name, nn.Parameter(d, requires_grad=p.requires_grad))


def replicate_module_params(module, mesh, src_data_rank=0):
    """Every own parameter not yet a DTensor becomes Replicate() on mesh
    (torch's default partition); buffers likewise."""
    for name in list(module._parameters):
        distribute_param(module, name, mesh, None, src_data_rank)
    for name, b in list(getattr(module, "_buffers", {}).items()):
        if b is not None and not isinstance(b, DTensor):
            module._buffers[name] = distribute_tensor(b, mesh, None,
                                                      src_data_rank=src_data_rank)
