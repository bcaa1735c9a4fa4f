"""torch.distributed's collectives on plain tensors (dist.all_reduce(t),
all_gather, broadcast, send / recv, ...), for programs that run once per
rank: inside an SPMD function (python -m dtorch.run, dtorch.spmd), where
each rank's thread holds its own local tensors.

Each call is one of dtorch's SPMD collectives (dtorch._spmd: functional,
with the program's file:line as its call site, so a desync names it) and
then, as torch's collectives are in place, a write of the result into
the caller's tensor (dt_copy_, under no_grad: a collective is no autograd
op, as torch's are not). The call returns when the data is there:
async_op=True gives a Work that is already complete (wait() returns at
once), so the values are those of torch's, the overlap of communication
with the rank's Python is not.

One controller (no SPMD function) has no per-rank tensors to reduce:
the calls refuse with a message saying so.
"""
import enum
import io
import pickle
import warnings

from .. import _errors, _lib, _spmd
from . import _world


class ReduceOp:
    """torch.distributed.ReduceOp: ReduceOp.SUM, AVG, PRODUCT, MIN, MAX
    (BAND, BOR, BXOR, PREMUL_SUM are refused when used)."""

    class RedOpType(enum.Enum):
        SUM = 0
        AVG = 1
        PRODUCT = 2
        MIN = 3
        MAX = 4
        BAND = 5
        BOR = 6
        BXOR = 7
        PREMUL_SUM = 8
        UNUSED = 9

    SUM = RedOpType.SUM
    AVG = RedOpType.AVG
    PRODUCT = RedOpType.PRODUCT
    MIN = RedOpType.MIN
    MAX = RedOpType.MAX
    BAND = RedOpType.BAND
    BOR = RedOpType.BOR
    BXOR = RedOpType.BXOR
    PREMUL_SUM = RedOpType.PREMUL_SUM


_OPS = {ReduceOp.SUM: "sum", ReduceOp.AVG: "avg", ReduceOp.PRODUCT: "product",
        ReduceOp.MIN: "min", ReduceOp.MAX: "max"}


class Work:
    """A collective's handle (async_op=True). dtorch's SPMD collectives
    complete before they return, so a Work is complete when made."""

    def __init__(self, result=None):
        self._result = result

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def exception(self):
        return None

    def synchronize(self):
        pass

    def result(self):
        return list(self._result or [])

    def get_future(self):
        import torch
        fut = torch.futures.Future()
        fut.set_result(self.result())
        return fut

    def __repr__(self):
        return "Work(completed)"


def _need_spmd(fn):
    if _lib.dt_spmd_rank() < 0:
        raise RuntimeError(
            f"dtorch.distributed.{fn}: a collective on plain tensors runs once "
            f"per rank, inside an SPMD function (python -m dtorch.run, "
            f"dtorch.run.spawn or dtorch.spmd.spmd_run); one controller holds "
            f"every rank's data in DTensors: use redistribute")
    from . import _need
    _need(fn)


def _ranks(group, fn):
    """The group's runtime ranks (None: the world) and whether the calling
    rank is a member (torch: a non-member's call does nothing)."""
    from . import _group_ranks
    ranks = _group_ranks(group, fn)
    if ranks is None:
        return None, True
    return list(ranks), _world.current_rank() in ranks


def _not_member(fn):
    warnings.warn(f"dtorch.distributed.{fn}: the calling rank "
                  f"{_world.current_rank()} is not in the group: nothing is "
                  f"done (as torch.distributed does)", stacklevel=3)


def _check_tensor(t, fn, what="tensor"):
    from .._tensor import Tensor
    if not isinstance(t, Tensor):
        raise TypeError(f"dtorch.distributed.{fn}: {what} is a "
                        f"{type(t).__name__}, not a dtorch.Tensor")
    if t.is_dtensor():
        raise TypeError(f"dtorch.distributed.{fn}: {what} is a DTensor; pass "
                        f"its to_local() (torch's collectives take a rank's "
                        f"local tensor)")
    return t


def _reduce_name(op, fn):
    if isinstance(op, str) and op in _spmd._REDUCE:
        return op
    name = _OPS.get(op)
    if name is None:
        raise NotImplementedError(f"dtorch.distributed.{fn}: op {op} is not one "
                                  f"of SUM, AVG, PRODUCT, MIN, MAX")
    return name


def _write(dst, src):
    """src's values into the caller's tensor dst (its storage: every view
    of it sees them), outside autograd."""
    from .._grad_mode import no_grad
    with no_grad():
        _errors.check(_lib.dt_copy_(dst._h, src._h))


def _done(async_op, *tensors):
    return Work(tensors) if async_op else None


def _site():
    _spmd.user_call_site()


# ---- the collectives
def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """tensor <- the reduction of every member's tensor (in place)."""
    fn = "all_reduce"
    _need_spmd(fn)
    t = _check_tensor(tensor, fn)
    ranks, member = _ranks(group, fn)
    if not member:
        return _not_member(fn)
    name = _reduce_name(op, fn)
    _site()
    _write(t, _spmd.all_reduce(t, name, ranks))
    return _done(async_op, t)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[i] <- member i's tensor (every member's the same shape)."""
    fn = "all_gather"
    _need_spmd(fn)
    t = _check_tensor(tensor, fn)
    ranks, member = _ranks(group, fn)
    if not member:
        return _not_member(fn)
    n = len(ranks) if ranks is not None else _world.world_size()
    if not isinstance(tensor_list, (list, tuple)) or len(tensor_list) != n:
        raise ValueError(f"dtorch.distributed.{fn}: tensor_list must be a list of "
                         f"{n} tensors (one per member), got {tensor_list!r:.80}")
    for i, o in enumerate(tensor_list):
        _check_tensor(o, fn, f"tensor_list[{i}]")
    _site()
    g = _spmd.all_gather(t.unsqueeze(0), 0, ranks)
    for i, o in enumerate(tensor_list):
        _write(o, g[i])
    return _done(async_op, *tensor_list)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """output_tensor <- the members' inputs concatenated along dim 0 (an
    output of n * input's rows), or stacked (an output [n, *input])."""
    fn = "all_gather_into_tensor"
    _need_spmd(fn)
    out = _check_tensor(output_tensor, fn, "output_tensor")
    t = _check_tensor(input_tensor, fn, "input_tensor")
    ranks, member = _ranks(group, fn)
    if not member:
        return _not_member(fn)
    _site()
    g = _spmd.all_gather(t.unsqueeze(0), 0, ranks)
    if g.numel() != out.numel():
        raise ValueError(f"dtorch.distributed.{fn}: output_tensor has {out.numel()} "
                         f"elements, the gathered inputs {g.numel()}")
    _write(out, g.reshape(*out.shape))
    return _done(async_op, out)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """output <- the reduction over the members of their input_list[rank
    in group]."""
    fn = "reduce_scatter"
    _need_spmd(fn)
    out = _check_tensor(output, fn, "output")
    ranks, member = _ranks(group, fn)
    if not member:
        return _not_member(fn)
    n = len(ranks) if ranks is not None else _world.world_size()
    if not isinstance(input_list, (list, tuple)) or len(input_list) != n:
        raise ValueError(f"dtorch.distributed.{fn}: input_list must be a list of "
                         f"{n} tensors (one per member)")
    from .. import _ops
    parts = [_check_tensor(x, fn, f"input_list[{i}]").unsqueeze(0)
             for i, x in enumerate(input_list)]
    name = _reduce_name(op, fn)
    _site()
    r = _spmd.reduce_scatter(_ops.cat(parts, 0), name, 0, ranks)
    _write(out, r.reshape(*out.shape))
    return _done(async_op, out)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """output <- this member's block (dim 0, n equal blocks) of the
    reduction of every member's input."""
    fn = "reduce_scatter_tensor"
    _need_spmd(fn)
    out = _check_tensor(output, fn, "output")
    t = _check_tensor(input, fn, "input")
    ranks, member = _ranks(group, fn)
    if not member:
        return _not_member(fn)
    n = len(ranks) if ranks is not None else _world.world_size()
    if t.numel() != n * out.numel():
        raise ValueError(f"dtorch.distributed.{fn}: input has {t.numel()} elements, "
                         f"not {n} x output's {out.numel()}")
    name = _reduce_name(op, fn)
    _site()
    r = _spmd.reduce_scatter(t.reshape(n, out.numel()), name, 0, ranks)
    _write(out, r.reshape(*out.shape))
    return _done(async_op, out)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """tensor <- rank src's tensor (src a global rank; group_src its
    index in group)."""
    fn = "broadcast"
    _need_spmd(fn)
    t = _check_tensor(tensor, fn)
    ranks, member = _ranks(group, fn)
    if not member:
        return _not_member(fn)
    root = _root(src, group_src, ranks, fn, "src")
    _site()
    r = _spmd.broadcast(t, root, ranks if ranks is not None else None)
    if _world.current_rank() != root:
        _write(t, r)
    return _done(async_op, t)


def _root(rank, group_rank, ranks, fn, what):
    if (rank is None) == (group_rank is None):
        raise ValueError(f"dtorch.distributed.{fn}: give exactly one of {what} "
                         f"and group_{what}")
    if group_rank is not None:
        members = ranks if ranks is not None else list(range(_world.world_size()))
        if not 0 <= int(group_rank) < len(members):
            raise ValueError(f"dtorch.distributed.{fn}: group_{what}={group_rank} "
                             f"is not an index of the group {members}")
        return members[int(group_rank)]
    rank = int(rank)
    if ranks is not None and rank not in ranks:
        raise ValueError(f"dtorch.distributed.{fn}: {what}={rank} is not in the "
                         f"group {ranks}")
    return rank


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """output_tensor_list[j] <- member j's input_tensor_list[my index]
    (all tensors of one shape)."""
    fn = "all_to_all"
    _need_spmd(fn)
    ranks, member = _ranks(group, fn)
    if not member:
        return _not_member(fn)
    n = len(ranks) if ranks is not None else _world.world_size()
    for name, lst in (("output_tensor_list", output_tensor_list),
                      ("input_tensor_list", input_tensor_list)):
        if not isinstance(lst, (list, tuple)) or len(lst) != n:
            raise ValueError(f"dtorch.distributed.{fn}: {name} must be a list of "
                             f"{n} tensors (one per member)")
        for i, x in enumerate(lst):
            _check_tensor(x, fn, f"{name}[{i}]")
    shapes = {tuple(x.shape) for x in list(input_tensor_list) + list(output_tensor_list)}
    if len(shapes) != 1:
        raise NotImplementedError(f"dtorch.distributed.{fn}: tensors of different "
                                  f"shapes {sorted(shapes)}: dtorch's all_to_all "
                                  f"moves equal pieces")
    from .. import _ops
    _site()
    r = _spmd.all_to_all(_ops.stack(list(input_tensor_list), 0), 0, 0, ranks)
    for j, o in enumerate(output_tensor_list):
        _write(o, r[j])
    return _done(async_op, *output_tensor_list)


def all_to_all_single(output, input, output_split_sizes=None,
                      input_split_sizes=None, group=None, async_op=False):
    """output <- block j (dim 0, n equal blocks) of member j's input, for
    each j. Uneven split sizes are refused."""
    fn = "all_to_all_single"
    _need_spmd(fn)
    out = _check_tensor(output, fn, "output")
    t = _check_tensor(input, fn, "input")
    ranks, member = _ranks(group, fn)
    if not member:
        return _not_member(fn)
    n = len(ranks) if ranks is not None else _world.world_size()
    for name, sizes in (("output_split_sizes", output_split_sizes),
                        ("input_split_sizes", input_split_sizes)):
        if sizes is not None and len(set(int(s) for s in sizes)) > 1:
            raise NotImplementedError(f"dtorch.distributed.{fn}: {name} {list(sizes)}: "
                                      f"dtorch's all_to_all moves equal pieces")
    if t.shape[0] % n or tuple(out.shape) != tuple(t.shape):
        raise ValueError(f"dtorch.distributed.{fn}: input {tuple(t.shape)} and output "
                         f"{tuple(out.shape)} must be equal, dim 0 a multiple of {n}")
    _site()
    _write(out, _spmd.all_to_all(t, 0, 0, ranks))
    return _done(async_op, out)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False,
           group_dst=None):
    """rank dst's tensor <- the reduction of every member's (the others'
    are left alone)."""
    fn = "reduce"
    _need_spmd(fn)
    t = _check_tensor(tensor, fn)
    ranks, member = _ranks(group, fn)
    if not member:
        return _not_member(fn)
    root = _root(dst, group_dst, ranks, fn, "dst")
    name = _reduce_name(op, fn)
    _site()
    r = _spmd.all_reduce(t, name, ranks)
    if _world.current_rank() == root:
        _write(t, r)
    return _done(async_op, t)


def barrier_spmd(group=None, async_op=False):
    """Every member has called it."""
    fn = "barrier"
    ranks, member = _ranks(group, fn)
    if not member:
        return _not_member(fn)
    _site()
    _spmd.barrier(ranks)
    return _done(async_op)


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Blocks until rank dst took tensor's bytes (its recv): order sends
    and recvs so that each send meets a recv (rank 0 sends first, rank 1
    receives first)."""
    fn = "send"
    _need_spmd(fn)
    t = _check_tensor(tensor, fn)
    ranks, _ = _ranks(group, fn)
    peer = _root(dst, group_dst, ranks, fn, "dst")
    _site()
    _errors.check(_lib.dt_send(t._h, int(peer)))


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """tensor <- the bytes of rank src's next send; returns src."""
    fn = "recv"
    _need_spmd(fn)
    t = _check_tensor(tensor, fn)
    if src is None and group_src is None:
        raise NotImplementedError(f"dtorch.distributed.{fn}: a recv from any "
                                  f"source (src=None): name the sender")
    ranks, _ = _ranks(group, fn)
    peer = _root(src, group_src, ranks, fn, "src")
    _site()
    _write(t, _spmd.recv(peer, tuple(t.shape), t.dtype))
    return peer


def _blocking_only(name):
    def refused(*args, **kwargs):
        raise NotImplementedError(
            f"dtorch.distributed.{name}: dtorch's point-to-point calls block "
            f"until the peer takes the data, so an isend / irecv pair could "
            f"deadlock; use send / recv, ordered so that each send meets a recv")
    refused.__name__ = name
    return refused


isend = _blocking_only("isend")
irecv = _blocking_only("irecv")
batch_isend_irecv = _blocking_only("batch_isend_irecv")


# ---- objects (pickled into uint8 tensors)
def _object_bytes(obj):
    import torch
    buf = io.BytesIO()
    pickle.Pickler(buf).dump(obj)
    return torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)


def _padded(obj, ranks):
    """obj's pickle as a dtorch uint8 tensor padded to the longest of
    the members', and every member's length."""
    import torch
    from .._tensor import Tensor
    data = _object_bytes(obj)
    _site()
    sizes = _spmd.all_gather(Tensor(torch.tensor([data.numel()], dtype=torch.int64)),
                             0, ranks).tolist()
    pad = torch.zeros(max(sizes), dtype=torch.uint8)
    pad[:data.numel()] = data
    return Tensor(pad), sizes


def all_gather_object(object_list, obj, group=None):
    """object_list[i] <- member i's obj (pickled, as torch's)."""
    fn = "all_gather_object"
    _need_spmd(fn)
    ranks, member = _ranks(group, fn)
    if not member:
        return _not_member(fn)
    t, sizes = _padded(obj, ranks)
    _site()
    g = _spmd.all_gather(t.unsqueeze(0), 0, ranks).to_torch()
    for i, n in enumerate(sizes):
        object_list[i] = pickle.loads(bytes(g[i, :n].numpy().tobytes()))


def broadcast_object_list(object_list, src=None, group=None, device=None,
                          group_src=None):
    """object_list's items <- rank src's (pickled, as torch's)."""
    fn = "broadcast_object_list"
    _need_spmd(fn)
    ranks, member = _ranks(group, fn)
    if not member:
        return _not_member(fn)
    root = _root(src, group_src, ranks, fn, "src")
    t, sizes = _padded(list(object_list), ranks)
    members = ranks if ranks is not None else list(range(_world.world_size()))
    _site()
    r = _spmd.broadcast(t, root, ranks).to_torch()
    got = pickle.loads(bytes(r[:sizes[members.index(root)]].numpy().tobytes()))
    object_list[:] = got
