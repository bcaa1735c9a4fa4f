"""dtorch.distributed._tensor.device_mesh: the older name of
dtorch.distributed.device_mesh."""
from ..device_mesh import DeviceMesh, init_device_mesh  # noqa: F401

__all__ = ["DeviceMesh", "init_device_mesh"]
