"""dtorch.optim: torch.optim's SGD and AdamW on dtorch's fused optimisers
(python/dtorch/_optim.py)."""
from ._optim import SGD, AdamW, adam_moment, adamw_apply  # noqa: F401
