"""dtorch.nn.functional: PyTorch's functional names on dtorch tensors;
on DTensors the output placements follow the sharding rules (softmax's
dim must be Replicate())."""
from .. import _lib
from .._tensor import _wrap


def softmax(input, dim, dtype=None):
    out = input.softmax(dim)
    return out if dtype is None else out.to(dtype)


def log_softmax(input, dim, dtype=None):
    out = input.log_softmax(dim)
    return out if dtype is None else out.to(dtype)


def relu(input):
    return input.relu()


def silu(input):
    return input.silu()


def gelu(input, approximate="none"):
    return input.gelu_tanh() if approximate == "tanh" else input.gelu()


def sigmoid(input):
    return input.sigmoid()


def tanh(input):
    return input.tanh()


def linear(input, weight, bias=None):
    return _wrap(_lib.dt_linear(input._h, weight._h, bias._h if bias is not None else None))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    if tuple(normalized_shape) != tuple(input.shape[-1:]):
        raise ValueError("dtorch layer_norm: over the last dim only "
                         f"(normalized_shape {tuple(normalized_shape)}, input {tuple(input.shape)})")
    return _wrap(_lib.dt_layer_norm(input._h, weight._h if weight is not None else None,
                                    bias._h if bias is not None else None, eps))


def dropout(input, p=0.5, training=True):
    return _wrap(_lib.dt_dropout(input._h, p, training))
