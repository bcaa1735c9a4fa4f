"""dtorch.optim: torch.optim's Optimizer protocol, SGD, Adam, AdamW and
the learning-rate schedulers, on dtorch tensors and DTensors."""
from . import lr_scheduler  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401
