"""dtorch.nn: the functional ops under PyTorch's names."""
from . import functional  # noqa: F401
