"""dtorch.nn.init: torch.nn.init's initialisers on dtorch tensors.

Each fills its tensor IN PLACE with grad mode off (through the tensor's
uniform_ / normal_ / fill_ / zero_ / copy_) and returns it, so a Parameter
keeps its identity; the bounds and standard deviations are torch's
formulas (torch/nn/init.py). The random values come from dtorch's Philox
stream (dtorch.manual_seed), not torch's generator: equal in distribution
to torch's, not element for element. generator= must be None.
"""
import math
import warnings

from torch.nn.init import calculate_gain  # noqa: F401  (a pure function of its arguments)

from .._grad_mode import no_grad
from .parameter import _copy_into

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_",
           "ones_", "zeros_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_"]


def _no_generator(fn, generator):
    if generator is not None:
        raise ValueError(f"nn.init.{fn}: generator={generator!r} is not supported "
                         "(dtorch draws from its own stream: dtorch.manual_seed)")


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fills tensor with U(a, b)."""
    _no_generator("uniform_", generator)
    with no_grad():
        return tensor.uniform_(a, b)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fills tensor with N(mean, std^2)."""
    _no_generator("normal_", generator)
    with no_grad():
        return tensor.normal_(mean, std)


def _any(mask):
    return bool(mask.sum().item() > 0)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fills tensor with N(mean, std^2) truncated to [a, b], by rejection
    as torch does: redraw the values outside until none is."""
    _no_generator("trunc_normal_", generator)

    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if (mean < a - 2 * std) or (mean > b + 2 * std):
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    with no_grad():
        from .._ops import where, zeros_like
        p = norm_cdf((b - mean) / std) - norm_cdf((a - mean) / std)
        if p > 0.3:
            result = tensor.normal_(mean, std)
            while True:
                mask = (result < a) | (result > b)
                if not _any(mask):
                    break
                result = where(mask, zeros_like(result).normal_(mean, std), result)
        else:
            # a narrow interval: uniform proposals on [a, b], accepted with
            # the normal density's ratio to its peak on the interval
            mode = max(a, min(mean, b))
            log_peak = -0.5 * ((mode - mean) / std) ** 2

            def reject(c):
                return zeros_like(c).uniform_(0.0, 1.0).log() > \
                    ((c - mean) / std) ** 2 * -0.5 - log_peak
            result = zeros_like(tensor).uniform_(a, b)
            pending = reject(result)
            while _any(pending):
                cand = zeros_like(tensor).uniform_(a, b)
                result = where(pending, cand, result)
                pending = where(pending, reject(cand), pending)
        if result is not tensor:
            _copy_into(tensor, result)
        return tensor


def constant_(tensor, val):
    """Fills tensor with val."""
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    with no_grad():
        return tensor.fill_(1.0)


def zeros_(tensor):
    with no_grad():
        return tensor.zero_()


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight [out, in, *receptive field]."""
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer "
                         "than 2 dimensions")
    receptive_field_size = 1
    for s in tensor.shape[2:]:
        receptive_field_size *= s
    return tensor.size(1) * receptive_field_size, tensor.size(0) * receptive_field_size


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-bound, bound), bound = gain(nonlinearity, a) * sqrt(3 / fan)."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2), std = gain(nonlinearity, a) / sqrt(fan)."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)
