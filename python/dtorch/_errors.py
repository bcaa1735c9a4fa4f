"""dtorch's errors as Python exceptions: the C status picks the class, the
message is dtorch's own (it names the function, the argument and the
values), its leading C function name ("dt_add_scalar_typed: ...")
replaced by the Python function the program called ("Tensor.__add__:
... (dt_add_scalar_typed)"): api_name() finds it on the call stack, only
when an error is raised."""
import operator
import re
import sys

from . import _lib

# the status names, in dt_status order: from the library itself
# (dt_status_name), which python/tests/test_layouts.py checks against
# the header's enum
STATUS_NAMES = _lib.STATUS_NAMES


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


# frames that name no function of the API: glue between it and the C call
_GLUE = {"<lambda>", "<listcomp>", "<genexpr>", "<dictcomp>", "__call__",
         "_call_impl", "_wrapped_call_impl", "call", "with_device"}


def named(fn, name, qualname=None):
    """fn (a function made by a factory of functions) under its API name,
    in its code object too: errors raised inside name it (api_frame reads
    the code's name)."""
    qualname = qualname or name
    fn.__name__, fn.__qualname__ = name, qualname
    kw = {"co_name": name}
    if hasattr(fn.__code__, "co_qualname"):
        kw["co_qualname"] = qualname
    fn.__code__ = fn.__code__.replace(**kw)
    return fn


def _qualname(f):
    """Class.method of a frame, the class named as the object's own
    (Tensor.copy_, not the mixin InplaceMethods.copy_)."""
    code = f.f_code
    q = getattr(code, "co_qualname", code.co_name)  # 3.11+: Class.method
    self = f.f_locals.get("self") if code.co_argcount else None
    if self is not None and not isinstance(self, type):
        q = f"{type(self).__name__}.{code.co_name}"
    return q.replace(".<locals>", "")


def _api(depth):
    """The outermost dtorch frame on the stack (the function the program
    called), or None."""
    f = sys._getframe(depth + 1)
    best = None
    while f is not None:
        mod = f.f_globals.get("__name__", "")
        if mod == "dtorch" or mod.startswith("dtorch."):
            if f.f_code.co_name not in _GLUE:
                best = f
        elif best is not None:
            break  # the program's frame: the last dtorch one was the API's
        f = f.f_back
    return best


def api_frame(depth=1):
    """The qualified name of the outermost dtorch function on the stack:
    the one the program called ("Tensor.softmax", "cat"); None when
    dtorch is not on the stack or the program called a private helper
    (_wrap: the C name is then the clearer one)."""
    f = _api(depth)
    if f is None:
        return None, None
    name = f.f_code.co_name
    if name.startswith("_") and not name.startswith("__"):
        return None, None
    return _qualname(f), None


def _is_int(v, value):
    """v is an integer (a Python or numpy one, no bool) equal to value."""
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        return False
    try:
        return operator.index(v) == value
    except TypeError:
        return False


def _find_arg(depth, match):
    f = _api(depth + 1)
    try:
        for k, v in (f.f_locals.items() if f is not None else ()):
            if k != "self" and (match(v) or (isinstance(v, (tuple, list)) and any(
                    match(x) for x in v))):
                return k
        return None
    finally:
        del f


def api_arg(value, depth=1):
    """The name of the argument of the API function that holds the int
    value (itself or in a tuple/list of them), or None."""
    return _find_arg(depth, lambda v: _is_int(v, value))


def api_arg_of(obj, depth=1):
    """The name of the API function's argument that is obj, or None."""
    return _find_arg(depth, lambda v: v is obj)


_C_PREFIX = re.compile(r"^(dt_[A-Za-z0-9_]+): ")


def rename(message, api):
    """'dt_xxx: detail' -> 'api: detail (dt_xxx)'; other messages get the
    api name in front unless they start with it already."""
    if not api:
        return message
    m = _C_PREFIX.match(message)
    if m:
        return f"{api}: {message[m.end():]} ({m.group(1)})"
    if message.startswith(api + ":") or message.startswith("dtorch"):
        return message
    return f"{api}: {message}"


# message_hook(message) -> message, when set: what a runner adds to the
# library's messages (python -m dtorch.run: the Python traceback of a rank
# that left, where a stuck rank is)
message_hook = None


def error(status, message=None, api=None):
    """The exception for a status (an int) and this thread's last message,
    named after api (the Python function; found on the stack when None)."""
    if message is None:
        message = (_lib.dt_last_error() or b"").decode("utf-8", "replace")
    if message_hook is not None:
        message = message_hook(message)
    name = STATUS_NAMES[status] if 0 <= status < len(STATUS_NAMES) else str(status)
    _lib.dt_clear_error()
    if api is None:
        api = api_frame(2)[0]
    return _CLASSES.get(name, DTorchError)(rename(message or name, api), name)


def last(api=None):
    return error(_lib.dt_last_status(), api=api or api_frame(2)[0])


def check(status):
    if status != 0:
        raise error(status, api=api_frame(2)[0])


def handle(ptr):
    """A returned handle, or the error the call left."""
    if not ptr:
        raise last(api_frame(2)[0])
    return ptr


def raise_last(api):
    """For the C extension's operators: raises the last error, named api."""
    raise error(_lib.dt_last_status(), api=api)
