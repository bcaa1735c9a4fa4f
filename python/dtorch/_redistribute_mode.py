"""What a DTensor op does when its inputs' placements need a collective
its rule does not do for free (docs/sharding.md "Strict and auto"):
``dtorch.auto_redistribute()`` lets it insert the cheapest redistribution,
as PyTorch's DTensor always does; ``dtorch.explicit_redistribute()``
refuses it with a PlacementError naming the fix, as PyTorch's
``torch.distributed.tensor._utils.ExplicitRedistributionContext`` does
(a redistribution that needs no communication still happens in both).
Outside both, the runtime's own mode holds (strict unless made with
auto_redistribute or DTORCH_AUTO_REDISTRIBUTE=1).

Both are context managers (and decorators) over the C library's
per-thread mode (dt_redistribute_mode_set): they affect the ops this
thread issues, nest, and restore the previous mode on exit, an exception
included. dtorch.backward's own ops redistribute in every mode."""
import contextlib

from . import _errors, _lib

# dt_redistribute_mode
DEFAULT, AUTO, EXPLICIT = (_lib.E["DT_REDISTRIBUTE_" + n] for n in ("DEFAULT", "AUTO", "EXPLICIT"))
_NAMES = {DEFAULT: "default", AUTO: "auto", EXPLICIT: "explicit"}

_lib._decl("dt_redistribute_mode_set", _lib.I, _lib.I)
_lib._decl("dt_redistribute_mode_get", _lib.I)


def redistribute_mode():
    """This thread's mode: "default" (the runtime's), "auto" or "explicit"."""
    return _NAMES[_lib.dt_redistribute_mode_get()]


@contextlib.contextmanager
def _mode(mode):
    prev = _lib.dt_redistribute_mode_get()
    _errors.check(_lib.dt_redistribute_mode_set(mode))
    try:
        yield
    finally:
        _errors.check(_lib.dt_redistribute_mode_set(prev))


def _flag(fn, enabled):
    if not isinstance(enabled, bool):
        raise TypeError(f"{fn}: enabled must be a bool, got {enabled!r}")


def auto_redistribute(enabled=True):
    """Within it, DTensor ops on this thread insert the redistributions
    their inputs need (counted by CommDebugMode); enabled=False is
    explicit_redistribute()."""
    _flag("auto_redistribute", enabled)
    return _mode(AUTO if enabled else EXPLICIT)


def explicit_redistribute(enabled=True):
    """Within it, a DTensor op on this thread whose inputs need a
    collective raises PlacementError (call .redistribute() first), even
    where the runtime redistributes automatically; enabled=False is
    auto_redistribute(), as PyTorch's ExplicitRedistributionContext(
    enable=False) allows every redistribution."""
    _flag("explicit_redistribute", enabled)
    return _mode(EXPLICIT if enabled else AUTO)
