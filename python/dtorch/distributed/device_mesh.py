"""dtorch.distributed.device_mesh (torch.distributed.device_mesh):
DeviceMesh and init_device_mesh.

DeviceMesh is dtorch.distributed_spec's class (the same objects the rest
of dtorch hands out: t.device_mesh is one). init_device_mesh here also
initialises the default process group, as torch's does when none is.
"""
from .. import distributed_spec as _spec
from ..distributed_spec import DeviceMesh  # noqa: F401

__all__ = ["DeviceMesh", "init_device_mesh"]


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None,
                     backend_override=None):
    """The mesh over global ranks 0..n-1, row-major (torch's
    init_device_mesh): init_device_mesh("cuda", (2, 4),
    mesh_dim_names=("dp", "tp")). backend_override has no backend to pick
    and is accepted as torch takes it."""
    from . import init_process_group, is_initialized
    if not isinstance(mesh_shape, int) and not (
            isinstance(mesh_shape, (tuple, list)) and
            all(isinstance(s, int) for s in mesh_shape)):
        raise TypeError(f"init_device_mesh: mesh_shape {mesh_shape!r} is not "
                        f"a tuple of ints")
    mesh = _spec.init_device_mesh(device_type, mesh_shape, mesh_dim_names=mesh_dim_names)
    if not is_initialized():
        init_process_group()
    return mesh
