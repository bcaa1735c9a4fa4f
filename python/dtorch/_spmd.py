"""The per-rank (SPMD) model (spmd.h, docs/spmd.md): spmd_run(fn) runs
fn(ctx) on every rank's own thread, as a torchrun script runs once per
rank; inside it a rank makes its own local tensors (factories default to
its device, "cpu:<rank>"), calls collectives on them (functional, as
torch.distributed._functional_collectives) and builds DTensors from its
shard.

Why this is safe from Python: dtorch calls fn through a ctypes callback,
which takes the GIL on the rank thread; every dtorch call made through
ctypes releases it again, so a rank blocked in a collective lets its
peers run. The ranks' Python code is serialised by the GIL (correct, not
parallel); the kernels still run in parallel. An exception in fn fails
that rank (the others' collectives fail with DT_ERR_DESYNC naming it) and
is re-raised by spmd_run. Each collective reports the Python caller's
file and line in desync messages (dt_call_site)."""
import ctypes
import sys
import threading

from . import _errors, _lib

_REDUCE = {"sum": 0, "avg": 1, "max": 2, "min": 3, "product": 4, "prod": 4}

# dt_call_site borrows the file name: one bytes object per file, kept
_files = {}
_files_lock = threading.Lock()


def _set_site(f):
    name = f.f_code.co_filename
    with _files_lock:
        b = _files.get(name)
        if b is None:
            b = _files[name] = name.encode("utf-8", "replace")
    _lib.dt_call_site(b, f.f_lineno)


_PKG = __file__.rsplit("/", 1)[0] + "/"


def user_frame(depth=1):
    """The innermost frame on the stack outside the dtorch package (the
    program's line that called into dtorch), or None."""
    f = sys._getframe(depth + 1)
    while f is not None and f.f_code.co_filename.startswith(_PKG):
        f = f.f_back
    return f


def _call_site(depth=2):
    """Makes the program's line (the innermost frame outside dtorch, so
    dtorch.distributed's wrappers name their caller's) the call site of
    this thread's next collective (desync messages) or run."""
    f = user_frame(depth)
    if f is not None:
        _set_site(f)


user_call_site = _call_site


def site_in_spmd():
    """Inside an SPMD function: the program's line becomes the site of the
    collectives the next DTensor redistribute, fetch or backward makes
    (they report it in desync messages). Nothing elsewhere."""
    if _lib.dt_spmd_rank() >= 0:
        _call_site(2)


class SpmdContext:
    """What fn sees: rank (this rank's runtime rank id), world_size, the
    Runtime."""

    def __init__(self, rank, world_size, runtime):
        self.rank, self.world_size, self.runtime = rank, world_size, runtime

    def __repr__(self):
        return f"SpmdContext(rank={self.rank}, world_size={self.world_size})"


def spmd_run(fn, *args, runtime=None):
    """Runs fn(ctx, *args) on every rank of runtime (the current one when
    None) and returns the ranks' results, a list in rank order. Blocks
    until every rank returned; work other threads issue meanwhile runs
    after. A rank that raises fails the run: its exception is re-raised
    here (the lowest failing rank's; dtorch's message is in its
    __cause__ when dtorch failed it). Not from inside fn (no nesting)."""
    from ._runtime import Runtime
    rt = runtime or Runtime.current()
    _call_site()
    st, results, raised = run_ranks(lambda ctx: fn(ctx, *args), rt)
    if st != 0:
        err = _errors.error(st)
        if raised:
            first = raised[min(raised)]
            if first is not err:
                raise first from err
        raise err
    return [results[r] for r in sorted(results)]


def status_of(e):
    """The dt_status a rank's function returns for exception e: a dtorch
    error's own, DT_ERR_INTERNAL for any other."""
    if isinstance(e, _errors.DTorchError) and e.status in _errors.STATUS_NAMES:
        return _errors.STATUS_NAMES.index(e.status)
    return 13  # DT_ERR_INTERNAL


def run_ranks(fn, rt, on_raise=None):
    """dt_spmd_run of fn(ctx) on every rank of rt: (status, {rank:
    result}, {rank: exception}). on_raise(rank, exc), when given, runs on
    the failing rank's thread before the rank leaves its function (its
    peers' errors may then name what it raised). The caller sets the call
    site."""
    results, raised = {}, {}

    def body(ctxp):
        c = ctxp.contents
        ctx = SpmdContext(c.rank, c.world_size, rt)
        try:
            results[c.rank] = fn(ctx)
            return 0
        except BaseException as e:  # noqa: B902 (handed to the caller)
            raised[c.rank] = e
            if on_raise is not None:
                on_raise(c.rank, e)
            return status_of(e)
    cb = _lib.SpmdFn(body)  # alive until dt_spmd_run returns
    st = _lib.dt_spmd_run(rt._handle(), cb, None)
    return st, results, raised


def spmd_rank():
    """The calling thread's SPMD rank; -1 outside an SPMD function."""
    return _lib.dt_spmd_rank()


class _Group:
    """A dt_group from None (every rank of the runtime), a list of runtime
    ranks, a DeviceMesh (all its ranks) or (DeviceMesh, mesh_dim) (the
    ranks along that dim, as mesh.get_group(dim)); mesh_dim may be a dim
    name."""

    def __init__(self, group, what):
        from .distributed_spec import DeviceMesh
        self.c, self.keep = None, None
        if group is None:
            return
        g = _lib.Group()
        if isinstance(group, DeviceMesh):
            g.mesh, g.mesh_dim = group._h, -1
            self.keep = group
        elif isinstance(group, tuple) and len(group) == 2 and isinstance(group[0], DeviceMesh):
            mesh, dim = group
            if isinstance(dim, str):
                dim = _lib.dt_mesh_dim_index(mesh._h, dim.encode())
                if dim < 0:
                    raise _errors.last()
            g.mesh, g.mesh_dim = mesh._h, int(dim)
            self.keep = mesh
        elif isinstance(group, (list, tuple, range)):
            ranks = [int(r) for r in group]
            arr = _lib.int_array(ranks, "dtorch.distributed: ranks", min_len=1)
            g.ranks, g.nranks = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int)), len(ranks)
            self.keep = arr
        else:
            raise TypeError(f"{what}: group {group!r} is not None, a list of ranks, "
                            "a DeviceMesh or (DeviceMesh, mesh_dim)")
        self.c = g

    def ptr(self):
        return ctypes.byref(self.c) if self.c is not None else None


def _op(op, what):
    if op not in _REDUCE:
        raise ValueError(f"{what}: op {op!r} is not one of {list(_REDUCE)}")
    return _REDUCE[op]


def _tensor(t, what):
    from ._tensor import Tensor
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: expected a dtorch.Tensor, got {type(t).__name__}")
    return t._h


def all_reduce(tensor, op="sum", group=None):
    """The members' tensors reduced (op "sum", "avg", "max", "min",
    "product"); a new local tensor."""
    from ._tensor import _wrap
    h, g = _tensor(tensor, "all_reduce"), _Group(group, "all_reduce")
    _call_site()
    return _wrap(_lib.dt_all_reduce(h, _op(op, "all_reduce"), g.ptr()))


def all_gather(tensor, dim=0, group=None):
    """The members' tensors concatenated along dim, in member order."""
    from ._tensor import _wrap
    h, g = _tensor(tensor, "all_gather"), _Group(group, "all_gather")
    _call_site()
    return _wrap(_lib.dt_all_gather(h, int(dim), g.ptr()))


def reduce_scatter(tensor, op="sum", dim=0, group=None):
    """tensor reduced over the members, cut into equal pieces along dim:
    member i keeps piece i."""
    from ._tensor import _wrap
    h, g = _tensor(tensor, "reduce_scatter"), _Group(group, "reduce_scatter")
    _call_site()
    return _wrap(_lib.dt_reduce_scatter(h, _op(op, "reduce_scatter"), int(dim), g.ptr()))


def all_to_all(tensor, split_dim=0, concat_dim=0, group=None):
    """Piece j of tensor (cut along split_dim) to member j; the pieces
    received concatenated along concat_dim."""
    from ._tensor import _wrap
    h, g = _tensor(tensor, "all_to_all"), _Group(group, "all_to_all")
    _call_site()
    return _wrap(_lib.dt_all_to_all(h, int(split_dim), int(concat_dim), g.ptr()))


def broadcast(tensor, src, group=None):
    """src's tensor on every member (src a runtime rank in the group)."""
    from ._tensor import _wrap
    h, g = _tensor(tensor, "broadcast"), _Group(group, "broadcast")
    _call_site()
    return _wrap(_lib.dt_broadcast(h, int(src), g.ptr()))


def barrier(group=None):
    g = _Group(group, "barrier")
    _call_site()
    _errors.check(_lib.dt_barrier(g.ptr()))


def send(tensor, dst):
    """Blocks until rank dst took the bytes."""
    _errors.check(_lib.dt_send(_tensor(tensor, "send"), int(dst)))


def recv(src, shape, dtype):
    """A tensor of shape and dtype from src's next send."""
    from ._tensor import _wrap, dt_dtype
    return _wrap(_lib.dt_recv(int(src), _lib.shape_of(shape), dt_dtype(dtype)))


def dtensor_from_local(local, device_mesh, placements, shape=None):
    """DTensor.from_local inside an SPMD function: a DTensor on
    device_mesh whose shard on this rank is `local`; placements are
    claims (shadow checks Replicate ones). shape: the global shape, for
    uneven shards (else inferred as if every shard were this one's)."""
    from ._tensor import _wrap
    from .distributed_spec import _placements_array
    arr = _placements_array(placements, device_mesh.ndim)
    h = _tensor(local, "dtensor_from_local")
    if shape is None:
        return _wrap(_lib.dt_dtensor_from_local(h, device_mesh._h, arr))
    return _wrap(_lib.dt_dtensor_from_local_shape(h, device_mesh._h, arr,
                                                  _lib.shape_of(shape)))


def dtensor_to_local(tensor):
    """This rank's shard of a DTensor (DTensor.to_local), sharing its
    storage, inside an SPMD function."""
    from ._tensor import _wrap
    return _wrap(_lib.dt_dtensor_to_local(_tensor(tensor, "dtensor_to_local")))
