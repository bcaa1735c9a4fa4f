"""dtorch.distributed._tensor: the older name of dtorch.distributed.tensor
(torch.distributed._tensor), for scripts that import from it."""
from ..tensor import DTensor, DeviceMesh, Partial, Placement, Replicate, Shard, \
    distribute_module, distribute_tensor, empty, full, init_device_mesh, ones, \
    rand, randn, zeros  # noqa: F401
from ..tensor import __all__  # noqa: F401
from . import device_mesh  # noqa: F401
