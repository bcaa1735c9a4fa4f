"""dtorch.Tensor's methods beyond the operators in _tensor.py: the
reductions, splits, indexing and conversions PyTorch users reach for."""


class TensorMethods:
    """Mixed into dtorch.Tensor (python/dtorch/_tensor.py)."""
    __slots__ = ()
