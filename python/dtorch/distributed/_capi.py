"""ctypes declarations of the C functions dtorch.distributed uses beyond
dtorch._lib's: the runtime's process layout, mesh coordinates and
sub-meshes, the communication counters and the sharding picture. They
bind the library dtorch._lib loaded."""
import ctypes

from .. import _lib

P = ctypes.c_void_p
I = ctypes.c_int
I64 = ctypes.c_int64
B = ctypes.c_bool
S = ctypes.c_char_p


class CommCounts(ctypes.Structure):
    """dt_comm_counts (dtorch.h)."""
    _fields_ = [("all_reduce", I64), ("all_gather", I64),
                ("reduce_scatter", I64), ("all_to_all", I64),
                ("broadcast", I64), ("other", I64), ("bytes", I64),
                ("reserved", ctypes.c_uint64 * 9)]


def _decl(name, restype, *argtypes):
    fn = getattr(_lib.lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    globals()[name] = fn


for _n, _r, _a in [
    ("dt_runtime_current", P, ()),
    ("dt_runtime_num_processes", I, (P,)),
    ("dt_runtime_process_index", I, (P,)),
    ("dt_runtime_rank_is_local", B, (P, I)),
    ("dt_mesh_runtime", P, (P,)),
    ("dt_mesh_coords", I, (P, I, ctypes.POINTER(I64))),
    ("dt_mesh_dim_index", I, (P, S)),
    ("dt_mesh_sub", P, (P, ctypes.POINTER(S), I, I)),
    ("dt_comm_count_begin", None, ()),
    ("dt_comm_count_end", CommCounts, ()),
    ("dt_visualize_sharding", I, (P, P)),
    ("dt_set_grad_enabled", B, (B,)),
]:
    _decl(_n, _r, *_a)
