"""dtorch.Tensor's in-place methods (add_, mul_, zero_, fill_, copy_,
normal_, uniform_, clamp_, masked_fill_, ...) and the autograd switches on
a tensor (requires_grad_, detach, .data). docs/inplace.md says how an
in-place change reaches every view of the storage and what autograd
checks."""


class InplaceMethods:
    """Mixed into dtorch.Tensor (python/dtorch/_tensor.py)."""
    __slots__ = ()
