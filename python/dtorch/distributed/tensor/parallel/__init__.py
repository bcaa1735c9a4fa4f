"""dtorch.distributed.tensor.parallel (torch.distributed.tensor.parallel):
parallelize_module, the styles and loss_parallel."""
from .api import parallelize_module  # noqa: F401
from .loss import loss_parallel  # noqa: F401
from .style import ColwiseParallel, ParallelStyle, PrepareModuleInput, \
    PrepareModuleInputOutput, PrepareModuleOutput, RowwiseParallel, \
    SequenceParallel  # noqa: F401

__all__ = ["parallelize_module", "ParallelStyle", "ColwiseParallel",
           "RowwiseParallel", "SequenceParallel", "PrepareModuleInput",
           "PrepareModuleOutput", "PrepareModuleInputOutput", "loss_parallel"]
