"""dtorch's errors as Python exceptions: the C status picks the class, the
message is dtorch's own (it names the function, the argument and the
values)."""
from . import _lib

STATUS_NAMES = ["DT_OK", "DT_ERR_INVALID_ARGUMENT", "DT_ERR_SHAPE",
                "DT_ERR_DTYPE", "DT_ERR_PLACEMENT", "DT_ERR_MESH",
                "DT_ERR_OUT_OF_MEMORY", "DT_ERR_DEVICE", "DT_ERR_IO",
                "DT_ERR_TIMEOUT", "DT_ERR_DESYNC", "DT_ERR_FAULT",
                "DT_ERR_UNSUPPORTED", "DT_ERR_INTERNAL"]


class DTorchError(RuntimeError):
    """A failed dtorch call. ``status`` is the C status name
    ("DT_ERR_PLACEMENT"); ``str(e)`` is dtorch's message."""

    def __init__(self, message, status="DT_ERR_INTERNAL"):
        super().__init__(message)
        self.status = status


class InvalidArgumentError(DTorchError, ValueError):
    """DT_ERR_INVALID_ARGUMENT, DT_ERR_SHAPE, DT_ERR_DTYPE, DT_ERR_MESH."""


class PlacementError(DTorchError, ValueError):
    """DT_ERR_PLACEMENT: the op's inputs' placements are not legal for it;
    the message lists the legal ones (redistribute first)."""


class UnsupportedError(DTorchError, NotImplementedError):
    """DT_ERR_UNSUPPORTED."""


class DTorchTimeoutError(DTorchError, TimeoutError):
    """DT_ERR_TIMEOUT."""


class DTorchMemoryError(DTorchError, MemoryError):
    """DT_ERR_OUT_OF_MEMORY."""


_CLASSES = {
    "DT_ERR_INVALID_ARGUMENT": InvalidArgumentError,
    "DT_ERR_SHAPE": InvalidArgumentError,
    "DT_ERR_DTYPE": InvalidArgumentError,
    "DT_ERR_MESH": InvalidArgumentError,
    "DT_ERR_PLACEMENT": PlacementError,
    "DT_ERR_UNSUPPORTED": UnsupportedError,
    "DT_ERR_TIMEOUT": DTorchTimeoutError,
    "DT_ERR_OUT_OF_MEMORY": DTorchMemoryError,
}


def error(status, message=None):
    """The exception for a status (an int) and this thread's last message."""
    if message is None:
        message = (_lib.dt_last_error() or b"").decode("utf-8", "replace")
    name = STATUS_NAMES[status] if 0 <= status < len(STATUS_NAMES) else str(status)
    _lib.dt_clear_error()
    return _CLASSES.get(name, DTorchError)(message or name, name)


def last():
    return error(_lib.dt_last_status())


def check(status):
    if status != 0:
        raise error(status)


def handle(ptr):
    """A returned handle, or the error the call left."""
    if not ptr:
        raise last()
    return ptr
