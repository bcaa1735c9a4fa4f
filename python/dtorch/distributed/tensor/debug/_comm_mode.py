"""CommDebugMode on dtorch's communication counters (dt_comm_count_begin /
dt_comm_count_end): the collectives the calls in the block issue from
this thread, one count per logical collective over one mesh dim, as
torch's CommDebugMode counts functional collectives at dispatch."""
import collections
import threading

from ... import _capi

# dtorch's counter -> torch's functional-collective op name
_OPS = (("all_reduce", "c10d_functional.all_reduce"),
        ("all_gather", "c10d_functional.all_gather_into_tensor"),
        ("reduce_scatter", "c10d_functional.reduce_scatter_tensor"),
        ("all_to_all", "c10d_functional.all_to_all_single"),
        ("broadcast", "c10d_functional.broadcast"),
        # a DTensor moved to another mesh: no torch collective matches
        ("other", "dtorch.cross_mesh_transfer"))


def _torch_op(name):
    """torch.ops.c10d_functional.<op> (the key torch's CommDebugMode uses),
    or the name when this torch has no such op."""
    ns, op = name.split(".")
    if ns != "c10d_functional":
        return name
    try:
        # the namespace is registered when torch's functional collectives load
        import torch.distributed._functional_collectives  # noqa: F401
        return getattr(getattr(torch.ops, ns), op)
    except (AttributeError, ImportError, RuntimeError):
        return name


def _key_name(key):
    """"c10d_functional.all_reduce" for the op object or its name."""
    if isinstance(key, str):
        return key
    name = getattr(key, "_qualified_op_name", None) or str(key)
    return name.replace("::", ".")


class CommCounts(collections.defaultdict):
    """get_comm_counts()'s dict: keyed by torch's op objects
    (torch.ops.c10d_functional.all_reduce, ...) as torch's is, and also
    readable by their names ("c10d_functional.all_reduce"); a collective
    not seen reads 0 (a defaultdict(int), as torch's)."""

    def __init__(self, items=()):
        super().__init__(int)
        self._by_name = {}
        for k, v in items:
            self[k] = v
            self._by_name[_key_name(k)] = k

    def _key(self, key):
        return self._by_name.get(_key_name(key), key)

    def __getitem__(self, key):
        return super().__getitem__(self._key(key))

    def __contains__(self, key):
        return super().__contains__(self._key(key))

    def get(self, key, default=None):
        return super().get(self._key(key), default)


_active = threading.local()


class CommDebugMode:
    """with CommDebugMode() as comm: ...; comm.get_total_counts(),
    comm.get_comm_counts() (torch's). The counts are this thread's: a
    program's, since one controller issues every rank's work. One block
    per thread at a time (the C counters do not nest)."""

    def __init__(self):
        self._counts = CommCounts()
        self._bytes = 0

    def __enter__(self):
        if getattr(_active, "mode", None) is not None:
            raise RuntimeError("CommDebugMode: another CommDebugMode is already "
                               "open in this thread (they do not nest)")
        _active.mode = self
        self._counts = CommCounts()
        self._bytes = 0
        _capi.dt_comm_count_begin()
        return self

    def __exit__(self, *exc):
        c = _capi.dt_comm_count_end()
        _active.mode = None
        self._counts = CommCounts(
            (_torch_op(name), getattr(c, field)) for field, name in _OPS
            if getattr(c, field))
        self._bytes = c.bytes
        return False

    def get_total_counts(self):
        """Collectives counted in the block."""
        return sum(self._counts.values())

    def get_comm_counts(self):
        """{torch.ops.c10d_functional.<op>: count} of the collectives seen."""
        return self._counts

    def get_total_bytes(self):
        """dtorch's addition: the bytes the participating ranks fed into the
        counted collectives, summed."""
        return self._bytes
