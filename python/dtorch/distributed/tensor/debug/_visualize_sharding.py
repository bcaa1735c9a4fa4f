"""visualize_sharding: which ranks hold which block of a 1-d or 2-d
DTensor, drawn by dtorch (dt_visualize_sharding)."""
import ctypes
import ctypes.util

from .... import _errors
from ...._tensor import Tensor
from ... import _capi

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
_libc.open_memstream.restype = ctypes.c_void_p
_libc.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.POINTER(ctypes.c_size_t)]
_libc.fclose.argtypes = [ctypes.c_void_p]
_libc.free.argtypes = [ctypes.c_void_p]


def sharding_text(dtensor):
    """The picture visualize_sharding prints, as a string."""
    if not isinstance(dtensor, Tensor):
        raise TypeError(f"visualize_sharding: {type(dtensor).__name__} is not a "
                        f"dtorch.Tensor")
    buf, size = ctypes.c_void_p(), ctypes.c_size_t()
    f = _libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    if not f:
        raise OSError(ctypes.get_errno(), "visualize_sharding: open_memstream failed")
    st = _capi.dt_visualize_sharding(dtensor._h, f)
    _libc.fclose(f)
    try:
        text = ctypes.string_at(buf, size.value).decode() if buf.value else ""
    finally:
        _libc.free(buf)
    _errors.check(st)
    return text


def visualize_sharding(dtensor, header="", use_rich=False):
    """Prints header (when given) and the ranks holding each block of
    dtensor (1-d or 2-d), as torch's visualize_sharding does; use_rich is
    accepted and ignored (plain text always)."""
    text = sharding_text(dtensor)
    if header:
        print(header)
    print(text, end="" if text.endswith("\n") else "\n")
