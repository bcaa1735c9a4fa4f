"""dtorch.distributed.tensor.debug (torch.distributed.tensor.debug):
CommDebugMode and visualize_sharding."""
from ._comm_mode import CommCounts, CommDebugMode  # noqa: F401
from ._visualize_sharding import sharding_text, visualize_sharding  # noqa: F401

__all__ = ["CommDebugMode", "visualize_sharding"]
