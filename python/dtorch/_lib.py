"""Loading libdtorch.so and the ctypes declarations of the C API used here.

Every op's public function is declared here, with as many arguments as its
prototype in include/dtorch: scripts/check-op-columns.py (ctest
op_columns) fails otherwise.

Where the library comes from, first match wins:
1. ``DTORCH_LIBRARY`` (a path to libdtorch.so.1 or libdtorch.so);
2. a ``libdtorch.so.1`` / ``libdtorch.so`` next to this file (a wheel that
   bundles it);
3. the system loader: ``libdtorch.so.1`` through LD_LIBRARY_PATH and the
   ld.so cache (``cmake --install`` to /usr/local, then ``ldconfig``).
"""
import ctypes
import os
import pathlib

SONAME = "libdtorch.so.1"

# the DTorch API's number of emulated devices; dtorch always
# emulates ranks in one process, DTORCH_NUM_RANKS is its own name for it
_EMU_NUM = "DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE"
if _EMU_NUM in os.environ and "DTORCH_NUM_RANKS" not in os.environ:
    os.environ["DTORCH_NUM_RANKS"] = os.environ[_EMU_NUM]


def _candidates():
    env = os.environ.get("DTORCH_LIBRARY")
    if env:
        return [("DTORCH_LIBRARY", env)]
    here = pathlib.Path(__file__).resolve().parent
    out = [("package dir", str(here / n)) for n in (SONAME, "libdtorch.so")
           if (here / n).exists()]
    out.append(("system loader", SONAME))
    return out


def _load():
    tried = []
    for where, path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{where}: {e}")
    raise ImportError("dtorch: cannot load libdtorch: " + "; ".join(tried) +
                      " (set DTORCH_LIBRARY to the library's path, or install "
                      "it where the system loader finds it)")


lib, path = _load()

MAX_DIMS = 8


class Shape(ctypes.Structure):
    _fields_ = [("ndim", ctypes.c_int), ("dims", ctypes.c_int64 * MAX_DIMS)]


class Placement(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("dim", ctypes.c_int),
                ("reduce", ctypes.c_int)]


# The structs end in reserved words, zero (ctypes zero-initialises), that
# later 1.x libraries carve fields from (docs/abi.md); the sizes are the
# C header's, checked by python/tests/test_layouts.py.
class TensorOptions(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("mesh", ctypes.c_void_p),
                ("placements", ctypes.POINTER(Placement)),
                ("device", ctypes.c_char_p), ("requires_grad", ctypes.c_bool),
                ("reserved", ctypes.c_uint64 * 8)]


class MemoryStats(ctypes.Structure):
    _fields_ = [("used", ctypes.c_int64), ("peak", ctypes.c_int64),
                ("capacity", ctypes.c_int64),
                ("reserved", ctypes.c_uint64 * 5)]


P = ctypes.c_void_p
I = ctypes.c_int
I64 = ctypes.c_int64
D = ctypes.c_double
B = ctypes.c_bool
S = ctypes.c_char_p
PI = ctypes.POINTER(ctypes.c_int)
PP = ctypes.POINTER(Placement)


def _decl(name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    globals()[name] = fn


for _n, _r, _a in [
    ("dt_version", S, ()),
    ("dt_last_status", I, ()), ("dt_last_error", S, ()),
    ("dt_clear_error", None, ()), ("dt_status_name", S, (I,)),
    ("dt_manual_seed", None, (ctypes.c_uint64,)),
    ("dt_runtime_default", P, ()), ("dt_runtime_num_ranks", I, (P,)),
    ("dt_runtime_synchronize", I, (P,)),
    ("dt_runtime_memory", I, (P, I, ctypes.POINTER(MemoryStats))),
    ("dt_mesh_init", P, (P, S, Shape, ctypes.POINTER(S))),
    ("dt_mesh_create", P, (P, S, Shape, PI, ctypes.POINTER(S))),
    ("dt_mesh_release", None, (P,)), ("dt_mesh_retain", P, (P,)),
    ("dt_mesh_ndim", I, (P,)), ("dt_mesh_shape", Shape, (P,)),
    ("dt_mesh_size", I, (P,)), ("dt_mesh_dim_name", S, (P, I)),
    ("dt_mesh_rank", I, (P, ctypes.POINTER(I64))),
    ("dt_mesh_format", I, (P, S, ctypes.c_size_t)),
    ("dt_tensor_release", None, (P,)), ("dt_tensor_retain", P, (P,)),
    ("dt_tensor_shape", Shape, (P,)), ("dt_tensor_dtype", I, (P,)),
    ("dt_tensor_numel", I64, (P,)), ("dt_tensor_strides", Shape, (P,)),
    ("dt_tensor_mesh", P, (P,)), ("dt_tensor_placement", Placement, (P, I)),
    ("dt_tensor_requires_grad", B, (P,)),
    ("dt_tensor_local_shape", Shape, (P, I)),
    ("dt_tensor_local_data", I, (P, ctypes.POINTER(P))),
    ("dt_live_tensors", I64, ()),
    ("dt_from_host", P, (P, Shape, ctypes.POINTER(TensorOptions))),
    ("dt_to_host", I, (P, P, ctypes.c_size_t)),
    ("dt_to_host_async", P, (P, P, ctypes.c_size_t)),
    ("dt_local_to_host", I, (P, I, P, ctypes.c_size_t)),
    ("dt_arange", P, (D, D, D, ctypes.POINTER(TensorOptions))),
    ("dt_full", P, (Shape, D, ctypes.POINTER(TensorOptions))),
    ("dt_full_like", P, (P, D)),
    ("dt_future_wait", I, (P, I64)), ("dt_future_ready", B, (P,)),
    ("dt_future_fd", I, (P,)), ("dt_future_release", None, (P,)),
    ("dt_redistribute", P, (P, P, PP)), ("dt_redistribute_like", P, (P, P)),
    ("dt_redistribute_by_dict", P, (P, P, ctypes.POINTER(S), PP, I, I)),
    ("dt_transpose", P, (P, I, I)), ("dt_permute", P, (P, PI, I)),
    ("dt_view", P, (P, Shape)), ("dt_reshape", P, (P, Shape)),
    ("dt_expand", P, (P, Shape)),
    ("dt_slice", P, (P, I, I64, I64, I64)), ("dt_select", P, (P, I, I64)),
    ("dt_squeeze", P, (P, I)), ("dt_squeeze_all", P, (P,)),
    ("dt_unsqueeze", P, (P, I)), ("dt_flatten", P, (P, I, I)),
    ("dt_cast", P, (P, I)), ("dt_clamp", P, (P, D, D)),
    ("dt_where", P, (P, P, P)), ("dt_softmax", P, (P, I)),
    ("dt_log_softmax", P, (P, I)), ("dt_layer_norm", P, (P, P, P, D)),
    ("dt_linear", P, (P, P, P)), ("dt_dropout", P, (P, D, B)),
    ("dt_cat", P, (ctypes.POINTER(P), I, I)),
    ("dt_stack", P, (ctypes.POINTER(P), I, I)),
    ("dt_backward", I, (P,)), ("dt_grad", P, (P,)),
    ("dt_var", P, (P, PI, I, B, B)),
    ("dt_masked_fill", P, (P, P, D)), ("dt_narrow", P, (P, I, I64, I64)),
    ("dt_rms_norm", P, (P, P, D)), ("dt_embedding", P, (P, P)),
    ("dt_index_select", P, (P, I, P)),
    ("dt_cross_entropy", P, (P, P, I, I64)),
    # the backward and optimiser ops (their public functions, for tests
    # and custom formulas)
    ("dt_gelu_backward", P, (P, P)),
    ("dt_slice_scatter", P, (P, Shape, I, I64, I64, I64)),
    ("dt_index_select_backward", P, (P, I, P, I64)),
    ("dt_cross_entropy_backward", P, (P, P, P, I, I64, D)),
    ("dt_adam_moment", P, (P, P, D, B)),
    ("dt_adamw_apply", P, (P, P, P, D, D, D)),
]:
    _decl(_n, _r, *_a)

# what dtorch.nn, dtorch.optim and the grad modes call beyond the ops
for _n, _r, _a in [
    ("dt_grad_enabled", B, ()), ("dt_set_grad_enabled", B, (B,)),
    ("dt_tensor_set_requires_grad", I, (P, B)),
    ("dt_tensor_grad_fn", S, (P,)), ("dt_zero_grad", None, (P,)),
    ("dt_tensor_shares_storage", B, (P, P)),
    ("dt_clip_grad_norm", I, (ctypes.POINTER(P), I, D, ctypes.POINTER(D))),
    ("dt_cross_entropy_smoothed", P, (P, P, I, I64, D)),
]:
    _decl(_n, _r, *_a)

# tensor -> tensor, (tensor, tensor) -> tensor, (tensor, scalar) -> tensor
UNARY = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh",
         "sigmoid", "relu", "silu", "gelu", "gelu_tanh", "logical_not",
         "contiguous", "clone", "zeros_like", "ones_like"]
BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "matmul",
          "floor_divide", "remainder", "eq", "ne", "lt", "le", "gt", "ge",
          "logical_and", "logical_or"]
SCALAR = ["add", "sub", "mul", "div", "pow", "floor_divide", "remainder"]
REDUCE = ["sum", "mean", "amax", "amin", "prod", "argmax", "argmin"]
FACTORY = ["empty", "zeros", "ones", "rand", "randn"]
for _n in UNARY:
    _decl("dt_" + _n, P, P)
for _n in BINARY:
    _decl("dt_" + _n, P, P, P)
for _n in SCALAR:
    _decl(f"dt_{_n}_scalar", P, P, D)
for _n in REDUCE:
    _decl("dt_" + _n, P, P, PI, I, B)
for _n in FACTORY:
    _decl("dt_" + _n, P, Shape, ctypes.POINTER(TensorOptions))


def shape_of(dims):
    dims = tuple(int(d) for d in dims)
    if len(dims) > MAX_DIMS:
        raise ValueError(f"dtorch: {len(dims)} dims; at most {MAX_DIMS}")
    s = Shape()
    s.ndim = len(dims)
    for i, d in enumerate(dims):
        s.dims[i] = d
    return s


def dims_of(shape):
    return tuple(shape.dims[i] for i in range(shape.ndim))
