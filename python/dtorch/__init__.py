"""dtorch: PyTorch's tensor API on dtorch's runtime, with distributed
tensors (DeviceMesh + placements) as the DTorch Python API describes them.

    import dtorch
    a = dtorch.randn(4, 8)
    c = (a + a * 2.0).relu().sum()

dtypes, devices, finfo/iinfo are PyTorch's own objects (dtorch.float32 is
torch.float32). The library is found as dtorch._lib says (DTORCH_LIBRARY,
the package dir, the system loader).
"""
import torch as _torch

from . import _lib  # noqa: F401  (loads libdtorch first)
from ._errors import DTorchError, InvalidArgumentError, PlacementError, \
    UnsupportedError, DTorchTimeoutError, DTorchMemoryError  # noqa: F401
from ._tensor import Tensor  # noqa: F401
from ._future import TensorFuture  # noqa: F401
from ._ops import *  # noqa: F401,F403
from ._ops import empty, zeros, ones, rand, randn, randint, full, arange, tensor, \
    zeros_like, ones_like, full_like, manual_seed, add, sub, mul, div, pow, \
    matmul, maximum, minimum, where, transpose, permute, reshape, softmax, \
    log_softmax, clamp, var, cat, stack, live_tensors, synchronize, version  # noqa: F401
from ._grad_mode import no_grad, enable_grad, set_grad_enabled, inference_mode, \
    is_grad_enabled, is_inference_mode_enabled  # noqa: F401
from . import distributed_spec, nn, optim  # noqa: F401
from . import distributed  # noqa: F401  (torch.distributed; after distributed_spec)
from ._redistribute_mode import auto_redistribute, explicit_redistribute, \
    redistribute_mode  # noqa: F401
from ._serialization import save, load  # noqa: F401
from .distributed_spec import DeviceMesh, init_device_mesh, Shard, Replicate, \
    Partial, Placement  # noqa: F401
# the rest of the C API by group (docs/python-api.md lists every name)
from ._future import Future  # noqa: F401
from ._runtime import Runtime, Event, Stream, MemoryStats, DryRunStats, \
    num_processes, process_index, rank_is_local  # noqa: F401
from ._mesh import mesh_range, coordinates_of, dim_index, submesh, \
    flatten_dims, mesh_runtime  # noqa: F401
from ._debug import comm_count, sharding_cache_stats, sharding_cache_evictions, \
    sharding_cache_clear, label, shadow, comm_debug, comm_debug_label, \
    visualize_sharding, describe, memory_report, trace, intercept, op_counter, \
    op_printer  # noqa: F401
from ._io import load_safetensors, load_safetensors_async, save_safetensors, \
    safetensors_index  # noqa: F401
from ._autograd import autograd_live_nodes, clip_grad_norm_  # noqa: F401
from . import _spmd as spmd  # noqa: F401

# the type system is PyTorch's
dtype = _torch.dtype
device = _torch.device
finfo = _torch.finfo
iinfo = _torch.iinfo
Size = _torch.Size
float32 = float = _torch.float32
float64 = double = _torch.float64
float16 = half = _torch.float16
bfloat16 = _torch.bfloat16
int32 = int = _torch.int32
int64 = long = _torch.int64
uint8 = _torch.uint8
bool = _torch.bool

__version__ = "1.0.0"
