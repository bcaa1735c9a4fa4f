"""torch.distributed.tensor's factories: DTensors made in place on a mesh
(each rank fills its own box; the random ones draw the values one device
would, whatever the placements)."""
import torch

from ... import _errors, _ops
from ..._tensor import _sizes
from ._api import _mesh_or_current, _placements

__all__ = ["zeros", "ones", "empty", "full", "rand", "randn"]


def _check_layout(layout, fn):
    if layout is not torch.strided:
        raise ValueError(f"{fn}: layout {layout}: only torch.strided")


def _factory(name):
    make = getattr(_ops, name)

    def factory(*size, requires_grad=False, dtype=None, layout=torch.strided,
                device_mesh=None, placements=None):
        _check_layout(layout, name)
        mesh = _mesh_or_current(device_mesh, name)
        shape = _sizes(size)
        pl = _placements(placements, mesh, len(shape), name)
        return make(*shape, dtype=dtype, device_mesh=mesh, placements=list(pl),
                    requires_grad=requires_grad)
    _errors.named(factory, name)
    factory.__doc__ = (f"{name}(*size, requires_grad=False, dtype=None, "
                       "layout=torch.strided, device_mesh=None, placements=None): "
                       "a DTensor on device_mesh (the `with mesh:` one when None), "
                       "all Replicate() when placements is None")
    return factory


zeros = _factory("zeros")
ones = _factory("ones")
empty = _factory("empty")
rand = _factory("rand")
randn = _factory("randn")


def full(size, fill_value, *, dtype=None, layout=torch.strided,
         requires_grad=False, device_mesh=None, placements=None):
    """A DTensor of fill_value on device_mesh laid out by placements."""
    _check_layout(layout, "full")
    mesh = _mesh_or_current(device_mesh, "full")
    shape = _sizes((size,) if isinstance(size, int) else (tuple(size),))
    pl = _placements(placements, mesh, len(shape), "full")
    return _ops.full(shape, fill_value, dtype=dtype, device_mesh=mesh,
                     placements=list(pl), requires_grad=requires_grad)
