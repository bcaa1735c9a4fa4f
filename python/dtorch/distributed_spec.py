"""Device meshes and placements (the DTorch API: ``from dtorch.distributed_spec
import DeviceMesh, init_device_mesh, Shard, Replicate, Partial``).

A mesh arranges ranks of dtorch's runtime (this thread's, by default the
process's default runtime: DTORCH_NUM_RANKS ranks, or 8). dtorch runs
every rank in this process (the DTorch API's "single-device emulation", always
on), so a mesh of device_type "cuda" is emulated on CPU ranks when the
runtime has no CUDA ranks (a library without the CUDA backend, no GPU, or
a runtime not made with device="cuda"): a ``DTorchEmulationWarning`` says
so once, and ``mesh.device_type`` stays "cuda".
"""
import ctypes
import threading
import warnings
import weakref

from . import _errors, _lib

__all__ = ["DeviceMesh", "init_device_mesh", "Placement", "Shard",
           "Replicate", "Partial", "DTorchEmulationWarning"]


class DTorchEmulationWarning(UserWarning):
    """A "cuda" mesh or device runs on dtorch's CPU ranks."""


_warned = False


_SAME_DEVICE = "DTORCH_DTENSOR_IN_SAME_DEVICE"


def _emulation_asked():
    """Whether the environment asks for single-GPU emulation (the values
    the runtime takes as true: runtime/cuda_map.h)."""
    import os
    return os.environ.get(_SAME_DEVICE, "").strip().lower() in ("1", "true", "yes", "on")


def _device(device_type, call):
    """Calls call(c_device_type). A CUDA request the library cannot serve
    (DT_ERR_DEVICE: no GPU, no CUDA backend) fails naming the device,
    unless DTORCH_DTENSOR_IN_SAME_DEVICE asks for single-GPU emulation:
    then it runs on the CPU ranks (a DTorchEmulationWarning says so once)."""
    global _warned
    dev = (device_type or "cpu").encode()
    ptr = call(dev)
    if ptr or not dev.startswith(b"cuda") or \
            _lib.dt_last_status() != _lib.E["DT_ERR_DEVICE"]:
        return _errors.handle(ptr)
    if not _emulation_asked():
        detail = (_lib.dt_last_error() or b"").decode("utf-8", "replace")
        _lib.dt_clear_error()
        api = _errors.api_frame(2)[0] or "dtorch"
        raise _errors.DTorchError(
            f"{api}: device {device_type!r}: the runtime has no CUDA ranks (no "
            f"GPU, no CUDA backend or no device=\"cuda\" runtime: {detail}); "
            f"set {_SAME_DEVICE}=1 to emulate the ranks of a \"cuda\" mesh on "
            f"the CPU", "DT_ERR_DEVICE")
    _lib.dt_clear_error()
    if not _warned:
        _warned = True
        warnings.warn("dtorch: the runtime has no CUDA ranks (no CUDA "
                      "backend, GPU or device=\"cuda\" runtime); \"cuda\" "
                      f"meshes and devices run on its CPU ranks ({_SAME_DEVICE})",
                      DTorchEmulationWarning, stacklevel=4)
    return _errors.handle(call(b"cpu" + dev[4:]))


# the Python object of each live mesh handle, so t.device_mesh is mesh
_by_handle = weakref.WeakValueDictionary()


def _names_array(names, ndim):
    if names is None:
        return None, None
    names = list(names)
    if len(names) != ndim:
        raise ValueError(f"DeviceMesh: {len(names)} mesh_dim_names for a "
                         f"{ndim}-d mesh")
    keep = [n.encode() for n in names]
    return (ctypes.c_char_p * ndim)(*keep), keep


def _flatten(mesh):
    try:
        import torch
        if isinstance(mesh, torch.Tensor):
            return [int(x) for x in mesh.flatten().tolist()], tuple(mesh.shape)
    except ImportError:
        pass
    if isinstance(mesh, (list, tuple)) and mesh and isinstance(mesh[0], (list, tuple)):
        parts = [_flatten(m) for m in mesh]
        shapes = {p[1] for p in parts}
        if len(shapes) != 1:
            raise ValueError("DeviceMesh: the nested lists are ragged")
        return [r for p in parts for r in p[0]], (len(mesh),) + parts[0][1]
    return [int(x) for x in mesh], (len(mesh),)


class DeviceMesh:
    """An n-d arrangement of ranks: DeviceMesh("cuda") is one device;
    DeviceMesh("cuda", [[0, 1], [2, 3]], mesh_dim_names=["dp", "tp"]) a
    2-d mesh of runtime ranks 0-3 (a nested list or a torch.Tensor)."""

    def __init__(self, device_type, mesh=None, mesh_dim_names=None, *, _handle=None):
        self.device_type = device_type
        if _handle is not None:
            self._h = _handle
        else:
            ranks, shape = _flatten([0] if mesh is None else mesh)
            names, _keep = _names_array(mesh_dim_names, len(shape))
            arr = _lib.int_array(ranks, "DeviceMesh: mesh")
            self._h = _device(device_type, lambda d: _lib.dt_mesh_create(
                None, d, _lib.shape_of(shape), arr, names))
        _by_handle[self._h] = self

    @classmethod
    def _wrap(cls, borrowed):
        m = _by_handle.get(borrowed)
        if m is not None:
            return m
        buf = ctypes.create_string_buffer(64)
        _lib.dt_mesh_format(borrowed, buf, 64)
        dev = buf.value.split(b"'")[1].decode() if b"'" in buf.value else "cpu"
        return cls(dev, _handle=_lib.dt_mesh_retain(borrowed))

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h and _lib is not None and _lib.dt_mesh_release is not None:
            _lib.dt_mesh_release(h)

    @property
    def ndim(self):
        return _lib.dt_mesh_ndim(self._h)

    @property
    def shape(self):
        return _lib.dims_of(_lib.dt_mesh_shape(self._h))

    def size(self, mesh_dim=None):
        return _lib.dt_mesh_size(self._h) if mesh_dim is None else self.shape[mesh_dim]

    @property
    def mesh_dim_names(self):
        names = [_lib.dt_mesh_dim_name(self._h, i) for i in range(self.ndim)]
        if all(n is None for n in names):
            return None
        return tuple(n.decode() if n else None for n in names)

    @property
    def mesh(self):
        """The runtime ranks, as a torch.Tensor of the mesh's shape."""
        import itertools
        import torch
        shape = self.shape
        out = []
        for coords in itertools.product(*[range(s) for s in shape]):
            c = _lib.int_array(coords, "DeviceMesh: coordinates", ctypes.c_int64)
            out.append(_lib.dt_mesh_rank(self._h, c))
        return torch.tensor(out, dtype=torch.int64).reshape(shape)

    def __repr__(self):
        buf = ctypes.create_string_buffer(4096)
        _lib.dt_mesh_format(self._h, buf, 4096)
        text = buf.value.decode()
        if self.device_type and not text.startswith(f"DeviceMesh('{self.device_type}'"):
            text = f"DeviceMesh('{self.device_type}'" + text[text.index(","):]
        return text

    def __eq__(self, other):
        return isinstance(other, DeviceMesh) and (
            self._h == other._h or (self.shape == other.shape and
                                    self.mesh_dim_names == other.mesh_dim_names and
                                    self.mesh.tolist() == other.mesh.tolist()))

    __hash__ = object.__hash__

    # ---- torch.distributed.DeviceMesh's rank queries: "the current rank"
    # is dtorch.distributed._world's answer (the first rank this process
    # hosts)
    def _dim(self, mesh_dim, fn):
        """mesh_dim (an int, negatives from the end, or a dim name) as an
        index; None only on a 1-d mesh."""
        n = self.ndim
        if mesh_dim is None:
            if n != 1:
                raise ValueError(f"DeviceMesh.{fn}: a {n}-d mesh needs mesh_dim "
                                 f"(an index or one of {self.mesh_dim_names})")
            return 0
        if isinstance(mesh_dim, str):
            names = self.mesh_dim_names or ()
            if mesh_dim not in names:
                raise KeyError(f"DeviceMesh.{fn}: mesh dim {mesh_dim!r} is not one "
                               f"of the mesh's dim names {names}")
            return names.index(mesh_dim)
        if not isinstance(mesh_dim, int) or not -n <= mesh_dim < n:
            raise ValueError(f"DeviceMesh.{fn}: mesh_dim {mesh_dim!r} is out of "
                             f"range for a {n}-d mesh")
        return mesh_dim % n

    def get_rank(self):
        """The current global rank (dtorch.distributed.get_rank())."""
        from .distributed import _world
        return _world.current_rank(_capi_runtime(self))

    def get_coordinate(self):
        """The current rank's coordinates in the mesh; None outside it."""
        from .distributed import _capi
        me = self.get_rank()
        coords = (ctypes.c_int64 * max(1, self.ndim))()
        if _capi.dt_mesh_coords(self._h, me, coords) != 0:
            _lib.dt_clear_error()
            return None
        return tuple(int(coords[i]) for i in range(self.ndim))

    def get_local_rank(self, mesh_dim=None):
        """The current rank's coordinate along mesh_dim (its rank in that
        dim's group)."""
        d = self._dim(mesh_dim, "get_local_rank")
        c = self.get_coordinate()
        if c is None:
            raise ValueError(f"DeviceMesh.get_local_rank: the current rank "
                             f"{self.get_rank()} is not in {self!r}")
        return c[d]

    def get_group(self, mesh_dim=None):
        """The ProcessGroup of mesh_dim that holds the current rank (a
        name and its ranks: dtorch needs no communicator object)."""
        from .distributed import ProcessGroup
        d = self._dim(mesh_dim, "get_group")
        c = self.get_coordinate()
        if c is None:
            raise ValueError(f"DeviceMesh.get_group: the current rank "
                             f"{self.get_rank()} is not in {self!r}")
        mesh = self.mesh.movedim(d, -1)
        others = [x for i, x in enumerate(c) if i != d]
        ranks = mesh[tuple(others)].tolist()
        names = self.mesh_dim_names
        return ProcessGroup(ranks, names[d] if names and names[d] else f"mesh_dim_{d}")

    def get_all_groups(self):
        return [self.get_group(d) for d in range(self.ndim)]

    def __getitem__(self, names):
        """mesh["tp"], mesh["dp", "tp"]: the sub-mesh over those named dims
        that holds the current rank."""
        from .distributed import _capi
        names = (names,) if isinstance(names, str) else tuple(names)
        have = self.mesh_dim_names or ()
        for n in names:
            if not isinstance(n, str) or n not in have:
                raise KeyError(f"DeviceMesh[{names!r}]: {n!r} is not one of the "
                               f"mesh's dim names {have}")
        if len(names) == self.ndim and names == have:
            return self
        arr = (ctypes.c_char_p * len(names))(*[n.encode() for n in names])
        h = _errors.handle(_capi.dt_mesh_sub(self._h, arr, len(names), self.get_rank()))
        return DeviceMesh(self.device_type, _handle=h)

    def __enter__(self):
        _mesh_stack().append(self)
        return self

    def __exit__(self, *exc):
        _mesh_stack().pop()
        return False


# `with mesh:` makes mesh the default of dtorch.distributed.tensor's
# factories, distribute_tensor and parallelize_module in this thread
# (torch's mesh context)
_mesh_tls = threading.local()


def _mesh_stack():
    if not hasattr(_mesh_tls, "stack"):
        _mesh_tls.stack = []
    return _mesh_tls.stack


def current_mesh():
    """The innermost open `with mesh:` block's mesh in this thread, or None."""
    stack = _mesh_stack()
    return stack[-1] if stack else None


def _capi_runtime(mesh):
    from .distributed import _capi
    return _errors.handle(_capi.dt_mesh_runtime(mesh._h))


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None):
    """The mesh over ranks 0..n-1 of this thread's runtime, row-major:
    init_device_mesh("cuda", (2, 2), mesh_dim_names=["dp", "tp"])."""
    shape = (mesh_shape,) if isinstance(mesh_shape, int) else tuple(mesh_shape)
    names, _keep = _names_array(mesh_dim_names, len(shape))
    h = _device(device_type, lambda d: _lib.dt_mesh_init(
        None, d, _lib.shape_of(shape), names))
    return DeviceMesh(device_type, _handle=h)


class Placement:
    """How a tensor lies along one mesh dim."""

    def is_shard(self, dim=None):
        return False

    def is_replicate(self):
        return False

    def is_partial(self):
        return False


class Shard(Placement):
    def __init__(self, dim):
        self.dim = int(dim)

    def is_shard(self, dim=None):
        return dim is None or dim == self.dim

    def _c(self):
        return _lib.Placement(_lib.E["DT_PLACEMENT_SHARD"],
                              _lib.check_int(self.dim, ctypes.c_int, "Shard: dim"), 0)

    def __eq__(self, other):
        return isinstance(other, Shard) and other.dim == self.dim

    def __hash__(self):
        return hash(("Shard", self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"

    def __str__(self):  # torch's short form
        return f"S({self.dim})"


class Replicate(Placement):
    def is_replicate(self):
        return True

    def _c(self):
        return _lib.Placement(_lib.E["DT_PLACEMENT_REPLICATE"], 0, 0)

    def __eq__(self, other):
        return isinstance(other, Replicate)

    def __hash__(self):
        return hash("Replicate")

    def __repr__(self):
        return "Replicate()"

    def __str__(self):
        return "R"


_REDUCE_C = {"sum": "DT_REDUCE_SUM", "avg": "DT_REDUCE_AVG", "max": "DT_REDUCE_MAX",
             "min": "DT_REDUCE_MIN", "product": "DT_REDUCE_PROD"}
_REDUCE = list(_REDUCE_C)


class Partial(Placement):
    """Pending reduction: reduce_op "sum" (default), "avg", "max", "min",
    "product"."""

    def __init__(self, reduce_op="sum"):
        if reduce_op not in _REDUCE:
            raise ValueError(f"Partial: reduce_op {reduce_op!r} is not one of {_REDUCE}")
        self.reduce_op = reduce_op

    def is_partial(self):
        return True

    def _c(self):
        return _lib.Placement(_lib.E["DT_PLACEMENT_PARTIAL"], 0,
                              _lib.E[_REDUCE_C[self.reduce_op]])

    def __eq__(self, other):
        return isinstance(other, Partial) and other.reduce_op == self.reduce_op

    def __hash__(self):
        return hash(("Partial", self.reduce_op))

    def __repr__(self):
        return f"Partial({self.reduce_op})"

    def __str__(self):
        return f"P({self.reduce_op})"


def _from_c(p):
    if p.kind == _lib.E["DT_PLACEMENT_SHARD"]:
        return Shard(p.dim)
    if p.kind == _lib.E["DT_PLACEMENT_PARTIAL"]:
        return Partial({_lib.E[c]: n for n, c in _REDUCE_C.items()}[p.reduce])
    return Replicate()


def _placements_array(placements, ndim):
    placements = list(placements)
    if len(placements) != ndim:
        raise ValueError(f"placements: {len(placements)} given for a {ndim}-d "
                         f"mesh ({placements})")
    for p in placements:
        if not isinstance(p, Placement):
            raise TypeError(f"placements: {p!r} is not a Shard, Replicate or Partial")
    return (_lib.Placement * ndim)(*[p._c() for p in placements])
