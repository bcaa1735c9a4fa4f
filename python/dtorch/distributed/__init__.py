"""dtorch.distributed: torch.distributed's process-group calls as one
controller answers them (``import dtorch.distributed as dist``).

dtorch runs every rank of a job in this process (an MPI job: each process
a block of them), driven by one Python program, so there is no per-rank
process to initialise: init_process_group records that the default group
exists and checks the environment; get_rank() is the first rank this
process hosts and get_world_size() the job's rank count (the runtime's
ranks, DTORCH_NUM_RANKS). _world.py is where that is decided.

Submodules: dtorch.distributed.device_mesh, dtorch.distributed.tensor
(DTensor, parallel, debug) and the older dtorch.distributed._tensor.
"""
import datetime

from .. import _errors, _lib
from . import _world
from .device_mesh import DeviceMesh, init_device_mesh  # noqa: F401

__all__ = ["init_process_group", "destroy_process_group", "is_initialized",
           "is_available", "get_rank", "get_world_size", "barrier",
           "get_backend", "ProcessGroup", "group", "GroupMember",
           "get_process_group_ranks", "DeviceMesh", "init_device_mesh"]

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


GroupMember = group

_state = {"initialized": False, "backend": None}


def is_available():
    """True: dtorch's collectives are always there (emulated in-process)."""
    return True


def is_initialized():
    return _state["initialized"]


def init_process_group(backend=None, init_method=None, timeout=None,
                       world_size=-1, rank=-1, store=None, group_name="",
                       pg_options=None, device_id=None):
    """Marks the default group initialised. backend is recorded (get_backend
    returns it; "dtorch" when None): every backend is dtorch's in-process
    collectives. world_size / rank, when given, must be this job's
    (get_world_size() / get_rank()); WORLD_SIZE in the environment too.
    init_method, store, timeout, pg_options and device_id have nothing to
    connect and are accepted as torch takes them."""
    if _state["initialized"]:
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
        raise ValueError(f"init_process_group: rank={rank} but this process's "
                         f"first rank is {me} (one controller drives every rank)")
    _state["initialized"] = True
    _state["backend"] = "dtorch" if backend is None else str(backend)


def destroy_process_group(group=None):
    """Waits for the issued work and forgets the default group."""
    _need("destroy_process_group")
    barrier()
    _state["initialized"] = False
    _state["backend"] = None


def _need(fn):
    if not _state["initialized"]:
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


def get_backend(group=None):
    _need("get_backend")
    _group_ranks(group, "get_backend")
    return _state["backend"]


def barrier(group=None, async_op=False, device_ids=None):
    """Waits until every op issued before it has run on every rank (one
    controller issues for all ranks, so this is the runtime's
    synchronize). In an MPI job it also meets the other processes: a sum
    over a mesh of every rank, fetched, completes only when every process
    has issued it (dt_runtime_synchronize alone is local)."""
    _need("barrier")
    _group_ranks(group, "barrier")
    rt = _world.runtime()
    _errors.check(_lib.dt_runtime_synchronize(rt))
    if _world.num_processes(rt) > 1:
        from .. import zeros
        from .device_mesh import DeviceMesh
        from ..distributed_spec import Partial
        mesh = DeviceMesh("cpu", list(range(_world.num_ranks(rt))))
        zeros(1, device_mesh=mesh, placements=[Partial()]).to_torch()
