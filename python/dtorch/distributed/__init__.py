"""dtorch.distributed: torch.distributed's process-group calls as one
controller answers them (``import dtorch.distributed as dist``), and as
each rank does in a program that runs once per rank (SPMD mode).

dtorch runs every rank of a job in this process (an MPI job: each process
a block of them). Driven by one Python program (the controller) there is
no per-rank process to initialise: init_process_group records that the
default group exists and checks the environment; get_rank() is the first
rank this process hosts and get_world_size() the job's rank count (the
runtime's ranks, DTORCH_NUM_RANKS). Inside an SPMD function (python -m
dtorch.run: a torchrun script runs once per rank, each on its rank's
thread) every rank has its own default group, get_rank() is that rank,
and the collectives on plain tensors (all_reduce, all_gather, broadcast,
send / recv, ...: _c10d.py) run between the ranks. _world.py is where
"which rank am I" is decided.

Submodules: dtorch.distributed.device_mesh, dtorch.distributed.tensor
(DTensor, parallel, debug) and the older dtorch.distributed._tensor.
"""
import datetime

from .. import _errors, _lib
from . import _world
from .device_mesh import DeviceMesh, init_device_mesh  # noqa: F401
from ._c10d import ReduceOp, Work, all_reduce, all_gather, \
    all_gather_into_tensor, reduce_scatter, reduce_scatter_tensor, broadcast, \
    all_to_all, all_to_all_single, reduce, send, recv, isend, irecv, \
    batch_isend_irecv, all_gather_object, broadcast_object_list  # noqa: F401

__all__ = ["init_process_group", "destroy_process_group", "is_initialized",
           "is_available", "get_rank", "get_world_size", "barrier",
           "get_backend", "ProcessGroup", "group", "GroupMember",
           "get_process_group_ranks", "DeviceMesh", "init_device_mesh",
           "new_group", "get_global_rank", "get_group_rank", "ReduceOp", "Work",
           "all_reduce", "all_gather", "all_gather_into_tensor",
           "reduce_scatter", "reduce_scatter_tensor", "broadcast", "all_to_all",
           "all_to_all_single", "reduce", "send", "recv", "isend", "irecv",
           "batch_isend_irecv", "all_gather_object", "broadcast_object_list",
           "is_gloo_available", "is_nccl_available", "is_mpi_available",
           "is_torchelastic_launched"]

_BACKENDS = ("gloo", "nccl", "mpi", "ucc", "xccl", "fake", "dtorch")


class ProcessGroup:
    """A group of global ranks (the world, or one mesh dim's group that
    the current rank belongs to). dtorch has no communicator objects: the
    group only names its ranks; collectives run through DTensors."""

    def __init__(self, ranks, name):
        self._ranks = tuple(int(r) for r in ranks)
        self.group_name = name

    def rank(self):
        """The current rank's index in the group; -1 outside it."""
        me = _world.current_rank()
        return self._ranks.index(me) if me in self._ranks else -1

    def size(self):
        return len(self._ranks)

    @property
    def ranks(self):
        return self._ranks

    def __eq__(self, other):
        return isinstance(other, ProcessGroup) and other._ranks == self._ranks

    def __hash__(self):
        return hash(self._ranks)

    def __repr__(self):
        return f"ProcessGroup({self.group_name!r}, ranks={list(self._ranks)})"


class _WorldMarker:
    """group.WORLD: stands for the default group (every rank of the job)."""

    def __repr__(self):
        return "group.WORLD"


class group:  # noqa: N801  (torch.distributed.group)
    WORLD = _WorldMarker()


class GroupMember:
    """torch.distributed.GroupMember: WORLD, and NON_GROUP_MEMBER (what
    new_group gives a rank outside the group)."""
    WORLD = group.WORLD
    NON_GROUP_MEMBER = -100


def is_available():
    """True: dtorch's collectives are always there (emulated in-process)."""
    return True


def is_gloo_available():
    """True: every backend name runs on dtorch's in-process collectives."""
    return True


def is_nccl_available():
    return True


def is_mpi_available():
    return True


def is_torchelastic_launched():
    """Whether the program runs under a launcher that set TORCHELASTIC_RUN_ID
    (python -m dtorch.run does, as torchrun)."""
    import os
    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


def is_initialized():
    return _world.pg_state()["initialized"]


def init_process_group(backend=None, init_method=None, timeout=None,
                       world_size=-1, rank=-1, store=None, group_name="",
                       pg_options=None, device_id=None):
    """Marks the default group initialised. backend is recorded (get_backend
    returns it; "dtorch" when None): every backend is dtorch's in-process
    collectives. world_size / rank, when given, must be this job's
    (get_world_size() / get_rank()); WORLD_SIZE in the environment too.
    init_method, store, timeout, pg_options and device_id have nothing to
    connect and are accepted as torch takes them."""
    state = _world.pg_state()
    if state["initialized"]:
        raise ValueError("init_process_group: trying to initialize the default "
                         "process group twice!")
    if backend is not None:
        names = [b.split(":")[-1] for b in str(backend).lower().split(",")]
        bad = [b for b in names if b not in _BACKENDS]
        if bad:
            raise ValueError(f"init_process_group: backend {backend!r} is not one "
                             f"of {list(_BACKENDS)}")
    if timeout is not None and not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"init_process_group: timeout {timeout!r} is not a "
                        f"datetime.timedelta")
    n = _world.world_size()
    if world_size not in (-1, None) and int(world_size) != n:
        raise ValueError(f"init_process_group: world_size={world_size} but the "
                         f"runtime has {n} ranks (DTORCH_NUM_RANKS)")
    me = _world.current_rank()
    if rank not in (-1, None) and int(rank) != me:
        if _world.spmd_rank() >= 0:
            raise ValueError(f"init_process_group: rank={rank} but the calling "
                             f"rank is {me}")
        raise ValueError(f"init_process_group: rank={rank} but this process's "
                         f"first rank is {me} (one controller drives every rank)")
    state["initialized"] = True
    state["backend"] = "dtorch" if backend is None else str(backend)


def destroy_process_group(group=None):
    """Forgets the default group; one controller first waits for the
    issued work (a rank in SPMD mode has none pending: its ops ran)."""
    _need("destroy_process_group")
    if _world.spmd_rank() < 0:
        barrier()
    state = _world.pg_state()
    state["initialized"] = False
    state["backend"] = None


def _need(fn):
    if not _world.pg_state()["initialized"]:
        raise ValueError(f"{fn}: Default process group has not been initialized, "
                         f"please make sure to call init_process_group.")


def _group_ranks(group, fn):
    if group is None or isinstance(group, _WorldMarker):
        return None
    if isinstance(group, ProcessGroup):
        return group.ranks
    raise TypeError(f"{fn}: group {group!r} is not a ProcessGroup (or None / "
                    f"group.WORLD)")


def get_rank(group=None):
    """The current rank (the first rank this process hosts: 0 in one
    process); of a group: its index there, -1 when outside it."""
    _need("get_rank")
    ranks = _group_ranks(group, "get_rank")
    me = _world.current_rank()
    if ranks is None:
        return me
    return ranks.index(me) if me in ranks else -1


def get_world_size(group=None):
    """The job's rank count (the runtime's ranks); of a group: its size."""
    _need("get_world_size")
    ranks = _group_ranks(group, "get_world_size")
    return _world.world_size() if ranks is None else len(ranks)


def get_process_group_ranks(group):
    """The global ranks of group."""
    ranks = _group_ranks(group, "get_process_group_ranks")
    return list(range(_world.world_size())) if ranks is None else list(ranks)


def get_global_rank(group, group_rank):
    """The global rank of member group_rank of group."""
    ranks = get_process_group_ranks(group)
    if not 0 <= int(group_rank) < len(ranks):
        raise ValueError(f"get_global_rank: group rank {group_rank} is not in a "
                         f"group of {len(ranks)}")
    return ranks[int(group_rank)]


def get_group_rank(group, global_rank):
    """global_rank's index in group."""
    ranks = get_process_group_ranks(group)
    if int(global_rank) not in ranks:
        raise ValueError(f"get_group_rank: global rank {global_rank} is not part "
                         f"of the group {ranks}")
    return ranks.index(int(global_rank))


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization=False, group_desc=None, device_id=None):
    """A ProcessGroup of the given global ranks (None: every rank), which
    the collectives take as group=; a rank outside it gets
    GroupMember.NON_GROUP_MEMBER, as from torch. dtorch needs no
    communicator, so nothing is exchanged (torch makes every rank call it;
    so may the program)."""
    _need("new_group")
    n = _world.world_size()
    members = list(range(n)) if ranks is None else sorted(int(r) for r in ranks)
    bad = [r for r in members if not 0 <= r < n]
    if bad or len(set(members)) != len(members) or not members:
        raise ValueError(f"new_group: ranks {ranks!r} are not distinct ranks of "
                         f"the {n}-rank world")
    if _world.current_rank() not in members:
        return GroupMember.NON_GROUP_MEMBER
    return ProcessGroup(members, group_desc or f"group_{members}")


def get_backend(group=None):
    _need("get_backend")
    _group_ranks(group, "get_backend")
    return _world.pg_state()["backend"]


def barrier(group=None, async_op=False, device_ids=None):
    """Waits until every op issued before it has run on every rank (one
    controller issues for all ranks, so this is the runtime's
    synchronize). In an MPI job it also meets the other processes: a sum
    over a mesh of every rank, fetched, completes only when every process
    has issued it (dt_runtime_synchronize alone is local). Inside an SPMD
    function: every member of group has called it."""
    _need("barrier")
    if _world.spmd_rank() >= 0:
        from ._c10d import barrier_spmd
        return barrier_spmd(group, async_op)
    _group_ranks(group, "barrier")
    rt = _world.runtime()
    _errors.check(_lib.dt_runtime_synchronize(rt))
    if _world.num_processes(rt) > 1:
        from .. import zeros
        from .device_mesh import DeviceMesh
        from ..distributed_spec import Partial
        mesh = DeviceMesh("cpu", list(range(_world.num_ranks(rt))))
        zeros(1, device_mesh=mesh, placements=[Partial()]).to_torch()
