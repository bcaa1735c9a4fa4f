"""Who "this process" is in a one-controller job: the single place where
dtorch.distributed decides which rank get_rank() (and every "current
rank" question: DeviceMesh.get_rank, mesh["tp"], DTensor.to_local())
answers and how many ranks the world has.

One controller (this Python program) drives every rank of the runtime,
so there is no per-rank caller: the answer is the first rank this
process hosts — 0 in a one-process job; in an MPI job (several
processes, each hosting a block of the ranks) the first global rank of
this process's block.

Inside an SPMD function (dtorch.spmd.spmd_run, python -m dtorch.run:
the program runs once per rank, each on its rank's own thread) the
answer is per rank: the calling rank thread's rank (dt_spmd_rank), and
the process group's state (initialised, backend) is that rank's own
(pg_state()), as each torchrun process has its own.
"""
import os
import threading

from .. import _errors, _lib
from . import _capi

# the controller's process-group state; a rank thread's is in _tls
_controller_state = {"initialized": False, "backend": None}
_tls = threading.local()


def spmd_rank():
    """The calling thread's SPMD rank, -1 outside an SPMD function."""
    return _lib.dt_spmd_rank()


def pg_state():
    """The default process group's state ({"initialized", "backend"}) of
    the caller: the controller's, or inside an SPMD function the calling
    rank's (a thread-local, fresh for every run: a rank's Python thread
    state lives as long as its function)."""
    if _lib.dt_spmd_rank() < 0:
        return _controller_state
    st = getattr(_tls, "pg", None)
    if st is None:
        st = _tls.pg = {"initialized": False, "backend": None}
    return st


def runtime():
    """This thread's runtime (the default one unless dt_runtime_set_current
    picked another)."""
    return _errors.handle(_capi.dt_runtime_current())


def num_ranks(rt=None):
    """The job's ranks (DTORCH_NUM_RANKS, or 8): every process's."""
    return _lib.dt_runtime_num_ranks(rt or runtime())


def current_rank(rt=None):
    """The rank the caller answers as: inside an SPMD function the
    calling rank's; else this process's first local rank."""
    me = _lib.dt_spmd_rank()
    if me >= 0:
        return me
    rt = rt or runtime()
    n = _lib.dt_runtime_num_ranks(rt)
    for r in range(n):
        if _capi.dt_runtime_rank_is_local(rt, r):
            return r
    raise _errors.DTorchError(f"dtorch.distributed: this process hosts none of "
                              f"the runtime's {n} ranks")


def local_ranks(rt=None):
    """The ranks whose threads run in this process."""
    rt = rt or runtime()
    return [r for r in range(_lib.dt_runtime_num_ranks(rt))
            if _capi.dt_runtime_rank_is_local(rt, r)]


def num_processes(rt=None):
    return _capi.dt_runtime_num_processes(rt or runtime())


def process_index(rt=None):
    return _capi.dt_runtime_process_index(rt or runtime())


def world_size(rt=None):
    """num_ranks(), checked against WORLD_SIZE when the environment sets it
    (a torchrun-style launch of a different size is refused; dtorch never
    sets WORLD_SIZE)."""
    n = num_ranks(rt)
    env = os.environ.get("WORLD_SIZE")
    if env is not None:
        try:
            want = int(env)
        except ValueError:
            raise ValueError(f"dtorch.distributed: WORLD_SIZE={env!r} is not "
                             f"an integer") from None
        if want != n:
            raise ValueError(
                f"dtorch.distributed: WORLD_SIZE={want} in the environment but "
                f"the runtime has {n} ranks (DTORCH_NUM_RANKS="
                f"{os.environ.get('DTORCH_NUM_RANKS', 'unset: 8')}); dtorch runs "
                f"every rank in one process: set DTORCH_NUM_RANKS={want} or "
                f"unset WORLD_SIZE")
    return n
