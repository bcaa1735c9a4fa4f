"""dtorch.distributed.tensor (torch.distributed.tensor): DTensor and its
placements, distribute_tensor / distribute_module, the factories; the
tensor-parallel styles are in .parallel, CommDebugMode and
visualize_sharding in .debug.

    from dtorch.distributed.tensor import DTensor, Shard, Replicate, \\
        distribute_tensor
    x = distribute_tensor(torch.randn(8, 4), mesh, [Shard(0)])
    isinstance(x, DTensor)    # True: a dtorch.Tensor with a mesh
    x.full_tensor()           # the global value, a torch.Tensor
    x.to_local()              # the current rank's shard (to_local(r): rank r's)
"""
from ..device_mesh import DeviceMesh, init_device_mesh  # noqa: F401
from ._api import DTensor, distribute_module, distribute_tensor  # noqa: F401
from ._factories import empty, full, ones, rand, randn, zeros  # noqa: F401
from .placement_types import Partial, Placement, Replicate, Shard  # noqa: F401

__all__ = ["DTensor", "distribute_tensor", "distribute_module", "Shard",
           "Replicate", "Partial", "Placement", "DeviceMesh",
           "init_device_mesh", "zeros", "ones", "empty", "full", "rand", "randn"]
