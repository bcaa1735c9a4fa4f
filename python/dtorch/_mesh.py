"""The mesh functions of dtorch.h that DeviceMesh (distributed_spec.py)
does not already call: a mesh over ranks 0..n-1 of a given runtime, a
runtime rank's coordinates, a dim's index by name, the sub-mesh a rank
sees, merging dims, and the mesh's runtime. As functions here, and as
DeviceMesh methods (attached below where DeviceMesh has none of that
name)."""
import ctypes

from . import _errors, _lib
from .distributed_spec import DeviceMesh, _device, _names_array


def _names(names, what):
    if isinstance(names, str):
        names = [names]
    names = list(names)
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"{what}: mesh dim names must be str, got {n!r}")
    keep = [n.encode() for n in names]
    return (ctypes.c_char_p * max(1, len(keep)))(*keep), len(keep), keep


def mesh_range(device_type, mesh_shape, *, mesh_dim_names=None, runtime=None):
    """The mesh over ranks 0..n-1 of runtime (the current one when None),
    row-major (dt_mesh_create_range)."""
    shape = (mesh_shape,) if isinstance(mesh_shape, int) else tuple(mesh_shape)
    names, _keep = _names_array(mesh_dim_names, len(shape))
    rt = runtime._handle() if runtime is not None else None
    h = _device(device_type, lambda d: _lib.dt_mesh_create_range(
        rt, d, _lib.shape_of(shape), names))
    return DeviceMesh(device_type, _handle=h)


def coordinates_of(mesh, rank):
    """The coordinates of runtime rank `rank` in mesh, a tuple
    (dt_mesh_coords); an error if the rank is not in it."""
    out = (ctypes.c_int64 * max(1, mesh.ndim))()
    _errors.check(_lib.dt_mesh_coords(mesh._h, int(rank), out))
    return tuple(out[i] for i in range(mesh.ndim))


def dim_index(mesh, name):
    """The index of the mesh dim called name (dt_mesh_dim_index)."""
    i = _lib.dt_mesh_dim_index(mesh._h, str(name).encode())
    if i < 0:
        raise _errors.last()
    return i


def submesh(mesh, mesh_dim_names, rank):
    """The sub-mesh over the named dims (in mesh's order) that contains
    runtime rank `rank`: PyTorch's mesh["tp"] as rank sees it
    (dt_mesh_sub)."""
    arr, n, _keep = _names(mesh_dim_names, "submesh")
    h = _errors.handle(_lib.dt_mesh_sub(mesh._h, arr, n, int(rank)))
    return DeviceMesh(mesh.device_type, _handle=h)


def flatten_dims(mesh, mesh_dim_names, new_name=None):
    """mesh with the named dims (adjacent, in order) merged into one
    named new_name (None: the names joined with "_"), as PyTorch's
    mesh["dp", "tp"]._flatten() (dt_mesh_flatten)."""
    arr, n, _keep = _names(mesh_dim_names, "flatten_dims")
    nn = None if new_name is None else str(new_name).encode()
    h = _errors.handle(_lib.dt_mesh_flatten(mesh._h, arr, n, nn))
    return DeviceMesh(mesh.device_type, _handle=h)


def mesh_runtime(mesh):
    """The Runtime whose ranks mesh arranges (dt_mesh_runtime)."""
    from ._runtime import Runtime
    return Runtime._wrap(_errors.handle(_lib.dt_mesh_runtime(mesh._h)))


for _name, _fn in [("coordinates_of", coordinates_of), ("dim_index", dim_index),
                   ("submesh", submesh), ("flatten_dims", flatten_dims)]:
    if not hasattr(DeviceMesh, _name):
        setattr(DeviceMesh, _name, _fn)
if not hasattr(DeviceMesh, "runtime"):
    DeviceMesh.runtime = property(mesh_runtime, doc=mesh_runtime.__doc__)
