"""Checkpoints in the safetensors format (dtorch.h "safetensors",
docs/io.md): each rank reads only its shard's byte ranges, so any file
loads into any mesh and placements; a save writes the global values
atomically. The names follow safetensors.torch (save_file's dict of
tensors; load by name)."""
import collections
import ctypes

from . import _errors, _lib

SafetensorsEntry = collections.namedtuple(
    "SafetensorsEntry", "name dtype_name dtype shape offset nbytes")
SafetensorsEntry.__doc__ = ("One tensor of a file's header: dtype is a torch "
                            "dtype, or None for one dtorch does not hold (listed, "
                            "not loadable); offset is from the file's start.")
SafetensorsIndex = collections.namedtuple("SafetensorsIndex", "tensors metadata")


def _load_options(device_mesh, placements, device, direct, queue_depth, merge_gap):
    """A LoadOptions and what it points into."""
    from .distributed_spec import DeviceMesh, _placements_array
    o = _lib.LoadOptions()
    keep = []
    if device_mesh is not None:
        if not isinstance(device_mesh, DeviceMesh):
            raise TypeError(f"load_safetensors: device_mesh {device_mesh!r} is not a DeviceMesh")
        o.mesh = device_mesh._h
        if placements is not None:
            arr = _placements_array(placements, device_mesh.ndim)
            keep.append(arr)
            o.placements = arr
    elif placements is not None:
        raise ValueError("load_safetensors: placements given without a device_mesh")
    if device is not None:
        keep.append(str(device).encode())
        o.device = keep[-1]
    o.direct, o.queue_depth, o.merge_gap = bool(direct), int(queue_depth), int(merge_gap)
    return o, keep


def load_safetensors(path, name, *, device_mesh=None, placements=None, device=None,
                     direct=False, queue_depth=0, merge_gap=0):
    """Tensor `name` of the safetensors file at path: a DTensor on
    device_mesh with placements (all Replicate when None), or a
    single-device tensor on device ("cpu" / "cpu:N"; None: rank 0 of the
    current runtime). Returns at once; ops and fetches wait for the data
    (a read that fails later is the tensor's error). direct: O_DIRECT
    reads; queue_depth (0: 32) and merge_gap (0: 4096, < 0: never) tune
    the reads (dt_load_safetensors)."""
    from ._tensor import Tensor
    o, _keep = _load_options(device_mesh, placements, device, direct, queue_depth, merge_gap)
    h = _lib.dt_load_safetensors(str(path).encode(), str(name).encode(), ctypes.byref(o))
    return Tensor._from_handle(_errors.handle(h))


def load_safetensors_async(path, name, **options):
    """(tensor, Future): the Future completes when every rank has read
    its part, with the read's error if any (dt_load_safetensors_async);
    options as load_safetensors'."""
    from ._future import Future
    from ._tensor import Tensor
    o, _keep = _load_options(options.pop("device_mesh", None), options.pop("placements", None),
                             options.pop("device", None), options.pop("direct", False),
                             options.pop("queue_depth", 0), options.pop("merge_gap", 0))
    if options:
        raise TypeError(f"load_safetensors_async: unknown options {sorted(options)}")
    out = ctypes.c_void_p()
    f = _lib.dt_load_safetensors_async(str(path).encode(), str(name).encode(),
                                       ctypes.byref(o), ctypes.byref(out))
    f = _errors.handle(f)
    return Tensor._from_handle(out.value), Future(f)


def save_safetensors(tensors, path):
    """Writes {name: dtorch.Tensor} to path, atomically (a temporary file
    renamed over path): the global values whatever the placements
    (safetensors.torch.save_file's argument order; dt_save_safetensors)."""
    from ._tensor import Tensor
    if not isinstance(tensors, dict):
        raise TypeError(f"save_safetensors: tensors must be a dict of name -> "
                        f"dtorch.Tensor, got {type(tensors).__name__}")
    items = list(tensors.items())
    for k, v in items:
        if not isinstance(k, str) or not isinstance(v, Tensor):
            raise TypeError(f"save_safetensors: entry {k!r}: names must be str and "
                            f"values dtorch.Tensor, got {type(v).__name__}")
    n = len(items)
    hs = (ctypes.c_void_p * max(1, n))(*[v._h for _, v in items])
    names = (ctypes.c_char_p * max(1, n))(*[k.encode() for k, _ in items])
    _errors.check(_lib.dt_save_safetensors(str(path).encode(), hs, names, n))


def safetensors_index(path):
    """The file's header, not its data: SafetensorsIndex(tensors: a list
    of SafetensorsEntry in data order, metadata: the "__metadata__" dict)
    (dt_safetensors_index)."""
    from ._tensor import DTYPES
    info = _errors.handle(_lib.dt_safetensors_index(str(path).encode()))
    try:
        i = info.contents
        entries = []
        for k in range(i.n):
            e = i.tensors[k]
            entries.append(SafetensorsEntry(
                e.name.decode(), e.dtype_name.decode(),
                DTYPES[e.dtype] if 0 <= e.dtype < len(DTYPES) else None,
                _lib.dims_of(e.shape), e.offset, e.nbytes))
        meta = {i.metadata_keys[k].decode(): i.metadata_values[k].decode()
                for k in range(i.n_metadata)}
    finally:
        _lib.dt_safetensors_info_free(info)
    return SafetensorsIndex(entries, meta)
