"""Runtimes, processes, streams and events, per-rank memory, cancelling,
dry-run reports and fault injection (dtorch.h "runtime", sim.h).

A Runtime is N virtual ranks, each a simulated device with its own memory
and worker thread. Code that never makes one uses the default runtime.
``with Runtime(4) as rt:`` makes rt this thread's current runtime (the
factories' and meshes' default) and destroys it at the end; Runtime.current()
and Runtime.default() are the library's own (never destroyed here).
"""
import collections
import ctypes
import threading
import weakref

from . import _errors, _interop, _lib
from ._future import Future

MemoryStats = collections.namedtuple("MemoryStats", "used peak capacity")
MemoryStats.__doc__ = "One rank's device memory in bytes (capacity 0: unlimited)."

DryRunStats = collections.namedtuple(
    "DryRunStats", "ops collectives comm_bytes peak_max peak_min peak_rank "
    "comm_s compute_s step_s")
DryRunStats.__doc__ = "What a dry run saw (dt_dry_run_stats; sim.h)."

# dt_fault_kind bits by name
FAULTS = {n[len("DT_FAULT_"):].lower(): v for n, v in _lib.FAULT_KINDS.items()}

# the Python object of each runtime handle seen, so Runtime.current() is rt
_by_handle = weakref.WeakValueDictionary()
_lock = threading.Lock()

_OPTION_FIELDS = ("num_ranks", "auto_redistribute", "device_memory",
                  "ring_capacity", "spin_us", "collective_timeout_ms",
                  "pin_ranks", "chaos_seed", "dry_run", "dry_link_gbps",
                  "dry_link_latency_us", "dry_mem_gbps", "dry_tflops")


def _options(device, rank_devices, launcher, values):
    """A RuntimeOptions and the bytes it points into (kept alive by the
    caller until dt_runtime_create returns: it copies them)."""
    o = _lib.RuntimeOptions()
    keep = []
    for name in _OPTION_FIELDS:
        setattr(o, name, values[name])
    if device is not None:
        keep.append(str(device).encode())
        o.device = keep[-1]
    if rank_devices is not None:
        devs = [str(d).encode() for d in rank_devices]
        arr = (ctypes.c_char_p * len(devs))(*devs)
        keep += [devs, arr]
        o.rank_devices = ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p))
    if launcher is not None:
        keep.append(str(launcher).encode())
        o.launcher = keep[-1]
    return o, keep


class Runtime:
    """Runtime(num_ranks=0, *, device=None, auto_redistribute=False, ...):
    dt_runtime_create with dt_runtime_options' fields as keywords (0 /
    None / False: the default or its environment variable, as
    include/dtorch/dtorch.h says). device "cpu" | "cuda"; rank_devices a
    list of "cuda:K"; launcher None (one process) or "mpi"."""

    def __init__(self, num_ranks=0, *, device=None, auto_redistribute=False,
                 device_memory=0, ring_capacity=0, spin_us=0,
                 collective_timeout_ms=0, pin_ranks=0, chaos_seed=0,
                 dry_run=False, dry_link_gbps=0.0, dry_link_latency_us=0.0,
                 dry_mem_gbps=0.0, dry_tflops=0.0, rank_devices=None,
                 launcher=None):
        values = dict(locals())
        self._h, self._owned, self._prev = None, True, []
        o, _keep = _options(device, rank_devices, launcher, values)
        self._h = _errors.handle(_lib.dt_runtime_create(ctypes.byref(o)))
        with _lock:
            _by_handle[self._h] = self

    @classmethod
    def _wrap(cls, h):
        with _lock:
            rt = _by_handle.get(h)
            if rt is None:
                rt = cls.__new__(cls)
                rt._h, rt._owned, rt._prev = h, False, []
                _by_handle[h] = rt
            return rt

    @classmethod
    def default(cls):
        """The process's default runtime (made on first use; the library
        destroys it at exit)."""
        return cls._wrap(_errors.handle(_lib.dt_runtime_default()))

    @classmethod
    def current(cls):
        """This thread's runtime (the default one unless set_current)."""
        return cls._wrap(_errors.handle(_lib.dt_runtime_current()))

    def set_current(self):
        """Makes this the runtime of this thread's factories and meshes."""
        _errors.check(_lib.dt_runtime_set_current(self._h))

    def __enter__(self):
        self._prev.append(_lib.dt_runtime_current())
        self.set_current()
        return self

    def __exit__(self, *exc):
        prev = self._prev.pop()
        _errors.check(_lib.dt_runtime_set_current(prev))
        if self._owned and not self._prev:
            self.destroy()

    def destroy(self):
        """Waits for the issued work, joins the rank threads and frees the
        devices (dt_runtime_destroy). Tensors still held stay valid
        objects, but ops and fetches on them fail (DT_ERR_DEVICE). The
        default runtime cannot be destroyed from Python. While a numpy or
        DLPack view may read a tensor's memory, the C destroy waits until
        the last such view is gone (_interop.py): this object is closed
        at once, the runtime's ops keep running until then."""
        if not self._owned:
            raise ValueError("Runtime.destroy: the default runtime (or one this "
                             "Runtime object did not create) is not destroyed here")
        h, self._h = self._h, None
        if h and _interop.lending():
            # a numpy / DLPack view may read this runtime's memory, which
            # the teardown frees: it runs when the last such view is gone
            _interop.defer_destroy(h)
            return
        if h:
            _lib.dt_clear_error()
            _lib.dt_runtime_destroy(h)
            st = _lib.dt_last_status()
            if st != 0:
                self._h = h  # refused (a rank thread) or timed out: still alive
                raise _errors.error(st)

    close = destroy

    def __del__(self):
        if getattr(self, "_owned", False) and self._h and _lib is not None \
                and _lib.dt_runtime_destroy is not None:
            if _interop is not None and _interop.lending():
                _interop.defer_destroy(self._h)
            else:
                _lib.dt_runtime_destroy(self._h)

    def _handle(self):
        if not self._h:
            raise ValueError("Runtime: destroyed")
        return self._h

    # ---- ranks and processes
    @property
    def num_ranks(self):
        return _count(_lib.dt_runtime_num_ranks(self._handle()))

    @property
    def num_processes(self):
        """The job's processes (1 unless launcher "mpi")."""
        return _count(_lib.dt_runtime_num_processes(self._handle()))

    @property
    def process_index(self):
        """This process's index in the job (0 in a one-process runtime)."""
        return _count(_lib.dt_runtime_process_index(self._handle()))

    def rank_is_local(self, rank):
        """Whether global rank `rank`'s thread runs in this process."""
        _lib.dt_clear_error()
        ok = _lib.dt_runtime_rank_is_local(self._handle(), int(rank))
        if not ok and _lib.dt_last_status() != 0:
            raise _errors.last()
        return bool(ok)

    def local_ranks(self):
        """The ranks this process hosts (all of them in one process)."""
        return [r for r in range(self.num_ranks) if self.rank_is_local(r)]

    # ---- work
    def synchronize(self):
        """Blocks until every op issued to this runtime has run."""
        _errors.check(_lib.dt_runtime_synchronize(self._handle()))

    def cancel(self):
        """Cancels the single-device ops issued before that have not
        finished: their outputs fail with "cancelled by dt_runtime_cancel"
        (DT_ERR_TIMEOUT) when fetched (dtorch.h says which ops stop)."""
        _errors.check(_lib.dt_runtime_cancel(self._handle()))

    def queue_depth(self, rank):
        """Records issued to `rank` and not yet run (a gauge)."""
        return _count(_lib.dt_runtime_queue_depth(self._handle(), int(rank)))

    # ---- streams and events
    def record_event(self, rank):
        """An Event in rank's stream: it completes when everything issued
        to that rank before it has run."""
        return Event(_errors.handle(_lib.dt_event_record(self._handle(), int(rank))), rank)

    def wait_event(self, rank, event):
        """Makes `rank` run nothing issued after this call until `event`
        completes (PyTorch's stream.wait_event)."""
        if not isinstance(event, Future):
            raise TypeError(f"Runtime.wait_event: event {event!r} is not a dtorch Event/Future")
        _errors.check(_lib.dt_stream_wait_event(self._handle(), int(rank), event._f))

    def stream(self, rank):
        """Rank's compute stream (each rank runs its work in issue order)."""
        return Stream(self, rank)

    # ---- memory
    def memory(self, rank):
        """MemoryStats(used, peak, capacity) of rank's device memory."""
        st = _lib.MemoryStats()
        _errors.check(_lib.dt_runtime_memory(self._handle(), int(rank), ctypes.byref(st)))
        return MemoryStats(st.used, st.peak, st.capacity)

    def empty_cache(self):
        """Returns every rank's cached device blocks to the system (like
        torch.cuda.empty_cache); waits for it."""
        _errors.check(_lib.dt_runtime_empty_cache(self._handle()))

    def memory_report(self):
        """Per rank: bytes in use, peak, cached, largest blocks (text)."""
        from ._debug import capture
        return capture(lambda f: _lib.dt_memory_report(self._handle(), f))

    # ---- timelines
    def trace(self, path):
        """A context manager recording this runtime's timeline into a Chrome
        trace-event JSON file (dt_trace_begin / dt_trace_end)."""
        from ._debug import Trace
        return Trace(self, path)

    # ---- dry runs and faults (sim.h)
    def dry_run_report(self):
        """DryRunStats since creation or the last dry_run_reset (a dry-run
        runtime only)."""
        st = _lib.DryRunStats()
        _errors.check(_lib.dt_dry_run_report(self._handle(), ctypes.byref(st)))
        return DryRunStats(*(getattr(st, f) for f in DryRunStats._fields))

    def dry_run_reset(self):
        _errors.check(_lib.dt_dry_run_reset(self._handle()))

    def inject_fault(self, kind, rank=-1, after=1, stall_ms=0):
        """The `after`-th event of each kind on `rank` (-1: every rank)
        fails once (dt_fault_inject). kind: a name of FAULTS ("oom",
        "stall", "rank_fail", "collective_fail", "io"), a list of them, or
        the bits as an int."""
        f = _lib.Fault()
        f.kind = _fault_bits(kind)
        f.rank, f.after, f.stall_ms = int(rank), int(after), int(stall_ms)
        _errors.check(_lib.dt_fault_inject(self._handle(), ctypes.byref(f)))

    def clear_faults(self):
        """Disarms every fault not yet fired."""
        _errors.check(_lib.dt_fault_clear(self._handle()))

    @property
    def fault_count(self):
        """Faults fired so far."""
        return _count(_lib.dt_fault_count(self._handle()))

    def spmd_run(self, fn, *args):
        """Runs fn(ctx, *args) on every rank's own thread (dtorch._spmd)."""
        from ._spmd import spmd_run
        return spmd_run(fn, *args, runtime=self)

    def __repr__(self):
        if not self._h:
            return "Runtime(destroyed)"
        return f"Runtime(num_ranks={self.num_ranks}, num_processes={self.num_processes})"


def _count(n):
    if n < 0:
        raise _errors.last()
    return n


def _fault_bits(kind):
    if isinstance(kind, int) and not isinstance(kind, bool):
        return kind
    names = [kind] if isinstance(kind, str) else list(kind)
    bits = 0
    for n in names:
        if n not in FAULTS:
            raise ValueError(f"Runtime.inject_fault: kind {n!r} is not one of {list(FAULTS)}")
        bits |= FAULTS[n]
    return bits


class Event(Future):
    """A marker in one rank's stream (dt_event_record): a Future that
    completes when everything issued to that rank before it has run."""

    def __init__(self, handle, rank):
        super().__init__(handle)
        self.rank = rank

    def synchronize(self):
        self.wait()

    query = Future.is_ready

    def __repr__(self):
        return f"Event(rank={self.rank}, {'ready' if self.is_ready() else 'pending'})"


class Stream:
    """A rank's compute stream, with PyTorch's record_event / wait_event
    / wait_stream / synchronize."""

    def __init__(self, runtime, rank):
        self.runtime, self.rank = runtime, int(rank)

    def record_event(self):
        return self.runtime.record_event(self.rank)

    def wait_event(self, event):
        self.runtime.wait_event(self.rank, event)

    def wait_stream(self, other):
        """Work issued here after this call waits for what was issued to
        `other` before it."""
        self.wait_event(other.record_event())

    def synchronize(self):
        self.record_event().wait()

    def query(self):
        return self.runtime.queue_depth(self.rank) == 0

    def __repr__(self):
        return f"Stream(rank={self.rank})"


def num_processes():
    """The current runtime's processes (dt_runtime_num_processes)."""
    return Runtime.current().num_processes


def process_index():
    return Runtime.current().process_index


def rank_is_local(rank):
    return Runtime.current().rank_is_local(rank)


# The DTorch API's count of emulated devices, for a program that sets it
# and not DTORCH_NUM_RANKS (which wins): the package makes a runtime of
# that many ranks, current on the importing thread (other threads that
# pick none use the library's default runtime: DTORCH_NUM_RANKS or 8).
# The environment is read, never written.
_EMU_NUM = "DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE"


def _package_runtime():
    import os
    v = os.environ.get(_EMU_NUM, "").strip()
    if not v or os.environ.get("DTORCH_NUM_RANKS", "").strip():
        return None
    try:
        n = int(v)
    except ValueError:
        raise ValueError(f"dtorch: {_EMU_NUM}={v!r} is not a number of ranks") from None
    rt = Runtime(n)
    rt.set_current()
    return rt


PACKAGE_RUNTIME = _package_runtime()
