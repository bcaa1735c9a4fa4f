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
import operator
import os
import pathlib

SONAME = "libdtorch.so.1"


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


def _names(fn, bad):
    """fn(0), fn(1), ... up to the first unknown value (bad)."""
    fn.restype = ctypes.c_char_p
    fn.argtypes = [ctypes.c_int]
    out = []
    while len(out) < 64:
        n = fn(len(out))
        if n is None or n == bad:
            break
        out.append(n.decode())
    return out


# dt_status and dt_dtype in the header's order, as the library names them
# (python/tests/test_layouts.py checks them against include/dtorch)
STATUS_NAMES = _names(lib.dt_status_name, b"DT_ERR_?")
DTYPE_NAMES = _names(lib.dt_dtype_name, b"?")

# the enums the package passes by value, that the library has no names
# for: python/tests/test_layouts.py parses include/dtorch/*.h and checks
# every value; the modules use these (E["DT_PLACEMENT_SHARD"]), no literal
ENUMS = {
    "dt_placement_kind": ("DT_PLACEMENT_REPLICATE", "DT_PLACEMENT_SHARD",
                          "DT_PLACEMENT_PARTIAL"),
    "dt_reduce_op": ("DT_REDUCE_SUM", "DT_REDUCE_AVG", "DT_REDUCE_MAX",
                     "DT_REDUCE_MIN", "DT_REDUCE_PROD"),
    "dt_scalar_kind": ("DT_SCALAR_AUTO", "DT_SCALAR_INT", "DT_SCALAR_FLOAT",
                       "DT_SCALAR_BOOL"),
    "dt_redistribute_mode": ("DT_REDISTRIBUTE_DEFAULT", "DT_REDISTRIBUTE_AUTO",
                             "DT_REDISTRIBUTE_EXPLICIT"),
    "dt_default_placement": ("DT_DEFAULT_RAISE_ERROR", "DT_DEFAULT_REPLICATE",
                             "DT_DEFAULT_KEEP"),
}
E = {n: i for names in ENUMS.values() for i, n in enumerate(names)}
# dt_fault_kind's values are bits
FAULT_KINDS = {"DT_FAULT_OOM": 1, "DT_FAULT_STALL": 2, "DT_FAULT_RANK_FAIL": 4,
               "DT_FAULT_COLLECTIVE_FAIL": 8, "DT_FAULT_IO": 16}
E.update(FAULT_KINDS)
E.update({n: i for i, n in enumerate(STATUS_NAMES)})

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


class RuntimeOptions(ctypes.Structure):
    """dt_runtime_options (232 bytes on LP64): 0 / NULL / false in a field
    means the default or the environment variable the header names."""
    _fields_ = [("device", ctypes.c_char_p), ("num_ranks", ctypes.c_int),
                ("auto_redistribute", ctypes.c_bool),
                ("device_memory", ctypes.c_int64),
                ("ring_capacity", ctypes.c_int), ("spin_us", ctypes.c_int),
                ("collective_timeout_ms", ctypes.c_int64),
                ("pin_ranks", ctypes.c_int), ("chaos_seed", ctypes.c_uint64),
                ("dry_run", ctypes.c_bool), ("dry_link_gbps", ctypes.c_double),
                ("dry_link_latency_us", ctypes.c_double),
                ("dry_mem_gbps", ctypes.c_double),
                ("dry_tflops", ctypes.c_double),
                ("rank_devices", ctypes.POINTER(ctypes.c_char_p)),
                ("launcher", ctypes.c_char_p),
                ("reserved", ctypes.c_uint64 * 15)]


class CommCounts(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in
                ("all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                 "broadcast", "other", "bytes")] + \
               [("reserved", ctypes.c_uint64 * 9)]


class CacheStats(ctypes.Structure):
    _fields_ = [("hits", ctypes.c_int64), ("misses", ctypes.c_int64),
                ("entries", ctypes.c_int64), ("evictions", ctypes.c_int64),
                ("reserved", ctypes.c_uint64 * 4)]


class LoadOptions(ctypes.Structure):
    _fields_ = [("mesh", ctypes.c_void_p),
                ("placements", ctypes.POINTER(Placement)),
                ("device", ctypes.c_char_p), ("direct", ctypes.c_bool),
                ("queue_depth", ctypes.c_int), ("merge_gap", ctypes.c_int64),
                ("reserved", ctypes.c_uint64 * 8)]


class SafetensorsEntry(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype_name", ctypes.c_char_p),
                ("dtype", ctypes.c_int), ("shape", Shape),
                ("offset", ctypes.c_uint64), ("nbytes", ctypes.c_uint64),
                ("reserved", ctypes.c_uint64 * 4)]


class SafetensorsInfo(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int),
                ("tensors", ctypes.POINTER(SafetensorsEntry)),
                ("n_metadata", ctypes.c_int),
                ("metadata_keys", ctypes.POINTER(ctypes.c_char_p)),
                ("metadata_values", ctypes.POINTER(ctypes.c_char_p)),
                ("reserved", ctypes.c_uint64 * 4)]


class BackwardOptions(ctypes.Structure):
    _fields_ = [("grad", ctypes.c_void_p), ("retain_graph", ctypes.c_bool),
                ("reserved", ctypes.c_uint64 * 4)]


class SgdOptions(ctypes.Structure):
    _fields_ = [("lr", ctypes.c_double), ("momentum", ctypes.c_double),
                ("weight_decay", ctypes.c_double), ("nesterov", ctypes.c_bool),
                ("reserved", ctypes.c_uint64 * 4)]


class AdamwOptions(ctypes.Structure):
    _fields_ = [(n, ctypes.c_double) for n in
                ("lr", "beta1", "beta2", "eps", "weight_decay")] + \
               [("reserved", ctypes.c_uint64 * 4)]


class ShadowReport(ctypes.Structure):
    _fields_ = [("ops_checked", ctypes.c_int64),
                ("first_divergence", ctypes.c_int64),
                ("max_diff", ctypes.c_double), ("failed", ctypes.c_bool),
                ("message", ctypes.c_char * 1024),
                ("reserved", ctypes.c_uint64 * 8)]


class VisualizeOptions(ctypes.Structure):
    _fields_ = [("ascii", ctypes.c_bool), ("max_width", ctypes.c_int),
                ("reserved", ctypes.c_uint64 * 4)]


class DryRunStats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in
                ("ops", "collectives", "comm_bytes", "peak_max", "peak_min")] + \
               [("peak_rank", ctypes.c_int)] + \
               [(n, ctypes.c_double) for n in ("comm_s", "compute_s", "step_s")] + \
               [("reserved", ctypes.c_uint64 * 8)]


class Fault(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_uint), ("rank", ctypes.c_int),
                ("after", ctypes.c_int64), ("stall_ms", ctypes.c_int64),
                ("reserved", ctypes.c_uint64 * 4)]


class SpmdCtx(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int), ("world_size", ctypes.c_int),
                ("rt", ctypes.c_void_p), ("arg", ctypes.c_void_p),
                ("reserved", ctypes.c_uint64 * 4)]


class Group(ctypes.Structure):
    _fields_ = [("mesh", ctypes.c_void_p), ("mesh_dim", ctypes.c_int),
                ("ranks", ctypes.POINTER(ctypes.c_int)),
                ("nranks", ctypes.c_int), ("reserved", ctypes.c_uint64 * 4)]


# the C callback types (ctypes takes the GIL in each call, from any thread)
InterceptFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
FutureCallback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int,
                                  ctypes.c_void_p)
SpmdFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(SpmdCtx))


P = ctypes.c_void_p
I = ctypes.c_int
I64 = ctypes.c_int64
D = ctypes.c_double
B = ctypes.c_bool
S = ctypes.c_char_p
PI = ctypes.POINTER(ctypes.c_int)
PP = ctypes.POINTER(Placement)


# the C integer types' ranges: ctypes truncates an int argument silently
# (c_int(2**32) is 0), so every declared function whose prototype has an
# integer argument checks it before the call (_checked)
RANGES = {}
for _t in (ctypes.c_int8, ctypes.c_int16, ctypes.c_int32, ctypes.c_int64,
           ctypes.c_int, ctypes.c_long, ctypes.c_longlong):
    RANGES[_t] = (-2 ** (8 * ctypes.sizeof(_t) - 1), 2 ** (8 * ctypes.sizeof(_t) - 1) - 1)
for _t in (ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64,
           ctypes.c_uint, ctypes.c_ulong, ctypes.c_size_t):
    RANGES[_t] = (0, 2 ** (8 * ctypes.sizeof(_t)) - 1)


def _type_name(t):
    lo, hi = RANGES[t]
    return ("int" if lo < 0 else "uint") + str(8 * ctypes.sizeof(t)) + "_t"


def check_int(value, ctype, what):
    """value (an int, or anything with __index__) as a Python int in the
    range of the C type ctype, else OverflowError / TypeError naming what
    ("Tensor.softmax: dim"), the value and the range."""
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {type(value).__name__} "
                        f"{value!r}") from None
    lo, hi = RANGES[ctype]
    if not lo <= v <= hi:
        raise OverflowError(f"{what}={v} is out of the range of the C "
                            f"{_type_name(ctype)} it is passed as [{lo}, {hi}]")
    return v


def int_array(values, what, ctype=ctypes.c_int, min_len=0):
    """A ctypes array of ctype holding values, each range-checked."""
    vals = [check_int(v, ctype, what) for v in values]
    return (ctype * max(min_len, len(vals)))(*vals)


def _range_error(cname, i, v, ctype):
    """The OverflowError for argument i of cname: named after the Python
    function the program called and its argument holding v."""
    from . import _errors
    api = _errors.api_frame(3)[0]
    arg = _errors.api_arg(v, 3) if api else None
    what = f"{api or cname}: {arg or f'argument {i} of {cname}'}"
    lo, hi = RANGES[ctype]
    return OverflowError(f"{what}={v} is out of the range of the C "
                         f"{_type_name(ctype)} it is passed as [{lo}, {hi}]")


def _type_error(cname, i, v):
    """The TypeError for a non-integer argument i of cname (ctypes' own is
    an ArgumentError "wrong type" naming neither)."""
    from . import _errors
    api = _errors.api_frame(3)[0]
    arg = _errors.api_arg_of(v, 3) if api else None
    what = f"{api or cname}: {arg or f'argument {i} of {cname}'}"
    return TypeError(f"{what} must be an integer, got {type(v).__name__} {v!r}")


def _checked(name, fn, argtypes):
    """fn with its integer arguments range-checked (a Python int outside
    the C type's range raises OverflowError instead of being truncated)."""
    ints = tuple((i, t) for i, t in enumerate(argtypes) if t in RANGES)
    if not ints:
        return fn

    def call(*args):
        for i, t in ints:
            v = args[i]
            if v.__class__ is int:
                lo, hi = RANGES[t]
                if lo <= v <= hi:
                    continue
            elif isinstance(v, (bool, ctypes._SimpleCData)):
                continue  # ctypes converts these itself
            elif hasattr(v, "__index__"):
                v = operator.index(v)
                if RANGES[t][0] <= v <= RANGES[t][1]:
                    args = args[:i] + (v,) + args[i + 1:]
                    continue
            else:
                raise _type_error(name, i, v)
            raise _range_error(name, i, v, t)
        return fn(*args)
    call.__name__ = name
    call.raw = fn  # unchecked, for callers that checked already
    call.argtypes, call.restype = fn.argtypes, fn.restype
    return call


def _decl(name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    globals()[name] = _checked(name, fn, argtypes)


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
    ("dt_view_shards", P, (P, Shape, PP)),
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

# the rest of the C API, by group (the Python names that reach each are
# listed in docs/python-api.md)
Z = ctypes.c_size_t
U64 = ctypes.c_uint64
PS = ctypes.POINTER(S)
PPt = ctypes.POINTER(P)
PG = ctypes.POINTER(Group)
for _n, _r, _a in [
    # value types
    ("dt_dtype_name", S, (I,)), ("dt_dtype_size", Z, (I,)),
    # runtimes, processes, streams and events, memory, cancelling
    ("dt_runtime_create", P, (ctypes.POINTER(RuntimeOptions),)),
    ("dt_runtime_destroy", None, (P,)),
    ("dt_runtime_num_processes", I, (P,)),
    ("dt_runtime_process_index", I, (P,)),
    ("dt_runtime_rank_is_local", B, (P, I)),
    ("dt_runtime_set_current", I, (P,)), ("dt_runtime_current", P, ()),
    ("dt_event_record", P, (P, I)), ("dt_stream_wait_event", I, (P, I, P)),
    ("dt_runtime_empty_cache", I, (P,)), ("dt_runtime_cancel", I, (P,)),
    ("dt_runtime_queue_depth", I64, (P, I)),
    # meshes
    ("dt_mesh_create_range", P, (P, S, Shape, PS)),
    ("dt_mesh_runtime", P, (P,)),
    ("dt_mesh_coords", I, (P, I, ctypes.POINTER(I64))),
    ("dt_mesh_dim_index", I, (P, S)),
    ("dt_mesh_sub", P, (P, PS, I, I)),
    ("dt_mesh_flatten", P, (P, PS, I, S)),
    # tensor metadata
    ("dt_tensor_ndim", I, (P,)), ("dt_tensor_storage_offset", I64, (P,)),
    ("dt_tensor_is_contiguous", B, (P,)),
    ("dt_tensor_shares_storage", B, (P, P)),
    ("dt_live_storage_bytes", I64, ()),
    # communication counts, the sharding cache
    ("dt_comm_count_begin", None, ()), ("dt_comm_count_end", CommCounts, ()),
    ("dt_sharding_cache_stats", CacheStats, ()),
    ("dt_sharding_cache_evictions", I64, ()),
    ("dt_sharding_cache_clear", None, ()),
    # ops not in the tables below
    ("dt_cross_entropy_smoothed", P, (P, P, I, I64, D)),
    ("dt_split", I, (P, I64, I, PPt, I)), ("dt_chunk", I, (P, I, I, PPt, I)),
    # interception
    ("dt_intercept_push", I, (InterceptFn, P)), ("dt_intercept_pop", I, ()),
    ("dt_op_call_run", I, (P,)), ("dt_op_call_name", S, (P,)),
    ("dt_op_call_num_inputs", I, (P,)), ("dt_op_call_input", P, (P, I)),
    ("dt_op_call_num_outputs", I, (P,)), ("dt_op_call_output", P, (P, I)),
    ("dt_op_call_format", I, (P, S, Z)),
    ("dt_op_printer_push", I, (P,)),
    ("dt_op_counter_push", P, ()), ("dt_op_counter_pop", I, (P,)),
    ("dt_op_counter_get", I64, (P, S)), ("dt_op_counter_total", I64, (P,)),
    ("dt_op_counter_format", I, (P, S, Z)),
    ("dt_op_counter_free", None, (P,)),
    # futures
    ("dt_future_retain", P, (P,)), ("dt_future_status", I, (P,)),
    ("dt_future_error", S, (P,)),
    ("dt_future_then", I, (P, FutureCallback, P)),
    ("dt_future_notify_ring", I, (P, I, U64)),
    # safetensors
    ("dt_load_safetensors", P, (S, S, ctypes.POINTER(LoadOptions))),
    ("dt_load_safetensors_async", P,
     (S, S, ctypes.POINTER(LoadOptions), PPt)),
    ("dt_save_safetensors", I, (S, PPt, PS, I)),
    ("dt_safetensors_index", ctypes.POINTER(SafetensorsInfo), (S,)),
    ("dt_safetensors_info_free", None, (ctypes.POINTER(SafetensorsInfo),)),
    ("dt_blas_set_threads", None, (I,)),
    # autograd and optimisers
    ("dt_backward_ex", I, (P, ctypes.POINTER(BackwardOptions))),
    ("dt_zero_grad", None, (P,)),
    ("dt_tensor_set_requires_grad", I, (P, B)),
    ("dt_grad_enabled", B, ()), ("dt_set_grad_enabled", B, (B,)),
    ("dt_tensor_grad_fn", S, (P,)), ("dt_autograd_live_nodes", I64, ()),
    # in-place writes (python/dtorch/_inplace.py, docs/inplace.md)
    ("dt_copy_", I, (P, P)), ("dt_tensor_version", I64, (P,)),
    ("dt_detach", P, (P,)), ("dt_set_grad", I, (P, P)),
    ("dt_sgd_create", P, (PPt, I, ctypes.POINTER(SgdOptions))),
    ("dt_adamw_create", P, (PPt, I, ctypes.POINTER(AdamwOptions))),
    ("dt_optimizer_step", I, (P,)), ("dt_optimizer_zero_grad", None, (P,)),
    ("dt_optimizer_steps", I64, (P,)), ("dt_optimizer_free", None, (P,)),
    ("dt_optimizer_release", None, (P,)),
    ("dt_clip_grad_norm", I, (PPt, I, D, ctypes.POINTER(D))),
    # debug.h: shadow checks, labels, communication debugging, inspection,
    # timelines (FILE * arguments are P: the Python side opens them)
    ("dt_shadow_begin", I, (D,)),
    ("dt_shadow_end", I, (ctypes.POINTER(ShadowReport),)),
    ("dt_label_push", None, (S,)), ("dt_label_pop", None, ()),
    ("dt_comm_debug_begin", I, ()), ("dt_comm_debug_end", I, (P, P)),
    ("dt_comm_debug_label_push", None, (S,)),
    ("dt_comm_debug_label_pop", None, ()),
    ("dt_visualize_sharding", I, (P, P)),
    ("dt_visualize_sharding_ex", I, (P, P, ctypes.POINTER(VisualizeOptions))),
    ("dt_tensor_describe", I, (P, P)), ("dt_memory_report", I, (P, P)),
    ("dt_trace_begin", I, (P, S)), ("dt_trace_end", I, (P,)),
    # sim.h: dry runs, fault injection
    ("dt_dry_run_report", I, (P, ctypes.POINTER(DryRunStats))),
    ("dt_dry_run_reset", I, (P,)),
    ("dt_fault_inject", I, (P, ctypes.POINTER(Fault))),
    ("dt_fault_clear", I, (P,)), ("dt_fault_count", I64, (P,)),
    # spmd.h: the per-rank model
    ("dt_spmd_run", I, (P, SpmdFn, P)), ("dt_spmd_rank", I, ()),
    ("dt_all_reduce", P, (P, I, PG)), ("dt_all_gather", P, (P, I, PG)),
    ("dt_reduce_scatter", P, (P, I, I, PG)),
    ("dt_all_to_all", P, (P, I, I, PG)), ("dt_broadcast", P, (P, I, PG)),
    ("dt_barrier", I, (PG,)), ("dt_send", I, (P, I)),
    ("dt_recv", P, (I, Shape, I)), ("dt_call_site", None, (S, I)),
    ("dt_dtensor_from_local", P, (P, P, PP)),
    ("dt_dtensor_from_local_shape", P, (P, P, PP, Shape)),
    ("dt_dtensor_to_local", P, (P,)),
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


def shape_of(dims, what=None):
    """A dt_shape of dims (each in int64's range: ctypes would truncate)."""
    if what is None:
        from . import _errors
        what = (_errors.api_frame(2)[0] or "dtorch") + ": size"
    dims = tuple(check_int(d, ctypes.c_int64, what) for d in dims)
    if len(dims) > MAX_DIMS:
        raise ValueError(f"{what}: {len(dims)} dims; at most {MAX_DIMS}")
    return Shape(len(dims), (ctypes.c_int64 * MAX_DIMS)(*dims))


def dims_of(shape):
    return tuple(shape.dims[i] for i in range(shape.ndim))
