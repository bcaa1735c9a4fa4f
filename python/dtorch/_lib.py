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
