"""Zero-copy views of a single-device tensor's memory: numpy's
__array_interface__ (read-only) and DLPack capsules (torch.from_dlpack,
numpy.from_dlpack). dt_tensor_local_data waits for the tensor's ops and
gives the address; the view keeps the dtorch.Tensor alive. DTensors (one
shard per rank) have no single buffer: numpy copies them through
__array__, DLPack refuses them.

A runtime's teardown frees its ranks' memory, which a view would then
read: while any tensor that lent its memory to a view is alive, a
Runtime.destroy() is completed later, when the last such tensor is gone
(lend / defer_destroy below), so a view stays readable after its runtime
was destroyed."""
import ctypes
import weakref

import torch

from . import _errors, _lib

_TYPESTR = {torch.float32: "<f4", torch.float64: "<f8", torch.float16: "<f2",
            torch.int32: "<i4", torch.int64: "<i8", torch.uint8: "|u1",
            torch.bool: "|b1"}
# DLPack (code, bits): kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6
_DLTYPE = {torch.float32: (2, 32), torch.float64: (2, 64), torch.float16: (2, 16),
           torch.bfloat16: (4, 16), torch.int32: (0, 32), torch.int64: (0, 64),
           torch.uint8: (1, 8), torch.bool: (6, 8)}


def _local(t, what):
    if t.is_dtensor():
        raise _errors.UnsupportedError(
            f"{what}: a DTensor has one shard per rank and no single buffer; "
            "use to_torch() or to_local(rank)", "DT_ERR_UNSUPPORTED")
    p = ctypes.c_void_p()
    _errors.check(_lib.dt_tensor_local_data(t._h, ctypes.byref(p)))
    strides = _lib.dims_of(_lib.dt_tensor_strides(t._h))
    return p.value or 0, tuple(t.shape), strides


# id(tensor) -> weakref of each tensor whose memory a view reads, and the
# runtime handles whose dt_runtime_destroy waits for them
_lent = {}
_pending = []


def _returned(key):
    _lent.pop(key, None)
    if not _lent and _pending and _lib is not None:
        while _pending:
            _lib.dt_runtime_destroy(_pending.pop())
            _lib.dt_clear_error()


def lend(t):
    """Notes that a view reads t's memory (until t is gone)."""
    key = id(t)
    if key not in _lent:
        _lent[key] = weakref.ref(t, lambda _r, key=key: _returned(key))


def lending():
    """Whether a view may still read some tensor's memory."""
    return bool(_lent)


def defer_destroy(h):
    """dt_runtime_destroy(h) once no view reads any tensor's memory."""
    _pending.append(h)


def array_interface(t):
    if t.is_dtensor():  # numpy falls back to __array__ (a copy)
        raise AttributeError("__array_interface__: a DTensor has no single buffer")
    if t.dtype not in _TYPESTR:
        raise AttributeError(f"__array_interface__: numpy has no {t.dtype}")
    ptr, shape, strides = _local(t, "__array_interface__")
    lend(t)
    es = t.dtype.itemsize
    return {"version": 3, "shape": shape, "typestr": _TYPESTR[t.dtype],
            "data": (ptr, True),  # read-only: dtorch tensors are values
            "strides": tuple(s * es for s in strides)}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice),
                ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", _Deleter)]

# what each exported DLManagedTensor keeps alive, by its address; the
# deleter (the consumer's, or the capsule's destructor when unconsumed)
# drops it
_alive = {}


@_Deleter
def _delete(mt):
    _alive.pop(ctypes.addressof(mt.contents), None)


_Destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_capi = ctypes.pythonapi
_capi.PyCapsule_New.restype = ctypes.py_object
_capi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _Destructor]
_capi.PyCapsule_IsValid.restype = ctypes.c_int
_capi.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_capi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_capi.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


@_Destructor
def _capsule_gone(capsule):
    # a consumer renames the capsule "used_dltensor" and owns the tensor
    if _capi.PyCapsule_IsValid(capsule, b"dltensor"):
        addr = _capi.PyCapsule_GetPointer(capsule, b"dltensor")
        _alive.pop(addr, None)


def dlpack(t, copy=None):
    if copy:
        return t.to_torch().__dlpack__()
    ptr, shape, strides = _local(t, "__dlpack__")
    lend(t)
    n = len(shape)
    shp = (ctypes.c_int64 * max(1, n))(*shape)
    std = (ctypes.c_int64 * max(1, n))(*strides)
    mt = DLManagedTensor()
    code, bits = _DLTYPE[t.dtype]
    mt.dl_tensor = DLTensor(ptr, DLDevice(1, 0), n, DLDataType(code, bits, 1),
                            shp, std, 0)
    mt.deleter = _delete
    addr = ctypes.addressof(mt)
    _alive[addr] = (mt, shp, std, t)
    return _capi.PyCapsule_New(addr, b"dltensor", _capsule_gone)
