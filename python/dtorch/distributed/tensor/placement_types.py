"""torch.distributed.tensor.placement_types: the placements (dtorch's,
from dtorch.distributed_spec)."""
from ...distributed_spec import Partial, Placement, Replicate, Shard  # noqa: F401

__all__ = ["Placement", "Shard", "Replicate", "Partial"]
